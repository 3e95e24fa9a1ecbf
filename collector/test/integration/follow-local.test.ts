/**
 * LogFollower against real files through a real shell (LocalShell: `/bin/sh -c` here instead of
 * over SSH), with real logrotate. Every test checks the one promise: per file, the bytes
 * received are exactly the file's bytes from the announced offset: nothing lost, nothing twice.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { appendFileSync, closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import { isPglogError } from '@pglog/common/errors.ts';

import { LogFollower, type LogFollowerOptions } from '../../src/follow/follower.ts';
import { parseIdentity } from '../../src/follow/identity.ts';
import type { FollowedFile, FollowItem, FollowPosition } from '../../src/follow/types.ts';
import { fastFollowerOptions } from '../helpers/fast-follower.ts';
import { LocalShell } from '../helpers/local-shell.ts';

const run = promisify(execFile);
/** Generous bound on every wait: a hang fails the test instead of blocking CI. */
const WAIT_MS = 30_000;

interface Received {
  file: FollowedFile;
  offset: number;
  chunks: Buffer[];
  bytes: number;
  ended: boolean;
}

/** Recorders still following: stopped after each test, also a failed one, so nothing lingers. */
const running = new Set<Recorder>();

/** Consumes a follower in the background and records what arrived, per announced file. */
class Recorder {
  readonly files: Received[] = [];
  readonly kinds: FollowItem['kind'][] = [];
  readonly gaps: Extract<FollowItem, { kind: 'gap' }>[] = [];
  error: unknown = null;
  done: Promise<void>;
  private readonly controller = new AbortController();
  private wakeups: (() => void)[] = [];

  constructor(follower: LogFollower, start: FollowPosition | null, options: { keepBytes?: boolean } = {}) {
    running.add(this);
    const keep = options.keepBytes ?? true;
    this.done = (async () => {
      try {
        for await (const item of follower.follow(start, this.controller.signal)) {
          if (item.kind !== 'data') this.kinds.push(item.kind);
          const last = this.files.at(-1);
          switch (item.kind) {
            case 'file':
              this.files.push({ file: item.file, offset: item.offset, chunks: [], bytes: 0, ended: false });
              break;
            case 'data':
              assert.ok(last !== undefined && !last.ended, 'data outside a file');
              if (keep) last.chunks.push(item.chunk);
              last.bytes += item.chunk.length;
              break;
            case 'end-of-file':
              assert.ok(last !== undefined);
              last.ended = true;
              break;
            case 'gap':
              this.gaps.push(item);
              break;
            case 'idle':
            case 'size':
              break;
          }
          for (const wake of this.wakeups.splice(0)) wake();
        }
      } catch (e) {
        this.error = e;
      } finally {
        for (const wake of this.wakeups.splice(0)) wake();
      }
    })();
  }

  /** Waits (bounded) until `condition` holds after some item. */
  async until(condition: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + WAIT_MS;
    while (!condition()) {
      if (this.error !== null) throw this.error as Error;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `timed out waiting for ${what}; items: ${this.kinds.join(',')}; files: ${this.files.map((f) => `${f.file.path}@${f.offset}+${f.bytes}`).join(' ')}`,
        );
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 1000));
        this.wakeups.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Waits (bounded) until every byte of the file at `path` has arrived. */
  caughtUp(path: string, what: string): Promise<void> {
    return this.until(() => this.bytesOf(path) === readFileSync(path).length, what);
  }

  received(path: string): Buffer {
    return Buffer.concat(this.files.filter((f) => f.file.path === path).flatMap((f) => f.chunks));
  }

  bytesOf(path: string): number {
    return this.files.filter((f) => f.file.path === path).reduce((n, f) => n + f.bytes, 0);
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.done;
    running.delete(this);
    if (this.error !== null) throw this.error as Error;
  }
}

