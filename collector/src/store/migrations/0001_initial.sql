-- pglog store, version 1: event tables partitioned by UTC day, the stable views, read
-- positions, quarantine, and the partition maintenance functions. See docs/store.md.
-- Applied by collector/src/store/migrate.ts inside its transaction: no BEGIN/COMMIT here.
-- Released migrations are never edited (migrate() compares checksums): add a new file.

CREATE SCHEMA IF NOT EXISTS pglog;

-- Event tables. Every row keeps the source log file and the byte offset of its entry, so a
-- batch can be checked against pglog.read_position_state (exactly-once).

CREATE TABLE pglog.statement_events (
  ts          timestamptz NOT NULL,
  target      text        NOT NULL,
  instance    text        NOT NULL,
  database    text,
  username    text,
  application text,
  pid         int4,
  duration_ms float8,
  fingerprint text,
  query       text        NOT NULL,   -- full text, or at least the first 1000 characters
  protocol    text,                   -- 'simple' | 'extended'
  parameters  text,
  file        text        NOT NULL,
  file_offset int8        NOT NULL
) PARTITION BY RANGE (ts);

CREATE TABLE pglog.error_events (
  ts          timestamptz NOT NULL,
  target      text        NOT NULL,
  instance    text        NOT NULL,
  database    text,
  username    text,
  severity    text        NOT NULL,
  sqlstate    text,
  message     text        NOT NULL,
  detail      text,
  hint        text,
  context     text,
  statement   text,
  fingerprint text,
  file        text        NOT NULL,
  file_offset int8        NOT NULL
) PARTITION BY RANGE (ts);

CREATE TABLE pglog.lock_wait_events (
  ts          timestamptz NOT NULL,
  target      text        NOT NULL,
  instance    text        NOT NULL,
  database    text,
  pid         int4,
  state       text        NOT NULL,   -- waiting | acquired | deadlock_avoided | deadlock_detected | failed
  lock_type   text,
  lock_mode   text,
  lock_object text,
  wait_ms     float8,
  file        text        NOT NULL,
  file_offset int8        NOT NULL
) PARTITION BY RANGE (ts);

-- Every other event kind (plan, deadlock, checkpoint, autovacuum, autoanalyze, temp_file,
-- connection, disconnection, other): common columns plus the event as jsonb.
CREATE TABLE pglog.other_events (
  ts          timestamptz NOT NULL,
  target      text        NOT NULL,
  instance    text        NOT NULL,
  kind        text        NOT NULL,
  severity    text,
  database    text,
  message     text,
  payload     jsonb,
  file        text        NOT NULL,
  file_offset int8        NOT NULL
) PARTITION BY RANGE (ts);

-- Rows whose ts falls on a day without a partition land here, never lost.
CREATE TABLE pglog.statement_events_default PARTITION OF pglog.statement_events DEFAULT;
CREATE TABLE pglog.error_events_default     PARTITION OF pglog.error_events DEFAULT;
CREATE TABLE pglog.lock_wait_events_default PARTITION OF pglog.lock_wait_events DEFAULT;
CREATE TABLE pglog.other_events_default     PARTITION OF pglog.other_events DEFAULT;

-- Indexes on the partitioned parents: every partition (present and future) gets them.
CREATE INDEX statement_events_ts_idx          ON pglog.statement_events (ts);
CREATE INDEX statement_events_fingerprint_idx ON pglog.statement_events (fingerprint, ts);
CREATE INDEX error_events_ts_idx              ON pglog.error_events (ts);
CREATE INDEX error_events_sqlstate_idx        ON pglog.error_events (sqlstate, ts);
CREATE INDEX error_events_fingerprint_idx     ON pglog.error_events (fingerprint, ts);
CREATE INDEX lock_wait_events_ts_idx          ON pglog.lock_wait_events (ts);
CREATE INDEX other_events_ts_idx              ON pglog.other_events (ts);
CREATE INDEX other_events_kind_idx            ON pglog.other_events (kind, ts);

CREATE TABLE pglog.query_templates (
  fingerprint text        PRIMARY KEY,
  normalized  text        NOT NULL,
  first_seen  timestamptz NOT NULL,
  last_seen   timestamptz NOT NULL
);

-- What has been committed from each log file: written in the same transaction as the batch.
CREATE TABLE pglog.read_position_state (
  target        text        NOT NULL,
  instance      text        NOT NULL,
  file          text        NOT NULL,
  file_identity text,                  -- inode, or a checksum of the file's first bytes
  byte_offset   int8        NOT NULL CHECK (byte_offset >= 0),
  epoch         int8        NOT NULL,  -- assignment fencing token
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (target, instance)
);

-- Entries the store refused (bad encoding, values out of range ...), kept for inspection.
CREATE TABLE pglog.quarantine (
  ts          timestamptz NOT NULL DEFAULT now(),
  target      text        NOT NULL,
  instance    text        NOT NULL,
  file        text,
  file_offset int8,
  reason      text        NOT NULL,
  "row"       jsonb
);
CREATE INDEX quarantine_ts_idx ON pglog.quarantine (ts);

