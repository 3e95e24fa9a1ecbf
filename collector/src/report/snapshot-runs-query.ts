/**
 * Which snapshot of each server is "current", and how its runs went: the SQL both
 * `report locks` and `report activity` start from. Pure.
 *
 * Snapshot runs are read from pglog.snapshot_runs (there is no stable view over it yet); only
 * activity runs count, the kind that reads pg_stat_activity and the blocking chains. A
 * successful run's row shares (target, instance, ts) with the snapshot's sample rows, so
 * the current snapshot is the newest successful run in the window, joined on ts in SQL:
 * timestamptz has microseconds, a JavaScript Date only milliseconds, so a ts must never make
 * a round trip through the client to select rows. A newest run that failed is reported with
 * its error, so a server that could not be read is visible, not just empty.
 */
import { orderBySql, type SortKey, textKey } from './order.ts';
import { date, num, numOrNull, type Row, type SqlQuery, text, textOrNull } from './query.ts';
import type { ServerRuns, SnapshotFilter } from './snapshot-types.ts';

/**
 * `runs` (activity runs in the window), `newest` (the newest run per server instance) and
 * `snap` (the newest successful one: target, instance, ts, sessions, blocked), as the start
 * of a WITH list. Parameters: $1 since, $2 until, then the target when filtered.
 */
export function snapshotCtes(filter: SnapshotFilter): { sql: string; values: unknown[] } {
  const values: unknown[] = [filter.since, filter.until];
  let targetCondition = '';
  if (filter.target !== null) {
    values.push(filter.target);
    targetCondition = ` AND target = $${values.length}`;
  }
  const sql = `runs AS (
    SELECT ts, target, instance, duration_ms, sessions, blocked, error_code, error
      FROM pglog.snapshot_runs
     WHERE kind = 'activity' AND ts >= $1 AND ts < $2${targetCondition}),
  newest AS (
    SELECT DISTINCT ON (target, instance) * FROM runs ORDER BY target, instance, ts DESC),
  snap AS (
    SELECT DISTINCT ON (target, instance) target, instance, ts, sessions, blocked
      FROM runs WHERE error_code IS NULL ORDER BY target, instance, ts DESC)`;
  return { sql, values };
}

/** `alias` rows of the current snapshots (a view with ts, target, instance), inside the window for partition pruning. */
export function inCurrentSnapshot(alias: string): string {
  return `JOIN snap s ON ${alias}.target = s.target AND ${alias}.instance = s.instance AND ${alias}.ts = s.ts
   WHERE ${alias}.ts >= $1 AND ${alias}.ts < $2`;
}

/** The order of servers: by target and instance (SQL and the merge of several stores, merge.ts). */
export const SERVER_ORDER: readonly SortKey<ServerRuns>[] = [textKey((s) => s.target, 'n.target'), textKey((s) => s.instance, 'n.instance')];

/** One row per server instance with an activity run in the window. */
export function serverRunsQuery(filter: SnapshotFilter): SqlQuery {
  const ctes = snapshotCtes(filter);
  const text = `WITH ${ctes.sql},
  counts AS (
    SELECT target, instance, count(*) AS runs, count(*) FILTER (WHERE error_code IS NOT NULL) AS failed_runs
      FROM runs GROUP BY target, instance)
SELECT n.target, n.instance, s.ts AS snapshot_at, s.sessions, s.blocked,
       n.ts AS last_run_at, n.duration_ms AS last_run_ms, n.error_code, n.error, c.runs, c.failed_runs
  FROM newest n
  JOIN counts c ON c.target = n.target AND c.instance = n.instance
  LEFT JOIN snap s ON s.target = n.target AND s.instance = n.instance
 ${orderBySql(SERVER_ORDER)}`;
  return { text, values: ctes.values };
}

export function serverRunsFromRow(r: Row): ServerRuns {
  return {
    target: text(r.target),
    instance: text(r.instance),
    snapshotAt: r.snapshot_at === null || r.snapshot_at === undefined ? null : date(r.snapshot_at),
    sessions: numOrNull(r.sessions),
    blocked: numOrNull(r.blocked),
    lastRunAt: date(r.last_run_at),
    lastRunMs: num(r.last_run_ms),
    lastErrorCode: textOrNull(r.error_code),
    lastError: textOrNull(r.error),
    runs: num(r.runs),
    failedRuns: num(r.failed_runs),
  };
}

/** Key of a server instance in maps. */
export function serverKey(target: string, instance: string): string {
  return `${target}\u0000${instance}`;
}
