# shellcheck shell=bash
# loggen, sourced by generate.sh: bench mode, one big stderr log (DIR/stderr/postgresql.log of
# at least --bench-mb MB) and its manifest.json.

# ---------------------------------------------------------------------------------------------
# Bench mode: one big stderr log
# ---------------------------------------------------------------------------------------------
bench_mode() {
  local target=$((BENCH_MB * 1024 * 1024))
  local budget=${PGLOG_BENCH_REAL_SECONDS:-300}
  local t0=$SECONDS
  say "bench: generating >= $BENCH_MB MB of stderr log (real load for up to ${budget}s, then copies)"
  reset_counts
  start_cluster bench '%m [%p] %q%u@%d ' stderr "auto_explain.log_min_duration = 0
auto_explain.sample_rate = 0.002
auto_explain.log_format = 'text'
autovacuum = on"
  pg env PGOPTIONS='-c log_min_duration_statement=-1' "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -U postgres -d postgres >/dev/null </dev/null \
    -c 'CREATE ROLE app LOGIN' -c 'CREATE DATABASE bench OWNER app' || die "bench setup failed"
  pg env PGAPPNAME=pgbench_init "$PGBIN/pgbench" -i -s "$PGBENCH_SCALE" -U app bench >"$RUN_DIR/init.out" 2>&1 </dev/null \
    || { cat "$RUN_DIR/init.out" >&2; die "pgbench -i failed"; }
  # errors and a few plain statements next to each pgbench round
  printf '%s\n' 'SELECT * FROM no_such_table;' 'INSERT INTO pgbench_branches (bid, bbalance) VALUES (1, 0);' \
    'SELECT 1 / 0;' 'SELECT abalanse FROM pgbench_accounts WHERE aid = 1;' \
    'SELECT aid, abalance FROM pgbench_accounts WHERE aid BETWEEN 100 AND 110 ORDER BY aid;' >"$RUN_DIR/sessions/bench_noise.sql"
  SESS_DB[bench_noise]=bench; SESS_USER[bench_noise]=app; SESS_APP[bench_noise]=psql_app
  local log=$RUN_DIR/log/postgresql.log size=0 round=0 mode
  while :; do
    size=$(stat -c %s "$log")
    [ "$size" -lt "$target" ] || break
    [ $((SECONDS - t0)) -lt "$budget" ] || break
    round=$((round + 1))
    # mostly simple protocol, some extended and prepared, and connect-per-transaction rounds
    case $((round % 5)) in 1|3) mode=simple ;; 2) mode=extended ;; 4) mode=prepared ;; 0) mode=simple ;; esac
    local extra=()
    [ $((round % 5)) = 0 ] && extra=(-C)
    pg env PGAPPNAME="pgbench_$mode" "$PGBIN/pgbench" -n -U app -M "$mode" -c 4 -j 2 -T 5 "${extra[@]}" \
      -f "$HERE/tpcb-partitioned.pgbench" -s "$PGBENCH_SCALE" bench >"$RUN_DIR/round.out" 2>&1 </dev/null &
    local bp=$!; BG_PIDS+=("$bp")
    # errors, plain statements and connections next to the pgbench load
    while kill -0 "$bp" 2>/dev/null; do run_session bench_noise; sleep 0.2; done
    wait "$bp" || { cat "$RUN_DIR/round.out" >&2; die "pgbench failed in bench round $round"; }
    BG_PIDS=()
    size=$(stat -c %s "$log")
    say "bench: round $round ($mode${extra[*]:+ -C}): $((size / 1048576)) MB real log after $((SECONDS - t0)) s"
  done
  stop_cluster
  local real; real=$(stat -c %s "$log")
  mkdir -p "$STAGE/stderr"
  cp "$log" "$STAGE/stderr/postgresql.log"
  chmod 0644 "$STAGE/stderr/postgresql.log"
  local copies=1
  while [ "$(stat -c %s "$STAGE/stderr/postgresql.log")" -lt "$target" ]; do
    cat "$log" >>"$STAGE/stderr/postgresql.log"; copies=$((copies + 1))
  done
  local total; total=$(stat -c %s "$STAGE/stderr/postgresql.log")
  cat >"$STAGE/manifest.json" <<EOF
{
  "generator": "scripts/loggen/generate.sh",
  "generator_hash": "$GEN_HASH",
  "postgres_version": $(jstr "$PG_VERSION"),
  "mode": "bench",
  "bench_mb": $BENCH_MB,
  "log_line_prefix": "%m [%p] %q%u@%d ",
  "file": "stderr/postgresql.log",
  "bytes": $total,
  "real_log_bytes": $real,
  "copies": $copies,
  "rounds": $round,
  "real_seconds": $((SECONDS - t0)),
  "note": "the file is the real log concatenated 'copies' times (timestamps restart at each copy) when real generation ran out of its time budget"
}
EOF
  say "bench: $((total / 1048576)) MB ($copies x $((real / 1048576)) MB real) in $((SECONDS - t0)) s"
}
