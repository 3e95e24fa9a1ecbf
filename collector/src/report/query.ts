/**
 * The SQL of `pglog report`, built from a filter, and the decoding of its rows. Pure.
 *
 * Only the stable views of the store are read (docs/store.md "Stable views": `pglog.statements`, `pglog.errors`,
 * `pglog.lock_waits`), never the tables behind them, so the report keeps working when the
 * tables change. Every value is a bind parameter. `count(*) OVER ()` is evaluated after GROUP
 * BY and before LIMIT: it is the number of groups in the window, for "20 of 153".
 */
import { numberKey, orderBySql, type SortKey, textKey, timeKey } from './order.ts';
import type { ErrorStats, LockWaitStats, ReportFilter, StatementStats } from './types.ts';

export interface SqlQuery {
  text: string;
  values: unknown[];
}

/** Characters of a query's text the report carries (the table cuts further to fit). */
export const QUERY_TEXT_CHARS = 300;
/** Characters of an error message grouped on and shown: longer ones differ in their tail only by literals. */
export const MESSAGE_CHARS = 500;

/** `WHERE` over the window and the optional target and database, with its parameters. */
function whereClause(filter: ReportFilter): { sql: string; values: unknown[] } {
  const values: unknown[] = [filter.since, filter.until];
  const conditions = ['ts >= $1', 'ts < $2'];
  if (filter.target !== null) {
    values.push(filter.target);
    conditions.push(`target = $${values.length}`);
  }
  if (filter.database !== null) {
    values.push(filter.database);
    conditions.push(`database = $${values.length}`);
  }
  return { sql: `WHERE ${conditions.join(' AND ')}`, values };
}

/** Each section's order: the SQL's ORDER BY and the merge of several stores' rows (merge.ts) both read it. */
export const STATEMENT_ORDER: readonly SortKey<StatementStats>[] = [
  numberKey((r) => r.total_ms, 'total_ms', { desc: true }),
  numberKey((r) => r.calls, 'calls', { desc: true }),
  textKey((r) => r.target, 'target'),
  textKey((r) => r.database, 'database', { nulls: 'first' }),
  textKey((r) => r.fingerprint, 'fingerprint', { nulls: 'first' }),
];

export const ERROR_ORDER: readonly SortKey<ErrorStats>[] = [
  numberKey((r) => r.count, 'count', { desc: true }),
  timeKey((r) => r.last_seen, 'max(ts)', { desc: true }),
  textKey((r) => r.target, 'target'),
  textKey((r) => r.database, 'database', { nulls: 'first' }),
  textKey((r) => r.severity, 'severity'),
  textKey((r) => r.sqlstate, 'sqlstate', { nulls: 'first' }),
  textKey((r) => r.message, `left(message, ${MESSAGE_CHARS})`),
];

export const LOCK_WAIT_ORDER: readonly SortKey<LockWaitStats>[] = [
  numberKey((r) => r.total_wait_ms, 'total_wait_ms', { desc: true }),
  numberKey((r) => r.max_wait_ms, 'max_wait_ms', { desc: true, nulls: 'last' }),
  numberKey((r) => r.count, 'count', { desc: true }),
  textKey((r) => r.target, 'target'),
  textKey((r) => r.database, 'database', { nulls: 'first' }),
  textKey((r) => r.lock_type, 'lock_type', { nulls: 'first' }),
];

function withLimit(where: { sql: string; values: unknown[] }, limit: number): { where: string; limit: string; values: unknown[] } {
  const values = [...where.values, limit];
  return { where: where.sql, limit: `LIMIT $${values.length}`, values };
}

/**
 * Top query templates by total time, per target and database. Statements logged without a
 * duration (log_statement) carry no time and are left out. min(left(query, N)) picks one
 * representative text per template in bounded memory (PostgreSQL 13 has no any_value).
 */
