// The store dashboard's panels on what the collector reads from the logs: the overview,
// statements (rates, duration percentiles, top templates), errors by SQLSTATE and lock waits.
// Only the stable views (docs/store.md) are read; each query is what `pglog report` computes
// for the same window (collector/src/report/query.ts), binned by Grafana's $__interval.
import { type Section, stat, table, timeseries, units } from './grafana.ts';
import { inWindow } from './store-filters.ts';

/** Characters of a statement's text shown (as in `pglog report`). */
const TEXT = 300;

export const overview: Section = {
  title: 'Overview',
  panels: [
    stat({
      title: 'Totals over the time range',
      description:
        'Over the time range, for the selected targets and databases: statements logged with a duration, their total and mean duration, ' +
        'the most statements logged in one second, errors (every severity), and the peak of concurrent client sessions seen by the SQL snapshots ' +
        "(the sum of each server's peak).",
      w: 24,
      h: 4,
      sql: `WITH s AS (
  SELECT count(*) AS statements, coalesce(sum(duration_ms), 0) / 1000 AS total_s, avg(duration_ms) AS mean_ms
    FROM pglog.statements
   WHERE ${inWindow()} AND duration_ms IS NOT NULL),
peak AS (
  SELECT coalesce(max(n), 0) AS peak_per_s
    FROM (SELECT count(*) AS n FROM pglog.statements WHERE ${inWindow()} GROUP BY date_trunc('second', ts)) per_second),
e AS (
  SELECT count(*) AS errors FROM pglog.errors WHERE ${inWindow()}),
a AS (
  SELECT coalesce(sum(peak), 0) AS peak_sessions
    FROM (SELECT max(n) AS peak
            FROM (SELECT target, instance, ts, count(*) AS n
                    FROM pglog.activity
                   WHERE ${inWindow()} AND backend_type = 'client backend'
                   GROUP BY target, instance, ts) per_snapshot
           GROUP BY target, instance) per_server)
SELECT statements, total_s, mean_ms, peak_per_s, errors, peak_sessions
  FROM s CROSS JOIN peak CROSS JOIN e CROSS JOIN a`,
      fields: {
        statements: { displayName: 'Statements', unit: 'short' },
        total_s: { displayName: 'Total duration', unit: 's' },
        mean_ms: { displayName: 'Mean duration', unit: 'ms' },
        peak_per_s: { displayName: 'Peak statements/s', unit: 'short' },
        errors: { displayName: 'Errors', unit: 'short' },
        peak_sessions: { displayName: 'Peak client sessions', unit: 'short' },
      },
    }),
  ],
};

/** A top-N table of query templates ordered by `order` (columns of the per-template aggregate). */
function topTemplates(title: string, order: string): ReturnType<typeof table> {
  return table({
    title,
    description:
      'Query templates (statements with their literals replaced, one fingerprint per template), over the time range: ' +
      "statements logged with a duration, their total, mean, p95 (percentile_cont) and longest duration, the template's normalized text " +
      '(pglog.templates) and one statement of it as logged.',
    w: 12,
    h: 9,
    sql: `WITH t AS (
  SELECT fingerprint,
         count(*) AS calls,
         sum(duration_ms) AS total_ms,
         avg(duration_ms) AS mean_ms,
         percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms,
         max(duration_ms) AS max_ms,
         count(DISTINCT target) AS targets,
         min(left(query, ${TEXT})) AS example
    FROM pglog.statements
   WHERE ${inWindow()} AND duration_ms IS NOT NULL
   GROUP BY fingerprint
   ORDER BY ${order}, fingerprint
   LIMIT 20)
SELECT t.fingerprint, t.calls, t.total_ms, t.mean_ms, t.p95_ms, t.max_ms, t.targets,
       left(coalesce(tpl.normalized, t.example), ${TEXT}) AS template, t.example
  FROM t
  LEFT JOIN pglog.templates tpl ON tpl.fingerprint = t.fingerprint
 ORDER BY ${order
   .split(', ')
   .map((o) => `t.${o}`)
   .join(', ')}, t.fingerprint`,
    fields: { fingerprint: { link: TEMPLATE_LINK }, ...units({ total_ms: 'ms', mean_ms: 'ms', p95_ms: 'ms', max_ms: 'ms' }) },
  });
}