/** Per file: the received bytes are exactly the file's bytes from the announced offset. */
function assertExact(rec: Recorder, path: string, content: Buffer): void {
  const parts = rec.files.filter((f) => f.file.path === path);
  assert.ok(parts.length > 0, `${path} was never announced`);
  assert.equal(parts.length, 1, `${path} announced more than once`);
  const part = parts[0]!;
  assert.equal(Buffer.concat(part.chunks).toString('latin1'), content.subarray(part.offset).toString('latin1'), `${path} from ${part.offset}`);
}

function lines(prefix: string, from: number, count: number): string {
  let s = '';
  for (let i = from; i < from + count; i++)
    s += `2024-01-01 00:00:${String(i % 60).padStart(2, '0')}.${String(i).padStart(6, '0')} UTC [${prefix}] LOG:  line ${i} of ${prefix}\n`;
  return s;
}

let root: string;
let case_ = 0;

/**
 * A fresh data and log directory whose path has spaces and quotes, as a server might
 * (logrotate's own configuration syntax cannot name a path with a double quote).
 */
function instanceDirs(forLogrotate = false): { data: string; log: string } {
  const data = join(root, forLogrotate ? `case ${++case_} it's data $HOME` : `case ${++case_} it's "data" $HOME`);
  const log = join(data, 'log dir');
  mkdirSync(log, { recursive: true });
  return { data, log };
}

function follower(shell: LocalShell, dirs: { data: string; log: string }, extra: Partial<LogFollowerOptions> = {}): LogFollower {
  return new LogFollower(shell, fastFollowerOptions(dirs, extra));
}

/** Writes current_logfiles the way PostgreSQL does: a new file renamed into place. */
function setCurrentLogfiles(data: string, relative: string): void {
  writeFileSync(join(data, 'current_logfiles.tmp'), `stderr ${relative}\n`);
  renameSync(join(data, 'current_logfiles.tmp'), join(data, 'current_logfiles'));
}

/**
 * A fresh instance whose log directory holds `name` with `text`, a follower on it through
 * `shell` and a recorder from the start; returns once the recorder has the whole file.
 */
async function followNewFile(
  text: string,
  { name = 'postgresql.log', forLogrotate = false, shell = new LocalShell() }: { name?: string; forLogrotate?: boolean; shell?: LocalShell } = {},
): Promise<{ dirs: { data: string; log: string }; live: string; f: LogFollower; rec: Recorder }> {
  const dirs = instanceDirs(forLogrotate);
  const live = join(dirs.log, name);
  writeFileSync(live, text);
  const f = follower(shell, dirs);
  const rec = new Recorder(f, null);
  await rec.caughtUp(live, `the whole of ${name}`);
  return { dirs, live, f, rec };
}

