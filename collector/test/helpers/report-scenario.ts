// A store filled by a real `pglog collect` run with every kind of event the HTML report shows:
// one sshd, one PostgreSQL 15 logging statements (seq-load, so the checker can count them),
// errors with SQLSTATEs, auto_explain plans, temporary files, a lock wait that the SQL
// snapshots catch as a blocking episode, a deadlock, checkpoints, autovacuum and autoanalyze,
// connections and disconnections, and texts written to be hostile to an HTML page.
// The collector is stopped before the scenario returns, so the store no longer changes.
import { type CheckResult, checkStore, formatCheck } from '@pglog/test-support/checker.ts';
import { waitFor } from '@pglog/test-support/collector-process.ts';
import type { LogServer } from '@pglog/test-support/log-server.ts';
import { startSeqLoad } from '@pglog/test-support/seq-load.ts';
import pg from 'pg';

import { startCollectedStore, waitForViews } from './collected-store.ts';

/** Markup and script in a query literal and in a relation name (so in an error message). */
export const HOSTILE_LITERAL = `</script><img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`;
export const HOSTILE_RELATION = `<svg onload=window.__pwned=3>`;

export interface ReportScenario {
  storeUrl: string;
  /** A window holding the whole run. */
  since: Date;
  until: Date;
  /** The seq-load run and what the checker found for it (none lost, none duplicated). */
  run: string;
  check: CheckResult;
  dispose(): Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function withClient<T>(server: LogServer, work: (c: pg.Client) => Promise<T>, applicationName = 'report-scenario'): Promise<T> {
  const c = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres', database: 'postgres', application_name: applicationName });
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

/** Everything but the seq load: one of each event family the report has a section for. */
async function workload(server: LogServer): Promise<void> {
  await withClient(server, async (c) => {
    await c.query('CREATE TABLE IF NOT EXISTS lw (id int PRIMARY KEY, v int)');
    await c.query('INSERT INTO lw VALUES (1, 0), (2, 0) ON CONFLICT DO NOTHING');
    await c.query(`CREATE TABLE IF NOT EXISTS av (id int, v int) WITH (autovacuum_vacuum_threshold = 0, autovacuum_vacuum_scale_factor = 0,
      autovacuum_analyze_threshold = 0, autovacuum_analyze_scale_factor = 0)`);
    await c.query('INSERT INTO av SELECT g, 0 FROM generate_series(1, 2000) g');
    await c.query('UPDATE av SET v = v + 1');
    for (let i = 0; i < 5; i++) await c.query('SELECT * FROM no_such_table').catch(() => undefined);
    for (let i = 0; i < 3; i++) await c.query('SELECT 1 / 0').catch(() => undefined);
    await c.query(`SELECT * FROM "${HOSTILE_RELATION}"`).catch(() => undefined);
    await c.query('SELECT $1::text AS hostile', [HOSTILE_LITERAL]);
    await c.query(`SELECT '${HOSTILE_LITERAL.replaceAll("'", "''")}' AS hostile`);
    await c.query("SET work_mem = '64kB'");
    for (let i = 0; i < 2; i++) await c.query('SELECT count(*) FROM (SELECT g FROM generate_series(1, 100000) g ORDER BY g DESC) s');
    for (let i = 0; i < 3; i++) await c.query('SELECT pg_sleep(0.06), count(*) FROM lw');
    await c.query('CHECKPOINT');
  });
  // A lock wait longer than deadlock_timeout, held over a few snapshots: a blocking episode.
  await withClient(
    server,
    async (holder) => {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE lw IN ACCESS EXCLUSIVE MODE');
      const waiter = withClient(server, (w) => w.query('SELECT count(*) FROM lw'), 'report-waiter');
      await sleep(3500);
      await holder.query('COMMIT');
      await waiter;
    },
    'report-holder',
  );
  // A deadlock: each holds one row and asks for the other's.
  await withClient(server, async (a) =>
    withClient(server, async (b) => {
      await a.query('BEGIN');
      await b.query('BEGIN');
      await a.query('UPDATE lw SET v = v + 1 WHERE id = 1');
      await b.query('UPDATE lw SET v = v + 1 WHERE id = 2');
      const first = a.query('UPDATE lw SET v = v + 1 WHERE id = 2').catch(() => undefined);
      await sleep(100);
      await b.query('UPDATE lw SET v = v + 1 WHERE id = 1').catch(() => undefined);
      await first;
      await a.query('ROLLBACK');
      await b.query('ROLLBACK');
    }),
  );
  // Autovacuum and autoanalyze of av (naptime 1 s, thresholds 0).
  await waitFor(
    () =>
      withClient(server, async (c) => {
        const r = await c.query<{ done: boolean }>(
          "SELECT last_autovacuum IS NOT NULL AND last_autoanalyze IS NOT NULL AS done FROM pg_stat_user_tables WHERE relname = 'av'",
        );
        return r.rows[0]?.done === true;
      }),
    'autovacuum and autoanalyze of av',
    60_000,
  );
  await withClient(server, (c) => c.query('CHECKPOINT'));
}

/** Rows per stable view the scenario must have produced before the report is written. */
const PRESENT = [
  ['checkpoints', "SELECT 1 FROM pglog.checkpoints WHERE phase = 'complete'"],
  ['autovacuum', "SELECT 1 FROM pglog.maintenance WHERE kind = 'autovacuum' AND relation LIKE '%.av'"],
  ['autoanalyze', "SELECT 1 FROM pglog.maintenance WHERE kind = 'autoanalyze' AND relation LIKE '%.av'"],
  ['temp files', 'SELECT 1 FROM pglog.temp_files'],
  ['plans', "SELECT 1 FROM pglog.plans WHERE query LIKE '%pg_sleep%'"],
  ['deadlocks', 'SELECT 1 FROM pglog.deadlocks'],
  ['lock waits', 'SELECT 1 FROM pglog.lock_waits WHERE acquired'],
  ['blocking', 'SELECT 1 FROM pglog.blocking'],
  ['sessions', "SELECT 1 FROM pglog.sessions WHERE event = 'disconnection'"],
  ['errors', "SELECT 1 FROM pglog.errors WHERE sqlstate = '22012'"],
] as const;

export async function startReportScenario(): Promise<ReportScenario> {
  const since = new Date(Date.now() - 60_000);
  // The workload starts once activity snapshots are being stored, so they see its lock wait.
  const s = await startCollectedStore({
    name: 'report',
    target: 'db1',
    logLinePrefix: '%m [%p] %q%e %u@%d ',
    settings: [
      "shared_preload_libraries = 'auto_explain'",
      "auto_explain.log_min_duration = '50ms'",
      'log_checkpoints = on',
      'log_connections = on',
      'log_disconnections = on',
      'log_lock_waits = on',
      "deadlock_timeout = '200ms'",
      'log_temp_files = 0',
      'log_autovacuum_min_duration = 0',
      'autovacuum_naptime = 1',
    ],
    collect: { logs: true, activity: true, locks: true, intervalSeconds: 1 },
    batchMs: 200,
    firstSnapshots: { kind: 'activity', count: 1 },
  });
  try {
    const load = startSeqLoad(s.server.url, { ratePerSecond: 40 });
    await workload(s.server);
    await load.stop();
    let check = { expected: 0, stored: 0, lost: [], duplicated: [], unexpected: [] } as CheckResult;
    await waitFor(
      async () => {
        check = await checkStore(s.store.url, load.run, { logDirectory: s.server.logDirectory });
        return check.lost.length === 0 && check.expected > 0;
      },
      'the seq load in the store',
      90_000,
      () => `${formatCheck(check)}\n${s.collector.output().slice(-3000)}`,
    );
    await waitForViews(
      s,
      PRESENT.map(([what, sql]) => [what, `${sql} LIMIT 1`] as const),
      120_000,
    );
    await s.collector.stop();
    return { storeUrl: s.store.url, since, until: new Date(Date.now() + 1000), run: load.run, check, dispose: s.dispose };
  } catch (e) {
    await s.dispose();
    throw e;
  }
}
