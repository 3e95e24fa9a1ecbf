// A store filled by a real `pglog collect` run with something of every kind a DBA reads: a real
// sshd, a real PostgreSQL 15 logging like a production server (statements with durations, lock
// waits, checkpoints, autovacuum, temporary files, connections, auto_explain plans) with pg_stat_statements, SQL
// snapshots over SSH as a pg_monitor role, and a scripted workload in database `shop`:
// statements, three kinds of error, a lock wait held across snapshots (blocking), a deadlock,
// a sort spilling to a temporary file, a slow statement, a CHECKPOINT, deletes that wake autovacuum, sessions
// coming and going. Returns once every stable view holds rows of it.
import type { CollectorProcess } from '@pglog/test-support/collector-process.ts';
import type { LogServer } from '@pglog/test-support/log-server.ts';
import pg from 'pg';

import { startCollectedStore, waitForViews } from './collected-store.ts';

export const WORKLOAD_TARGET = 'db1';
export const WORKLOAD_DATABASE = 'shop';
const INTERVAL_S = 2;
/** With %e: the SQLSTATE of each error (the default prefix has none). */
const PREFIX = '%m [%p] %q%u@%d %e ';

export interface StoreWorkload {
  readonly storeUrl: string;
  /** When the workload started and when every view had its rows (the store's whole content lies between). */
  readonly startedAt: Date;
  readonly seededAt: Date;
  readonly collector: CollectorProcess;
  /** Stops the collector and every server, removes the files. */
  dispose(): Promise<void>;
}

/** What the store must hold before the workload counts as collected: one query per view, on the workload's database where it has one. */
const EXPECTED: ReadonlyArray<[string, string]> = [
  ['statements', `SELECT 1 FROM pglog.statements WHERE database = 'shop' AND query LIKE '%pglog-workload-end%'`],
  [
    'errors 22012, 23505, 42P01',
    `SELECT 1 FROM pglog.errors WHERE database = 'shop' AND sqlstate IN ('22012', '23505', '42P01') HAVING count(DISTINCT sqlstate) = 3`,
  ],
  ['lock waits (acquired)', `SELECT 1 FROM pglog.lock_waits WHERE database = 'shop' AND acquired`],
  ['deadlocks', `SELECT 1 FROM pglog.deadlocks WHERE database = 'shop'`],
  ['blocking', `SELECT 1 FROM pglog.blocking WHERE database = 'shop'`],
  ['activity', `SELECT 1 FROM pglog.activity WHERE database = 'shop' AND backend_type = 'client backend'`],
  ['statement_stats', `SELECT 1 FROM pglog.statement_stats WHERE database = 'shop' AND calls > 0`],
  ['database_stats', `SELECT 1 FROM pglog.database_stats WHERE database = 'shop' AND deadlocks > 0`],
  ['checkpoints', `SELECT 1 FROM pglog.checkpoints WHERE phase = 'complete'`],
  ['autovacuum and autoanalyze', `SELECT 1 FROM pglog.maintenance WHERE database = 'shop' HAVING count(DISTINCT kind) = 2`],
  ['temp_files', `SELECT 1 FROM pglog.temp_files WHERE database = 'shop'`],
  ['sessions', `SELECT 1 FROM pglog.sessions WHERE database = 'shop' AND event = 'disconnection'`],
  ['plans', `SELECT 1 FROM pglog.plans WHERE database = 'shop'`],
  ['templates', `SELECT 1 FROM pglog.templates t JOIN pglog.statements s ON s.fingerprint = t.fingerprint WHERE s.database = 'shop'`],
];

