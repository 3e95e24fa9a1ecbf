/**
 * The SQL of `pglog report activity` and the decoding of its rows. Pure. Reads the stable
 * view pglog.activity at each server's current snapshot (snapshot-runs-query.ts).
 */
import { numberKey, orderBySql, type SortKey, textKey } from './order.ts';
import { date, num, numOrNull, QUERY_TEXT_CHARS, type Row, type SqlQuery, text, textOrNull } from './query.ts';
import { inCurrentSnapshot, serverKey, snapshotCtes } from './snapshot-runs-query.ts';
import type { LongSession, SnapshotFilter } from './snapshot-types.ts';

/**
 * States that count as running: the session is in a statement or holds a transaction open
 * (and with it its locks and the xmin horizon that keeps VACUUM from cleaning up).
 */
export const RUNNING_STATES = ['active', 'idle in transaction', 'idle in transaction (aborted)', 'fastpath function call'];

function databaseCondition(filter: SnapshotFilter, values: unknown[]): string {
  if (filter.database === null) return '';
  values.push(filter.database);
  return ` AND a.database = $${values.length}`;
}

/** Sessions of each current snapshot by state, and how many of them wait for a lock. */
export function sessionStatesQuery(filter: SnapshotFilter): SqlQuery {
  const ctes = snapshotCtes(filter);
  const values = [...ctes.values];
  const text = `WITH ${ctes.sql}
SELECT a.target, a.instance, coalesce(a.state, '') AS state, count(*) AS sessions,
       count(*) FILTER (WHERE a.wait_event_type = 'Lock') AS lock_waiting
  FROM pglog.activity a
  ${inCurrentSnapshot('a')}${databaseCondition(filter, values)}
 GROUP BY a.target, a.instance, coalesce(a.state, '')
 ORDER BY a.target, a.instance, state`;
  return { text, values };
}

/** The order of long-running sessions: longest first (SQL and the merge of several stores, merge.ts). */
export const LONG_SESSION_ORDER: readonly SortKey<LongSession>[] = [
  numberKey((l) => l.durationMs, 'duration_ms', { desc: true }),
  textKey((l) => l.target, 'target'),
  textKey((l) => l.instance, 'instance'),
  numberKey((l) => l.pid, 'pid'),
];

/**
 * Sessions of the current snapshots in a running state whose transaction is at least
 * --min-duration old (outside a transaction: the statement), longest first.
 */
export function longRunningQuery(filter: SnapshotFilter): SqlQuery {
  const ctes = snapshotCtes(filter);
  const values = [...ctes.values];
  const database = databaseCondition(filter, values);
  values.push(RUNNING_STATES);
  const states = `$${values.length}`;
  values.push(filter.minDurationMs);
  const min = `$${values.length}`;
  values.push(filter.limit);
  const limit = `$${values.length}`;
  const text = `WITH ${ctes.sql},
  running AS (
    SELECT a.target, a.instance, a.ts, a.pid, a.database, a.username, a.application, a.state,
           a.wait_event_type, a.wait_event, a.fingerprint, left(a.query, ${QUERY_TEXT_CHARS}) AS query,
           extract(epoch FROM a.ts - a.xact_start) * 1000 AS xact_ms,
           extract(epoch FROM a.ts - a.query_start) * 1000 AS query_ms
      FROM pglog.activity a
      ${inCurrentSnapshot('a')}${database}
       AND a.state = ANY (${states}::text[]))
SELECT *, coalesce(xact_ms, query_ms) AS duration_ms, count(*) OVER () AS groups
  FROM running
 WHERE coalesce(xact_ms, query_ms) >= ${min}
 ${orderBySql(LONG_SESSION_ORDER)}
 LIMIT ${limit}`;
  return { text, values };
}

export function longSessionFromRow(r: Row): LongSession {
  return {
    target: text(r.target),
    instance: text(r.instance),
    snapshotAt: date(r.ts),
    pid: num(r.pid),
    database: textOrNull(r.database),
    user: textOrNull(r.username),
    application: textOrNull(r.application),
    state: textOrNull(r.state),
    waitEventType: textOrNull(r.wait_event_type),
    waitEvent: textOrNull(r.wait_event),
    xactMs: numOrNull(r.xact_ms),
    queryMs: numOrNull(r.query_ms),
    durationMs: num(r.duration_ms),
    fingerprint: textOrNull(r.fingerprint) || null,
    query: textOrNull(r.query),
  };
}

/** Rows of sessionStatesQuery, per server instance (serverKey): sessions by state and lock waiters. */
export function activityStates(rows: readonly Row[]): Map<string, { byState: Record<string, number>; lockWaiting: number }> {
  const out = new Map<string, { byState: Record<string, number>; lockWaiting: number }>();
  for (const r of rows) {
    const key = serverKey(text(r.target), text(r.instance));
    let entry = out.get(key);
    if (entry === undefined) {
      entry = { byState: {}, lockWaiting: 0 };
      out.set(key, entry);
    }
    entry.byState[text(r.state)] = num(r.sessions);
    entry.lockWaiting += num(r.lock_waiting);
  }
  return out;
}
