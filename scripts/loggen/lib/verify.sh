# shellcheck shell=bash
# loggen, sourced by generate.sh: checks a test run's logs against the independent counts
# (pg_stat_statements, the load's own bookkeeping from lib/sessions.sh) and writes the run's
# part of manifest.json. Called from scenario_run (lib/scenario.sh), whose locals (name,
# prefix, init_stmts, av_tables, pgss_rows, stat_rows, ckpt_req, dealloc, PGSS, total_pgss,
# total_known, n_stderr, n_csv, n_json, conn_r, conn_a, conn_d, conn_apps) these functions
# read and set.

# check_count WHAT EXPECTED ACTUAL
check_count() {
  [ "$2" = "$3" ] || die "run $RUN_NAME: $1: expected $2, found $3 in the log"
}

# compare_severity SEVERITY EXPECTED_ARRAY JSONLOG: entries of that severity by SQLSTATE.
compare_severity() {
  local sev=$1 exp=$2 j=$3 c st
  declare -A SEEN=()
  # shellcheck disable=SC2034  # SEEN is read through jmap's nameref
  while read -r c st; do [ -n "${st:-}" ] && SEEN[$st]=$c; done < <(
    { grep -a "\"error_severity\":\"$sev\"" "$j" || true; } | { grep -a -o '"state_code":"[0-9A-Z]*"' || true; } | cut -d'"' -f4 | sort | uniq -c)
  [ "$(jmap SEEN)" = "$(jmap "$exp")" ] || die "run $RUN_NAME: $sev by SQLSTATE: expected $(jmap "$exp"), found $(jmap SEEN)"
}

# count_shutdown_fatals JSONLOG: the fast shutdown at the end of a run ends an autovacuum
# worker that is still at work with FATAL 57P01 ("terminating autovacuum process due to
# administrator command"). Whether one is at work then depends on the machine's speed, not
# on the load, so such entries are counted into the expectations (the manifest then says
# what the log holds); any other 57P01 still fails the run.
count_shutdown_fatals() {
  local j=$1 line db
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    case $line in
      *'"backend_type":"autovacuum worker"'*) ;;
      *) die "run $RUN_NAME: unexpected FATAL 57P01 (not an autovacuum worker at shutdown): ${line:0:400}" ;;
    esac
    FATALS[57P01]=$(( ${FATALS[57P01]:-0} + 1 ))
    db=$(sed -n 's/.*"dbname":"\([^"]*\)".*/\1/p' <<<"$line")
    [ -z "$db" ] || ERRS_DB[$db/57P01]=$(( ${ERRS_DB[$db/57P01]:-0} + 1 ))
  done < <(grep -a '"error_severity":"FATAL","state_code":"57P01"' "$j" || true)
}