-- The stable interface (design §6): columns may be added, never removed or renamed.

CREATE VIEW pglog.statements AS
  SELECT ts, target, instance, database, username, application, pid, duration_ms, fingerprint, query
  FROM pglog.statement_events;

CREATE VIEW pglog.errors AS
  SELECT ts, target, instance, database, username, severity, sqlstate, message, detail, hint, statement
  FROM pglog.error_events;

CREATE VIEW pglog.lock_waits AS
  SELECT ts, target, instance, database, pid, lock_type, wait_ms, state = 'acquired' AS acquired
  FROM pglog.lock_wait_events;

CREATE VIEW pglog.read_positions AS
  SELECT target, instance, file, byte_offset AS "offset", updated_at
  FROM pglog.read_position_state;

-- Partition maintenance. Partitions cover one UTC day: <table>_pYYYYMMDD holds
-- [day 00:00 UTC, day+1 00:00 UTC). Both functions run with DateStyle ISO and TimeZone UTC,
-- so the bounds they write and read back do not depend on the caller's session settings.

CREATE FUNCTION pglog.partitioned_tables() RETURNS SETOF text
LANGUAGE sql IMMUTABLE AS $$
  VALUES ('statement_events'), ('error_events'), ('lock_wait_events'), ('other_events')
$$;

-- Creates the missing daily partitions for days from_day .. from_day + days - 1 for every
-- event table; returns the names created. Idempotent. Rows of those days that already sit in
-- the DEFAULT partition are moved into the new partition.
CREATE FUNCTION pglog.ensure_partitions(from_day date, days int) RETURNS SETOF text
LANGUAGE plpgsql SET datestyle = 'ISO, YMD' SET timezone = 'UTC' AS $$
DECLARE
  tbl  text;
  d    date;
  part text;
  lo   timestamptz;
  hi   timestamptz;
  moved boolean;
BEGIN
  IF days IS NULL OR days < 0 THEN
    RAISE EXCEPTION 'pglog.ensure_partitions: days must be >= 0, got %', days;
  END IF;
  FOR tbl IN SELECT pglog.partitioned_tables() LOOP
    FOR i IN 0 .. days - 1 LOOP
      d := from_day + i;
      part := format('%s_p%s', tbl, to_char(d, 'YYYYMMDD'));
      CONTINUE WHEN to_regclass(format('pglog.%I', part)) IS NOT NULL;
      lo := d::timestamp AT TIME ZONE 'UTC';
      hi := (d + 1)::timestamp AT TIME ZONE 'UTC';
      EXECUTE format('SELECT EXISTS (SELECT 1 FROM pglog.%I WHERE ts >= $1 AND ts < $2)', tbl || '_default')
        INTO moved USING lo, hi;
      IF moved THEN
        -- Attaching a partition whose range has rows in DEFAULT fails: move them first.
        EXECUTE format('CREATE TABLE pglog.%I (LIKE pglog.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, tbl);
        EXECUTE format('WITH m AS (DELETE FROM pglog.%I WHERE ts >= $1 AND ts < $2 RETURNING *) INSERT INTO pglog.%I SELECT * FROM m',
                       tbl || '_default', part) USING lo, hi;
        EXECUTE format('ALTER TABLE pglog.%I ATTACH PARTITION pglog.%I FOR VALUES FROM (%L) TO (%L)', tbl, part, lo, hi);
      ELSE
        EXECUTE format('CREATE TABLE pglog.%I PARTITION OF pglog.%I FOR VALUES FROM (%L) TO (%L)', part, tbl, lo, hi);
      END IF;
      RETURN NEXT part;
    END LOOP;
  END LOOP;
END
$$;

-- Retention: drops every daily partition that ends on or before day 00:00 UTC, and deletes
-- older rows from the DEFAULT partitions; returns the names of the dropped partitions.
CREATE FUNCTION pglog.drop_partitions_before(day date) RETURNS SETOF text
LANGUAGE plpgsql SET datestyle = 'ISO, YMD' SET timezone = 'UTC' AS $$
DECLARE
  tbl    text;
  part   text;
  upper_ts timestamptz;
  cutoff timestamptz := day::timestamp AT TIME ZONE 'UTC';
BEGIN
  IF day IS NULL THEN
    RAISE EXCEPTION 'pglog.drop_partitions_before: day must not be null';
  END IF;
  FOR tbl IN SELECT pglog.partitioned_tables() LOOP
    FOR part, upper_ts IN
      SELECT c.relname,
             (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']*)''\)'))[1]::timestamptz
      FROM pg_inherits i
      JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = format('pglog.%I', tbl)::regclass
        AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
      ORDER BY c.relname
    LOOP
      IF upper_ts <= cutoff THEN
        EXECUTE format('DROP TABLE pglog.%I', part);
        RETURN NEXT part;
      END IF;
    END LOOP;
    EXECUTE format('DELETE FROM pglog.%I WHERE ts < $1', tbl || '_default') USING cutoff;
  END LOOP;
END
$$;
