# shellcheck shell=bash
# loggen, sourced by generate.sh: the test scenario. Two runs (A, B), each on a fresh cluster
# with its own log_line_prefix: setup, load (pgbench, scripted psql sessions, errors, lock
# waits, a deadlock, failed connections, checkpoints, autovacuum), then the independent counts
# read from the server. lib/verify.sh checks the logs against them and writes the manifest.

# test_mode: both runs, then DIR's manifest.json (in $STAGE).
test_mode() {
  scenario_run A '%m [%p] %q%u@%d '
  scenario_run B '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h,e=%e,c=%c,x=%x,v=%v '
  {
    echo "{"
    echo "  \"generator\": \"scripts/loggen/generate.sh\","
    echo "  \"generator_hash\": \"$GEN_HASH\","
    echo "  \"postgres_version\": $(jstr "$PG_VERSION"),"
    echo "  \"created_at\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
    echo "  \"mode\": \"test\","
    echo "  \"runs\": {"
    printf '    "A": '; cat "$STAGE/A.manifest.json"; echo "    ,"
    printf '    "B": '; cat "$STAGE/B.manifest.json"
    echo "  }"
    echo "}"
  } >"$STAGE/manifest.json"
  rm -f "$STAGE/A.manifest.json" "$STAGE/B.manifest.json"
}

# scenario_run NAME LOG_LINE_PREFIX: one run = one cluster, one log_line_prefix.
scenario_run() {
  local name=$1 prefix=$2
  local t0=$SECONDS
  # The run's facts, shared with the steps below through bash's dynamic scoping (a function
  # sees and sets the locals of its callers): set by scenario_setup, scenario_await_autovacuum,
  # scenario_read_counts and verify_run; read by verify_run and write_run_manifest.
  local init_stmts=0 av_tables=() pgss_rows="" dealloc="" stat_rows="" ckpt_req=""
  local total_pgss=0 total_known=0 n_stderr="" n_csv="" n_json="" conn_r="" conn_a="" conn_d="" conn_apps=""
  declare -A PGSS=()
  RUN_NAME=$name
  say "run $name: starting PostgreSQL (log_line_prefix '$prefix')"
  reset_counts
  start_cluster "$name" "$prefix" 'stderr,csvlog,jsonlog'
  scenario_bookkeeping
  scenario_setup
  scenario_load
  scenario_await_autovacuum
  scenario_read_counts
  stop_cluster
  say "run $name: server stopped after $((SECONDS - t0)) s; verifying"
  verify_run
  write_run_manifest
  say "run $name: ok: $total_pgss statement executions, $(du -sh "$STAGE/$name" | cut -f1) of logs, $((SECONDS - t0)) s"
}

# Bookkeeping before the counted part: neither logged (log_min_duration_statement = -1 in
# these sessions) nor counted (pg_stat_statements is reset afterwards).
scenario_bookkeeping() {
  : >"$RUN_DIR/connections.txt"
  conn loggen_admin
  pg env PGOPTIONS='-c log_min_duration_statement=-1' PGAPPNAME=loggen_admin "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 \
    -U postgres -d postgres >/dev/null </dev/null \
    -c 'CREATE ROLE loggen_admin LOGIN SUPERUSER' \
    -c 'ALTER ROLE loggen_admin SET log_min_duration_statement = -1' \
    -c 'CREATE ROLE app LOGIN' \
    -c "CREATE ROLE badpass LOGIN PASSWORD 'loggen-secret'" \
    -c 'CREATE EXTENSION pg_stat_statements' || die "bookkeeping setup failed"
  admin postgres -c 'SELECT pg_stat_statements_reset()' -c "SELECT pg_stat_reset_shared('bgwriter')" >/dev/null
}

