-- pglog store, version 7: the store's functions resolve names in pg_catalog only, whoever calls
-- them on whatever search_path. See docs/store.md "Store roles and search_path" (security
-- review R1). Applied by collector/src/store/migrate.ts inside its transaction: no BEGIN/COMMIT
-- here. Released migrations are never edited: add a new file.
--
-- Why: a function without its own search_path resolves the names in its body on the caller's
-- path, by default "$user", public. A role that may CREATE in schema public (PUBLIC may before
-- PostgreSQL 15) could plant there a function or operator that matches a call more exactly than
-- pg_catalog's, and it ran as the caller (the store owner): public.to_char(date, text) for
-- ensure_partitions' to_char(d, 'YYYYMMDD') on a date (pg_catalog has to_char for timestamps,
-- not dates); public.<=(float8, numeric) for duration_bin's ms <= 0.001;
-- public.-(int4, numeric) for duration_of_bin's bin - 0.5. pglog's own sessions pin their
-- path too (store-connection.ts); this covers every other caller.

-- The plpgsql functions: their own path, kept with their DateStyle and TimeZone. They run once
-- per maintenance round, so switching the path on each call costs nothing that matters.
ALTER FUNCTION pglog.ensure_partitions(date, int4) SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION pglog.drop_partitions_before(date) SET search_path = pg_catalog, pg_temp;

-- The event and snapshot tables' list: called from the functions above, in a target list,
-- where a SQL function is never inlined, so a path of its own costs nothing.
ALTER FUNCTION pglog.partitioned_tables() SET search_path = pg_catalog, pg_temp;

-- The rollup's histogram bins (version 6): called once per row, e.g. for the statement rows
-- of the HTML report's edge minutes and by migration 6's backfill (which bench/report-bench.ts
-- reruns over millions of rows). No SET search_path here: it keeps the planner from inlining a
-- function and switches the path on every call. Instead every name in their bodies is
-- qualified (pg_catalog.ln, OPERATOR(pg_catalog.<=), 0.001::pg_catalog.float8), so they
-- resolve the same on any caller's path, also when inlined into the caller's query.
-- Version 6's were STRICT with a CASE, which the planner never inlines (a CASE is not strict),
-- so each call ran the body as a SQL function, planned on the caller's path: 3.8 s for a
-- million rows (PostgreSQL 15, one run on a busy machine), 5.2 s with SET search_path, 0.4 s
-- inlined. Now they are not STRICT, return NULL for NULL themselves and are inlined. The
-- values are version 6's (compared over 200,001 durations and every bin): duration_bin
-- computes in float8, duration_of_bin in numeric (its bin - 0.5 was int4 - numeric), then
-- float8, with the same casts. OPERATOR() gives every operator the same precedence: the
-- parentheses keep version 6's order.
CREATE OR REPLACE FUNCTION pglog.duration_bin(ms float8) RETURNS int4
  LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
  AS $$ SELECT CASE WHEN ms IS NULL THEN NULL::pg_catalog.int4
    WHEN ms OPERATOR(pg_catalog.<=) 0.001::pg_catalog.float8 THEN 0::pg_catalog.int4
    ELSE LEAST(160::pg_catalog.float8,
           pg_catalog.ceil((4::pg_catalog.float8 OPERATOR(pg_catalog.*) pg_catalog.ln(ms OPERATOR(pg_catalog./) 0.001::pg_catalog.float8))
                           OPERATOR(pg_catalog./) pg_catalog.ln(2::pg_catalog.float8)))::pg_catalog.int4 END $$;

CREATE OR REPLACE FUNCTION pglog.duration_of_bin(bin int4) RETURNS float8
  LANGUAGE sql IMMUTABLE CALLED ON NULL INPUT PARALLEL SAFE
  AS $$ SELECT (CASE WHEN bin IS NULL THEN NULL::pg_catalog.numeric
    WHEN bin OPERATOR(pg_catalog.<=) 0 THEN 0.001::pg_catalog.numeric
    ELSE 0.001::pg_catalog.numeric OPERATOR(pg_catalog.*)
         pg_catalog.power(2::pg_catalog.numeric, (bin::pg_catalog.numeric OPERATOR(pg_catalog.-) 0.5::pg_catalog.numeric) OPERATOR(pg_catalog./) 4::pg_catalog.numeric)
    END)::pg_catalog.float8 $$;