export function statementsQuery(filter: ReportFilter): SqlQuery {
  const q = withLimit(whereClause(filter), filter.limit);
  const text = `SELECT target, database, fingerprint,
       min(left(query, ${QUERY_TEXT_CHARS})) AS query,
       count(*) AS calls,
       sum(duration_ms) AS total_ms,
       avg(duration_ms) AS mean_ms,
       stddev_pop(duration_ms) AS stddev_ms,
       min(duration_ms) AS min_ms,
       max(duration_ms) AS max_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms,
       count(*) OVER () AS groups
  FROM pglog.statements
  ${q.where} AND duration_ms IS NOT NULL
  GROUP BY target, database, fingerprint
  ${orderBySql(STATEMENT_ORDER)}
  ${q.limit}`;
  return { text, values: q.values };
}

/** Errors by SQLSTATE and message, per target, database and severity; most frequent first. */
export function errorsQuery(filter: ReportFilter): SqlQuery {
  const q = withLimit(whereClause(filter), filter.limit);
  const text = `SELECT target, database, severity, sqlstate,
       left(message, ${MESSAGE_CHARS}) AS message,
       count(*) AS count,
       min(ts) AS first_seen,
       max(ts) AS last_seen,
       count(*) OVER () AS groups
  FROM pglog.errors
  ${q.where}
  GROUP BY target, database, severity, sqlstate, left(message, ${MESSAGE_CHARS})
  ${orderBySql(ERROR_ORDER)}
  ${q.limit}`;
  return { text, values: q.values };
}

/**
 * Lock waits per target, database and lock type, longest total first. One wait may log
 * "still waiting ... after 1000 ms" and later "acquired ... after 5200 ms": the total sums
 * only the acquired messages (each carries its wait's whole duration, so none is counted
 * twice); the maximum looks at every message (a wait that never ended still shows).
 */
export function lockWaitsQuery(filter: ReportFilter): SqlQuery {
  const q = withLimit(whereClause(filter), filter.limit);
  const text = `SELECT target, database, lock_type,
       count(*) AS count,
       count(*) FILTER (WHERE acquired) AS acquired,
       coalesce(sum(wait_ms) FILTER (WHERE acquired), 0) AS total_wait_ms,
       max(wait_ms) AS max_wait_ms,
       count(*) OVER () AS groups
  FROM pglog.lock_waits
  ${q.where}
  GROUP BY target, database, lock_type
  ${orderBySql(LOCK_WAIT_ORDER)}
  ${q.limit}`;
  return { text, values: q.values };
}

// ---------------------------------------------------------------- rows (decoders shared with the snapshot reports)

export type Row = Record<string, unknown>;

/** count(*) and other int8 arrive as strings (pg does not guess at 64-bit precision). */
export function num(v: unknown): number {
  return typeof v === 'number' ? v : Number(v);
}

export function numOrNull(v: unknown): number | null {
  return v === null || v === undefined ? null : num(v);
}

export function text(v: unknown): string {
  return typeof v === 'string' ? v : '';
}

export function textOrNull(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

export function date(v: unknown): Date {
  return v instanceof Date ? v : new Date(String(v));
}

/** Groups in the window (the same on every row; 0 when there are no rows). */
export function groupsOf(rows: readonly Row[]): number {
  return rows.length === 0 ? 0 : num(rows[0]?.groups);
}

export function statementFromRow(r: Row): StatementStats {
  return {
    target: text(r.target),
    database: textOrNull(r.database),
    fingerprint: textOrNull(r.fingerprint),
    query: text(r.query),
    calls: num(r.calls),
    total_ms: num(r.total_ms),
    mean_ms: num(r.mean_ms),
    stddev_ms: num(r.stddev_ms ?? 0),
    min_ms: num(r.min_ms),
    max_ms: num(r.max_ms),
    p95_ms: num(r.p95_ms),
  };
}

export function errorFromRow(r: Row): ErrorStats {
  return {
    target: text(r.target),
    database: textOrNull(r.database),
    severity: text(r.severity),
    sqlstate: textOrNull(r.sqlstate),
    message: text(r.message),
    count: num(r.count),
    first_seen: date(r.first_seen),
    last_seen: date(r.last_seen),
  };
}

export function lockWaitFromRow(r: Row): LockWaitStats {
  return {
    target: text(r.target),
    database: textOrNull(r.database),
    lock_type: textOrNull(r.lock_type),
    count: num(r.count),
    acquired: num(r.acquired),
    total_wait_ms: num(r.total_wait_ms),
    max_wait_ms: numOrNull(r.max_wait_ms),
  };
}
