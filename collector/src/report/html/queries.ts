/**
 * The SQL of the HTML report (`pglog report --html`), built from a filter. Pure.
 *
 * Reads only the store's stable views (docs/store.md), every value a bind parameter. Series
 * are binned in SQL (bin = floor((ts - since) / width), width chosen from the window by
 * `binWidthMs`), and lists are top-N, so the report's size depends on the window's shape and
 * --limit, not on how many rows the store holds. The errors, lock-wait and blocking-episode
 * tables reuse the text report's queries (../query.ts, ../locks-query.ts). Grouped series have
 * no ORDER BY: model.ts places rows by their keys, and without one the planner hashes instead
 * of sorting every row by a text key (half the time at a million rows).
 */
import { QUERY_TEXT_CHARS, type SqlQuery } from '../query.ts';
import type { ReportFilter } from '../types.ts';

/** Bins a series has at most: enough for a chart's width, small in the file. */
export const MAX_BINS = 120;
/** Widths a bin may have, so its edges fall on round times. */
const NICE_BIN_MS = [1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 604800].map((s) => s * 1000);
/** Characters of a plan or parameter list the report carries. */
export const PLAN_CHARS = 20_000;
export const PARAMETER_CHARS = 2_000;
/** Series of errors by SQLSTATE and of statements by target: the top ones get their own line. */
export const SERIES_TOP = 8;

/** The smallest round bin width that covers the window in at most MAX_BINS bins. */
export function binWidthMs(since: Date, until: Date): number {
  const span = Math.max(1, until.getTime() - since.getTime());
  for (const w of NICE_BIN_MS) if (span / w <= MAX_BINS) return w;
  return Math.ceil(span / MAX_BINS / 86_400_000) * 86_400_000;
}

export function binCount(since: Date, until: Date, binMs: number): number {
  return Math.max(1, Math.ceil((until.getTime() - since.getTime()) / binMs));
}

export interface HtmlFilter extends ReportFilter {
  binMs: number;
}

/** WHERE over the window, target and (when the view has one) database; $1 since, $2 until. */
export function windowWhere(filter: HtmlFilter, opts: { database?: boolean; alias?: string } = {}): { sql: string; values: unknown[] } {
  const a = opts.alias === undefined ? '' : `${opts.alias}.`;
  const values: unknown[] = [filter.since, filter.until];
  const conditions = [`${a}ts >= $1`, `${a}ts < $2`];
  if (filter.target !== null) {
    values.push(filter.target);
    conditions.push(`${a}target = $${values.length}`);
  }
  if (filter.database !== null && opts.database !== false) {
    values.push(filter.database);
    conditions.push(`${a}database = $${values.length}`);
  }
  return { sql: `WHERE ${conditions.join(' AND ')}`, values };
}

/**
 * A query over the window (windowWhere with `opts`) that takes one more parameter, mostly the
 * row limit: `sql` gets the WHERE clause and that parameter's placeholder (`$n`).
 */
function windowQuery(filter: HtmlFilter, param: unknown, sql: (where: string, p: string) => string, opts: { database?: boolean } = {}): SqlQuery {
  const w = windowWhere(filter, opts);
  w.values.push(param);
  return { text: sql(w.sql, `$${w.values.length}`), values: w.values };
}

/** The bin of ts as an SQL expression (needs $1 = since) with the width as parameter `$n`. */
function binExpr(values: unknown[], binMs: number, alias = ''): string {
  values.push(binMs);
  // date_part is float8; extract() is numeric since PostgreSQL 14, several times slower per row.
  return `floor(date_part('epoch', ${alias}ts - $1::timestamptz) * 1000 / $${values.length})::int`;
}

/**
 * Statements per bin: every statement, the timed ones, their total and the duration
 * percentiles (p50/p95/p99, percentile_cont over the timed ones). The overview's totals are
 * the sums of these bins.
 */
export function statementSeriesQuery(filter: HtmlFilter): SqlQuery {
  const w = windowWhere(filter);
  const bin = binExpr(w.values, filter.binMs);
  return {
    text: `SELECT ${bin} AS bin, count(*) AS n, count(duration_ms) AS timed, coalesce(sum(duration_ms), 0) AS total_ms,
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY duration_ms) FILTER (WHERE duration_ms IS NOT NULL) AS pct
  FROM pglog.statements ${w.sql}
 GROUP BY 1 ORDER BY 1`,
    values: w.values,
  };
}

/** Statements per target (fleet-wide table) and per target and bin for the top targets. */
export function targetSeriesQuery(filter: HtmlFilter): SqlQuery {
  const w = windowWhere(filter);
  const bin = binExpr(w.values, filter.binMs);
  return {
    text: `SELECT target, ${bin} AS bin, count(*) AS n, coalesce(sum(duration_ms), 0) AS total_ms
  FROM pglog.statements ${w.sql}
 GROUP BY 1, 2`,
    values: w.values,
  };
}

