// The store dashboard's panels on the server's own work, from the event views of store version 4
// (docs/store.md, "Event views"): deadlocks as logged, checkpoints, autovacuum and autoanalyze
// per table, temporary files, connections and sessions. Checkpoints have no database: they are
// filtered by target only.
import { type Section, table, timeseries, units } from './grafana.ts';
import { byTarget, inWindow } from './store-filters.ts';

export const deadlocks: Section = {
  title: 'Deadlocks (log)',
  panels: [
    timeseries({
      title: 'Deadlocks detected, per target',
      description: 'Deadlocks the servers logged ("deadlock detected"), per interval and target.',
      w: 8,
      h: 8,
      unit: 'short',
      bars: true,
      sql: `SELECT $__timeGroupAlias(ts, $__interval), target AS metric, count(*) AS deadlocks
  FROM pglog.deadlocks
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    table({
      title: 'Deadlocks',
      description: 'The newest deadlocks: the statement that was cancelled, and the processes of the cycle with their locks and queries.',
      w: 16,
      h: 8,
      sql: `SELECT ts, target, instance, database, pid, left(statement, 300) AS statement, left(processes::text, 1000) AS processes
  FROM pglog.deadlocks
 WHERE ${inWindow()}
 ORDER BY ts DESC
 LIMIT 50`,
      fields: units({ ts: 'dateTimeAsIso' }),
    }),
  ],
};

export const checkpoints: Section = {
  title: 'Checkpoints',
  panels: [
    timeseries({
      title: 'Checkpoint write and sync time',
      description: 'log_checkpoints: the longest write, sync and total time of the checkpoints (and restartpoints) completed per interval.',
      w: 8,
      h: 8,
      unit: 's',
      sql: `SELECT $__timeGroupAlias(ts, $__interval), max(write_s) AS write_s, max(sync_s) AS sync_s, max(total_s) AS total_s
  FROM pglog.checkpoints
 WHERE $__timeFilter(ts) AND ${byTarget()} AND phase = 'complete'
 GROUP BY 1
 ORDER BY 1`,
    }),
    timeseries({
      title: 'Checkpoint buffers and WAL files',
      description: 'Buffers written and WAL files added, removed and recycled by the checkpoints completed per interval.',
      w: 8,
      h: 8,
      unit: 'short',
      sql: `SELECT $__timeGroupAlias(ts, $__interval), sum(buffers_written) AS buffers_written,
       sum(wal_added) AS wal_added, sum(wal_removed) AS wal_removed, sum(wal_recycled) AS wal_recycled
  FROM pglog.checkpoints
 WHERE $__timeFilter(ts) AND ${byTarget()} AND phase = 'complete'
 GROUP BY 1
 ORDER BY 1`,
    }),
    table({
      title: 'Checkpoints',
      description: 'The newest completed checkpoints and restartpoints with their WAL, distance and write/sync times.',
      w: 8,
      h: 8,
      sql: `SELECT ts, target, instance, checkpoint_kind, buffers_written, buffers_pct, wal_added, wal_removed, wal_recycled,
       write_s, sync_s, total_s, longest_sync_s, distance_kb
  FROM pglog.checkpoints
 WHERE $__timeFilter(ts) AND ${byTarget()} AND phase = 'complete'
 ORDER BY ts DESC
 LIMIT 50`,
      fields: units({ ts: 'dateTimeAsIso', write_s: 's', sync_s: 's', total_s: 's', longest_sync_s: 's', distance_kb: 'deckbytes' }),
    }),
  ],
};

export const maintenance: Section = {
  title: 'Autovacuum and autoanalyze',
  panels: [
    timeseries({
      title: 'Autovacuum and autoanalyze runs',
      description: 'Tables processed by autovacuum and autoanalyze per interval (log_autovacuum_min_duration).',
      w: 8,
      h: 9,
      unit: 'short',
      bars: true,
      stack: true,
      sql: `SELECT $__timeGroupAlias(ts, $__interval), kind AS metric, count(*) AS runs
  FROM pglog.maintenance
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    table({
      title: 'Autovacuum and autoanalyze per table',
      description:
        'Per table: automatic vacuums and analyzes, their time, the tuples and pages vacuum removed, the WAL it wrote, and whether one was to prevent wraparound.',
      w: 16,
      h: 9,
      sql: `SELECT target, relation,
       count(*) FILTER (WHERE kind = 'autovacuum') AS vacuums,
       count(*) FILTER (WHERE kind = 'autoanalyze') AS analyzes,
       sum(elapsed_s) AS total_s,
       max(elapsed_s) AS max_s,
       sum(tuples_removed) AS tuples_removed,
       sum(pages_removed) AS pages_removed,
       sum(wal_bytes) AS wal_bytes,
       bool_or(wraparound) AS wraparound,
       max(ts) AS last_run
  FROM pglog.maintenance
 WHERE ${inWindow()}
 GROUP BY target, relation
 ORDER BY total_s DESC NULLS LAST, count(*) DESC
 LIMIT 50`,
      fields: units({ total_s: 's', max_s: 's', wal_bytes: 'bytes', last_run: 'dateTimeAsIso' }),
    }),
  ],
};

export const tempFiles: Section = {
  title: 'Temporary files',
  panels: [
    timeseries({
      title: 'Temporary file bytes, per target',
      description: 'log_temp_files: bytes of the temporary files removed per interval (queries that spilled past work_mem), by target.',
      w: 8,
      h: 8,
      unit: 'bytes',
      bars: true,
      stack: true,
      sql: `SELECT $__timeGroupAlias(ts, $__interval), target AS metric, sum(size_bytes) AS bytes
  FROM pglog.temp_files
 WHERE ${inWindow()}
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    table({
      title: 'Temporary files by template',
      description: 'Per query template: temporary files, their total and largest size, and one statement that made them, largest total first.',
      w: 16,
      h: 8,
      sql: `SELECT fingerprint, count(*) AS files, sum(size_bytes) AS total_bytes, max(size_bytes) AS max_bytes,
       count(DISTINCT target) AS targets, min(left(statement, 300)) AS statement
  FROM pglog.temp_files
 WHERE ${inWindow()}
 GROUP BY fingerprint
 ORDER BY total_bytes DESC NULLS LAST
 LIMIT 50`,
      fields: units({ total_bytes: 'bytes', max_bytes: 'bytes' }),
    }),
  ],
};

export const connections: Section = {
  title: 'Connections and sessions (log)',
  panels: [
    timeseries({
      title: 'Connections per second, per target',
      description: 'log_connections: sessions authorized per second (each logs "connection authorized" once), by target.',
      w: 8,
      h: 8,
      unit: 'short',
      sql: `SELECT $__timeGroupAlias(ts, $__interval), target AS metric, count(*) / ($__interval_ms / 1000.0) AS connections_per_s
  FROM pglog.sessions
 WHERE ${inWindow()} AND event = 'connection' AND phase = 'authorized'
 GROUP BY 1, 2
 ORDER BY 1`,
    }),
    timeseries({
      title: 'Session length p50 / p95',
      description: 'log_disconnections: the length of the sessions that ended in each interval.',
      w: 8,
      h: 8,
      unit: 'ms',
      sql: `SELECT $__timeGroupAlias(ts, $__interval),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY session_ms) AS p50,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY session_ms) AS p95
  FROM pglog.sessions
 WHERE ${inWindow()} AND event = 'disconnection' AND session_ms IS NOT NULL
 GROUP BY 1
 ORDER BY 1`,
    }),
    table({
      title: 'Sessions by database and user',
      description: 'Sessions authorized and ended over the time range, and the mean and longest length of those that ended.',
      w: 8,
      h: 8,
      sql: `SELECT target, database, username,
       count(*) FILTER (WHERE event = 'connection' AND phase = 'authorized') AS connections,
       count(*) FILTER (WHERE event = 'disconnection') AS disconnections,
       avg(session_ms) AS mean_session_ms,
       max(session_ms) AS max_session_ms
  FROM pglog.sessions
 WHERE ${inWindow()}
 GROUP BY target, database, username
 ORDER BY connections DESC, disconnections DESC
 LIMIT 50`,
      fields: units({ mean_session_ms: 'ms', max_session_ms: 'ms' }),
    }),
  ],
};
