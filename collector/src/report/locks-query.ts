/**
 * The SQL of `pglog report locks` and the decoding of its rows. Pure.
 *
 * Edges and sessions come from the stable views pglog.blocking and pglog.activity. Durations
 * are computed in SQL from the snapshot's own ts (the monitored server's clock, microseconds).
 */
import type { EdgeInput, SessionInput } from './blocking-tree.ts';
import { numberKey, orderBySql, type SortKey, textKey, timeKey } from './order.ts';
import { date, num, numOrNull, QUERY_TEXT_CHARS, type Row, type SqlQuery, text, textOrNull } from './query.ts';
import { inCurrentSnapshot, snapshotCtes } from './snapshot-runs-query.ts';
import type { BlockingEpisode, SnapshotFilter } from './snapshot-types.ts';

/** The edges of every server's current snapshot. */
export function currentEdgesQuery(filter: SnapshotFilter): SqlQuery {
  const ctes = snapshotCtes(filter);
  const text = `WITH ${ctes.sql}
SELECT b.target, b.instance, b.pid, b.blocking_pid, b.database, b.lock_type, b.wait_mode, b.held_mode, b.relation, b.wait_ms
  FROM pglog.blocking b
  ${inCurrentSnapshot('b')}
 ORDER BY b.target, b.instance, b.pid, b.blocking_pid`;
  return { text, values: ctes.values };
}

/** The sessions of the current snapshots that wait or block (the others are not in a tree). */
export function currentTreeSessionsQuery(filter: SnapshotFilter): SqlQuery {
  const ctes = snapshotCtes(filter);
  const text = `WITH ${ctes.sql}
SELECT a.target, a.instance, a.pid, a.database, a.username, a.application, a.state,
       extract(epoch FROM a.ts - a.xact_start) * 1000 AS xact_ms,
       a.fingerprint, left(a.query, ${QUERY_TEXT_CHARS}) AS query
  FROM pglog.activity a
  ${inCurrentSnapshot('a')}
   AND EXISTS (SELECT 1 FROM pglog.blocking b
                WHERE b.target = a.target AND b.instance = a.instance AND b.ts = a.ts
                  AND (b.pid = a.pid OR b.blocking_pid = a.pid))
 ORDER BY a.target, a.instance, a.pid`;
  return { text, values: ctes.values };
}

/**
 * The recursive part of blocking episodes, shared with the store dashboard
 * (scripts/dashboards/store-panels-snapshots.ts): `WITH RECURSIVE` and the CTEs `e` (the
 * blocking edges of the window: `edgesWhere` filters pglog.blocking), `roots` (blockers that
 * wait for nobody in their snapshot), `reach` (every session below a root; UNION, so a cycle
 * below a root ends) and `per_snapshot` (per snapshot and root: waiters, longest wait, and
 * `inDatabase`, an aggregate over `e`, as in_database). The caller goes on with `, name AS (...)`
 * or its final SELECT.
 */
export function blockingRootsCtes(edgesWhere: string, inDatabase: string): string {
  return `WITH RECURSIVE e AS MATERIALIZED (
    SELECT ts, target, instance, pid, blocking_pid, database, wait_ms
      FROM pglog.blocking
     WHERE ${edgesWhere}),
  roots AS (
    SELECT DISTINCT e.ts, e.target, e.instance, e.blocking_pid AS root
      FROM e
     WHERE NOT EXISTS (SELECT 1 FROM e w
                        WHERE w.ts = e.ts AND w.target = e.target AND w.instance = e.instance AND w.pid = e.blocking_pid)),
  reach (ts, target, instance, root, pid) AS (
    SELECT ts, target, instance, root, root FROM roots
    UNION
    SELECT r.ts, r.target, r.instance, r.root, e.pid
      FROM reach r JOIN e ON e.ts = r.ts AND e.target = r.target AND e.instance = r.instance AND e.blocking_pid = r.pid),
  per_snapshot AS (
    SELECT r.ts, r.target, r.instance, r.root, count(DISTINCT e.pid) AS waiters, max(e.wait_ms) AS max_wait_ms,
           ${inDatabase} AS in_database
      FROM reach r JOIN e ON e.ts = r.ts AND e.target = r.target AND e.instance = r.instance AND e.pid = r.pid
     GROUP BY r.ts, r.target, r.instance, r.root)`;
}