/** Rows of a view per target (the fleet table): counts of what each view holds in the window. */
export function perTargetCountsQuery(filter: HtmlFilter): SqlQuery {
  const w = windowWhere(filter);
  const ws = windowWhere(filter, { database: false });
  // Both WHEREs use $1..$k in the same order; the no-database one is a prefix of the other.
  return {
    text: `SELECT target, kind, count(*) AS n FROM (
    SELECT target, 'errors' AS kind FROM pglog.errors ${w.sql}
    UNION ALL SELECT target, 'lock_waits' FROM pglog.lock_waits ${w.sql}
    UNION ALL SELECT target, 'deadlocks' FROM pglog.deadlocks ${w.sql}
    UNION ALL SELECT target, 'connections' FROM pglog.sessions ${w.sql} AND event = 'connection' AND phase = 'authorized'
    UNION ALL SELECT target, 'disconnections' FROM pglog.sessions ${w.sql} AND event = 'disconnection'
    UNION ALL SELECT target, 'temp_files' FROM pglog.temp_files ${w.sql}
    UNION ALL SELECT target, 'checkpoints' FROM pglog.checkpoints ${ws.sql} AND phase = 'complete'
    UNION ALL SELECT target, 'autovacuum' FROM pglog.maintenance ${w.sql} AND kind = 'autovacuum'
    UNION ALL SELECT target, 'autoanalyze' FROM pglog.maintenance ${w.sql} AND kind = 'autoanalyze') x
 GROUP BY 1, 2`,
    values: w.values,
  };
}

/**
 * The end of both template queries (from the rows, and from the rollup in queries-rollup.ts):
 * given a CTE `s` of (target, database, fingerprint, calls, total_ms, mean_ms, max_ms, p95_ms),
 * each template's place in the four rankings and its normalized text, the top `limit` of any
 * (`limit`: the SQL parameter that holds it, e.g. `$3`).
 */
export function rankedTemplates(limit: string): string {
  return `r AS (
  SELECT s.*, count(*) OVER () AS groups,
         row_number() OVER (ORDER BY total_ms DESC, calls DESC, target, database NULLS FIRST, fingerprint NULLS FIRST) AS by_total,
         row_number() OVER (ORDER BY calls DESC, total_ms DESC, target, database NULLS FIRST, fingerprint NULLS FIRST) AS by_calls,
         row_number() OVER (ORDER BY mean_ms DESC, calls DESC, target, database NULLS FIRST, fingerprint NULLS FIRST) AS by_mean,
         row_number() OVER (ORDER BY p95_ms DESC, calls DESC, target, database NULLS FIRST, fingerprint NULLS FIRST) AS by_p95
    FROM s)
SELECT r.*, t.normalized
  FROM r LEFT JOIN pglog.templates t ON t.fingerprint = r.fingerprint
 WHERE by_total <= ${limit} OR by_calls <= ${limit} OR by_mean <= ${limit} OR by_p95 <= ${limit}
 ORDER BY by_total`;
}

/**
 * Templates (target, database, fingerprint) ranked four ways over the window's timed
 * statements: by total time, calls, mean and p95. A template is returned when it is in the
 * top `limit` of any ranking; `groups` counts them all. The normalized text comes from
 * the stable view pglog.templates (version 5, one row per fingerprint); no query text is aggregated here (the sort
 * behind the percentiles stays narrow): each template's text is its example's.
 */
export function templatesQuery(filter: HtmlFilter): SqlQuery {
  return windowQuery(
    filter,
    filter.limit,
    (where, limit) => `WITH s AS (
  SELECT target, database, fingerprint, count(*) AS calls, sum(duration_ms) AS total_ms, avg(duration_ms) AS mean_ms,
         max(duration_ms) AS max_ms, percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms
    FROM pglog.statements ${where} AND duration_ms IS NOT NULL
   GROUP BY target, database, fingerprint),
${rankedTemplates(limit)}`,
  );
}

/** Keys of the templates the report shows, as three parallel arrays (unnest in SQL). */
export interface TemplateKeys {
  targets: string[];
  databases: Array<string | null>;
  fingerprints: Array<string | null>;
  maxMs: number[];
}

function keysCte(values: unknown[], keys: TemplateKeys): string {
  values.push(keys.targets, keys.databases, keys.fingerprints, keys.maxMs);
  const k = values.length - 3;
  return `k AS (SELECT * FROM unnest($${k}::text[], $${k + 1}::text[], $${k + 2}::text[], $${k + 3}::float8[])
                 AS k(target, database, fingerprint, max_ms))`;
}

// Equalities the planner can hash (IS NOT DISTINCT FROM it cannot: a nested loop over every row).
const KEY_JOIN = `s.target = k.target AND coalesce(s.fingerprint, '') = coalesce(k.fingerprint, '') AND coalesce(s.database, '') = coalesce(k.database, '')`;

