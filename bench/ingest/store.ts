/**
 * The ingest benchmark's store: the test helper's throwaway PostgreSQL 15
 * (test-support/src/postgres.ts) restarted once with the settings the benchmark needs,
 * and the queries that read end-to-end latency and row counts out of it.
 *
 * Why restart instead of a starter of our own: the helper already owns creating the cluster,
 * the server user, the socket directory and cleanup on exit; it has no option for extra
 * settings, and ALTER SYSTEM plus its own stopServer()/startServer() adds them without
 * duplicating any of that.
 * - track_commit_timestamp = on: every row's commit time is `pg_xact_commit_timestamp(xmin)`,
 *   so latency = commit time − the log line's own timestamp (the time the writer wrote it);
 * - shared_buffers 256MB, max_wal_size 4GB: the helper's 16 MB suits tests, not tens of
 *   thousands of rows a second; a real store would be sized for its load (fsync and
 *   synchronous_commit stay off as the helper sets them: the store's disk is not what this
 *   benchmark measures).
 */
import { EVENT_TABLES } from '@pglog/collector/store/event-tables.ts';
import { ROLLUP_TABLE } from '@pglog/collector/store/rollup.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import pg from 'pg';

export const STORE_SETTINGS: Readonly<Record<string, string>> = {
  track_commit_timestamp: 'on',
  shared_buffers: '256MB',
  max_wal_size: '4GB',
};

export async function startBenchStore(): Promise<TestPostgres> {
  const store = await startPostgres();
  try {
    const client = new pg.Client({ connectionString: store.url });
    await client.connect();
    try {
      for (const [name, v] of Object.entries(STORE_SETTINGS)) await client.query(`ALTER SYSTEM SET ${name} = '${v}'`);
    } finally {
      await client.end();
    }
    await store.stopServer();
    await store.startServer();
    const check = new pg.Client({ connectionString: store.url });
    await check.connect();
    try {
      const { rows } = await check.query<{ setting: string }>("SELECT setting FROM pg_settings WHERE name = 'track_commit_timestamp'");
      if (rows[0]?.setting !== 'on') throw new Error(`track_commit_timestamp is ${rows[0]?.setting} after the restart`);
    } finally {
      await check.end();
    }
    return store;
  } catch (e) {
    await store.stop();
    throw e;
  }
}

export interface Latency {
  rows: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/**
 * End-to-end latency of the statement rows committed in [fromMs, toMs): commit time minus the
 * entry's own log timestamp (millisecond precision, so up to 1 ms too high).
 */
export async function latencyOfRowsCommitted(client: pg.Client, fromMs: number, toMs: number): Promise<Latency> {
  const { rows } = await client.query<{ n: string; p50: number | null; p99: number | null; max: number | null }>(
    `
    WITH r AS (
      SELECT (extract(epoch FROM pg_xact_commit_timestamp(xmin) - ts) * 1000)::float8 AS ms
      FROM pglog.statement_events
      WHERE ts >= to_timestamp($1 / 1000.0) - interval '10 minutes'
        AND pg_xact_commit_timestamp(xmin) >= to_timestamp($1 / 1000.0)
        AND pg_xact_commit_timestamp(xmin) <  to_timestamp($2 / 1000.0)
        AND ts_logged IS NULL  -- ts is the logged time, not the time pglog read the entry
    )
    SELECT count(*) AS n,
           percentile_cont(0.5)  WITHIN GROUP (ORDER BY ms) AS p50,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99,
           max(ms) AS max
    FROM r`,
    [fromMs, toMs],
  );
  const r = rows[0]!;
  return { rows: Number(r.n), p50Ms: r.p50 ?? NaN, p99Ms: r.p99 ?? NaN, maxMs: r.max ?? NaN };
}

/** Statement rows in the store, all targets. */
export async function statementRows(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM pglog.statement_events');
  return Number(rows[0]!.n);
}

/**
 * Empties the event tables and the statement rollup before a run: each run then starts on the
 * same store (an earlier run's millions of rows would slow its commits and inflate the drain's
 * row count).
 */
export async function emptyEventTables(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // Before the first run the collector has not made the schema yet: nothing to empty.
    const { rows } = await client.query<{ made: boolean }>("SELECT to_regclass('pglog.statement_events') IS NOT NULL AS made");
    if (rows[0]?.made === true) await client.query(`TRUNCATE ${[...EVENT_TABLES, ROLLUP_TABLE.name].map((t) => `pglog.${t}`).join(', ')}`);
  } finally {
    await client.end();
  }
}