/** The order of episodes: newest first (SQL and the merge of several stores, merge.ts). */
export const EPISODE_ORDER: readonly SortKey<BlockingEpisode>[] = [
  timeKey((e) => e.lastSeen, 'last_seen', { desc: true }),
  numberKey((e) => e.maxWaitMs, 'max_wait_ms', { desc: true, nulls: 'last' }),
  textKey((e) => e.target, 'target'),
  textKey((e) => e.instance, 'instance'),
  numberKey((e) => e.rootPid, 'root'),
  timeKey((e) => e.xactStart, 'xact_start', { nulls: 'first' }),
];

/**
 * Blocking episodes in the window: per snapshot, each root (a blocker that waits for nobody
 * in that snapshot) with the sessions reachable below it (recursive; UNION, not UNION ALL,
 * so a cycle below a root ends), then grouped by (server, root pid, root's xact_start): one
 * transaction blocking others over consecutive snapshots is one episode. Sessions caught in
 * a cycle with no root form no episode here; the current tree shows them.
 * With --database, only episodes in which a waiter was in that database.
 */
export function episodesQuery(filter: SnapshotFilter): SqlQuery {
  const values: unknown[] = [filter.since, filter.until];
  let targetCondition = '';
  if (filter.target !== null) {
    values.push(filter.target);
    targetCondition = ` AND target = $${values.length}`;
  }
  let having = '';
  if (filter.database !== null) {
    values.push(filter.database);
    having = `HAVING bool_or(p.in_database)`;
  }
  const inDatabase = filter.database === null ? 'true' : `bool_or(e.database = $${values.length})`;
  values.push(filter.limit);
  const text = `${blockingRootsCtes(`ts >= $1 AND ts < $2${targetCondition}`, inDatabase)},
  episodes AS (
    SELECT p.target, p.instance, p.root, a.xact_start,
           min(p.ts) AS first_seen, max(p.ts) AS last_seen, count(*) AS snapshots,
           max(p.waiters) AS peak_waiters, max(p.max_wait_ms) AS max_wait_ms,
           (array_agg(a.database ORDER BY p.ts DESC))[1] AS database,
           (array_agg(a.username ORDER BY p.ts DESC))[1] AS username,
           (array_agg(a.application ORDER BY p.ts DESC))[1] AS application,
           (array_agg(a.fingerprint ORDER BY p.ts DESC))[1] AS fingerprint,
           (array_agg(left(a.query, ${QUERY_TEXT_CHARS}) ORDER BY p.ts DESC))[1] AS query
      FROM per_snapshot p
      LEFT JOIN pglog.activity a
        ON a.target = p.target AND a.instance = p.instance AND a.ts = p.ts AND a.pid = p.root
       AND a.ts >= $1 AND a.ts < $2
     GROUP BY p.target, p.instance, p.root, a.xact_start
     ${having})
SELECT *, count(*) OVER () AS groups
  FROM episodes
 ${orderBySql(EPISODE_ORDER)}
 LIMIT $${values.length}`;
  return { text, values };
}

export function edgeFromRow(r: Row): EdgeInput & { target: string; instance: string } {
  return {
    target: text(r.target),
    instance: text(r.instance),
    pid: num(r.pid),
    blockingPid: num(r.blocking_pid),
    database: textOrNull(r.database),
    lockType: text(r.lock_type),
    waitMode: text(r.wait_mode),
    heldMode: textOrNull(r.held_mode),
    relation: textOrNull(r.relation),
    waitMs: numOrNull(r.wait_ms),
  };
}

export function treeSessionFromRow(r: Row): SessionInput & { target: string; instance: string } {
  return {
    target: text(r.target),
    instance: text(r.instance),
    pid: num(r.pid),
    database: textOrNull(r.database),
    user: textOrNull(r.username),
    application: textOrNull(r.application),
    state: textOrNull(r.state),
    xactMs: numOrNull(r.xact_ms),
    query: textOrNull(r.query),
    fingerprint: textOrNull(r.fingerprint) || null,
  };
}

export function episodeFromRow(r: Row): BlockingEpisode {
  return {
    target: text(r.target),
    instance: text(r.instance),
    rootPid: num(r.root),
    xactStart: r.xact_start === null || r.xact_start === undefined ? null : date(r.xact_start),
    firstSeen: date(r.first_seen),
    lastSeen: date(r.last_seen),
    snapshots: num(r.snapshots),
    peakWaiters: num(r.peak_waiters),
    maxWaitMs: numOrNull(r.max_wait_ms),
    database: textOrNull(r.database),
    user: textOrNull(r.username),
    application: textOrNull(r.application),
    fingerprint: textOrNull(r.fingerprint) || null,
    query: textOrNull(r.query),
  };
}