/**
 * Each shown template's slowest execution in the window (its example, with parameters): a
 * hash join on the maximum duration the template query found, so no sort over the rows.
 */
export function templateExamplesQuery(filter: HtmlFilter, keys: TemplateKeys): SqlQuery {
  const w = windowWhere(filter, { alias: 's' });
  const cte = keysCte(w.values, keys);
  return {
    text: `WITH ${cte}
SELECT DISTINCT ON (k.target, k.database, k.fingerprint) k.target, k.database, k.fingerprint,
       s.ts, s.username, s.application, s.duration_ms, left(s.query, ${QUERY_TEXT_CHARS * 10}) AS query,
       left(s.parameters, ${PARAMETER_CHARS}) AS parameters
  FROM pglog.statements s JOIN k ON ${KEY_JOIN} AND s.duration_ms = k.max_ms
  ${w.sql}
 ORDER BY k.target, k.database, k.fingerprint, s.ts DESC`,
    values: w.values,
  };
}

/** Calls and mean duration per bin of each shown template: its own small series. */
export function templateSeriesQuery(filter: HtmlFilter, keys: TemplateKeys): SqlQuery {
  const w = windowWhere(filter, { alias: 's' });
  const bin = binExpr(w.values, filter.binMs, 's.');
  const cte = keysCte(w.values, keys);
  return {
    text: `WITH ${cte}
SELECT k.target, k.database, k.fingerprint, ${bin} AS bin, count(*) AS calls, avg(s.duration_ms) AS mean_ms
  FROM pglog.statements s JOIN k ON ${KEY_JOIN}
  ${w.sql} AND s.duration_ms IS NOT NULL
 GROUP BY 1, 2, 3, 4`,
    values: w.values,
  };
}

/** The newest auto_explain plan of each shown fingerprint in the window (any target). */
export function templatePlansQuery(filter: HtmlFilter, fingerprints: string[]): SqlQuery {
  return windowQuery(
    filter,
    fingerprints,
    (where, p) => `SELECT DISTINCT ON (target, fingerprint) target, fingerprint, ts, duration_ms, format, left(plan, ${PLAN_CHARS}) AS plan
  FROM pglog.plans ${where} AND fingerprint = ANY(${p}::text[])
 ORDER BY target, fingerprint, ts DESC`,
  );
}

/** Errors per SQLSTATE and bin (NULL sqlstate: the log prefix had no %e). */
export function errorSeriesQuery(filter: HtmlFilter): SqlQuery {
  const w = windowWhere(filter);
  const bin = binExpr(w.values, filter.binMs);
  return {
    text: `SELECT sqlstate, ${bin} AS bin, count(*) AS n FROM pglog.errors ${w.sql} GROUP BY 1, 2`,
    values: w.values,
  };
}

/**
 * Per bin, the counts of every other event family, in one pass per view: lock wait messages,
 * deadlocks, authorized connections, disconnections, temporary files and their bytes,
 * completed checkpoints, autovacuum and autoanalyze runs, blocked sessions (the most any
 * activity snapshot of the bin saw; server-wide, so not filtered by database).
 */
export function eventSeriesQuery(filter: HtmlFilter): SqlQuery {
  const w = windowWhere(filter);
  const ws = windowWhere(filter, { database: false });
  const bin = binExpr(w.values, filter.binMs);
  return {
    text: `SELECT bin, kind, sum(n) AS n, sum(v) AS v FROM (
    SELECT ${bin} AS bin, 'lock_waits' AS kind, count(*) AS n, 0::float8 AS v FROM pglog.lock_waits ${w.sql} GROUP BY 1
    UNION ALL SELECT ${bin}, 'deadlocks', count(*), 0 FROM pglog.deadlocks ${w.sql} GROUP BY 1
    UNION ALL SELECT ${bin}, 'connections', count(*), 0 FROM pglog.sessions ${w.sql} AND event = 'connection' AND phase = 'authorized' GROUP BY 1
    UNION ALL SELECT ${bin}, 'disconnections', count(*), coalesce(sum(session_ms), 0) FROM pglog.sessions ${w.sql} AND event = 'disconnection' GROUP BY 1
    UNION ALL SELECT ${bin}, 'temp_files', count(*), coalesce(sum(size_bytes), 0) FROM pglog.temp_files ${w.sql} GROUP BY 1
    UNION ALL SELECT ${bin}, 'checkpoints', count(*), coalesce(max(total_s), 0) FROM pglog.checkpoints ${ws.sql} AND phase = 'complete' GROUP BY 1
    UNION ALL SELECT ${bin}, 'autovacuum', count(*), coalesce(sum(elapsed_s), 0) FROM pglog.maintenance ${w.sql} AND kind = 'autovacuum' GROUP BY 1
    UNION ALL SELECT ${bin}, 'autoanalyze', count(*), coalesce(sum(elapsed_s), 0) FROM pglog.maintenance ${w.sql} AND kind = 'autoanalyze' GROUP BY 1
    UNION ALL SELECT ${bin}, 'blocked', 0, coalesce(max(blocked), 0) FROM pglog.snapshot_runs ${ws.sql} AND kind = 'activity' AND error_code IS NULL GROUP BY 1
  ) x GROUP BY 1, 2`,
    values: w.values,
  };
}

