# shellcheck shell=bash
# loggen, sourced by generate.sh: the load's own bookkeeping. Scripted psql sessions, the
# connections the load opens and the pgbench runs are counted here, independently of the logs.
# Uses: RUN_DIR, BG_PIDS, pg (lib/cluster.sh); PGBIN, HERE, die (generate.sh).

# pgbench -i scale, the same in both modes.
PGBENCH_SCALE=4

# ---------------------------------------------------------------------------------------------
# Scripted sessions: every statement is written through ok/err/warn/plan so that the load
# knows exactly how many statements complete (per database) and which errors it causes.
# Every call adds exactly ONE statement (psql -f sends each ';'-terminated statement as its
# own simple-protocol Query message).
# ---------------------------------------------------------------------------------------------
declare -gA STMTS=() ERRS=() ERRS_DB=() FATALS=() WARNS=() SESS_DB=() SESS_USER=() SESS_APP=()
PLANS_TEXT=0; PLANS_JSON=0; TEMP_FILES=0; CHECKPOINTS=0; DEADLOCKS=0; LOCK_PAIRS=0; SCRIPTED=0
CUR=""; CUR_DB=""
PGBENCH_JSON=()

reset_counts() {
  STMTS=(); ERRS=(); ERRS_DB=(); FATALS=(); WARNS=(); SESS_DB=(); SESS_USER=(); SESS_APP=()
  PLANS_TEXT=0; PLANS_JSON=0; TEMP_FILES=0; CHECKPOINTS=0; DEADLOCKS=0; LOCK_PAIRS=0; SCRIPTED=0
  PGBENCH_JSON=()
}

# session NAME DB USER: start writing a new session script.
session() {
  CUR=$1; CUR_DB=$2
  SESS_DB[$1]=$2; SESS_USER[$1]=$3; SESS_APP[$1]=${4:-$1}
  : >"$RUN_DIR/sessions/$1.sql"
}
_add() {
  local s=$1
  case "$s" in *";") ;; *) die "internal: statement does not end with ';': $s" ;; esac
  printf '%s\n' "$s" >>"$RUN_DIR/sessions/$CUR.sql"
}
_stmt_src() { if [ $# -gt 0 ]; then printf '%s' "$1"; else cat; fi; }
ok()   { _add "$(_stmt_src "$@")"; STMTS[$CUR_DB]=$(( ${STMTS[$CUR_DB]:-0} + 1 )); SCRIPTED=$((SCRIPTED + 1)); }
err()  {
  local st=$1; shift; _add "$(_stmt_src "$@")"
  ERRS[$st]=$(( ${ERRS[$st]:-0} + 1 )); ERRS_DB[$CUR_DB/$st]=$(( ${ERRS_DB[$CUR_DB/$st]:-0} + 1 ))
}
# conn APP [RECEIVED [AUTHORIZED [DISCONNECTED]]]: the connections the load opens, kept in a
# file so that background subshells and command substitutions count too.
conn() {
  local r=${2:-1}; local a=${3:-$r}; local d=${4:-$a}
  echo "$1 $r $a $d" >>"$RUN_DIR/connections.txt"
}
warn() { local st=$1; shift; ok "$@"; WARNS[$st]=$(( ${WARNS[$st]:-0} + 1 )); }
plan() { local fmt=$1; shift; ok "$@"; if [ "$fmt" = json ]; then PLANS_JSON=$((PLANS_JSON + 1)); else PLANS_TEXT=$((PLANS_TEXT + 1)); fi; }

# wait_until LABEL SQL-CONDITION: a DO block polling pg_stat_activity (one statement).
wait_until() {
  ok "DO \$\$ /* loggen:$1 */ DECLARE i int := 0; BEGIN LOOP PERFORM pg_stat_clear_snapshot(); EXIT WHEN $2; i := i + 1; IF i > 1200 THEN RAISE EXCEPTION 'loggen: timed out waiting ($1)'; END IF; PERFORM pg_sleep(0.05); END LOOP; END \$\$;"
}

run_session() {
  local n=$1
  conn "${SESS_APP[$n]}"
  pg env PGAPPNAME="${SESS_APP[$n]}" "$PGBIN/psql" -X -q -v ON_ERROR_STOP=0 -U "${SESS_USER[$n]}" -d "${SESS_DB[$n]}" \
    -f "$RUN_DIR/sessions/$n.sql" >"$RUN_DIR/sessions/$n.out" 2>&1 </dev/null \
    || die "session $n could not run: $(tail -n 3 "$RUN_DIR/sessions/$n.out")"
}
run_session_bg() { run_session "$1" & BG_PIDS+=($!); }
wait_bg() {
  local p rc=0
  for p in "${BG_PIDS[@]}"; do wait "$p" || rc=1; done
  BG_PIDS=()
  [ "$rc" -eq 0 ] || die "a background session failed"
}

# pgbench_account DB PROTOCOL CLIENTS TX_PER_CLIENT STMTS_PER_TX SCRIPT [extra pgbench args]:
# what a pgbench run will do (statements, connections: one per client, or one per transaction
# with -C, plus pgbench's own first connection).
pgbench_account() {
  local db=$1 proto=$2 clients=$3 tx=$4 per=$5 script=$6; shift 6
  local connect=false; case " $* " in *" -C "*) connect=true ;; esac
  local n=$((clients * tx * per))
  STMTS[$db]=$(( ${STMTS[$db]:-0} + n ))
  PGBENCH_JSON+=("{\"database\": \"$db\", \"protocol\": \"$proto\", \"script\": \"$script\", \"clients\": $clients, \"transactions_per_client\": $tx, \"statements_per_transaction\": $per, \"connect_per_transaction\": $connect, \"statements\": $n}")
  if [ "$connect" = true ]; then conn "pgbench_$proto" $((clients * tx + 1)); else conn "pgbench_$proto" $((clients + 1)); fi
}
# pgbench_exec: same arguments; runs pgbench and checks it did all its transactions.
pgbench_exec() {
  local db=$1 proto=$2 clients=$3 tx=$4 per=$5 script=$6; shift 6
  local out="$RUN_DIR/pgbench-$db-$proto-$RANDOM.out"
  pg env PGAPPNAME="pgbench_$proto" "$PGBIN/pgbench" -n -U app -M "$proto" -c "$clients" -j "$clients" -t "$tx" \
    -f "$HERE/$script" "$@" "$db" >"$out" 2>&1 </dev/null || { tail -n 20 "$out" >&2; die "pgbench failed ($db, $proto)"; }
  local done_tx; done_tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
  [ "$done_tx" = $((clients * tx)) ] || { cat "$out" >&2; die "pgbench processed '$done_tx' transactions, expected $((clients * tx))"; }
  if grep -q 'number of failed transactions: [1-9]' "$out"; then die "pgbench reported failed transactions: $out"; fi
}
pgbench_run() { pgbench_account "$@"; pgbench_exec "$@"; }