# ---- setup (autovacuum still off, so no DDL ever waits for an autovacuum worker) ----
scenario_setup() {
  session setup_dbs postgres postgres loggen_setup
  ok 'CREATE DATABASE bench OWNER app;'
  ok "CREATE DATABASE cyr_utf8 OWNER app TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';"
  ok "CREATE DATABASE cyr_win1251 OWNER app TEMPLATE template0 ENCODING 'WIN1251' LOCALE 'C';"
  ok "CREATE DATABASE cyr_koi8r OWNER app TEMPLATE template0 ENCODING 'KOI8R' LOCALE 'C';"
  run_session setup_dbs

  say "run $name: pgbench -i -s $PGBENCH_SCALE"
  local init_out="$RUN_DIR/pgbench-init.out"
  conn pgbench_init
  pg env PGAPPNAME=pgbench_init "$PGBIN/pgbench" -i -s "$PGBENCH_SCALE" -U app bench >"$init_out" 2>&1 </dev/null \
    || { cat "$init_out" >&2; die "pgbench -i failed"; }
  # pgbench 15 -i (steps dtgvp) sends exactly these top-level statements: drop tables (1),
  # create 4 tables (4), begin + truncate (2), one INSERT per branch and per teller (11 per
  # scale unit), COPY pgbench_accounts + commit (2), vacuum analyze 4 tables (4), 3 primary
  # keys (3).
  init_stmts=$((16 + 11 * PGBENCH_SCALE))
  STMTS[bench]=$(( ${STMTS[bench]:-0} + init_stmts ))

  session setup_bench bench app loggen_setup
  ok 'CREATE TABLE av_target (id integer PRIMARY KEY, payload text NOT NULL, n integer NOT NULL DEFAULT 0);'
  ok 'INSERT INTO av_target (id, payload) SELECT g, md5(g::text) FROM generate_series(1, 2000) AS g;'
  ok 'CREATE TABLE lw_rows (id integer PRIMARY KEY, v integer NOT NULL) WITH (autovacuum_enabled = off);'
  ok 'INSERT INTO lw_rows (id, v) VALUES (1, 0), (2, 0);'
  ok 'CREATE TABLE lw_table (id integer PRIMARY KEY, v integer NOT NULL) WITH (autovacuum_enabled = off);'
  ok 'INSERT INTO lw_table (id, v) VALUES (1, 0);'
  ok 'CREATE TABLE dl (id integer PRIMARY KEY, v integer NOT NULL) WITH (autovacuum_enabled = off);'
  ok 'INSERT INTO dl (id, v) VALUES (1, 0), (2, 0);'
  ok 'CREATE TABLE spill_src (id integer NOT NULL, payload text NOT NULL) WITH (autovacuum_enabled = off);'
  ok 'INSERT INTO spill_src (id, payload) SELECT g, md5(g::text) FROM generate_series(1, 30000) AS g;'
  run_session setup_bench
  local db
  for db in "${CYR_DBS[@]}"; do cyr_setup_session "$db"; run_session "setup_$db"; done
}

