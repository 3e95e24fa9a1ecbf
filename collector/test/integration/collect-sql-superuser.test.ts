// A superuser SQL role is refused (security review R7, ADR 0032): the real `pglog collect`, a
// real sshd and a PostgreSQL 15 that logs every statement, with two targets whose SQL role is
// the superuser postgres:
//   - `refused` (no sql.allowSuperuser): every snapshot fails with SQL_ROLE_SUPERUSER, counted
//     by code and recorded in the store, one error in the log saying why and how to fix it,
//     and the server's log shows that the only statement its sessions ran is the server-info
//     query that found the role out: no BEGIN, no snapshot query;
//   - `allowed` (sql.allowSuperuser: true, in database `allowed` to tell the two apart in the
//     server's log): its snapshots run, with the warning and the privilege metric as before.
import { strict as assert } from 'node:assert';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { metricSum, scrapeMetrics } from '@pglog/test-support/collect-scenario.ts';
import { type CollectorProcess, sshLogin, type TargetSpec, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { startSqlCollector } from '../helpers/sql-collector.ts';

/** Each log entry starts with this prefix: the application name tells pglog's sessions apart. */
const PREFIX = '%m [%p] %q%u@%d app=%a ';
const ENTRY_START = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/m;

describe('a superuser SQL role: refused unless the target allows it (real sshd, PostgreSQL 15, pglog collect)', { timeout: 300_000 }, () => {
  let work: string;
  let storePg: TestPostgres;
  let ssh: TestSshServer;
  let server: LogServer;
  let collector: CollectorProcess;
  let metricsPort: number;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-sql-superuser-'));
    [storePg, ssh, server] = await Promise.all([
      startPostgres(),
      startSshServer({ allowLocalForwarding: true }),
      startLogServer({ logLinePrefix: PREFIX, settings: ["log_statement = 'all'"], databases: [{ name: 'allowed', encoding: 'UTF8' }] }),
    ]);
    const target = (name: 'refused' | 'allowed'): TargetSpec => ({
      ...sshLogin(ssh),
      name,
      transport: 'inproc',
      instances: [
        {
          name: 'main',
          dataDirectory: server.dataDirectory,
          logDirectory: server.logDirectory,
          sql: {
            socketDirectory: server.socketDir,
            port: server.port,
            user: 'postgres',
            timeoutSeconds: 5,
            ...(name === 'allowed' ? { database: 'allowed', allowSuperuser: true } : { database: 'postgres' }),
          },
        },
      ],
      collect: { logs: false, activity: true, locks: true, intervalSeconds: 1 },
    });
    ({ collector, metricsPort } = await startSqlCollector(work, writeTargetsFile(work, [target('refused'), target('allowed')]), storePg.url));
  });

  after(async () => {
    collector?.kill('SIGKILL');
    await collector?.exited;
    await Promise.allSettled([ssh?.dispose(), server?.dispose(), storePg?.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  const output = (): string => collector.output().split('\n').slice(-40).join('\n');
  const metric = async (name: string, labels: Record<string, string>): Promise<number> =>
    metricSum(await scrapeMetrics(metricsPort).catch(() => ''), name, labels);
  /** The statements pglog's sessions ran in `database`, as the server logged them. */
  const statementsIn = (database: string): string[] =>
    server
      .logFiles()
      .flatMap((f) => readFileSync(f, 'utf8').split(ENTRY_START))
      .filter((e) => e.includes(` postgres@${database} app=pglog `) && e.includes('LOG:  statement: '))
      .map((e) => e.slice(e.indexOf('LOG:  statement: ') + 'LOG:  statement: '.length).trim());

  test('refused: SQL_ROLE_SUPERUSER at every snapshot, one error that says how to fix it, and no statement beyond the server-info query', async () => {
    const failures = (): Promise<number> => metric('pglog_snapshot_failures_total', { target: 'refused', code: 'SQL_ROLE_SUPERUSER' });
    await waitFor(async () => (await failures()) >= 3, 'three refused snapshots of refused', 30_000, output);
    assert.equal(await metric('pglog_sql_role_privileged', { target: 'refused', instance: 'main', reason: 'SQL_ROLE_SUPERUSER' }), 1, 'still reported');
    assert.equal(await metric('pglog_snapshot_duration_seconds_count', { target: 'refused' }), 0, 'no snapshot succeeded');

    const records = collector.logRecords().filter((r) => r['target'] === 'refused');
    const errors = records.filter((r) => r['level'] === 'error');
    assert.deepEqual(
      errors.map((r) => r['code']),
      ['SQL_ROLE_SUPERUSER'],
      'one error for the streak, not one per snapshot',
    );
    assert.match(
      String(errors[0]!['msg']),
      /^refused\/main: activity snapshot failed: refused\/main: the SQL role postgres is a superuser: refused, no snapshot runs as it .*OS account.*pg_monitor \(docs\/snapshots\.md\), or set spec\.instances\[\]\.sql\.allowSuperuser: true/,
    );
    assert.deepEqual(
      records.filter((r) => r['level'] === 'warn').map((r) => r['msg']),
      [],
      'the error says it all: no warning too',
    );

    const statements = statementsIn('postgres');
    assert.ok(statements.length >= 3, `a server-info query per refused snapshot: ${statements.length}`);
    for (const s of statements)
      assert.match(s, /^SELECT pg_catalog\.current_setting\('server_version_num'\)::int AS version_num,/, `only the server-info query ran: ${s}`);

    const db = new pg.Client({ connectionString: storePg.url });
    await db.connect();
    try {
      const runs = await db.query<{ code: string | null }>("SELECT DISTINCT error_code AS code FROM pglog.snapshot_runs WHERE target = 'refused'");
      assert.deepEqual(
        runs.rows.map((r) => r.code),
        ['SQL_ROLE_SUPERUSER'],
        'the refused runs are in the store with their code',
      );
    } finally {
      await db.end();
    }
  });

  test('allowed (sql.allowSuperuser: true): its snapshots run as the superuser, with the warning and the metric', async () => {
    await waitFor(async () => (await metric('pglog_snapshot_duration_seconds_count', { target: 'allowed' })) > 0, 'a snapshot of allowed', 30_000, output);
    assert.equal(await metric('pglog_snapshot_failures_total', { target: 'allowed' }), 0);
    assert.equal(await metric('pglog_sql_role_privileged', { target: 'allowed', instance: 'main', reason: 'SQL_ROLE_SUPERUSER' }), 1);
    const warnings = collector.logRecords().filter((r) => r['target'] === 'allowed' && r['level'] === 'warn');
    assert.equal(warnings.length, 1, JSON.stringify(warnings));
    assert.match(
      String(warnings[0]!['msg']),
      /^allowed\/main: the SQL role postgres is a superuser \(SQL_ROLE_SUPERUSER\), taken because sql\.allowSuperuser is set: /,
    );
    // The server's log does show a session's snapshot statements: their absence above means something.
    assert.ok(statementsIn('allowed').includes('BEGIN TRANSACTION READ ONLY'), statementsIn('allowed').slice(0, 5).join('\n'));
  });
});
