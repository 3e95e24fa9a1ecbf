/**
 * SQL forwards of `pglog sshproxy` against a real OpenSSH sshd (which allows local forwarding)
 * and a real PostgreSQL, driven through the collector's own SidecarClient.forward():
 *
 * - bytes both ways through a forward to a Unix-socket echo server on the "server" side;
 * - a real pg client through a forward to a real PostgreSQL's socket: SELECT 1;
 * - the master SIGKILLed: the forward goes pending and comes back on the next master;
 * - removeForward: the sidecar cancels it and the local socket and its directory are gone;
 * - a forward to a socket that does not exist: the forward is ready (OpenSSH only opens the
 *   remote end per connection), the local connect succeeds and the stream is then closed;
 *   pg reports a connection error, never a hang, and the sidecar logs the master's refusal;
 * - a SIGKILLed sidecar: the next instance sets the forward up again, forward() resolves again;
 * - a master refused for good (changed host key): forward() rejects at once with its code.
 */
import { strict as assert } from 'node:assert';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';

import { PglogError } from '@pglog/common/errors.ts';
import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { cmdline, descendants } from '@pglog/test-support/process-tree.ts';
import { isRoot, serverUser } from '@pglog/test-support/server-user.ts';
import { launchSidecar, type RunningSidecar, sidecarServer, TEST_SIDECAR_ARGS } from '@pglog/test-support/sidecar-process.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { sleep, within } from '@pglog/test-support/wait.ts';
import pg from 'pg';

import { isAlive } from '../../src/sidecar/sidecar-files.ts';
import { SidecarClient } from '../../src/transport/sidecar-client.ts';

const sidecars: RunningSidecar[] = [];
const dirs: string[] = [];
const clients: SidecarClient[] = [];

function startSidecar(dir: string): RunningSidecar {
  const s = launchSidecar(dir, TEST_SIDECAR_ARGS);
  sidecars.push(s);
  return s;
}

function masterPids(sidecarPid: number): number[] {
  return descendants(sidecarPid).filter((pid) => {
    const a = cmdline(pid);
    return a[0] === 'ssh' && a.includes('-M');
  });
}

/** Every live process whose command line mentions `dir` (what a sidecar on `dir` started). */
function processesMentioning(dir: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => pid !== process.pid && isAlive(pid) && cmdline(pid).some((a) => a.includes(`${dir}/`)));
}

async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline)
      throw new Error(`${what}: not within ${timeoutMs} ms\nsidecar log tail:\n${sidecars.at(-1)?.output().split('\n').slice(-20).join('\n') ?? ''}`);
    await sleep(25);
  }
}

/** A sidecar directory (short: sockets live in it) with the collector's client on it and a server `db`. */
async function setup(ssh: TestSshServer): Promise<{ dir: string; client: SidecarClient; sidecar: RunningSidecar }> {
  const dir = mkdtempSync(join(tmpdir(), 'spf-'));
  dirs.push(dir);
  const client = await SidecarClient.open({ dir, pollMs: 50, forwardTimeoutMs: 20_000 });
  clients.push(client);
  await client.setServer(sidecarServer(ssh, 'db'));
  const sidecar = startSidecar(dir);
  return { dir, client, sidecar };
}

/** Sends `data` through the socket at `path` and returns what comes back once `data.length` bytes did. */
function roundTrip(path: string, data: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect(path);
    const chunks: Buffer[] = [];
    let received = 0;
    socket.on('data', (b: Buffer) => {
      chunks.push(b);
      received += b.length;
      if (received >= data.length) {
        socket.end();
        resolve(Buffer.concat(chunks));
      }
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error(`closed after ${received} of ${data.length} bytes`)));
    socket.write(data);
  });
}

