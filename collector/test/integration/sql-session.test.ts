// The SQL session over SSH against a real sshd and a real PostgreSQL 15 that listens only on
// its Unix socket: pg runs over an ssh2 direct-streamlocal channel (DeferredSocket), read-only,
// with every failure classified (SQL_CONNECT_FAILED, SQL_AUTH_FAILED, SQL_TIMEOUT).
import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { sshConnectionOptions } from '@pglog/test-support/ssh-connection.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { SqlSession } from '../../src/sampler/sql-session.ts';
import { SshConnection } from '../../src/transport/ssh-connection.ts';

describe('SqlSession over an ssh2 stream-local channel (real sshd, PostgreSQL 15)', { timeout: 120_000 }, () => {
  let ssh: TestSshServer;
  let server: LogServer;
  let connection: SshConnection;

  before(async () => {
    [ssh, server] = await Promise.all([startSshServer({ allowLocalForwarding: true }), startLogServer()]);
    connection = new SshConnection(sshConnectionOptions(ssh, { target: 'db1' }));
  });
  after(async () => {
    await connection?.close();
    await Promise.allSettled([ssh?.dispose(), server?.dispose()]);
  });

  const socket = (): string => `${server.socketDir}/.s.PGSQL.${server.port}`;
  const session = (over: { user?: string; database?: string; timeoutMs?: number; path?: string } = {}): SqlSession =>
    new SqlSession({
      place: `db1/main (${over.path ?? socket()})`,
      user: over.user ?? 'postgres',
      database: over.database ?? 'postgres',
      timeoutMs: over.timeoutMs ?? 2000,
      open: (signal) => connection.openStreamLocal(over.path ?? socket(), { signal }),
    });
  const codeOf = async (p: Promise<unknown>): Promise<string> => {
    try {
      await p;
      return 'resolved';
    } catch (e) {
      return isPglogError(e) ? `${e.code}: ${e.message}` : `other: ${(e as Error).message}`;
    }
  };

  test('queries run over the channel, in a read-only transaction, as application pglog, and the session is kept', async () => {
    const s = session();
    try {
      const first = await s.readOnly(
        'probe',
        async (c) =>
          (
            await c.query<{ app: string; ro: string; pid: number; port: number | null }>(
              "SELECT current_setting('application_name') AS app, current_setting('transaction_read_only') AS ro, pg_backend_pid() AS pid, inet_client_port() AS port",
            )
          ).rows[0]!,
      );
      assert.deepEqual([first.app, first.ro, first.port], ['pglog', 'on', null]); // null port: a Unix socket connection
      const second = await s.readOnly('probe', async (c) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!);
      assert.equal(second.pid, first.pid);
      // Writes are refused, and the session stays usable after a plain SQL error.
      assert.match(
        await codeOf(s.readOnly('write', (c) => c.query('CREATE TABLE x (id int)'))),
        /^SQL_QUERY_FAILED: .*read-only transaction \[SQLSTATE 25006\]/,
      );
      assert.equal(await s.readOnly('after', async (c) => (await c.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one), 1);
      assert.equal(s.isOpen, true);
      // Big results come through (backpressure over the channel).
      const rows = await s.readOnly('big', async (c) => (await c.query("SELECT repeat('x', 1000) FROM generate_series(1, 20000)")).rowCount);
      assert.equal(rows, 20000);
    } finally {
      await s.close();
    }
  });

  test('a missing socket is SQL_CONNECT_FAILED naming it; an unknown role is SQL_AUTH_FAILED', async () => {
    const missing = session({ path: '/nonexistent/.s.PGSQL.5432' });
    assert.match(
      await codeOf(missing.readOnly('probe', (c) => c.query('SELECT 1'))),
      /^SQL_CONNECT_FAILED: .*could not connect to the Unix socket \/nonexistent\/\.s\.PGSQL\.5432/,
    );
    await missing.close();
    const role = session({ user: 'nobody_here' });
    assert.match(await codeOf(role.readOnly('probe', (c) => c.query('SELECT 1'))), /^SQL_AUTH_FAILED: .*role "nobody_here" does not exist/);
    await role.close();
  });

  test('statement_timeout is SQL_TIMEOUT, and a stopped backend is SQL_TIMEOUT too (client-side bound); the next use opens a new session', async () => {
    const s = session({ timeoutMs: 1000 });
    try {
      assert.match(await codeOf(s.readOnly('slow', (c) => c.query('SELECT pg_sleep(3)'))), /^SQL_TIMEOUT: .*statement timeout/);
      const pid = await s.readOnly('pid', async (c) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
      process.kill(pid, 'SIGSTOP');
      try {
        const started = Date.now();
        assert.match(await codeOf(s.readOnly('hung', (c) => c.query('SELECT 1'))), /^SQL_TIMEOUT: /);
        assert.ok(Date.now() - started < 10_000);
        const fresh = await s.readOnly('pid', async (c) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
        assert.notEqual(fresh, pid);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
    } finally {
      await s.close();
    }
  });

  test('PostgreSQL stopped: SQL_CONNECT_FAILED; started again: the session reopens by itself', async () => {
    const s = session();
    try {
      await s.readOnly('probe', (c) => c.query('SELECT 1'));
      await server.stop();
      try {
        const down = await codeOf(s.readOnly('probe', (c) => c.query('SELECT 1')));
        assert.match(down, /^SQL_CONNECT_FAILED: /);
        assert.match(await codeOf(s.readOnly('probe', (c) => c.query('SELECT 1'))), /^SQL_CONNECT_FAILED: .*could not connect to the Unix socket/);
      } finally {
        await server.start();
      }
      assert.equal(await s.readOnly('probe', async (c) => (await c.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one), 1);
    } finally {
      await s.close();
    }
  });

  test('sessions do not take SSH session slots (MaxSessions counts only sessions)', async () => {
    const sessions = Array.from({ length: 12 }, () => session());
    try {
      await Promise.all(sessions.map((s) => s.readOnly('probe', (c) => c.query('SELECT 1'))));
      assert.equal(connection.openSessions, 0);
      const su = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres', database: 'postgres' });
      await su.connect();
      const n = (await su.query<{ n: string }>("SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'pglog'")).rows[0]!.n;
      await su.end();
      assert.equal(Number(n), 12);
    } finally {
      await Promise.all(sessions.map((s) => s.close()));
    }
  });
});
