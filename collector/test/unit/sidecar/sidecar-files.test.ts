// The sshproxy sidecar's file chores on real temp directories and real processes: key file
// checks (mode, owner, symlinks, missing files; the chown case only as root), the clean-up of a
// previous sidecar's leftovers, which kills only its processes that name DIR, with their
// group, and the pids file and atomic writes.
import { strict as assert } from 'node:assert';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { checkKeyFile, cleanStaleDir, isAlive, PIDS_FILE, PidsFile, prepareDir, writeFileAtomic } from '../../../src/sidecar/sidecar-files.ts';

const uid = process.getuid?.() ?? 0;
const dirs: string[] = [];

function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'spf-'));
  dirs.push(d);
  return d;
}

after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('key files', () => {
  test('a regular file of ours with no access for others passes; anything else is SSH_KEY_INVALID naming the file', async () => {
    const d = dir();
    await prepareDir(d);
    const keys = join(d, 'keys');
    writeFileSync(join(keys, 'ok'), 'x', { mode: 0o600 });
    writeFileSync(join(keys, 'readonly'), 'x', { mode: 0o400 });
    writeFileSync(join(keys, 'open'), 'x');
    chmodSync(join(keys, 'open'), 0o644);
    writeFileSync(join(keys, 'group'), 'x');
    chmodSync(join(keys, 'group'), 0o640);
    symlinkSync(join(keys, 'ok'), join(keys, 'link'));
    mkdirSync(join(keys, 'adir'));

    assert.equal(await checkKeyFile(d, 'ok', uid), null);
    assert.equal(await checkKeyFile(d, 'readonly', uid), null);
    const cases: [string, RegExp][] = [
      ['open', /^keys\/open has mode 0644; it must be 0600/],
      ['group', /^keys\/group has mode 0640/],
      ['link', /^keys\/link is a symbolic link/],
      ['adir', /^keys\/adir is not a regular file/],
      ['missing', /^keys\/missing cannot be read \(ENOENT\)/],
    ];
    for (const [file, message] of cases) {
      const e = await checkKeyFile(d, file, uid);
      assert.equal(e?.code, 'SSH_KEY_INVALID', file);
      assert.match(e.message, message);
    }
    assert.match((await checkKeyFile(d, 'ok', uid + 1))?.message ?? '', /owned by uid \d+, not by the sidecar's uid/);
    if (uid === 0) {
      chownSync(join(keys, 'ok'), 65534, 65534);
      assert.match((await checkKeyFile(d, 'ok', 0))?.message ?? '', /owned by uid 65534/);
    }
  });
});

describe("a previous sidecar's leftovers", () => {
  test('its live processes that mention DIR are killed (with their group), others are left alone; FIFOs, sockets and temp files go', async () => {
    const d = dir();
    await prepareDir(d);
    // A "stream": a process group whose leader names a FIFO of DIR, with a child.
    const stream = spawn('sh', ['-c', 'sleep 30 & wait', 'sh', `${d}/streams/x.out`], { detached: true, stdio: 'ignore' });
    // A pid reused by something else: in the pids file, but not about DIR.
    const stranger = spawn('sleep', ['30'], { stdio: 'ignore' });
    try {
      const pids = new PidsFile(d);
      pids.add(stream.pid!);
      pids.add(stranger.pid!);
      execFileSync('mkfifo', [`${d}/streams/x.out`, `${d}/streams/x.err`]);
      writeFileSync(`${d}/ctl/abc-0`, '');
      writeFileSync(`${d}/status.json.tmp-123`, '');
      writeFileSync(`${d}/desired.json`, '{}');
      await new Promise((r) => setTimeout(r, 100));
      const child = execFileSync('pgrep', ['-P', String(stream.pid)], { encoding: 'utf8' })
        .trim()
        .split('\n')
        .map(Number);

      const result = await cleanStaleDir(d);
      assert.deepEqual(result.killed, [stream.pid]);
      assert.equal(result.removedFiles, 3);
      assert.ok(!isAlive(stream.pid!));
      for (const pid of child) assert.ok(!isAlive(pid), 'the group went too');
      assert.ok(isAlive(stranger.pid!), 'a process not about DIR is never killed');
      assert.equal(existsSync(`${d}/streams/x.out`), false);
      assert.equal(existsSync(`${d}/ctl/abc-0`), false);
      assert.equal(existsSync(`${d}/status.json.tmp-123`), false);
      assert.equal(existsSync(`${d}/${PIDS_FILE}`), false);
      assert.equal(readFileSync(`${d}/desired.json`, 'utf8'), '{}', "the collector's files stay");
    } finally {
      stranger.kill('SIGKILL');
      try {
        process.kill(-stream.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });

  test('no pids file, nothing to do', async () => {
    const d = dir();
    await prepareDir(d);
    assert.deepEqual(await cleanStaleDir(d), { killed: [], removedFiles: 0 });
  });

  test('the pids file follows the live children; writes are atomic renames', async () => {
    const d = dir();
    const pids = new PidsFile(d);
    pids.add(11);
    pids.add(12);
    pids.delete(11);
    assert.equal(readFileSync(join(d, PIDS_FILE), 'utf8'), '12\n');
    await writeFileAtomic(join(d, 'status.json'), 'a');
    assert.equal(readFileSync(join(d, 'status.json'), 'utf8'), 'a');
    assert.deepEqual(execFileSync('ls', [d], { encoding: 'utf8' }).trim().split('\n').sort(), [PIDS_FILE, 'status.json']);
  });
});
