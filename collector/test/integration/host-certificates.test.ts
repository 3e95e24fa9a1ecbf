/**
 * `@cert-authority` lines mean the same in both transports (F10 of the 2026-11 review), on a
 * real sshd that presents a CA-signed host certificate (ssh-keygen -s, HostCertificate):
 *
 * - OpenSSH itself, given the CA line, accepts that server (so the certificate is real and a
 *   CA line would vouch for it, were it passed on as it is);
 * - with a known_hosts that holds only the `@cert-authority` line, the in-process transport
 *   (ssh2) and the sidecar's OpenSSH both refuse the server with SSH_HOST_KEY_UNKNOWN, and no
 *   command runs;
 * - with the server's plain key listed too, both accept it.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import { launchSidecar, type RunningSidecar, sidecarServer } from '@pglog/test-support/sidecar-process.ts';
import { sshConnectionOptions } from '@pglog/test-support/ssh-connection.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { within } from '@pglog/test-support/wait.ts';

import { ConnectLimiter } from '../../src/transport/connect-limiter.ts';
import { ProxyShell } from '../../src/transport/proxy-shell.ts';
import { type RemoteShell, runRemote } from '../../src/transport/remote-shell.ts';
import { SidecarClient } from '../../src/transport/sidecar-client.ts';
import { SshConnection } from '../../src/transport/ssh-connection.ts';

/** What running `touch MARKER; echo ran` gives: its output, or the error code it was refused with. */
async function outcome(shell: RemoteShell, marker: string): Promise<string> {
  try {
    const r = await within(40_000, 'the command or its refusal', runRemote(shell, `touch ${marker}; echo ran`));
    return r.stdout.toString().trim();
  } catch (e) {
    assert.ok(isPglogError(e), String(e));
    return e.code;
  }
}

describe('@cert-authority lines: the same trust in both transports', { timeout: 180_000 }, () => {
  let ssh: TestSshServer;
  let work: string;
  let sidecar: RunningSidecar | undefined;
  let client: SidecarClient | undefined;
  const connections: SshConnection[] = [];
  const limiter = new ConnectLimiter({ spreadMs: 0 });
  const unregister = onProcessExit(() => sidecar?.proc.kill('SIGKILL'));

  before(async () => {
    ssh = await within(30_000, 'starting sshd', startSshServer({ hostCertificate: true }));
    work = mkdtempSync(join(tmpdir(), 'spc-'));
    client = await SidecarClient.open({ dir: join(work, 'sp'), pollMs: 50 });
    sidecar = launchSidecar(join(work, 'sp'), ['--log-level', 'warn']);
  });

  after(async () => {
    await Promise.allSettled(connections.map((c) => c.close()));
    await client?.close();
    if (sidecar !== undefined && sidecar.proc.exitCode === null) {
      sidecar.proc.kill('SIGTERM');
      await within(15_000, 'sidecar exit', sidecar.exited);
    }
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
    await ssh?.dispose();
    unregister();
  });

  function inProcess(knownHosts: string): SshConnection {
    const c = new SshConnection(sshConnectionOptions(ssh, { target: 'cert', knownHosts: { text: knownHosts, source: 'test known_hosts' }, limiter }));
    connections.push(c);
    return c;
  }

  async function throughSidecar(name: string, knownHosts: string): Promise<ProxyShell> {
    await client!.setServer(sidecarServer(ssh, name, { knownHosts }));
    return new ProxyShell({ client: client!, server: name, endpoint: `${ssh.host}:${ssh.port}`, startTimeoutMs: 30_000 });
  }

  test('OpenSSH given the CA line accepts the certificate: the server really presents one', async () => {
    const caOnly = join(work, 'ca_only_known_hosts');
    writeFileSync(caOnly, `${ssh.certAuthorityLine ?? ''}\n`, { mode: 0o600 });
    const out = await new Promise<string>((resolve, reject) => {
      execFile(
        'ssh',
        [
          '-F',
          '/dev/null',
          '-o',
          'BatchMode=yes',
          '-o',
          'StrictHostKeyChecking=yes',
          '-o',
          `UserKnownHostsFile=${caOnly}`,
          '-o',
          'GlobalKnownHostsFile=/dev/null',
          '-o',
          'IdentitiesOnly=yes',
          '-i',
          ssh.privateKeyFile,
          '-p',
          String(ssh.port),
          '-l',
          ssh.user,
          ssh.host,
          'echo via-certificate',
        ],
        (e, stdout, stderr) => (e === null ? resolve(stdout) : reject(new Error(`${e.message}\n${stderr}`))),
      );
    });
    assert.equal(out.trim(), 'via-certificate');
  });

  test('known_hosts with only the @cert-authority line: both transports refuse with SSH_HOST_KEY_UNKNOWN, nothing runs', async () => {
    const knownHosts = `# the CA of our hosts\n${ssh.certAuthorityLine ?? ''}\n`;
    const inprocMarker = join(ssh.dir, 'ran-inproc');
    const proxyMarker = join(ssh.dir, 'ran-proxy');
    const [inproc, proxy] = await Promise.all([
      outcome(inProcess(knownHosts), inprocMarker),
      outcome(await throughSidecar('ca-only', knownHosts), proxyMarker),
    ]);
    assert.deepEqual({ inproc, proxy }, { inproc: 'SSH_HOST_KEY_UNKNOWN', proxy: 'SSH_HOST_KEY_UNKNOWN' });
    assert.ok(!existsSync(inprocMarker) && !existsSync(proxyMarker), 'no command ran');
  });

  test('the plain host key listed beside the CA line: both transports accept', async () => {
    const knownHosts = `${ssh.certAuthorityLine ?? ''}\n${readFileSync(ssh.knownHostsFile, 'utf8')}`;
    const [inproc, proxy] = await Promise.all([
      outcome(inProcess(knownHosts), join(ssh.dir, 'plain-inproc')),
      outcome(await throughSidecar('plain', knownHosts), join(ssh.dir, 'plain-proxy')),
    ]);
    assert.deepEqual({ inproc, proxy }, { inproc: 'ran', proxy: 'ran' });
  });
});
