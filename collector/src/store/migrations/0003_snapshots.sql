-- pglog store, version 3: SQL snapshots of the monitored instances (activity, blocking chains,
-- pg_stat_statements and pg_stat_database deltas) and a record of every snapshot run, failed
-- ones included. See docs/store.md and docs/snapshots.md.
-- Applied by collector/src/store/migrate.ts inside its transaction: no BEGIN/COMMIT here.
--
-- Every ts is the monitored server's statement_timestamp() of the snapshot transaction (the
-- collector's clock only for a failed run, whose server time is not known). Rows of one
-- snapshot share (target, instance, ts): that triple identifies the snapshot.

-- One row per backend of pg_stat_activity at a snapshot.
CREATE TABLE pglog.activity_samples (
  ts              timestamptz NOT NULL,
  target          text        NOT NULL,
  instance        text        NOT NULL,
  pid             int4        NOT NULL,
  leader_pid      int4,
  database        text,
  username        text,
  application     text,
  client          text,
  backend_type    text,
  state           text,
  wait_event_type text,
  wait_event      text,
  backend_start   timestamptz,
  xact_start      timestamptz,
  query_start     timestamptz,
  state_change    timestamptz,
  blocked_by      int4[]      NOT NULL DEFAULT '{}',
  fingerprint     text        NOT NULL DEFAULT '',
  query           text
) PARTITION BY RANGE (ts);

-- One row per edge of a blocking chain: pid waits for blocking_pid.
CREATE TABLE pglog.blocking_samples (
  ts                 timestamptz NOT NULL,
  target             text        NOT NULL,
  instance           text        NOT NULL,
  database           text,
  pid                int4        NOT NULL,
  blocking_pid       int4        NOT NULL,
  lock_type          text        NOT NULL,
  wait_mode          text        NOT NULL,
  held_mode          text,
  blocker_wait_mode  text,
  relation           text,
  wait_start         timestamptz,
  wait_ms            float8
) PARTITION BY RANGE (ts);

-- What changed in each pg_stat_statements entry since the previous sample (interval_s ago).
CREATE TABLE pglog.statement_deltas (
  ts                timestamptz NOT NULL,
  target            text        NOT NULL,
  instance          text        NOT NULL,
  interval_s        float8      NOT NULL,
  database          text,
  username          text,
  queryid           int8        NOT NULL,
  toplevel          bool        NOT NULL,
  fingerprint       text        NOT NULL,
  query             text        NOT NULL,
  calls             int8        NOT NULL,
  total_exec_ms     float8      NOT NULL,
  rows              int8        NOT NULL,
  shared_blks_hit   int8        NOT NULL,
  shared_blks_read  int8        NOT NULL,
  temp_blks_written int8        NOT NULL
) PARTITION BY RANGE (ts);

-- What changed in each database's pg_stat_database row since the previous sample.
CREATE TABLE pglog.database_deltas (
  ts            timestamptz NOT NULL,
  target        text        NOT NULL,
  instance      text        NOT NULL,
  interval_s    float8      NOT NULL,
  database      text        NOT NULL,
  backends      int4        NOT NULL,
  xact_commit   int8        NOT NULL,
  xact_rollback int8        NOT NULL,
  blks_read     int8        NOT NULL,
  blks_hit      int8        NOT NULL,
  tup_returned  int8        NOT NULL,
  tup_fetched   int8        NOT NULL,
  tup_inserted  int8        NOT NULL,
  tup_updated   int8        NOT NULL,
  tup_deleted   int8        NOT NULL,
  conflicts     int8        NOT NULL,
  temp_files    int8        NOT NULL,
  temp_bytes    int8        NOT NULL,
  deadlocks     int8        NOT NULL
) PARTITION BY RANGE (ts);

-- Every snapshot run: what it found, or why it failed (error_code is a PglogError code).
-- Part of the stable interface like the views below (columns may be added, none removed).
CREATE TABLE pglog.snapshot_runs (
  ts          timestamptz NOT NULL,
  target      text        NOT NULL,
  instance    text        NOT NULL,
  kind        text        NOT NULL CHECK (kind IN ('activity', 'statistics')),
  duration_ms float8      NOT NULL,
  sessions    int4        NOT NULL DEFAULT 0,
  blocked     int4        NOT NULL DEFAULT 0,
  error_code  text,
  error       text
) PARTITION BY RANGE (ts);

CREATE TABLE pglog.activity_samples_default  PARTITION OF pglog.activity_samples DEFAULT;
CREATE TABLE pglog.blocking_samples_default  PARTITION OF pglog.blocking_samples DEFAULT;
CREATE TABLE pglog.statement_deltas_default  PARTITION OF pglog.statement_deltas DEFAULT;
CREATE TABLE pglog.database_deltas_default   PARTITION OF pglog.database_deltas DEFAULT;
CREATE TABLE pglog.snapshot_runs_default     PARTITION OF pglog.snapshot_runs DEFAULT;

-- Reports read the newest snapshots of a server first.
CREATE INDEX activity_samples_target_ts_idx ON pglog.activity_samples (target, instance, ts);
CREATE INDEX blocking_samples_target_ts_idx ON pglog.blocking_samples (target, instance, ts);
CREATE INDEX snapshot_runs_target_ts_idx    ON pglog.snapshot_runs (target, instance, ts);

-- Partition maintenance and retention cover the new tables as well.
CREATE OR REPLACE FUNCTION pglog.partitioned_tables() RETURNS SETOF text
LANGUAGE sql IMMUTABLE AS $$
  VALUES ('statement_events'), ('error_events'), ('lock_wait_events'), ('other_events'),
         ('activity_samples'), ('blocking_samples'), ('statement_deltas'), ('database_deltas'), ('snapshot_runs')
$$;

-- The stable interface (design §6): columns may be added, never removed or renamed.

CREATE VIEW pglog.activity AS
  SELECT ts, target, instance, database, username, application, pid, state, wait_event_type, wait_event,
         xact_start, query_start, blocked_by, fingerprint, query,
         leader_pid, backend_type, client, backend_start, state_change
  FROM pglog.activity_samples;

CREATE VIEW pglog.blocking AS
  SELECT ts, target, instance, database, pid, blocking_pid, lock_type, wait_mode, held_mode, relation, wait_ms,
         blocker_wait_mode, wait_start
  FROM pglog.blocking_samples;

CREATE VIEW pglog.statement_stats AS
  SELECT ts, target, instance, interval_s, database, username, queryid, fingerprint, query, calls, total_exec_ms, rows
  FROM pglog.statement_deltas;

CREATE VIEW pglog.database_stats AS
  SELECT ts, target, instance, interval_s, database, backends, xact_commit, xact_rollback, blks_read, blks_hit, deadlocks, temp_bytes
  FROM pglog.database_deltas;
