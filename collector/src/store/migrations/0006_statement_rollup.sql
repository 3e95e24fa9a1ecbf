-- pglog store, version 6: a rollup of statements per minute and template, written by the
-- collector in the same transaction as the statement rows (exactly once, like them), so the
-- report ranks templates and draws its series over a day of millions of statements without
-- reading them. See docs/store.md "Statement rollup". Applied by collector/src/store/migrate.ts
-- inside its transaction: no BEGIN/COMMIT here. Released migrations are never edited.

-- The duration histogram's bins, fixed for every row: bin 0 holds durations up to 1 µs
-- (0.001 ms), bin i >= 1 holds (0.001 * 2^((i-1)/4), 0.001 * 2^(i/4)] ms, bin 160 everything
-- above 0.001 * 2^(159/4) ms (about 9 days). A bin's value is its geometric middle, so a
-- percentile read from the histogram is within 2^(1/8) - 1 (9.1 %) of a duration in its bin.
-- collector/src/store/rollup.ts computes the same bins; ln()/ln(2) in both, so they agree.
CREATE FUNCTION pglog.duration_bin(ms float8) RETURNS int4
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT CASE WHEN ms <= 0.001 THEN 0 ELSE least(160, ceil(4 * ln(ms / 0.001) / ln(2)))::int4 END $$;

-- The duration a bin stands for (its geometric middle; bin 0: 0.001 ms).
CREATE FUNCTION pglog.duration_of_bin(bin int) RETURNS float8
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT CASE WHEN bin <= 0 THEN 0.001 ELSE 0.001 * power(2, (bin - 0.5) / 4) END $$;

-- Partial rollup rows: each committed batch appends one row per minute and key it holds
-- (no upsert: batches committing side by side never wait on each other's rows), so a
-- (bucket, key) may have many rows; readers sum them. bins/counts: the non-empty histogram
-- bins of the timed statements, ascending, and their counts.
CREATE TABLE pglog.statement_rollup_parts (
  bucket      timestamptz NOT NULL,   -- the minute (UTC) the statements' ts fall in
  target      text        NOT NULL,
  instance    text        NOT NULL,
  database    text,
  fingerprint text,
  calls       int8        NOT NULL,   -- statements, timed or not
  timed       int8        NOT NULL,   -- statements with a duration
  total_ms    float8      NOT NULL,   -- sum of the durations (0 when none is timed)
  max_ms      float8,                 -- NULL when none is timed
  bins        int4[]      NOT NULL,
  counts      int4[]      NOT NULL
);
CREATE INDEX statement_rollup_parts_bucket_idx ON pglog.statement_rollup_parts (bucket);

-- The stable view: the rows as they are (sum them per bucket and key when reading).
CREATE VIEW pglog.statement_rollup AS
  SELECT bucket, target, instance, database, fingerprint, calls, timed, total_ms, max_ms, bins, counts
  FROM pglog.statement_rollup_parts;

-- The statements stored before this version, rolled up once.
INSERT INTO pglog.statement_rollup_parts (bucket, target, instance, database, fingerprint, calls, timed, total_ms, max_ms, bins, counts)
SELECT bucket, target, instance, database, fingerprint, sum(n), sum(timed), coalesce(sum(total), 0), max(mx),
       coalesce(array_agg(bin ORDER BY bin) FILTER (WHERE bin IS NOT NULL), '{}'),
       coalesce(array_agg(timed::int4 ORDER BY bin) FILTER (WHERE bin IS NOT NULL), '{}')
  FROM (SELECT date_bin('1 minute', ts, timestamptz 'epoch') AS bucket, target, instance, database, fingerprint, pglog.duration_bin(duration_ms) AS bin,
               count(*) AS n, count(duration_ms) AS timed, sum(duration_ms) AS total, max(duration_ms) AS mx
          FROM pglog.statement_events
         GROUP BY 1, 2, 3, 4, 5, 6) per_bin
 GROUP BY bucket, target, instance, database, fingerprint;
