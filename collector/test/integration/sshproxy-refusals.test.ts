/**
 * One target's wrong entry fails only that target (F7 of the 2026-11 review), with the real
 * `pglog sshproxy` child on a real OpenSSH sshd, driven through the collector's own
 * SidecarClient and ProxyShell. Three servers share the pod's sidecar:
 *
 * - `busy-db`, a healthy target: its stream runs and delivers its output;
 * - `ad-db`, user `alice@corp.example.com` (an AD/SSSD name OpenSSH takes as `-l`): accepted by
 *   the sidecar, and refused by the server only, as a login (SSH_AUTH_FAILED);
 * - `bad-db`, a user that would be an ssh option: refused by the sidecar alone, its spawns and
 *   forwards fail at once with CONFIG_INVALID (not after a 30 s SSH_CONNECT_FAILED), and no
 *   ssh process ever gets it as an argument.
 */
import { strict as assert } from 'node:assert';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { isPglogError } from '@pglog/common/errors.ts';
import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import { cmdline } from '@pglog/test-support/process-tree.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { within } from '@pglog/test-support/wait.ts';

import { isAlive } from '../../src/sidecar/sidecar-files.ts';
import { ProxyShell } from '../../src/transport/proxy-shell.ts';
import { runRemote } from '../../src/transport/remote-shell.ts';
import { SidecarClient, type SidecarServer } from '../../src/transport/sidecar-client.ts';

const MAIN = fileURLToPath(new URL('../../../cli/src/main.ts', import.meta.url));

function allProcesses(): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => pid !== process.pid && isAlive(pid));
}

/** The error a promise rejects with (fails the test when it resolves). */
async function rejection(p: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await p;
  } catch (e) {
    return e as Error & { code?: string };
  }
  assert.fail('expected a rejection');
}

describe('sshproxy: a wrong server entry fails only its own target', { timeout: 180_000 }, () => {
  let ssh: TestSshServer;
  let dir: string;
  let client: SidecarClient;
  let sidecar: ChildProcess;
  let sidecarLog = '';
  const unregister = onProcessExit(() => sidecar?.kill('SIGKILL'));

  before(async () => {
    ssh = await within(30_000, 'starting sshd', startSshServer());
    dir = mkdtempSync(join(tmpdir(), 'spr-'));
    client = await SidecarClient.open({ dir, pollMs: 50, forwardTimeoutMs: 20_000 });
    const base: Omit<SidecarServer, 'name' | 'user'> = {
      host: ssh.host,
      port: ssh.port,
      maxSessions: 10,
      serverAliveIntervalS: 2,
      connectTimeoutS: 5,
      privateKey: readFileSync(ssh.privateKeyFile),
      knownHosts: readFileSync(ssh.knownHostsFile, 'utf8'),
    };
    await client.setServer({ ...base, name: 'busy-db', user: ssh.user });
    await client.setServer({ ...base, name: 'ad-db', user: 'alice@corp.example.com' });
    await client.setServer({ ...base, name: 'bad-db', user: `-oProxyCommand=touch ${dir}/pwned` });
    await client.flushed();
    sidecar = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'sshproxy', '--dir', dir, '--log-level', 'debug'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    sidecar.stdout!.setEncoding('utf8').on('data', (s: string) => {
      sidecarLog += s;
    });
    sidecar.stderr!.setEncoding('utf8').on('data', (s: string) => {
      sidecarLog += s;
    });
  });

  after(async () => {
    await client?.close();
    if (sidecar !== undefined && sidecar.exitCode === null) {
      const exited = new Promise((resolve) => sidecar.once('exit', resolve));
      sidecar.kill('SIGTERM');
      await within(15_000, 'sidecar exit', exited);
    }
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    await ssh?.dispose();
    unregister();
  });

  const shell = (server: string): ProxyShell => new ProxyShell({ client, server, endpoint: `${ssh.host}:${ssh.port}`, startTimeoutMs: 20_000 });

  test('the healthy target streams, the AD user reaches the server, the bad entry is refused at once with CONFIG_INVALID', async () => {
    // The healthy target of the same pod is not held up by the bad one.
    const ok = await within(30_000, 'the healthy stream', runRemote(shell('busy-db'), 'echo healthy proxy target; echo to-stderr >&2'));
    assert.equal(ok.stdout.toString(), 'healthy proxy target\n');
    assert.equal(ok.stderr, 'to-stderr\n');
    assert.equal(ok.exit.code, 0);

    // The bad entry: refused by the sidecar, reported as its own stream's failure.
    const bad = await rejection(shell('bad-db').spawn('echo never'));
    assert.ok(isPglogError(bad), String(bad));
    assert.equal(bad.code, 'CONFIG_INVALID', bad.message);
    assert.match(bad.message, /bad-db via sshproxy: .*servers\[\d\]\.user: "-oProxyCommand=touch .*" is not an SSH user name: it must not start with "-"/);
    // Its SQL forward too, without waiting for the forward timeout.
    const fwd = await rejection(client.forward('bad-db', '/var/run/postgresql/.s.PGSQL.5432', 5432));
    assert.equal(fwd.code, 'CONFIG_INVALID', fwd.message);

    // The AD user is passed to OpenSSH as it is; only the server says no (it has no such user).
    const ad = await rejection(shell('ad-db').spawn('echo never'));
    assert.equal(ad.code, 'SSH_AUTH_FAILED', ad.message);

    const status = client.status;
    assert.ok(status !== null);
    assert.deepEqual(Object.keys(status.refusedServers ?? {}), ['bad-db']);
    assert.equal(status.desiredError, undefined);
    assert.deepEqual([...new Set(status.masters.map((m) => m.server))].sort(), ['ad-db', 'busy-db']);

    // The healthy target still works after the refusals (a second, later stream).
    const again = await within(30_000, 'a second healthy stream', runRemote(shell('busy-db'), 'echo again'));
    assert.equal(again.stdout.toString(), 'again\n');

    // The refused user never reached a command line, and its would-be ProxyCommand never ran.
    assert.ok(!existsSync(join(dir, 'pwned')));
    for (const pid of allProcesses()) assert.ok(!cmdline(pid).some((a) => a.includes('-oProxyCommand=touch')), `pid ${pid}: ${cmdline(pid).join(' ')}`);
    assert.match(sidecarLog, /is not an SSH user name.*this entry is refused, the others are applied/);
  });
});
