/**
 * A connection takes a handshake slot only once the server has identified itself (ssh-socket.ts,
 * connect-limiter.ts; issue 46): a server that accepts TCP and says nothing, or closes at once as
 * sshd does past MaxStartups, fails with its own clear error after its own wait, and meanwhile a
 * healthy server connects through the single handshake slot of the limiter.
 */
import { strict as assert } from 'node:assert';
import { createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { sshConnectionOptions } from '@pglog/test-support/ssh-connection.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { within } from '@pglog/test-support/wait.ts';

import { ConnectLimiter } from '../../src/transport/connect-limiter.ts';
import { runRemote } from '../../src/transport/remote-shell.ts';
import { SshConnection } from '../../src/transport/ssh-connection.ts';

/** A TCP listener on the server's address that does `onConnection` with every connection. */
function listen(host: string, onConnection: (socket: Socket) => void): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer(onConnection).listen(0, host, () => {
      const address = server.address();
      resolve({ server, port: typeof address === 'object' && address !== null ? address.port : 0 });
    });
  });
}

describe('connecting in two stages', { timeout: 120_000 }, () => {
  let sshd: TestSshServer;
  const held: Socket[] = [];
  const listeners: Server[] = [];
  const opened: SshConnection[] = [];
  before(async () => {
    sshd = await within(30_000, 'starting sshd', startSshServer());
  });
  after(async () => {
    await Promise.allSettled(opened.map((c) => c.close()));
    for (const s of held) s.destroy();
    for (const l of listeners) l.close();
    await sshd?.dispose();
  });

  test('a server that accepts TCP but never identifies times out on its own, holding no handshake slot; a healthy server connects meanwhile', async () => {
    const silent = await listen(sshd.host, (socket) => held.push(socket));
    listeners.push(silent.server);
    // One handshake slot for the whole process: if the silent server held it, the healthy one would wait.
    const limiter = new ConnectLimiter({ maxConcurrent: 1, spreadMs: 0, minSpacingMs: 0 });
    const hung = new SshConnection(sshConnectionOptions(sshd, { target: 'hung', port: silent.port, limiter, connectTimeoutMs: 4000 }));
    const healthy = new SshConnection(sshConnectionOptions(sshd, { target: 'healthy', limiter }));
    opened.push(hung, healthy);
    let hungFailedAt = 0;
    const failed = hung.spawn('true').then(
      () => assert.fail('the silent server ran a command'),
      (e: unknown) => {
        hungFailedAt = performance.now();
        return e;
      },
    );
    const ok = await within(30_000, 'the healthy server', runRemote(healthy, 'echo up'));
    const healthyDoneAt = performance.now();
    assert.equal(ok.stdout.toString(), 'up\n');
    const error = await within(30_000, 'the silent server failing', failed);
    assert.ok(isPglogError(error) && error.code === 'SSH_TIMEOUT', String(error));
    assert.match(error.message, /accepted the TCP connection but sent no SSH identification within 4000 ms/);
    assert.ok(error.message.includes(`${sshd.host}:${silent.port}`));
    // The healthy server did not wait for the silent one to give its slot back.
    assert.ok(healthyDoneAt < hungFailedAt, 'the healthy command finished before the silent server timed out');
    assert.equal(limiter.connecting, 0);
  });

  test('a server that closes before identifying (as sshd does past MaxStartups) is SSH_CONNECT_FAILED saying so', async () => {
    const closing = await listen(sshd.host, (socket) => socket.destroy());
    listeners.push(closing.server);
    const limiter = new ConnectLimiter({ spreadMs: 0 });
    const refused = new SshConnection(sshConnectionOptions(sshd, { target: 'refusing', port: closing.port, limiter }));
    opened.push(refused);
    const error = await within(
      30_000,
      'the refusing server',
      refused.spawn('true').then(
        () => assert.fail('ran a command'),
        (e: unknown) => e,
      ),
    );
    assert.ok(isPglogError(error) && error.code === 'SSH_CONNECT_FAILED', String(error));
    assert.match(error.message, /closed the connection before identifying itself \(sshd refusing new connections: MaxStartups/);
  });
});