async function selectOne(localDir: string, port: number): Promise<number> {
  const client = new pg.Client({ host: localDir, port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    const r = await client.query<{ one: number }>('SELECT 1 AS one');
    return r.rows[0]!.one;
  } finally {
    await client.end();
  }
}

describe('sshproxy SQL forwards against OpenSSH and PostgreSQL', { timeout: 240_000 }, () => {
  let ssh: TestSshServer;
  let postgres: TestPostgres;
  let echo: Server;
  let echoDir: string;
  let echoSocket: string;
  const unregister = onProcessExit(() => {
    for (const s of sidecars) s.proc.kill('SIGKILL');
    for (const d of dirs) for (const pid of processesMentioning(d)) process.kill(pid, 'SIGKILL');
  });

  before(async () => {
    [ssh, postgres] = await within(90_000, 'sshd and PostgreSQL', Promise.all([startSshServer({ allowLocalForwarding: true }), startPostgres()]));
    // The echo server plays PostgreSQL: a Unix socket that the SSH login user (sshd's session
    // opens the forwarded connection as that user) may connect to.
    echoDir = mkdtempSync(join(tmpdir(), 'spf-echo-'));
    echoSocket = join(echoDir, '.s.PGSQL.5432');
    echo = createServer((c) => {
      c.on('error', () => undefined);
      c.pipe(c);
    });
    await new Promise<void>((resolve) => echo.listen(echoSocket, resolve));
    if (isRoot()) {
      const u = serverUser();
      chownSync(echoDir, u.uid, u.gid);
      chownSync(echoSocket, u.uid, u.gid);
    }
    chmodSync(echoDir, 0o700);
    chmodSync(echoSocket, 0o600);
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
    for (const s of sidecars.splice(0)) {
      s.proc.kill('SIGTERM');
      await within(15_000, 'sidecar exit', s.exited);
    }
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  after(async () => {
    await new Promise<void>((resolve) => echo.close(() => resolve()));
    rmSync(echoDir, { recursive: true, force: true });
    await Promise.allSettled([ssh.dispose(), postgres.stop()]);
    unregister();
  });

  test('bytes go both ways through a forward to a Unix socket on the server; the local socket is private', async () => {
    const { dir, client } = await setup(ssh);
    const localDir = await client.forward('db', echoSocket, 5432);
    assert.match(localDir, new RegExp(`^${dir}/sql/f[0-9a-f]{15}$`));
    const socket = join(localDir, '.s.PGSQL.5432');
    assert.ok(Buffer.byteLength(socket) <= 107);
    assert.ok(statSync(socket).isSocket());
    assert.equal(statSync(socket).mode & 0o777, 0o600, 'StreamLocalBindMask=0177');
    const data = Buffer.alloc(1 << 20);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 8)) & 0xff;
    const back = await within(20_000, 'echo', roundTrip(socket, data));
    assert.ok(back.equals(data), 'the same bytes came back');
    // Two callers of the same forward share it.
    assert.equal(await client.forward('db', echoSocket, 5432), localDir);
    assert.equal(Object.keys(client.status?.forwards ?? {}).length, 1);
  });

  test('a real pg client through a forward runs SELECT 1; after the master is killed the forward comes back; removed, its socket is gone', async () => {
    const { client, sidecar } = await setup(ssh);
    const remote = join(postgres.socketDir, `.s.PGSQL.${postgres.port}`);
    const localDir = await client.forward('db', remote, postgres.port);
    assert.equal(await selectOne(localDir, postgres.port), 1);
    const before = client.status!;
    const id = Object.keys(before.forwards)[0]!;

    await until('one master', () => masterPids(sidecar.pid).length === 1);
    const [master] = masterPids(sidecar.pid);
    process.kill(master!, 'SIGKILL');
    await until('the forward is no longer ready', () => client.status?.forwards[id]?.state !== 'ready' || client.status.masters[0]?.state !== 'up');
    const again = await client.forward('db', remote, postgres.port);
    assert.equal(again, localDir, 'the same directory');
    const status = client.status!;
    assert.equal(status.forwards[id]?.state, 'ready');
    assert.ok((status.masters[0]?.restarts ?? 0) >= 1, 'a new master');
    assert.equal(await selectOne(again, postgres.port), 1);
    assert.match(sidecar.output(), /forward f[0-9a-f]{15} lost with its master/);

    client.removeForward('db', remote, postgres.port);
    await until('the sidecar dropped it', () => client.status !== null && client.status.forwards[id] === undefined);
    await until('socket and directory removed', () => !existsSync(localDir));
    await assert.rejects(selectOne(localDir, postgres.port), /ENOENT/);
    assert.match(sidecar.output(), /forward f[0-9a-f]{15} removed/);
  });

  test('a forward to a socket that does not exist: ready, the local connect succeeds, then the stream is closed; pg fails with a connection error', async () => {
    const { client, sidecar } = await setup(ssh);
    const localDir = await client.forward('db', '/nonexistent/pglog/.s.PGSQL.5432', 5432);
    // What the collector sees: the connect to the local socket succeeds (the master accepts
    // it), then the master's channel open is refused by sshd and it closes the connection.
    const seen = await within(
      10_000,
      'close',
      new Promise<{ connected: boolean; data: number; error: string | null }>((resolve) => {
        const socket = connect(join(localDir, '.s.PGSQL.5432'));
        let connected = false;
        let data = 0;
        let error: string | null = null;
        socket.on('connect', () => {
          connected = true;
        });
        socket.on('data', (b: Buffer) => {
          data += b.length;
        });
        socket.on('error', (e: NodeJS.ErrnoException) => {
          error = e.code ?? e.message;
        });
        socket.on('close', () => resolve({ connected, data, error }));
      }),
    );
    assert.deepEqual({ connected: seen.connected, data: seen.data }, { connected: true, data: 0 });
    // pg writes its startup packet at once and gets EPIPE (or, by timing, ECONNRESET or an
    // unexpected end): a connection error, not an answer from PostgreSQL.
    const started = Date.now();
    await assert.rejects(within(15_000, 'pg connect', selectOne(localDir, 5432)), (e: Error) => {
      assert.match(e.message, /Connection terminated unexpectedly|ECONNRESET|EPIPE/);
      return true;
    });
    assert.ok(Date.now() - started < 10_000, 'no hang');
    // Only the master hears why (OpenSSH's "channel N: open failed"): the sidecar logs it.
    await until('the refusal logged', () =>
      /the server refused a forwarded connection \(channel \d+: open failed[^)]*\); is there a socket at \/nonexistent\/pglog\/\.s\.PGSQL\.5432\?/.test(
        sidecar.output(),
      ),
    );
    assert.equal(sidecar.proc.exitCode, null);
  });

  test('a SIGKILLed sidecar: the next instance sets the forward up again and forward() resolves for it', async () => {
    const { dir, client, sidecar } = await setup(ssh);
    const localDir = await client.forward('db', echoSocket, 5432);
    const first = client.status!.instance;
    sidecar.proc.kill('SIGKILL');
    await sidecar.exited;
    startSidecar(dir);
    await until('a new instance', () => client.status !== null && client.status.instance !== first);
    assert.equal(await client.forward('db', echoSocket, 5432), localDir);
    assert.notEqual(client.status!.instance, first);
    const back = await within(10_000, 'echo', roundTrip(join(localDir, '.s.PGSQL.5432'), Buffer.from('after restart')));
    assert.equal(back.toString(), 'after restart');
  });

  test('a master refused for good (changed host key): forward() rejects at once with SSH_HOST_KEY_CHANGED naming server and socket', async () => {
    const changed = await within(30_000, 'sshd', startSshServer({ allowLocalForwarding: true }));
    try {
      // known_hosts keeps the key the server was started with.
      await changed.changeHostKey();
      const { client } = await setup(changed);
      const started = Date.now();
      await assert.rejects(client.forward('db', echoSocket, 5432), (e: unknown) => {
        assert.ok(e instanceof PglogError);
        assert.equal(e.code, 'SSH_HOST_KEY_CHANGED');
        assert.ok(e.message.includes(`db: SQL forward of ${echoSocket}`), e.message);
        assert.ok(e.message.includes(`${changed.host}:${changed.port}`), e.message);
        return true;
      });
      assert.ok(Date.now() - started < 15_000);
    } finally {
      await changed.dispose();
    }
  });
});
