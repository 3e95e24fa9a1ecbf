// The store dashboard's panels on the SQL snapshots (docs/snapshots.md): blocking episodes and
// blocked sessions, client sessions by state, and the pg_stat_database deltas (backends,
// transactions, temporary bytes). Only the stable views are read (docs/store.md).
import { blockingRootsCtes } from '@pglog/collector/report/locks-query.ts';

import { type Section, table, timeseries, units } from './grafana.ts';
import { byDatabase, byTarget, inWindow } from './store-filters.ts';

export const blocking: Section = {
  title: 'Blocking (SQL snapshots)',
  panels: [
    timeseries({
      title: 'Blocked sessions, per target',
      description: 'The most sessions waiting for a lock held by another in one snapshot (pg_blocking_pids), per interval and target.',
      w: 8,
      h: 9,
      unit: 'short',
      sql: `SELECT $__timeGroupAlias(ts, $__interval), target AS metric, max(n) AS blocked
  FROM (SELECT ts, target, instance, count(DISTINCT pid) AS n
          FROM pglog.blocking
         WHERE ${inWindow()}
         GROUP BY ts, target, instance) per_snapshot
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    table({
      title: 'Blocking episodes',
      description:
        'As `pglog report locks`: in each snapshot, each root (a blocker that waits for nobody) with the sessions below it; ' +
        "one root transaction blocking others over consecutive snapshots is one episode. Newest first; the root's user, database and statement " +
        'from the activity snapshot. With databases selected, episodes in which a waiter was in one of them.',
      w: 16,
      h: 9,
      sql: `${blockingRootsCtes(`$__timeFilter(ts) AND ${byTarget()}`, `bool_or(${byDatabase('e.database')})`)}
SELECT p.target, p.instance, p.root AS root_pid,
       min(p.ts) AS first_seen, max(p.ts) AS last_seen, count(*) AS snapshots,
       max(p.waiters) AS peak_waiters, max(p.max_wait_ms) AS max_wait_ms,
       (array_agg(a.username ORDER BY p.ts DESC))[1] AS username,
       (array_agg(a.database ORDER BY p.ts DESC))[1] AS database,
       (array_agg(a.state ORDER BY p.ts DESC))[1] AS state,
       (array_agg(left(a.query, 300) ORDER BY p.ts DESC))[1] AS root_query
  FROM per_snapshot p
  LEFT JOIN pglog.activity a
    ON a.target = p.target AND a.instance = p.instance AND a.ts = p.ts AND a.pid = p.root AND $__timeFilter(a.ts)
 GROUP BY p.target, p.instance, p.root, a.xact_start
HAVING bool_or(p.in_database)
 ORDER BY last_seen DESC, max_wait_ms DESC NULLS LAST
 LIMIT 50`,
      fields: units({ first_seen: 'dateTimeAsIso', last_seen: 'dateTimeAsIso', max_wait_ms: 'ms' }),
    }),
  ],
};

export const sessions: Section = {
  title: 'Sessions and databases (SQL snapshots)',
  panels: [
    timeseries({
      title: 'Client sessions by state',
      description: "Client backends of pg_stat_activity by state: per interval, each server's most in one snapshot, summed over the servers.",
      w: 12,
      h: 8,
      unit: 'short',
      stack: true,
      sql: `WITH per_snapshot AS (
  SELECT ts, target, instance, coalesce(state, '-') AS state, count(*) AS n
    FROM pglog.activity
   WHERE ${inWindow()} AND backend_type = 'client backend'
   GROUP BY ts, target, instance, state),
per_server AS (
  SELECT $__timeGroup(ts, $__interval) AS time, target, instance, state, max(n) AS n
    FROM per_snapshot
   GROUP BY 1, target, instance, state)
SELECT time, state AS metric, sum(n) AS sessions
  FROM per_server
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    timeseries({
      title: 'Backends per database (pg_stat_database)',
      description: 'numbackends of pg_stat_database at each statistics snapshot (spec.collect.databases): the most per interval, by target and database.',
      w: 12,
      h: 8,
      unit: 'short',
      sql: `SELECT $__timeGroupAlias(ts, $__interval), target || '/' || database AS metric, max(backends) AS backends
  FROM pglog.database_stats
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    timeseries({
      title: 'Transactions per second (pg_stat_database)',
      description: 'Commits and rollbacks counted by pg_stat_database between the statistics snapshots, per second of each interval.',
      w: 12,
      h: 8,
      unit: 'short',
      sql: `SELECT $__timeGroupAlias(ts, $__interval),
       sum(xact_commit) / ($__interval_ms / 1000.0) AS commits,
       sum(xact_rollback) / ($__interval_ms / 1000.0) AS rollbacks
  FROM pglog.database_stats
 WHERE ${inWindow()}
 GROUP BY 1
 ORDER BY 1`,
    }),
    timeseries({
      title: 'Temporary bytes written (pg_stat_database)',
      description:
        'temp_bytes of pg_stat_database between the statistics snapshots, per second of each interval, by target: queries that spilled past work_mem.',
      w: 12,
      h: 8,
      unit: 'Bps',
      sql: `SELECT $__timeGroupAlias(ts, $__interval), target AS metric, sum(temp_bytes) / ($__interval_ms / 1000.0) AS temp_bytes_per_s
  FROM pglog.database_stats
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
  ],
};