describe('LogFollower on real files', () => {
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'pglog-follow-'));
  });
  after(() => {
    rmSync(root, { recursive: true, force: true });
  });
  afterEach(async () => {
    for (const rec of running) await rec.stop().catch(() => undefined);
  });

  it('streams appends to the active file as they happen', async () => {
    const { live: path, f, rec } = await followNewFile(lines('a', 0, 3));
    for (let round = 1; round <= 5; round++) {
      appendFileSync(path, lines('a', round * 10, round * 3));
      await rec.caughtUp(path, `round ${round}`);
    }
    await rec.until(() => rec.kinds.includes('idle') && rec.kinds.includes('size'), 'idle and size items');
    await rec.stop();
    assertExact(rec, path, readFileSync(path));
    assert.equal(rec.files[0]?.offset, 0);
    // The identity, first taken over a short head, now covers 1024 bytes, as POSIX cksum has it.
    assert.ok(parseIdentity(rec.files[0].file.identity)!.headLength < 1024);
    assert.ok(readFileSync(path).length > 1024);
    const { stdout } = await run('/bin/sh', ['-c', 'head -c 1024 "$1" | cksum', 'sh', path]);
    const ino = parseIdentity(rec.files[0].file.identity)!.inode;
    assert.equal(f.currentFile()?.identity, `${ino}:1024:${stdout.split(' ')[0]}`);
  });

  it('follows PostgreSQL rotation to a new file name, reading the old file to its end first', async () => {
    const dirs = instanceDirs();
    const first = join(dirs.log, 'postgresql-2024-01-01_000000.log');
    const second = join(dirs.log, 'postgresql-2024-01-01_010000.log');
    writeFileSync(first, lines('one', 0, 5));
    setCurrentLogfiles(dirs.data, 'log dir/postgresql-2024-01-01_000000.log');
    const f = follower(new LocalShell(), dirs);
    const rec = new Recorder(f, null);
    await rec.caughtUp(first, 'the first file');
    // The new file appears and gets lines; the old one gets its last lines; then the switch.
    writeFileSync(second, lines('two', 0, 4));
    appendFileSync(first, lines('one', 5, 3));
    setCurrentLogfiles(dirs.data, 'log dir/postgresql-2024-01-01_010000.log');
    appendFileSync(second, lines('two', 4, 4));
    await rec.caughtUp(second, 'the second file');
    await rec.stop();
    assertExact(rec, first, readFileSync(first));
    assertExact(rec, second, readFileSync(second));
    assert.equal(rec.files[1]?.offset, 0);
    assert.deepEqual(
      rec.kinds.filter((k) => k === 'file' || k === 'end-of-file'),
      ['file', 'end-of-file', 'file'],
    );
    assert.equal(f.currentFile()?.path, second);
  });

  it('follows logrotate rename rotation (create), with late lines written to the renamed file', async () => {
    const { live, rec } = await followNewFile(lines('gen1', 0, 20), { name: 'app.log', forLogrotate: true });
    const conf = join(root, `logrotate-create-${case_}.conf`);
    writeFileSync(conf, `"${live}" {\n  create\n  rotate 5\n  missingok\n}\n`);
    const inodeBefore = rec.files[0]?.file.identity;
    await run('logrotate', ['-f', '-s', join(root, `state-create-${case_}`), conf]);
    // The writer has not reopened yet: its next lines still land in the renamed file.
    appendFileSync(`${live}.1`, lines('gen1', 20, 5));
    appendFileSync(live, lines('gen2', 0, 10));
    await rec.until(() => rec.files.length === 2 && rec.files[1]!.bytes === readFileSync(live).length, 'the recreated file');
    await rec.stop();
    const gen1 = readFileSync(`${live}.1`);
    // Both logical files are announced under the path they had when first seen.
    assert.equal(rec.files[0]?.file.identity, inodeBefore);
    assert.equal(Buffer.concat(rec.files[0]!.chunks).toString(), gen1.toString());
    assert.equal(Buffer.concat(rec.files[1]!.chunks).toString(), readFileSync(live).toString());
    assert.ok(rec.files[0]!.ended);
  });

  it('follows logrotate copytruncate while a writer appends concurrently', async () => {
    const dirs = instanceDirs(true);
    const live = join(dirs.log, 'app.log');
    const written: string[] = [];
    const write = (n: number): void => {
      let s = '';
      for (let i = 0; i < n; i++) {
        const line = `2024-01-01 00:00:00.${String(written.length).padStart(6, '0')} UTC [w] LOG:  line ${written.length}\n`;
        written.push(line);
        s += line;
      }
      appendFileSync(live, s);
    };
    write(2000);
    const conf = join(root, `logrotate-copytruncate-${case_}.conf`);
    writeFileSync(conf, `"${live}" {\n  copytruncate\n  rotate 5\n}\n`);
    const rec = new Recorder(follower(new LocalShell(), dirs), null);
    await rec.caughtUp(live, 'the first lines');
    let writing = true;
    const writer = (async () => {
      // Racing logrotate, but slower than a whole file per read round (see segment-script.ts:
      // a truncated file that regrows past our offset between two rounds cannot be told apart).
      while (writing) {
        write(3);
        await new Promise((r) => setTimeout(r, 1));
      }
    })();
    await run('logrotate', ['-f', '-s', join(root, `state-ct-${case_}`), conf]);
    for (let i = 0; i < 20; i++) {
      write(2);
      await new Promise((r) => setTimeout(r, 5));
    }
    writing = false;
    await writer;
    await rec.until(() => rec.files.length === 2 && rec.files[1]!.bytes === readFileSync(live).length, 'the truncated file from 0');
    await rec.stop();
    const copy = readFileSync(`${live}.1`).toString();
    const first = Buffer.concat(rec.files[0]!.chunks).toString();
    const second = Buffer.concat(rec.files[1]!.chunks).toString();
    // The copy, whole and exactly; plus at most lines written between logrotate's copy and its
    // truncate (in no file any more, but we may have read them live).
    assert.ok(first.startsWith(copy), 'the first logical file begins with the whole copy');
    assert.equal(second, readFileSync(live).toString(), 'the truncated file from 0, exactly');
    const got = (first + second).split(/(?<=\n)/);
    const present = new Set([...copy.split(/(?<=\n)/), ...second.split(/(?<=\n)/)]);
    let cursor = 0;
    for (const line of got) {
      const at = written.indexOf(line, cursor);
      assert.ok(at >= cursor, `line out of order or twice: ${line}`);
      for (let i = cursor; i < at; i++) assert.ok(!present.has(written[i]!), `skipped a line still on disk: ${written[i]}`);
      cursor = at + 1;
    }
    assert.equal(rec.gaps.length, 0);
  });

  it('resumes exactly from a mid-file position, also after a rename rotation while stopped', async () => {
    const { dirs, live, f, rec: first } = await followNewFile(lines('r', 0, 40));
    await first.stop();
    const file = f.currentFile();
    assert.ok(file !== null);
    const content = readFileSync(live);
    const mid = content.indexOf('line 17 ');
    const boundary = content.lastIndexOf('\n', mid) + 1;
    // While stopped: more lines, then a rename rotation and a new file.
    appendFileSync(live, lines('r', 40, 10));
    renameSync(live, `${live}.1`);
    writeFileSync(live, lines('s', 0, 7));
    const second = new Recorder(follower(new LocalShell(), dirs), { file, offset: boundary });
    await second.until(() => second.files.length === 2 && second.files[1]!.bytes === readFileSync(live).length, 'both files');
    await second.stop();
    assert.deepEqual(
      second.files.map((x) => x.offset),
      [boundary, 0],
    );
    assert.equal(Buffer.concat(second.files[0]!.chunks).toString(), readFileSync(`${live}.1`).subarray(boundary).toString());
    assert.equal(Buffer.concat(second.files[1]!.chunks).toString(), readFileSync(live).toString());
  });

  it('after a copytruncate while stopped, reads the rest of the file from the copy, then the live file from 0', async () => {
    const { dirs, live, f, rec: first } = await followNewFile(lines('c', 0, 30), { name: 'app.log', forLogrotate: true });
    await first.stop();
    const position = { file: f.currentFile()!, offset: readFileSync(live).length };
    appendFileSync(live, lines('c', 30, 12));
    const conf = join(root, `logrotate-ct-down-${case_}.conf`);
    writeFileSync(conf, `"${live}" {\n  copytruncate\n  rotate 5\n}\n`);
    await run('logrotate', ['-f', '-s', join(root, `state-ct-down-${case_}`), conf]);
    appendFileSync(live, lines('d', 0, 5));
    const second = new Recorder(follower(new LocalShell(), dirs), position);
    await second.until(() => second.files.length === 2 && second.files[1]!.bytes === readFileSync(live).length, 'the live file');
    await second.stop();
    // The logical file continues under its own name and offset: the copy's bytes are its bytes.
    assert.equal(second.files[0]!.file.path, live);
    assert.equal(second.files[0]!.offset, position.offset);
    assert.equal(Buffer.concat(second.files[0]!.chunks).toString(), readFileSync(`${live}.1`).subarray(position.offset).toString());
    assert.ok(second.files[0]!.ended);
    assert.equal(Buffer.concat(second.files[1]!.chunks).toString(), readFileSync(live).toString());
    assert.equal(second.gaps.length, 0);
  });

  it('reports a gap when the file was truncated in place with no copy, then reads it from 0', async () => {
    const { live, rec } = await followNewFile(lines('t', 0, 30));
    const fd = openSync(live, 'r+');
    try {
      writeSync(fd, '', 0);
    } finally {
      closeSync(fd);
    }
    writeFileSync(live, lines('u', 0, 3)); // O_TRUNC: same inode, new content
    await rec.until(() => rec.files.length === 2 && rec.files[1]!.bytes === readFileSync(live).length, 'the rewritten file');
    await rec.stop();
    assert.equal(rec.gaps.length, 1);
    assert.match(rec.gaps[0]!.reason, /truncated or rewritten/);
    assert.equal(Buffer.concat(rec.files[1]!.chunks).toString(), readFileSync(live).toString());
  });

  it('streams a 200 MB line without a newline in bounded memory', async () => {
    const dirs = instanceDirs();
    const path = join(dirs.log, 'postgresql.log');
    const size = 200 * 1024 * 1024;
    const block = Buffer.alloc(1024 * 1024, 0x78);
    const fd = openSync(path, 'w');
    try {
      for (let written = 0; written < size; written += block.length) writeSync(fd, block);
    } finally {
      closeSync(fd);
    }
    // Retained memory, not garbage awaiting collection: measured right after a full GC.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const retained = (): number => {
      gc();
      const m = process.memoryUsage();
      return m.heapUsed + m.arrayBuffers;
    };
    const base = retained();
    let peak = 0;
    let nextSample = 0;
    const rec = new Recorder(follower(new LocalShell(), dirs), null, { keepBytes: false });
    await rec.until(() => {
      const got = rec.bytesOf(path);
      if (got >= nextSample) {
        peak = Math.max(peak, retained() - base);
        nextSample = got + 16 * 1024 * 1024;
      }
      return got === size;
    }, 'all 200 MB');
    await rec.stop();
    assert.equal(rec.bytesOf(path), size);
    assert.ok(peak < 64 * 1024 * 1024, `memory grew by ${Math.round(peak / 1024 / 1024)} MB while streaming`);
  });

  it('fails with REMOTE_COMMAND_FAILED naming target, instance and directory when the log directory is missing', async () => {
    const dirs = instanceDirs();
    const f = follower(new LocalShell(), { data: dirs.data, log: join(dirs.data, 'no such dir') });
    const controller = new AbortController();
    await assert.rejects(
      async () => {
        for await (const _ of f.follow(null, controller.signal)) {
          /* nothing */
        }
      },
      (e: unknown) => {
        assert.ok(isPglogError(e));
        assert.equal(e.code, 'REMOTE_COMMAND_FAILED');
        assert.match(e.message, /^db1\/main: cannot list .*no such dir: .*No such file/);
        return true;
      },
    );
  });

  it('a remote loop ends by itself once its channel is closed (heartbeat), also with no data flowing', async () => {
    const shell = new LocalShell({ hangup: 'pipes-only' });
    const { rec } = await followNewFile(lines('h', 0, 2), { shell });
    await rec.stop();
    const segment = shell.commands.at(-1);
    assert.ok(segment !== undefined && segment.command.includes('PGLOG'));
    const exit = await Promise.race([segment.exit, new Promise<'hang'>((r) => setTimeout(() => r('hang'), WAIT_MS).unref())]);
    assert.notEqual(exit, 'hang', 'the segment script outlived its closed pipes');
  });
});