async function client(server: LogServer, database: string): Promise<pg.Client> {
  const c = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres', database, application_name: 'pglog-workload' });
  c.on('error', () => undefined); // a session the deadlock ends
  await c.connect();
  return c;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The scripted workload, in database shop. */
async function runWorkload(server: LogServer): Promise<void> {
  const a = await client(server, WORKLOAD_DATABASE);
  const b = await client(server, WORKLOAD_DATABASE);
  try {
    await a.query('CREATE TABLE items (id int PRIMARY KEY, n int NOT NULL)');
    await a.query('INSERT INTO items SELECT g, 0 FROM generate_series(1, 2000) g');
    for (let i = 0; i < 100; i++) {
      await a.query(`SELECT n FROM items WHERE id = ${1 + (i % 50)}`);
      if (i % 10 === 0) await a.query(`UPDATE items SET n = n + 1 WHERE id = ${100 + i}`);
    }
    // Errors: division by zero, a duplicate key, an unknown table.
    for (const sql of ['SELECT 1 / 0', 'INSERT INTO items VALUES (1, 0)', 'SELECT * FROM no_such_table']) await a.query(sql).catch(() => undefined);
    // A lock wait longer than deadlock_timeout and than two snapshot intervals: logged, and in the blocking snapshots.
    await a.query('BEGIN');
    await a.query('UPDATE items SET n = n + 1 WHERE id = 1');
    const waiting = b.query('UPDATE items SET n = n + 1 WHERE id = 1');
    await sleep(3 * INTERVAL_S * 1000);
    await a.query('COMMIT');
    await waiting;
    // A deadlock: a locks 10 then wants 11, b locks 11 then wants 10.
    await a.query('BEGIN');
    await b.query('BEGIN');
    await a.query('UPDATE items SET n = n + 1 WHERE id = 10');
    await b.query('UPDATE items SET n = n + 1 WHERE id = 11');
    const first = a.query('UPDATE items SET n = n + 1 WHERE id = 11').then(
      () => 'ok',
      (e: unknown) => (e as { code?: string }).code,
    );
    await sleep(100);
    const second = b.query('UPDATE items SET n = n + 1 WHERE id = 10').then(
      () => 'ok',
      (e: unknown) => (e as { code?: string }).code,
    );
    const outcomes = await Promise.all([first, second]);
    if (!outcomes.includes('40P01')) throw new Error(`the workload's deadlock did not happen: ${JSON.stringify(outcomes)}`);
    await a.query('ROLLBACK');
    await b.query('ROLLBACK');
    // A sort past work_mem: a temporary file.
    await a.query("SET work_mem = '64kB'");
    await a.query('SELECT count(*) FROM (SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC) s');
    await a.query('RESET work_mem');
    // Dead tuples past autovacuum's thresholds (naptime 1 s), then a checkpoint.
    await a.query('DELETE FROM items WHERE id > 500');
    await a.query('CHECKPOINT');
    // Short sessions: connections and disconnections.
    for (let i = 0; i < 3; i++) {
      const c = await client(server, WORKLOAD_DATABASE);
      await c.query('SELECT 1');
      await c.end();
    }
    // A slow statement: auto_explain logs its plan.
    await a.query('SELECT pg_sleep(0.2)');
    await a.query("SELECT 'pglog-workload-end'");
  } finally {
    await Promise.allSettled([a.end(), b.end()]);
  }
}

export async function startStoreWorkload(): Promise<StoreWorkload> {
  const startedAt = new Date();
  const s = await startCollectedStore({
    name: 'workload',
    target: WORKLOAD_TARGET,
    logLinePrefix: PREFIX,
    databases: [{ name: WORKLOAD_DATABASE, encoding: 'UTF8' }],
    settings: [
      "shared_preload_libraries = 'pg_stat_statements,auto_explain'",
      "auto_explain.log_min_duration = '100ms'",
      'log_lock_waits = on',
      "deadlock_timeout = '200ms'",
      'log_checkpoints = on',
      'log_autovacuum_min_duration = 0',
      "autovacuum_naptime = '1s'",
      'log_temp_files = 0',
      'log_connections = on',
      'log_disconnections = on',
    ],
    extensions: ['pg_stat_statements'],
    sql: { database: 'postgres', timeoutSeconds: 5 },
    collect: { logs: true, activity: true, locks: true, statements: true, databases: true, intervalSeconds: INTERVAL_S, statisticsIntervalSeconds: INTERVAL_S },
    batchMs: 100,
    // The first snapshots (statistics need a baseline before their first deltas).
    firstSnapshots: { kind: 'statistics', count: 2 },
  });
  try {
    await runWorkload(s.server);
    await waitForViews(s, EXPECTED, 120_000);
    return { storeUrl: s.store.url, startedAt, seededAt: new Date(), collector: s.collector, dispose: s.dispose };
  } catch (e) {
    await s.dispose();
    throw e;
  }
}