# verify_run: the server's counts against the load's, then the three log files against both.
verify_run() {
  local d c st
  while IFS='|' read -r d c; do
    [ -n "$d" ] || continue
    PGSS[$d]=$c; total_pgss=$((total_pgss + c))
  done <<<"$pgss_rows"
  for d in "${!DB_ENCODING[@]}"; do
    STMTS[$d]=${STMTS[$d]:-0}
    total_known=$((total_known + STMTS[$d]))
    [ "${PGSS[$d]:-0}" = "${STMTS[$d]}" ] \
      || die "run $name: pg_stat_statements counts ${PGSS[$d]:-0} statements in $d, the load knows ${STMTS[$d]}"
  done

  # ---- verify the logs against the independent counts ----
  local L=$RUN_DIR/log
  n_stderr=$(grep -a -c 'LOG:  duration: [0-9.]* ms  \(statement\|execute [^:]*\): ' "$L/postgresql.log" || true)
  n_csv=$(grep -a -c ',"duration: [0-9.]* ms  \(statement\|execute [^:]*\): ' "$L/postgresql.csv" || true)
  n_json=$(grep -a -c '"message":"duration: [0-9.]* ms  \(statement\|execute [^:]*\): ' "$L/postgresql.json" || true)
  if ! { [ "$n_stderr" = "$total_pgss" ] && [ "$n_csv" = "$total_pgss" ] && [ "$n_json" = "$total_pgss" ]; }; then
    die "run $name: logged statement executions stderr=$n_stderr csv=$n_csv json=$n_json, pg_stat_statements=$total_pgss"
  fi
  local j=$L/postgresql.json
  check_count "deadlocks" "$DEADLOCKS" "$(grep -a -c '"message":"deadlock detected"' "$j" || true)"
  check_count "still waiting" "$LOCK_PAIRS" "$(grep -a -c '"message":"process [0-9]* still waiting for ' "$j" || true)"
  check_count "acquired" "$LOCK_PAIRS" "$(grep -a -c '"message":"process [0-9]* acquired ' "$j" || true)"
  check_count "temporary files" "$TEMP_FILES" "$(grep -a -c '"message":"temporary file: path ' "$j" || true)"
  check_count "requested checkpoints" "$CHECKPOINTS" "$(grep -a -c '"message":"checkpoint starting: immediate force wait"' "$j" || true)"
  check_count "all checkpoints" "$((CHECKPOINTS + 1))" "$(grep -a -c '"message":"checkpoint starting: ' "$j" || true)"
  check_count "text plans" "$PLANS_TEXT" "$(grep -a '"message":"duration: [0-9.]* ms  plan:' "$j" | grep -a -c -v 'plan:\\n{' || true)"
  check_count "json plans" "$PLANS_JSON" "$(grep -a -c '"message":"duration: [0-9.]* ms  plan:\\n{' "$j" || true)"
  count_shutdown_fatals "$j"
  compare_severity ERROR ERRS "$j"
  compare_severity FATAL FATALS "$j"
  compare_severity WARNING WARNS "$j"
  declare -A SEEN_DB=()
  # shellcheck disable=SC2034  # SEEN_DB is read through jnested's nameref
  while read -r c st; do [ -n "${st:-}" ] && SEEN_DB[$st]=$c; done < <(
    { grep -a '"error_severity":"\(ERROR\|FATAL\)"' "$j" || true; } \
      | sed -n 's/.*"dbname":"\([^"]*\)".*"error_severity":"[A-Z]*","state_code":"\([0-9A-Z]*\)".*/\1\/\2/p' | sort | uniq -c)
  [ "$(jnested SEEN_DB)" = "$(jnested ERRS_DB)" ] \
    || die "run $name: errors by database: expected $(jnested ERRS_DB), found $(jnested SEEN_DB)"
  read -r conn_r conn_a conn_d < <(awk '{ r += $2; a += $3; d += $4 } END { print r, a, d }' "$RUN_DIR/connections.txt")
  check_count "connection received" "$conn_r" "$(grep -a -c '"message":"connection received: ' "$j" || true)"
  check_count "connection authorized" "$conn_a" "$(grep -a -c '"message":"connection authorized: ' "$j" || true)"
  check_count "disconnection" "$conn_d" "$(grep -a -c '"message":"disconnection: ' "$j" || true)"
  conn_apps=$(awk '{ r[$1] += $2; a[$1] += $3; d[$1] += $4 } END { for (k in r) print k, r[k], a[k], d[k] }' "$RUN_DIR/connections.txt" \
    | LC_ALL=C sort | awk 'BEGIN { printf "{" } { if (NR > 1) printf ", "; printf "\"%s\": {\"received\": %s, \"authorized\": %s, \"disconnections\": %s}", $1, $2, $3, $4 } END { printf "}" }')
  local seen_apps; seen_apps=$({ grep -a -o '"message":"connection authorized: [^"]*application_name=[a-z_0-9]*' "$j" || true; } | sed 's/.*application_name=//' | sort | uniq -c | awk '{ print $2, $1 }')
  [ "$seen_apps" = "$(awk '$3 > 0 { a[$1] += $3 } END { for (k in a) print k, a[k] }' "$RUN_DIR/connections.txt" | sort)" ] \
    || die "run $name: authorized connections by application differ: $seen_apps"
  grep -a -q '"message":"automatic vacuum of table ' "$j" || die "run $name: no automatic vacuum entry"
  grep -a -q '"message":"automatic analyze of table ' "$j" || die "run $name: no automatic analyze entry"
  local enc s f
  for d in cyr_win1251 cyr_koi8r; do
    enc=$([ $d = cyr_win1251 ] && echo CP1251 || echo KOI8-R)
    for s in "${CYR_LITERALS[@]}" "${CYR_IDENTIFIERS[@]}" "${CYR_MESSAGES[@]}"; do
      for f in postgresql.log postgresql.csv postgresql.json; do
        LC_ALL=C grep -a -q -F -- "$(printf '%s' "$s" | iconv -f UTF-8 -t "$enc")" "$L/$f" \
          || die "run $name: '$s' not found in $enc in $f"
      done
    done
  done
}

# write_run_manifest: copies the run's logs to $STAGE/NAME and writes $STAGE/NAME.manifest.json.
write_run_manifest() {
  local L=$RUN_DIR/log cyr_json=() d
  mkdir -p "$STAGE/$name"
  cp "$L/postgresql.log" "$L/postgresql.csv" "$L/postgresql.json" "$STAGE/$name/"
  chmod 0644 "$STAGE/$name"/postgresql.*
  for d in "${CYR_DBS[@]}"; do
    cyr_json+=("$(jstr "$d"): {\"encoding\": $(jstr "${DB_ENCODING[$d]}"), \"identifiers\": $(jstrs "${CYR_IDENTIFIERS[@]}"), \"literals\": $(jstrs "${CYR_LITERALS[@]}"), \"messages\": $(jstrs "${CYR_MESSAGES[@]}"), \"pgbench_parameters\": $(jstrs "Иван Петров")}")
  done
  local enc_json="{" first=1
  for d in $(printf '%s\n' "${!DB_ENCODING[@]}" | LC_ALL=C sort); do
    [ $first = 1 ] || enc_json+=", "; first=0; enc_json+="\"$d\": \"${DB_ENCODING[$d]}\""
  done
  enc_json+="}"
  local av_json; av_json=$(jstrs "${av_tables[@]}")
  cat >"$STAGE/$name.manifest.json" <<EOF
{
      "dir": "$name",
      "log_line_prefix": $(jstr "$prefix"),
      "log_destination": "stderr,csvlog,jsonlog",
      "files": {"stderr": "$name/postgresql.log", "csvlog": "$name/postgresql.csv", "jsonlog": "$name/postgresql.json"},
      "settings": {"log_min_duration_statement": 0, "deadlock_timeout_ms": 100, "log_lock_waits": true, "log_temp_files": 0, "log_autovacuum_min_duration": 0, "log_checkpoints": true, "log_connections": true, "log_disconnections": true, "lc_messages": "C", "log_timezone": "UTC", "auto_explain.log_nested_statements": false, "pg_stat_statements.track": "top", "pg_stat_statements.track_utility": true},
      "databases": $enc_json,
      "cyrillic": {$(IFS=,; echo "${cyr_json[*]}")},
      "statements": {
        "definition": "successfully completed top-level statement executions: one per simple-protocol Query message ('duration: N ms  statement: ...') and one per extended-protocol Execute ('duration: N ms  execute <name>: ...'); parse and bind entries are not counted",
        "total": $total_pgss,
        "by_database": $(jmap PGSS),
        "source": "pg_stat_statements (track=top, track_utility=on, reset at the start of the run), sum(calls) excluding role loggen_admin",
        "load_known_total": $total_known,
        "load_known_by_database": $(jmap STMTS),
        "pgbench_init": {"database": "bench", "scale": $PGBENCH_SCALE, "statements": $init_stmts},
        "pgbench": $(jjoin "${PGBENCH_JSON[@]}"),
        "scripted_psql": $SCRIPTED,
        "logged_in_files": {"stderr": $n_stderr, "csvlog": $n_csv, "jsonlog": $n_json},
        "excluded": [
          "bookkeeping by role loggen_admin (pg_stat_statements reset/read, waiting for autovacuum, ALTER SYSTEM): log_min_duration_statement = -1 for that role, so not logged, and excluded from the count by userid; its connections and disconnections ARE logged",
          "role and extension creation before the pg_stat_statements reset, run with log_min_duration_statement = -1: not logged",
          "statements that fail (ERROR) complete no execution: logged as ERROR + STATEMENT, not counted",
          "no multi-statement query strings, no SQL-level PREPARE/EXECUTE/DEALLOCATE, no partial (row-limited) portal executions in the load",
          "no utility statements (BEGIN/END, SET ...) through protocol-level named prepared statements (pgbench -M prepared runs prepared.pgbench, which has none): PostgreSQL 15's pg_stat_statements counts such a statement only on its first execution in a session"
        ]
      },
      "errors": {"ERROR": $(jmap ERRS), "FATAL": $(jmap FATALS)},
      "errors_by_database": $(jnested ERRS_DB),
      "connections": {"received": $conn_r, "authorized": $conn_a, "disconnections": $conn_d, "by_application": $conn_apps, "note": "every attempt logs 'connection received'; the wrong password never reaches 'connection authorized'; the unknown database is authorized, then FATAL, without a 'disconnection' entry; pgbench opens one connection of its own besides its clients"},
      "warnings": $(jmap WARNS),
      "deadlocks": $DEADLOCKS,
      "lock_waits": {"pairs": $LOCK_PAIRS, "still_waiting": $LOCK_PAIRS, "acquired": $LOCK_PAIRS, "note": "one row lock (ShareLock on transaction), one relation lock (AccessShareLock on relation), one from the deadlock's surviving session"},
      "temp_files": $TEMP_FILES,
      "checkpoints": {"requested": $CHECKPOINTS, "shutdown": 1, "total_in_log": $((CHECKPOINTS + 1))},
      "auto_explain_plans": {"text": $PLANS_TEXT, "json": $PLANS_JSON, "databases": {"text": ["bench", "cyr_win1251"], "json": ["bench", "cyr_koi8r"]}},
      "autovacuum": {"tables_awaited": $av_json, "note": "each awaited table has at least one 'automatic vacuum' and one 'automatic analyze' entry; other tables (pgbench_*, catalogs) add more, in numbers that vary"},
      "server_stats": {"pg_stat_database": {"deadlocks": ${stat_rows%%|*}, "temp_files": ${stat_rows##*|}}, "pg_stat_bgwriter": {"checkpoints_req": ${ckpt_req:-null}}, "pg_stat_statements_info": {"dealloc": $dealloc}}
    }
EOF
}