/**
 * A fingerprint cell opens the same dashboard, same range and filters, with that template
 * selected, on the store of the row it is in (in a row repeated per store, ${datasource} is
 * that row's store).
 */
const TEMPLATE_LINK = {
  title: 'This template over time',
  url: '/d/pglog-store/pglog-store?${__url_time_range}&${datasource:queryparam}&${target:queryparam}&${database:queryparam}&var-fingerprint=${__value.raw}',
};

/** The template chosen in the `fingerprint` variable (a fingerprint cell's link sets it). */
const ONE_TEMPLATE = 'fingerprint = ${fingerprint:sqlstring}';

export const statements: Section = {
  title: 'Statements',
  panels: [
    timeseries({
      title: 'Statements per second, per target',
      description: 'Statements logged per second (every statement, with or without a duration), stacked by target.',
      w: 12,
      h: 8,
      unit: 'short',
      stack: true,
      sql: `SELECT $__timeGroupAlias(ts, $__interval), target AS metric, count(*) / ($__interval_ms / 1000.0) AS statements_per_s
  FROM pglog.statements
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    timeseries({
      title: 'Statement duration p50 / p95 / p99',
      description: 'Percentiles (percentile_cont) of the durations of the statements logged in each interval.',
      w: 12,
      h: 8,
      unit: 'ms',
      sql: `SELECT $__timeGroupAlias(ts, $__interval),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY duration_ms) AS p99
  FROM pglog.statements
 WHERE ${inWindow()} AND duration_ms IS NOT NULL
 GROUP BY 1
 ORDER BY 1`,
    }),
    topTemplates('Top templates by total time', 'total_ms DESC'),
    topTemplates('Top templates by calls', 'calls DESC'),
    topTemplates('Top templates by mean duration', 'mean_ms DESC'),
    topTemplates('Top templates by p95 duration', 'p95_ms DESC'),
    timeseries({
      title: 'The selected template: statements per second and p95',
      description: 'The template in the Template variable (click a fingerprint in a top-templates table): statements per second and the p95 of their duration.',
      w: 24,
      h: 7,
      unit: 'short',
      sql: `SELECT $__timeGroupAlias(ts, $__interval),
       count(*) / ($__interval_ms / 1000.0) AS statements_per_s,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms
  FROM pglog.statements
 WHERE ${inWindow()} AND ${ONE_TEMPLATE}
 GROUP BY 1
 ORDER BY 1`,
      fields: units({ p95_ms: 'ms' }),
    }),
    table({
      title: 'Slowest auto_explain plans',
      description:
        "Plans auto_explain logged (auto_explain.log_min_duration), slowest first, with the template's normalized text: why a slow statement was slow.",
      w: 24,
      h: 9,
      sql: `SELECT p.ts, p.target, p.database, p.duration_ms, p.fingerprint,
       left(coalesce(tpl.normalized, p.query), ${TEXT}) AS template,
       left(p.plan, 4000) AS plan
  FROM pglog.plans p
  LEFT JOIN pglog.templates tpl ON tpl.fingerprint = p.fingerprint
 WHERE ${inWindow('p.')}
 ORDER BY p.duration_ms DESC NULLS LAST, p.ts DESC
 LIMIT 20`,
      fields: units({ ts: 'dateTimeAsIso', duration_ms: 'ms' }),
    }),
    table({
      title: 'pg_stat_statements: top by execution time',
      description:
        'What pg_stat_statements counted between the SQL snapshots (spec.collect.statements), summed over the time range: ' +
        "statements the log does not show too (log_min_duration_statement). The text is pg_stat_statements' normalized one.",
      w: 24,
      h: 8,
      sql: `SELECT fingerprint,
       sum(calls) AS calls,
       sum(total_exec_ms) AS total_exec_ms,
       sum(total_exec_ms) / nullif(sum(calls), 0) AS mean_ms,
       sum(rows) AS rows,
       count(DISTINCT target) AS targets,
       min(left(query, ${TEXT})) AS query
  FROM pglog.statement_stats
 WHERE ${inWindow()}
 GROUP BY fingerprint
 ORDER BY total_exec_ms DESC, fingerprint
 LIMIT 20`,
      fields: units({ total_exec_ms: 'ms', mean_ms: 'ms' }),
    }),
  ],
};

export const errors: Section = {
  title: 'Errors',
  panels: [
    timeseries({
      title: 'Errors by SQLSTATE',
      description: 'Error, fatal and panic lines (and warnings with a SQLSTATE) logged per interval, by SQLSTATE.',
      w: 12,
      h: 8,
      unit: 'short',
      stack: true,
      bars: true,
      sql: `SELECT $__timeGroupAlias(ts, $__interval), coalesce(sqlstate, '-') AS metric, count(*) AS errors
  FROM pglog.errors
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    table({
      title: 'Errors by SQLSTATE and message',
      description: 'The most frequent errors of the time range, with their message (first 500 characters) and when they were last seen.',
      w: 12,
      h: 8,
      sql: `SELECT sqlstate, severity, left(message, 500) AS message, count(*) AS count, count(DISTINCT target) AS targets, max(ts) AS last_seen
  FROM pglog.errors
 WHERE ${inWindow()}
 GROUP BY sqlstate, severity, left(message, 500)
 ORDER BY count DESC, last_seen DESC
 LIMIT 50`,
      fields: units({ last_seen: 'dateTimeAsIso' }),
    }),
  ],
};

export const lockWaits: Section = {
  title: 'Lock waits and deadlocks',
  panels: [
    timeseries({
      title: 'Longest lock wait by lock type (log)',
      description:
        'log_lock_waits: the longest wait logged per interval ("still waiting" after deadlock_timeout, then "acquired" with the whole wait), by lock type.',
      w: 8,
      h: 8,
      unit: 'ms',
      sql: `SELECT $__timeGroupAlias(ts, $__interval), coalesce(lock_type, '-') AS metric, max(wait_ms) AS max_wait_ms
  FROM pglog.lock_waits
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    timeseries({
      title: 'Deadlocks (pg_stat_database)',
      description: 'Deadlocks counted by pg_stat_database between the SQL snapshots (spec.collect.databases), per target.',
      w: 8,
      h: 8,
      unit: 'short',
      bars: true,
      sql: `SELECT $__timeGroupAlias(ts, $__interval), target AS metric, sum(deadlocks) AS deadlocks
  FROM pglog.database_stats
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    table({
      title: 'Lock waits by lock type',
      description:
        'Per target, database and lock type: lock-wait lines, waits that ended acquired, their total wait (acquired lines carry the whole wait, so none is counted twice) and the longest.',
      w: 8,
      h: 8,
      sql: `SELECT target, database, lock_type,
       count(*) AS lines,
       count(*) FILTER (WHERE acquired) AS acquired,
       coalesce(sum(wait_ms) FILTER (WHERE acquired), 0) AS total_wait_ms,
       max(wait_ms) AS max_wait_ms
  FROM pglog.lock_waits
 WHERE ${inWindow()}
 GROUP BY target, database, lock_type
 ORDER BY total_wait_ms DESC, max_wait_ms DESC NULLS LAST
 LIMIT 50`,
      fields: units({ total_wait_ms: 'ms', max_wait_ms: 'ms' }),
    }),
  ],
};
