-- pglog store, version 4: stable views over the event kinds that other_events keeps as jsonb
-- (checkpoints, autovacuum/autoanalyze, temporary files, connections and disconnections,
-- auto_explain plans, deadlocks), so the HTML report and the store's Grafana dashboard read
-- typed columns instead of payload keys; and the indexes their window queries need.
-- See docs/store.md. Applied by collector/src/store/migrate.ts inside its transaction: no
-- BEGIN/COMMIT here. Released migrations are never edited: add a new file.
--
-- Payload numbers are read with ->> (JSON null becomes SQL NULL) and cast through float8 or
-- numeric, so a value the parser wrote as 1.0 or 1e3 never makes a view fail.

-- Checkpoints and restartpoints: one row per "starting" and per "complete" entry; the
-- complete row carries buffers, WAL files, write/sync times and the distance.
CREATE VIEW pglog.checkpoints AS
  SELECT ts, target, instance,
         payload->>'checkpoint_kind'                    AS checkpoint_kind,
         payload->>'phase'                              AS phase,
         payload->>'reason'                             AS reason,
         (payload->>'buffers_written')::numeric::int8   AS buffers_written,
         (payload->>'buffers_pct')::float8              AS buffers_pct,
         (payload->>'wal_added')::numeric::int8         AS wal_added,
         (payload->>'wal_removed')::numeric::int8       AS wal_removed,
         (payload->>'wal_recycled')::numeric::int8      AS wal_recycled,
         (payload->>'write_s')::float8                  AS write_s,
         (payload->>'sync_s')::float8                   AS sync_s,
         (payload->>'total_s')::float8                  AS total_s,
         (payload->>'sync_files')::numeric::int8        AS sync_files,
         (payload->>'longest_sync_s')::float8           AS longest_sync_s,
         (payload->>'average_sync_s')::float8           AS average_sync_s,
         (payload->>'distance_kb')::numeric::int8       AS distance_kb,
         (payload->>'estimate_kb')::numeric::int8       AS estimate_kb
  FROM pglog.other_events
  WHERE kind = 'checkpoint';

-- Automatic vacuum and analyze, one row per table processed. relation is `db.schema.table`
-- as logged; database is the log prefix's (%d), or else the relation's first part.
CREATE VIEW pglog.maintenance AS
  SELECT ts, target, instance,
         COALESCE(database, NULLIF(split_part(payload->>'table', '.', 1), '')) AS database,
         kind,                                                   -- 'autovacuum' | 'autoanalyze'
         payload->>'table'                                       AS relation,
         (payload->>'elapsed_s')::float8                         AS elapsed_s,
         (payload->>'cpu_user_s')::float8                        AS cpu_user_s,
         (payload->>'cpu_system_s')::float8                      AS cpu_system_s,
         (payload->>'buffer_hits')::numeric::int8                AS buffer_hits,
         (payload->>'buffer_misses')::numeric::int8              AS buffer_misses,
         (payload->>'buffer_dirtied')::numeric::int8             AS buffer_dirtied,
         (payload->>'read_rate_mbs')::float8                     AS read_rate_mbs,
         (payload->>'write_rate_mbs')::float8                    AS write_rate_mbs,
         COALESCE((payload->>'aggressive')::boolean, false)      AS aggressive,
         COALESCE((payload->>'wraparound')::boolean, false)      AS wraparound,
         (payload->>'index_scans')::numeric::int8                AS index_scans,
         (payload->>'pages_removed')::numeric::int8              AS pages_removed,
         (payload->>'pages_remain')::numeric::int8               AS pages_remain,
         (payload->>'pages_scanned')::numeric::int8              AS pages_scanned,
         (payload->>'tuples_removed')::numeric::int8             AS tuples_removed,
         (payload->>'tuples_remain')::numeric::int8              AS tuples_remain,
         (payload->>'tuples_dead_not_removable')::numeric::int8  AS tuples_dead_not_removable,
         (payload->>'wal_records')::numeric::int8                AS wal_records,
         (payload->>'wal_fpi')::numeric::int8                    AS wal_fpi,
         (payload->>'wal_bytes')::numeric                        AS wal_bytes
  FROM pglog.other_events
  WHERE kind IN ('autovacuum', 'autoanalyze');

-- Temporary files (log_temp_files), with the statement that made them when it was logged.
CREATE VIEW pglog.temp_files AS
  SELECT ts, target, instance, database,
         payload->>'user'                          AS username,
         (payload->>'pid')::numeric::int4          AS pid,
         payload->>'path'                          AS path,
         (payload->>'size_bytes')::numeric::int8   AS size_bytes,
         payload->>'statement'                     AS statement,
         payload->>'fingerprint'                   AS fingerprint
  FROM pglog.other_events
  WHERE kind = 'temp_file';

-- Connections (log_connections: received, authenticated, authorized, ready) and
-- disconnections (log_disconnections, with the session's length). event is the kind.
CREATE VIEW pglog.sessions AS
  SELECT ts, target, instance, database,
         kind                                      AS event,      -- 'connection' | 'disconnection'
         payload->>'phase'                         AS phase,      -- NULL for a disconnection
         payload->>'user'                          AS username,
         payload->>'application'                   AS application,
         (payload->>'pid')::numeric::int4          AS pid,
         payload->>'session_id'                    AS session_id,
         payload->>'host'                          AS host,
         payload->>'port'                          AS port,
         payload->>'identity'                      AS identity,
         payload->>'method'                        AS method,
         (payload->>'session_ms')::float8          AS session_ms  -- NULL for a connection
  FROM pglog.other_events
  WHERE kind IN ('connection', 'disconnection');

-- auto_explain plans, tied to their template and duration.
CREATE VIEW pglog.plans AS
  SELECT ts, target, instance, database,
         payload->>'user'                          AS username,
         (payload->>'pid')::numeric::int4          AS pid,
         (payload->>'duration_ms')::float8         AS duration_ms,
         payload->>'format'                        AS format,
         payload->>'fingerprint'                   AS fingerprint,
         payload->>'query'                         AS query,
         payload->>'plan'                          AS plan
  FROM pglog.other_events
  WHERE kind = 'plan';

-- Deadlocks as the server reported them: message and the processes of the cycle (jsonb array
-- of {pid, lock_mode, lock_object, blocked_by, query}).
CREATE VIEW pglog.deadlocks AS
  SELECT ts, target, instance, database,
         (payload->>'pid')::numeric::int4          AS pid,
         message,
         payload->'processes'                      AS processes,
         payload->>'statement'                     AS statement
  FROM pglog.other_events
  WHERE kind = 'deadlock';

-- Fleet-wide windows over the snapshot tables: their (target, instance, ts) indexes serve one
-- server's newest snapshots, not "every server between since and until".
CREATE INDEX blocking_samples_ts_idx ON pglog.blocking_samples (ts);
CREATE INDEX snapshot_runs_ts_idx    ON pglog.snapshot_runs (ts);

-- The extended protocol's bind parameters, so a report can show an example of a template
-- with the values it ran with (a column added at the end: CREATE OR REPLACE keeps the rest).
CREATE OR REPLACE VIEW pglog.statements AS
  SELECT ts, target, instance, database, username, application, pid, duration_ms, fingerprint, query, parameters
  FROM pglog.statement_events;