/** Completed checkpoints in the window, newest first, at most `limit * 10` (the chart's points). */
export function checkpointsQuery(filter: HtmlFilter): SqlQuery {
  return windowQuery(
    filter,
    filter.limit * 10,
    (where, limit) => `SELECT ts, target, instance, checkpoint_kind, reason, buffers_written, buffers_pct, wal_added, wal_removed, wal_recycled,
       write_s, sync_s, total_s, distance_kb, count(*) OVER () AS groups
  FROM pglog.checkpoints ${where} AND phase = 'complete'
 ORDER BY ts DESC LIMIT ${limit}`,
    { database: false },
  );
}

/** Autovacuum and autoanalyze per table, most time spent first. */
export function maintenanceQuery(filter: HtmlFilter): SqlQuery {
  return windowQuery(
    filter,
    filter.limit,
    (where, limit) => `SELECT target, database, relation,
       count(*) FILTER (WHERE kind = 'autovacuum') AS vacuums, count(*) FILTER (WHERE kind = 'autoanalyze') AS analyzes,
       coalesce(sum(elapsed_s), 0) AS elapsed_s, coalesce(sum(tuples_removed), 0) AS tuples_removed,
       coalesce(sum(pages_removed), 0) AS pages_removed, coalesce(sum(wal_bytes), 0) AS wal_bytes,
       bool_or(aggressive) AS aggressive, bool_or(wraparound) AS wraparound, max(ts) AS last_seen,
       count(*) OVER () AS groups
  FROM pglog.maintenance ${where}
 GROUP BY target, database, relation
 ORDER BY elapsed_s DESC, count(*) DESC, target, database NULLS FIRST, relation NULLS FIRST
 LIMIT ${limit}`,
  );
}

/** Temporary files by the statement that made them (fingerprint), largest total first. */
export function tempFilesQuery(filter: HtmlFilter): SqlQuery {
  return windowQuery(
    filter,
    filter.limit,
    (where, limit) => `SELECT target, database, fingerprint, count(*) AS files, sum(size_bytes) AS total_bytes, max(size_bytes) AS max_bytes,
       min(left(statement, ${QUERY_TEXT_CHARS})) AS statement, count(*) OVER () AS groups
  FROM pglog.temp_files ${where}
 GROUP BY target, database, fingerprint
 ORDER BY total_bytes DESC NULLS LAST, files DESC, target, database NULLS FIRST, fingerprint NULLS FIRST
 LIMIT ${limit}`,
  );
}

/** Temporary files by size class (powers of 4 from 64 kB), for the size histogram. */
export function tempFileSizesQuery(filter: HtmlFilter): SqlQuery {
  const w = windowWhere(filter);
  return {
    text: `SELECT least(greatest(floor(log(4, greatest(size_bytes, 1) / 65536.0))::int + 1, 0), 8) AS class, count(*) AS n
  FROM pglog.temp_files ${w.sql} GROUP BY 1 ORDER BY 1`,
    values: w.values,
  };
}

/** Sessions by database, user and application: authorized connections and ended sessions. */
export function sessionsQuery(filter: HtmlFilter): SqlQuery {
  return windowQuery(
    filter,
    filter.limit,
    (where, limit) => `SELECT target, database, username, application,
       count(*) FILTER (WHERE event = 'connection') AS connections,
       count(*) FILTER (WHERE event = 'disconnection') AS disconnections,
       avg(session_ms) AS mean_session_ms, max(session_ms) AS max_session_ms, count(*) OVER () AS groups
  FROM pglog.sessions ${where} AND (phase = 'authorized' OR event = 'disconnection')
 GROUP BY target, database, username, application
 ORDER BY connections DESC, disconnections DESC, target, database NULLS FIRST, username NULLS FIRST, application NULLS FIRST
 LIMIT ${limit}`,
  );
}

/** The newest deadlocks in the window with the processes of their cycle. */
export function deadlocksQuery(filter: HtmlFilter): SqlQuery {
  return windowQuery(
    filter,
    filter.limit,
    (where, limit) => `SELECT ts, target, instance, database, pid, left(message, 500) AS message, processes, count(*) OVER () AS groups
  FROM pglog.deadlocks ${where} ORDER BY ts DESC LIMIT ${limit}`,
  );
}
