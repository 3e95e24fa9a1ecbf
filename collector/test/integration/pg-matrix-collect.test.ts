// The version matrix through the real `pglog collect` over a real sshd (issue 47): ONE collector
// with a target per major 10 to 18 (helpers/matrix-fleet.ts: each server logs stderr with its
// own prefix, csvlog or jsonlog), into one store, as a fleet of mixed versions is collected.
// For each major: a numbered set of statements arrives in the store exactly once; the SQL
// snapshots, taken as the pg_monitor role over the SSH connection, store pg_stat_activity with
// a blocking chain while one session waits for another's lock, pg_stat_statements deltas at that
// major's extension version, and pg_stat_database deltas; and no snapshot of any major failed.
import { strict as assert } from 'node:assert';
import { after, before, describe, test } from 'node:test';

import { metricSum, scrapeMetrics } from '@pglog/test-support/collect-scenario.ts';
import { waitFor } from '@pglog/test-support/collector-process.ts';
import { PG_MAJORS, PG_STAT_STATEMENTS_VERSION } from '@pglog/test-support/pg-binaries.ts';
import { withClient } from '@pglog/test-support/pg-client.ts';
import pg from 'pg';

import { CHAIN_TABLE, MATRIX_LOGGING, type MatrixFleet, type MatrixServer, startMatrixFleet } from '../helpers/matrix-fleet.ts';

/** Statements of the numbered set, per major. */
const MARKERS = 20;
const marker = (major: number, i: number): string => `SELECT 'pglog-matrix-${major}-${i}'`;

let fleet: MatrixFleet;
let store: pg.Client;

const output = (): string => fleet.collector.output().split('\n').slice(-30).join('\n');

async function connect(s: MatrixServer, application: string): Promise<pg.Client> {
  const c = new pg.Client({ host: s.server.socketDir, port: s.server.port, user: 'postgres', database: 'postgres', application_name: application });
  await c.connect();
  c.on('error', () => undefined);
  return c;
}

/** Rows of `sql` (parameters `params`); the store is migrated once the fleet's first snapshots are in. */
async function rows<T extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<T[]> {
  return (await store.query<T>(sql, params)).rows;
}

/** What failed so far, for a wait that timed out: the snapshot runs with an error, and the collector's output. */
async function failures(): Promise<string> {
  const failed = await rows(
    'SELECT target, kind, error_code, left(error, 200) AS error, count(*)::int AS n FROM pglog.snapshot_runs WHERE error_code IS NOT NULL GROUP BY 1, 2, 3, 4',
    [],
  ).catch((e: unknown) => [String(e)]);
  return `failed snapshot runs: ${JSON.stringify(failed)}\n${output()}`;
}

async function waitForRows<T extends pg.QueryResultRow>(
  what: string,
  sql: string,
  params: unknown[],
  ok: (r: T[]) => boolean = (r) => r.length > 0,
): Promise<T[]> {
  let got: T[] = [];
  await waitFor(
    async () => ok((got = await rows<T>(sql, params))),
    what,
    30_000,
    async () => `last rows: ${JSON.stringify(got).slice(0, 2000)}\n${await failures()}`,
  );
  return got;
}

/** Holder locks the chain's table; waiter waits for it until the store has the chain and both sessions' activity. */
async function blockingChain(s: MatrixServer): Promise<void> {
  const holder = await connect(s, 'pglog-matrix-holder');
  const waiter = await connect(s, 'pglog-matrix-waiter');
  let waited: Promise<unknown> | undefined;
  try {
    const pidOf = async (c: pg.Client): Promise<number> => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const [ph, pw] = [await pidOf(holder), await pidOf(waiter)];
    await holder.query(`BEGIN; LOCK TABLE public.${CHAIN_TABLE} IN ACCESS EXCLUSIVE MODE`);
    waited = waiter.query(`SELECT count(*) FROM public.${CHAIN_TABLE}`).catch(() => undefined);
    const since = new Date();
    const edges = await waitForRows<{ wait_mode: string; held_mode: string | null; relation: string | null; wait_ms: number | null }>(
      `${s.target}: the waiter blocked by the holder in pglog.blocking`,
      'SELECT wait_mode, held_mode, relation, wait_ms FROM pglog.blocking WHERE target = $1 AND pid = $2 AND blocking_pid = $3 AND ts >= $4',
      [s.target, pw, ph, new Date(since.getTime() - 1000)],
    );
    assert.deepEqual([edges[0]!.wait_mode, edges[0]!.held_mode, edges[0]!.relation], ['AccessShareLock', 'AccessExclusiveLock', `public.${CHAIN_TABLE}`]);
    // The activity of the same snapshots: the holder idle in its transaction, the waiter blocked by it.
    const activity = await waitForRows<{ pid: number; state: string; wait_event_type: string | null; blocked_by: number[]; application: string }>(
      `${s.target}: both sessions in pglog.activity`,
      `SELECT pid, state, wait_event_type, blocked_by, application FROM pglog.activity
       WHERE target = $1 AND ts = (SELECT max(ts) FROM pglog.blocking WHERE target = $1 AND pid = $2) AND pid IN ($2, $3) ORDER BY pid = $2`,
      [s.target, pw, ph],
      (r) => r.length === 2,
    );
    const [h, w] = activity;
    assert.deepEqual([h!.pid, h!.state, h!.application], [ph, 'idle in transaction', 'pglog-matrix-holder']);
    assert.deepEqual([w!.pid, w!.state, w!.wait_event_type, w!.blocked_by], [pw, 'active', 'Lock', [ph]]);
    await holder.query('ROLLBACK');
    await waited;
  } finally {
    await Promise.allSettled([holder.end(), waiter.end()]);
  }
}