# ---- load: autovacuum on (its reload shows up in the log) ----
scenario_load() {
  local db
  admin postgres -c 'ALTER SYSTEM SET autovacuum = on' -c 'SELECT pg_reload_conf()' >/dev/null

  session checkpoint1 postgres postgres psql_admin
  ok 'CHECKPOINT;'; CHECKPOINTS=$((CHECKPOINTS + 1))
  run_session checkpoint1

  say "run $name: pgbench simple protocol (background) + scripted sessions"
  pgbench_account bench simple 4 350 7 tpcb-partitioned.pgbench -s "$PGBENCH_SCALE"
  pgbench_exec bench simple 4 350 7 tpcb-partitioned.pgbench -s "$PGBENCH_SCALE" &
  local bench_pid=$!
  BG_PIDS+=("$bench_pid")

  session errors bench app psql_errors
  ok 'SELECT count(*) FROM pgbench_branches;'
  err 42601 'SELEC abalance FROM pgbench_accounts WHERE aid = 1;'
  err 23505 'INSERT INTO lw_table (id, v) VALUES (1, 42);'
  err 22012 'SELECT 1 / 0 AS ratio;'
  err 42P01 'SELECT * FROM no_such_table;'
  err 42703 'SELECT abalanse FROM pgbench_accounts WHERE aid = 1;'
  err 42883 "SELECT pg_sleep('soon', 1);"
  warn 25P01 'COMMIT;'
  ok 'BEGIN;'
  err 23505 'INSERT INTO lw_table (id, v) VALUES (1, 7);'
  err 25P02 'SELECT v FROM lw_table WHERE id = 1;'
  ok 'ROLLBACK;'
  ok <<'SQL'
SELECT a.aid, a.abalance, t.tbalance
FROM pgbench_accounts AS a
JOIN pgbench_tellers AS t ON t.bid = a.bid
WHERE a.aid IN (1, 2, 3)
ORDER BY a.aid, t.tid
LIMIT 5;
SQL
  run_session errors

  session explain_text bench postgres psql_explain
  ok 'SET auto_explain.log_min_duration = 0;'
  ok "SET auto_explain.log_format = 'text';"
  ok 'SET auto_explain.log_analyze = on;'
  plan text 'SELECT aid, abalance FROM pgbench_accounts WHERE aid BETWEEN 1 AND 5 ORDER BY aid;'
  plan text 'UPDATE av_target SET n = n + 1 WHERE id = 1;'
  plan text 'SELECT b.bid, count(*) FROM pgbench_branches AS b JOIN pgbench_tellers AS t ON t.bid = b.bid GROUP BY b.bid ORDER BY b.bid;'
  run_session explain_text

  session explain_json bench postgres psql_explain
  ok 'SET auto_explain.log_min_duration = 0;'
  ok "SET auto_explain.log_format = 'json';"
  plan json 'SELECT tid, tbalance FROM pgbench_tellers WHERE bid = 1 ORDER BY tid;'
  plan json 'SELECT count(*) FROM pgbench_history;'
  run_session explain_json

  session explain_text_cyr cyr_win1251 postgres psql_explain
  ok 'SET auto_explain.log_min_duration = 0;'
  ok "SET auto_explain.log_format = 'text';"
  plan text "SELECT \"имя\", \"город\" FROM \"клиенты\" WHERE \"имя\" = 'Иван Петров';"
  run_session explain_text_cyr

  session explain_json_cyr cyr_koi8r postgres psql_explain
  ok 'SET auto_explain.log_min_duration = 0;'
  ok "SET auto_explain.log_format = 'json';"
  plan json "SELECT \"имя\", \"город\" FROM \"клиенты\" WHERE \"имя\" = 'Иван Петров';"
  run_session explain_json_cyr

  session spill bench app psql_spill
  ok "SET work_mem = '64kB';"
  ok 'SELECT id, payload FROM spill_src ORDER BY payload DESC OFFSET 29990;'
  TEMP_FILES=$((TEMP_FILES + 1))
  ok 'RESET work_mem;'
  run_session spill

  for db in "${CYR_DBS[@]}"; do cyr_load_session "$db"; run_session "load_$db"; done

  scenario_lock_waits

  # Failed connections (FATAL): unknown database, wrong password.
  pg env PGAPPNAME=psql_fatal "$PGBIN/psql" -X -w -U app -d no_such_db -c 'SELECT 1' >/dev/null 2>&1 </dev/null \
    && die "connecting to no_such_db unexpectedly worked"
  FATALS[3D000]=$(( ${FATALS[3D000]:-0} + 1 )); ERRS_DB[no_such_db/3D000]=1
  conn psql_fatal 1 1 0  # received and authorized, then FATAL: no disconnection entry
  pg env PGAPPNAME=psql_fatal PGPASSWORD=wrong-password "$PGBIN/psql" -X -w -U badpass -d bench -c 'SELECT 1' >/dev/null 2>&1 </dev/null \
    && die "wrong password unexpectedly accepted"
  FATALS[28P01]=$(( ${FATALS[28P01]:-0} + 1 )); ERRS_DB[bench/28P01]=1
  conn psql_fatal 1 0 0  # received only

  # Many updates: autovacuum + autoanalyze on av_target.
  session av_updates bench app psql_updates
  ok 'UPDATE av_target SET n = n + 1;'
  ok 'UPDATE av_target SET n = n + 1 WHERE id % 2 = 0;'
  ok 'UPDATE av_target SET n = n + 1;'
  run_session av_updates

  wait "$bench_pid" || die "pgbench (simple protocol) failed"
  BG_PIDS=()

  session checkpoint2 postgres postgres psql_admin
  ok 'CHECKPOINT;'; CHECKPOINTS=$((CHECKPOINTS + 1))
  run_session checkpoint2

  say "run $name: pgbench extended / prepared / connect-per-transaction / Cyrillic"
  pgbench_run bench extended 4 350 7 tpcb-partitioned.pgbench -s "$PGBENCH_SCALE"
  # -M prepared runs a script without BEGIN/END: PostgreSQL 15's pg_stat_statements counts a
  # utility statement executed from a protocol-level prepared statement only once per session.
  pgbench_run bench prepared 2 150 2 prepared.pgbench -s "$PGBENCH_SCALE"
  pgbench_run bench simple 2 25 7 tpcb-partitioned.pgbench -s "$PGBENCH_SCALE" -C
  for db in "${CYR_DBS[@]}"; do
    pgbench_run "$db" extended 2 25 2 cyrillic.pgbench -D 'who=Иван Петров'
  done

  session checkpoint3 postgres postgres psql_admin
  ok 'CHECKPOINT;'; CHECKPOINTS=$((CHECKPOINTS + 1))
  run_session checkpoint3
}

