// The SQL role, end to end (issue 13 point 5, security review F2): the real `pglog collect`
// with its sidecar, a real sshd and a logging PostgreSQL 15, with targets whose SQL role is a
// superuser (through both transports, allowed by sql.allowSuperuser: what is tested here is
// what a superuser session does; its refusal without it: collect-sql-superuser.test.ts), a
// member of pg_write_all_data, or pglog_monitor.
//   - pglog_sql_role_privileged says which is which (SQL_ROLE_SUPERUSER, SQL_ROLE_CAN_WRITE),
//     the log warns once per role and says why, and a role that loses its privilege reads 0
//     from its next session on;
//   - a role that may CREATE in `public` (GRANT CREATE ON SCHEMA public TO PUBLIC) plants the
//     review's `public.=(oid,integer)`, whose function runs COPY ... TO PROGRAM when a
//     superuser calls it, and makes a lock wait: the superuser targets' locks snapshots
//     compute the edge through both transports, and the planted code never runs.
import { strict as assert } from 'node:assert';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { metricSum, parseMetrics, scrapeMetrics } from '@pglog/test-support/collect-scenario.ts';
import { type CollectorProcess, sshLogin, type TargetSpec, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { currentUser } from '@pglog/test-support/server-user.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { MONITOR_ROLE, setUpMonitoringRole } from '../helpers/monitoring-role.ts';
import { startSqlCollector } from '../helpers/sql-collector.ts';

const ROLES = { 'su-inproc': 'postgres', 'su-proxy': 'postgres', writer: 'writer', monitor: MONITOR_ROLE } as const;
type TargetName = keyof typeof ROLES;

describe('the SQL role: privilege metric and warning, and no planted operator runs (real sshd, PostgreSQL 15, pglog collect)', { timeout: 300_000 }, () => {
  let work: string;
  let storePg: TestPostgres;
  let ssh: TestSshServer;
  let server: LogServer;
  let collector: CollectorProcess;
  let metricsPort: number;
  let pwned: string;
  const clients: pg.Client[] = [];

  const connect = async (user: string, application = 'pglog-test'): Promise<pg.Client> => {
    const c = new pg.Client({ host: server.socketDir, port: server.port, user, database: 'postgres', application_name: application });
    c.on('error', () => undefined); // sessions the test ends on purpose
    await c.connect();
    clients.push(c);
    return c;
  };

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-sql-role-'));
    [storePg, ssh, server] = await Promise.all([startPostgres(), startSshServer({ allowLocalForwarding: true }), startLogServer()]);
    await setUpMonitoringRole(server, [...new Set([ssh.user, currentUser().name])]);
    pwned = join(server.dataDirectory, 'pglog-pwned'); // the server's OS user writes there
    const su = await connect('postgres');
    await su.query(`
      CREATE ROLE writer LOGIN IN ROLE pg_write_all_data;
      CREATE ROLE mallory LOGIN;
      GRANT CREATE ON SCHEMA public TO PUBLIC;`);
    // The review's operator, planted by a role with nothing but CREATE on public.
    const mallory = await connect('mallory');
    await mallory.query(`
      CREATE FUNCTION public.pglog_eq(oid, integer) RETURNS boolean LANGUAGE plpgsql AS $$
      BEGIN
        IF pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on' THEN
          EXECUTE 'COPY (SELECT current_user) TO PROGRAM ''cat >> ${pwned}''';
        END IF;
        RETURN $1 OPERATOR(pg_catalog.=) $2::oid;
      END $$;
      CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = integer, FUNCTION = public.pglog_eq);
      CREATE TABLE public.mallory_t ();`);

    const base = sshLogin(ssh);
    const target = (name: TargetName): TargetSpec => ({
      ...base,
      name,
      transport: name === 'su-proxy' ? 'proxy' : 'inproc',
      instances: [
        {
          name: 'main',
          dataDirectory: server.dataDirectory,
          logDirectory: server.logDirectory,
          sql: {
            socketDirectory: server.socketDir,
            port: server.port,
            user: ROLES[name],
            database: 'postgres',
            timeoutSeconds: 5,
            ...(ROLES[name] === 'postgres' ? { allowSuperuser: true } : {}),
          },
        },
      ],
      collect: { logs: false, activity: true, locks: true, intervalSeconds: 1 },
    });
    const targetsFile = writeTargetsFile(work, (Object.keys(ROLES) as TargetName[]).map(target));
    ({ collector, metricsPort } = await startSqlCollector(work, targetsFile, storePg.url));
  });

  after(async () => {
    collector?.kill('SIGKILL');
    await collector?.exited;
    for (const c of clients) await c.end().catch(() => undefined);
    await Promise.allSettled([ssh?.dispose(), server?.dispose(), storePg?.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  const output = (): string => collector.output().split('\n').slice(-40).join('\n');
  const privileged = async (target: TargetName): Promise<Record<string, number>> => {
    const text = await scrapeMetrics(metricsPort);
    const of = (reason: string): number => metricSum(text, 'pglog_sql_role_privileged', { target, instance: 'main', reason });
    return { SQL_ROLE_SUPERUSER: of('SQL_ROLE_SUPERUSER'), SQL_ROLE_CAN_WRITE: of('SQL_ROLE_CAN_WRITE') };
  };
  /** Whether the target's role has been reported (the collector may not listen yet). */
  const reported = async (target: TargetName): Promise<boolean> => {
    const text = await scrapeMetrics(metricsPort).catch(() => '');
    return parseMetrics(text).some((m) => m.name === 'pglog_sql_role_privileged' && m.labels['target'] === target);
  };

  test('pglog_sql_role_privileged and a warning per privileged role; 0 for pglog_monitor; a role that loses its privilege reads 0', async () => {
    for (const t of Object.keys(ROLES) as TargetName[]) await waitFor(() => reported(t), `${t}'s role reported`, 30_000, output);
    assert.deepEqual(await privileged('su-inproc'), { SQL_ROLE_SUPERUSER: 1, SQL_ROLE_CAN_WRITE: 0 });
    assert.deepEqual(await privileged('su-proxy'), { SQL_ROLE_SUPERUSER: 1, SQL_ROLE_CAN_WRITE: 0 });
    assert.deepEqual(await privileged('writer'), { SQL_ROLE_SUPERUSER: 0, SQL_ROLE_CAN_WRITE: 1 });
    assert.deepEqual(await privileged('monitor'), { SQL_ROLE_SUPERUSER: 0, SQL_ROLE_CAN_WRITE: 0 });

    const warnings = collector.logRecords().filter((r) => r['level'] === 'warn' && typeof r['msg'] === 'string' && r['msg'].includes('the SQL role'));
    const byTarget = (t: string): string[] => warnings.filter((r) => r['target'] === t).map((r) => String(r['msg']));
    assert.equal(byTarget('su-inproc').length, 1, 'one warning, not one per snapshot');
    assert.match(
      byTarget('su-inproc')[0]!,
      /^su-inproc\/main: the SQL role postgres is a superuser \(SQL_ROLE_SUPERUSER\), taken because sql\.allowSuperuser is set: .*OS account.*pg_monitor \(docs\/snapshots\.md\)$/,
    );
    assert.match(byTarget('writer')[0] ?? '', /the SQL role writer can write data \(SQL_ROLE_CAN_WRITE/);
    assert.deepEqual(byTarget('monitor'), []);

    // The privilege is taken away; the role is checked again when its next session opens.
    const su = await connect('postgres');
    await su.query('REVOKE pg_write_all_data FROM writer');
    await su.query("SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity WHERE usename = 'writer' AND application_name = 'pglog'");
    await waitFor(async () => (await privileged('writer')).SQL_ROLE_CAN_WRITE === 0, 'writer no longer privileged', 30_000, output);
  });

  test("the review's planted public.=(oid,integer) never runs, though both superuser targets compute the lock wait's edge", async () => {
    const holder = await connect('mallory', 'holder');
    const waiter = await connect('mallory', 'waiter');
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE public.mallory_t IN ACCESS EXCLUSIVE MODE');
    const waiting = waiter.query('SELECT * FROM public.mallory_t');
    const ran = (): string => (existsSync(pwned) ? readFileSync(pwned, 'utf8') : '');
    try {
      for (const target of ['su-inproc', 'su-proxy']) {
        // Until the edge is seen, or the planted code has run (a hijacked snapshot may see nothing).
        await waitFor(
          async () => ran() !== '' || metricSum(await scrapeMetrics(metricsPort), 'pglog_blocked_sessions', { target, instance: 'main' }) >= 1,
          `${target}: the lock wait seen by a locks snapshot`,
          30_000,
          output,
        );
      }
      // A few more snapshots of each target while the wait lasts.
      await new Promise((r) => setTimeout(r, 3000));
      assert.equal(ran(), '', "the planted operator ran COPY ... TO PROGRAM as the collector's superuser");
    } finally {
      await holder.query('ROLLBACK');
      await waiting.catch(() => undefined);
    }
  });
});