/** The numbered set: each statement stored once, under this target, from this server's log. */
async function numberedSet(s: MatrixServer): Promise<void> {
  const su = await connect(s, 'pglog-matrix');
  try {
    for (let i = 1; i <= MARKERS; i++) await su.query(marker(s.major, i));
  } finally {
    await su.end();
  }
  const like = `SELECT 'pglog-matrix-${s.major}-%`;
  await waitForRows(
    `${s.target}: the ${MARKERS} numbered statements in pglog.statements`,
    'SELECT query FROM pglog.statements WHERE target = $1 AND query LIKE $2',
    [s.target, like],
    (r) => r.length >= MARKERS,
  );
  const stored = await rows<{ query: string; username: string; database: string }>(
    'SELECT query, username, database FROM pglog.statements WHERE query LIKE $1',
    [like],
  );
  const want = Array.from({ length: MARKERS }, (_, i) => marker(s.major, i + 1)).sort();
  assert.deepEqual(stored.map((r) => r.query).sort(), want, `${s.target}: each statement once, and no other target has them`);
  assert.ok(
    stored.every((r) => r.username === 'postgres' && r.database === 'postgres'),
    JSON.stringify(stored[0]),
  );
}

async function statistics(s: MatrixServer): Promise<void> {
  // pg_stat_statements: the numbered set, one template `SELECT $1`, as a delta at this major's version.
  await waitForRows<{ calls: string }>(
    `${s.target}: the numbered set's calls in pglog.statement_stats`,
    "SELECT coalesce(sum(calls), 0)::text AS calls FROM pglog.statement_stats WHERE target = $1 AND query = 'SELECT $1' AND database = 'postgres'",
    [s.target],
    (r) => Number(r[0]?.calls ?? 0) >= MARKERS,
  );
  await waitForRows(
    `${s.target}: pg_stat_database deltas of database postgres`,
    "SELECT 1 FROM pglog.database_stats WHERE target = $1 AND database = 'postgres' AND xact_commit > 0",
    [s.target],
  );
}

describe('the version matrix through pglog collect over sshd: one collector, a target per major 10 to 18', { timeout: 180_000 }, () => {
  before(async () => {
    fleet = await startMatrixFleet();
    store = new pg.Client({ connectionString: fleet.store.url });
    await store.connect();
    // Every target's first statistics sample (the baseline the deltas start from) before anything
    // runs; the store is migrated before the first one is stored.
    let ready: string[] = [];
    await waitFor(
      async () => {
        const r = await store
          .query<{ target: string }>("SELECT DISTINCT target FROM pglog.snapshot_runs WHERE kind = 'statistics' AND error_code IS NULL ORDER BY 1")
          .catch((e: unknown) => {
            if ((e as { code?: string }).code === '42P01') return { rows: [] }; // not migrated yet
            throw e;
          });
        ready = r.rows.map((x) => x.target);
        return ready.length === fleet.servers.length;
      },
      "every target's first statistics snapshot",
      60_000,
      async () => `ready: ${ready.join(', ')}\n${await failures()}`,
    );
  });

  after(async () => {
    await store?.end().catch(() => undefined);
    await fleet?.dispose();
  });

  describe('each major', { concurrency: true }, () => {
    for (const major of PG_MAJORS) {
      const { format, prefix } = MATRIX_LOGGING[major];
      const name = `PostgreSQL ${major} (${format}${prefix === undefined ? '' : ` '${prefix}'`})`;
      test(`${name}: statements once, activity, a blocking chain, pg_stat_statements ${PG_STAT_STATEMENTS_VERSION[major]}, pg_stat_database`, async () => {
        const s = fleet.servers.find((x) => x.major === major)!;
        assert.equal(s.statStatementsVersion, PG_STAT_STATEMENTS_VERSION[s.major]);
        const version = await withClient(
          s.server.url,
          async (c) => (await c.query<{ v: string }>("SELECT current_setting('server_version_num') AS v")).rows[0]!.v,
        );
        assert.equal(Math.floor(Number(version) / 10000), major);
        await numberedSet(s);
        await statistics(s);
        await blockingChain(s);
      });
    }
  });

  test('no snapshot of any major failed (none stored with an error, none counted in pglog_snapshot_failures_total), and no statement was stored twice', async () => {
    const failed = await rows('SELECT target, kind, error_code, left(error, 200) AS error FROM pglog.snapshot_runs WHERE error_code IS NOT NULL', []);
    assert.deepEqual(failed, []);
    const kinds = await rows<{ target: string; kinds: string[] }>(
      'SELECT target, array_agg(DISTINCT kind ORDER BY kind) AS kinds FROM pglog.snapshot_runs GROUP BY target ORDER BY target',
      [],
    );
    assert.deepEqual(kinds.map((k) => `${k.target} ${k.kinds.join(',')}`).sort(), fleet.servers.map((s) => `${s.target} activity,statistics`).sort());
    assert.equal(metricSum(await scrapeMetrics(fleet.metricsPort), 'pglog_snapshot_failures_total'), 0);
    // And no numbered statement came twice since its major's test saw them all.
    const [total] = await rows<{ n: number }>("SELECT count(*)::int AS n FROM pglog.statements WHERE query LIKE 'SELECT ''pglog-matrix-%'", []);
    assert.equal(total?.n, fleet.servers.length * MARKERS);
  });
});