# Two lock waits and a deadlock, each a pair of sessions running at the same time.
scenario_lock_waits() {
  say "run $name: lock waits and a deadlock"
  # Lock wait 1: a row lock (waits for the holder's transaction id).
  session lw1_holder bench app lw1_holder
  ok 'BEGIN;'
  ok 'UPDATE lw_rows SET v = v + 1 WHERE id = 1;'
  wait_until lw1-holder "EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'lw1_waiter' AND wait_event_type = 'Lock')"
  ok 'SELECT pg_sleep(0.4);'
  ok 'COMMIT;'
  session lw1_waiter bench app lw1_waiter
  wait_until lw1-waiter "EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'lw1_holder' AND query LIKE '%loggen:lw1-holder%')"
  ok 'UPDATE lw_rows SET v = v + 10 WHERE id = 1;'
  LOCK_PAIRS=$((LOCK_PAIRS + 1))
  run_session_bg lw1_holder; run_session_bg lw1_waiter; wait_bg

  # Lock wait 2: a relation lock.
  session lw2_holder bench app lw2_holder
  ok 'BEGIN;'
  ok 'LOCK TABLE lw_table IN ACCESS EXCLUSIVE MODE;'
  wait_until lw2-holder "EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'lw2_waiter' AND wait_event_type = 'Lock')"
  ok 'SELECT pg_sleep(0.4);'
  ok 'COMMIT;'
  session lw2_waiter bench app lw2_waiter
  wait_until lw2-waiter "EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'lw2_holder' AND query LIKE '%loggen:lw2-holder%')"
  ok 'SELECT count(*) FROM lw_table;'
  LOCK_PAIRS=$((LOCK_PAIRS + 1))
  run_session_bg lw2_holder; run_session_bg lw2_waiter; wait_bg

  # Deadlock: X waits first (and logs "still waiting"), Y closes the cycle 0.4 s later and is
  # the victim (its own deadlock check finds the cycle); X then logs "acquired".
  session dl_x bench app dl_x
  ok 'BEGIN;'
  ok 'UPDATE dl SET v = v + 1 WHERE id = 1;'
  wait_until dl-x "EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'dl_y' AND query LIKE '%loggen:dl-y%')"
  ok 'UPDATE dl SET v = v + 1 WHERE id = 2;'
  ok 'COMMIT;'
  session dl_y bench app dl_y
  ok 'BEGIN;'
  ok 'UPDATE dl SET v = v + 100 WHERE id = 2;'
  wait_until dl-y "EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'dl_x' AND wait_event_type = 'Lock')"
  ok 'SELECT pg_sleep(0.4);'
  err 40P01 'UPDATE dl SET v = v + 100 WHERE id = 1;'
  ok 'COMMIT;'
  DEADLOCKS=$((DEADLOCKS + 1)); LOCK_PAIRS=$((LOCK_PAIRS + 1))
  run_session_bg dl_x; run_session_bg dl_y; wait_bg
}

scenario_await_autovacuum() {
  local db
  say "run $name: waiting for autovacuum and autoanalyze"
  av_tables=("bench.public.av_target")
  admin bench -c "DO \$\$ DECLARE i int := 0; BEGIN LOOP PERFORM pg_stat_clear_snapshot(); EXIT WHEN (SELECT autovacuum_count > 0 AND autoanalyze_count > 0 FROM pg_stat_user_tables WHERE relid = 'av_target'::regclass); i := i + 1; IF i > 1200 THEN RAISE EXCEPTION 'autovacuum did not process av_target within 120 s'; END IF; PERFORM pg_sleep(0.1); END LOOP; END \$\$" \
    || die "autovacuum/autoanalyze did not run on bench.av_target"
  for db in "${CYR_DBS[@]}"; do
    admin "$db" -c "DO \$\$ DECLARE i int := 0; BEGIN LOOP PERFORM pg_stat_clear_snapshot(); EXIT WHEN (SELECT autovacuum_count > 0 AND autoanalyze_count > 0 FROM pg_stat_user_tables WHERE relid = '\"клиенты\"'::regclass); i := i + 1; IF i > 1200 THEN RAISE EXCEPTION 'autovacuum did not process клиенты within 120 s'; END IF; PERFORM pg_sleep(0.1); END LOOP; END \$\$" \
      || die "autovacuum/autoanalyze did not run on $db.клиенты"
    av_tables+=("$db.public.клиенты")
  done
}

# ---- read the independent counts (admin: not logged, excluded by userid) ----
scenario_read_counts() {
  pgss_rows=$(admin postgres -F '|' -c "
    SELECT d.datname, coalesce(sum(s.calls), 0)
    FROM pg_database AS d
    LEFT JOIN pg_stat_statements AS s ON s.dbid = d.oid AND s.toplevel AND s.userid <> 'loggen_admin'::regrole
    WHERE NOT d.datistemplate
    GROUP BY d.datname ORDER BY d.datname")
  dealloc=$(admin postgres -c 'SELECT dealloc FROM pg_stat_statements_info')
  [ "$dealloc" = 0 ] || die "pg_stat_statements evicted entries (dealloc=$dealloc): counts would be wrong"
  # (backend statistics were flushed when the load's sessions ended, seconds ago)
  stat_rows=$(admin postgres -F '|' -c "SELECT sum(deadlocks), sum(temp_files) FROM pg_stat_database")
  ckpt_req=$(admin postgres -c 'SELECT checkpoints_req FROM pg_stat_bgwriter')
}
