#!/usr/bin/env bash
# loggen: generates REAL PostgreSQL 15 logs for pglog's tests and benchmarks.
#
#   scripts/loggen/generate.sh --out DIR              test logs: DIR/A, DIR/B, DIR/manifest.json
#   scripts/loggen/generate.sh --out DIR --bench-mb N benchmark log: DIR/stderr/postgresql.log (>= N MB)
#
# A throw-away PostgreSQL 15 cluster (Debian's /usr/lib/postgresql/15/bin) runs in a temporary
# directory as an unprivileged user (pglog-loggen when started as root), listening on a Unix
# socket only. The result is cached: DIR/.loggen-stamp holds a hash of this directory's files,
# the arguments and the server version; when it matches, the script exits at once. A new
# result is built in a temporary directory next to DIR and moved into place only when complete
# and verified. See docs/loggen.md.
set -euo pipefail
# Logs hold bytes in several encodings: grep, sed, awk and sort must work on bytes.
export LC_ALL=C

PGBIN=${PGLOG_PGBIN:-/usr/lib/postgresql/15/bin}
LOGGEN_USER=${PGLOG_LOGGEN_USER:-pglog-loggen}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PORT=54315
GENERATOR_VERSION=1

say() { echo "loggen: $*" >&2; }
die() { echo "loggen: error: $*" >&2; exit 1; }

usage() {
  cat >&2 <<'EOF'
usage: generate.sh --out DIR [--bench-mb N]
  --out DIR       where the result goes (created; replaced atomically when regenerated)
  --bench-mb N    produce DIR/stderr/postgresql.log of at least N MB instead of the test scenario
environment:
  PGLOG_PGBIN         PostgreSQL 15 binaries (default /usr/lib/postgresql/15/bin)
  PGLOG_LOGGEN_KEEP=1 keep the temporary cluster directory (for debugging)
  PGLOG_BENCH_REAL_SECONDS  time budget for real bench load before copies are appended (default 300)
EOF
}

OUT=""
BENCH_MB=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || die "--out needs a directory"; OUT=$2; shift 2 ;;
    --out=*) OUT=${1#--out=}; shift ;;
    --bench-mb) [ $# -ge 2 ] || die "--bench-mb needs a number"; BENCH_MB=$2; shift 2 ;;
    --bench-mb=*) BENCH_MB=${1#--bench-mb=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument: $1" ;;
  esac
done
[ -n "$OUT" ] || { usage; die "--out DIR is required"; }
[[ "$BENCH_MB" =~ ^[0-9]+$ ]] || die "--bench-mb must be a whole number of megabytes, got '$BENCH_MB'"

for b in initdb pg_ctl postgres psql pgbench; do
  [ -x "$PGBIN/$b" ] || die "$PGBIN/$b not found: install PostgreSQL 15 (scripts/install-system-deps.sh)"
done
PG_VERSION=$("$PGBIN/postgres" --version)
case "$PG_VERSION" in
  *" 15."*) ;;
  *) die "PostgreSQL 15 expected in $PGBIN, found: $PG_VERSION" ;;
esac
[ -f "$PGBIN/../lib/auto_explain.so" ] && [ -f "$PGBIN/../lib/pg_stat_statements.so" ] \
  || die "auto_explain / pg_stat_statements missing under $PGBIN/../lib"

# ---------------------------------------------------------------------------------------------
# Cache check
# ---------------------------------------------------------------------------------------------
if [ "$BENCH_MB" -gt 0 ]; then MODE=bench; else MODE=test; fi
GEN_HASH=$(
  {
    echo "loggen v$GENERATOR_VERSION mode=$MODE bench_mb=$BENCH_MB"
    echo "$PG_VERSION"
    (cd "$HERE" && find . -type f | LC_ALL=C sort | while IFS= read -r f; do echo "== $f"; cat "$f"; done)
  } | sha256sum | cut -d' ' -f1
)
mkdir -p "$(dirname "$OUT")"
OUT="$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")"
STAMP="$OUT/.loggen-stamp"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$GEN_HASH" ]; then
  say "up to date: $OUT"
  exit 0
fi
# One generator per DIR at a time; the second one finds the first one's result.
command -v flock >/dev/null || die "flock (util-linux) is needed"
exec 9>"$OUT.lock"
flock 9
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$GEN_HASH" ]; then
  say "up to date: $OUT (made by a concurrent run)"
  exit 0
fi
# Never replace a directory that is not an earlier result of this script.
if [ -e "$OUT" ] && [ ! -f "$STAMP" ] && [ -n "$(ls -A "$OUT" 2>/dev/null)" ]; then
  die "$OUT exists and is not a loggen result (no .loggen-stamp): refusing to replace it"
fi

# ---------------------------------------------------------------------------------------------
# Temporary directories, unprivileged user, cleanup
# ---------------------------------------------------------------------------------------------
STAGE=""
WORK=""
SERVER_DATA=""
BG_PIDS=()
# fd 3 stays the script's own stderr: a signal may run the EXIT trap while stderr is
# redirected into a session's output file.
exec 3>&2
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local p
  for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "$SERVER_DATA" ]; then
    as_pg "$PGBIN/pg_ctl" -D "$SERVER_DATA" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
  fi
  if [ -n "$WORK" ] && [ -d "$WORK" ]; then
    if [ "${PGLOG_LOGGEN_KEEP:-0}" = 1 ]; then say "kept work directory $WORK"; else rm -rf "$WORK"; fi
  fi
  [ -n "$STAGE" ] && rm -rf "$STAGE"
  [ "$rc" -eq 0 ] || say "failed (exit $rc); no result was written to $OUT"
  exit "$rc"
} >&3 2>&3
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Leftovers of generators that were killed hard (SIGKILL): stop their clusters, remove them.
for owner in /tmp/pglog-loggen.*/owner.pid; do
  [ -f "$owner" ] || continue
  stale=$(dirname "$owner")
  if [ ! -d "/proc/$(cat "$owner" 2>/dev/null || echo none)" ]; then
    say "removing the leftovers of a killed run: $stale"
    for pidfile in "$stale"/*/data/postmaster.pid; do
      [ -f "$pidfile" ] || continue
      postmaster=$(head -n 1 "$pidfile")
      [[ "$postmaster" =~ ^[0-9]+$ ]] && kill -QUIT "$postmaster" 2>/dev/null || true
    done
    rm -rf "$stale" 2>/dev/null || true
  fi
done
for stale in "$(dirname "$OUT")/.$(basename "$OUT").tmp."*; do
  if [ -f "$stale/owner.pid" ] && [ ! -d "/proc/$(cat "$stale/owner.pid" 2>/dev/null || echo none)" ]; then
    rm -rf "$stale" 2>/dev/null || true
  fi
done

STAGE=$(mktemp -d "$(dirname "$OUT")/.$(basename "$OUT").tmp.XXXXXX")
echo $$ >"$STAGE/owner.pid"
chmod 0755 "$STAGE"
# The socket path must stay short (108 bytes): always under /tmp.
WORK=$(mktemp -d /tmp/pglog-loggen.XXXXXX)
echo $$ >"$WORK/owner.pid"

AS=()
if [ "$(id -u)" -eq 0 ]; then
  if ! id -u "$LOGGEN_USER" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$LOGGEN_USER" 2>/dev/null \
      || id -u "$LOGGEN_USER" >/dev/null 2>&1 || die "could not create system user $LOGGEN_USER"
  fi
  chown "$LOGGEN_USER:" "$WORK"
  command -v runuser >/dev/null || die "runuser (util-linux) is needed to run PostgreSQL as $LOGGEN_USER"
  AS=(runuser -u "$LOGGEN_USER" --)
fi
chmod 0700 "$WORK"

# Run a command as the cluster's OS user, from a directory that user can read.
as_pg() { (cd "$WORK" && "${AS[@]}" "$@"); }

# ---------------------------------------------------------------------------------------------
# Cluster
# ---------------------------------------------------------------------------------------------
RUN_DIR=""   # $WORK/<run>
SOCK=""

# start_cluster NAME LOG_LINE_PREFIX LOG_DESTINATION [extra postgresql.conf lines]
start_cluster() {
  local name=$1 prefix=$2 dest=$3 extra=${4:-}
  RUN_DIR=$WORK/$name
  SOCK=$RUN_DIR/s
  as_pg mkdir -p "$RUN_DIR/s" "$RUN_DIR/log" "$RUN_DIR/sessions"
  as_pg "$PGBIN/initdb" -D "$RUN_DIR/data" -U postgres -E UTF8 --locale=C --auth=trust --no-sync \
    >"$RUN_DIR/initdb.out" 2>&1 </dev/null || { cat "$RUN_DIR/initdb.out" >&2; die "initdb failed"; }
  cat >>"$RUN_DIR/data/postgresql.conf" <<EOF

# ---- pglog loggen ----
listen_addresses = ''
port = $PORT
unix_socket_directories = '$SOCK'
max_connections = 60
shared_buffers = '128MB'
synchronous_commit = off
checkpoint_timeout = '30min'
max_wal_size = '8GB'
max_parallel_workers_per_gather = 0
max_parallel_maintenance_workers = 0
timezone = 'UTC'
log_timezone = 'UTC'
lc_messages = 'C'
logging_collector = on
log_destination = '$dest'
log_directory = '$RUN_DIR/log'
log_filename = 'postgresql.log'
log_rotation_age = 0
log_rotation_size = 0
log_file_mode = 0640
log_line_prefix = '$prefix'
log_min_duration_statement = 0
log_checkpoints = on
log_connections = on
log_disconnections = on
log_lock_waits = on
deadlock_timeout = '100ms'
log_temp_files = 0
log_autovacuum_min_duration = 0
autovacuum = off
autovacuum_naptime = '1s'
shared_preload_libraries = 'auto_explain,pg_stat_statements'
pg_stat_statements.max = 10000
pg_stat_statements.track = 'top'
pg_stat_statements.track_utility = on
auto_explain.log_min_duration = -1
auto_explain.log_nested_statements = off
$extra
EOF
  cat >"$RUN_DIR/data/pg_hba.conf" <<'EOF'
# pglog loggen: one role with a password (for a failed authentication), trust otherwise.
local   all   badpass   scram-sha-256
local   all   all       trust
EOF
  SERVER_DATA=$RUN_DIR/data
  as_pg "$PGBIN/pg_ctl" -D "$RUN_DIR/data" -l "$RUN_DIR/pg_ctl.log" -w -t 60 start >/dev/null </dev/null \
    || { cat "$RUN_DIR/pg_ctl.log" >&2; die "PostgreSQL did not start (see above)"; }
}

stop_cluster() {
  as_pg "$PGBIN/pg_ctl" -D "$SERVER_DATA" -m fast -w -t 120 stop >/dev/null </dev/null || die "pg_ctl stop failed"
  SERVER_DATA=""
}

# pg CMD...: a client program against the current cluster, as the cluster's OS user.
pg() {
  as_pg env PGHOST="$SOCK" PGPORT="$PORT" PGCLIENTENCODING=UTF8 PGPASSFILE="$WORK/no-pgpass" PGCONNECT_TIMEOUT=30 "$@"
}
# admin DB [psql args]: bookkeeping as loggen_admin, whose statements are neither logged
# (log_min_duration_statement = -1 for that role) nor counted (excluded by userid).
admin() {
  local db=$1; shift
  conn loggen_admin
  pg env PGAPPNAME=loggen_admin "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -U loggen_admin -d "$db" "$@" </dev/null
}

# ---------------------------------------------------------------------------------------------
# Scripted sessions: every statement is written through ok/err/warn/plan so that the load
# knows exactly how many statements complete (per database) and which errors it causes.
# Every call adds exactly ONE statement (psql -f sends each ';'-terminated statement as its
# own simple-protocol Query message).
# ---------------------------------------------------------------------------------------------
declare -A STMTS=() ERRS=() ERRS_DB=() FATALS=() WARNS=() SESS_DB=() SESS_USER=() SESS_APP=()
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

# ---------------------------------------------------------------------------------------------
# JSON helpers (all keys and most values are ASCII; strings never hold control characters)
# ---------------------------------------------------------------------------------------------
jstr() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; s=${s//$'\t'/\\t}; printf '"%s"' "$s"; }
jstrs() { local first=1 s; printf '['; for s in "$@"; do [ $first = 1 ] || printf ', '; first=0; jstr "$s"; done; printf ']'; }
# jmap NAME: an associative array of integers as a JSON object with sorted keys.
jmap() {
  local -n m=$1
  local first=1 k
  printf '{'
  for k in $(printf '%s\n' "${!m[@]}" | LC_ALL=C sort); do
    [ $first = 1 ] || printf ', '; first=0
    printf '"%s": %s' "$k" "${m[$k]}"
  done
  printf '}'
}
# jnested NAME: an associative array keyed "outer/inner" with integer values, as nested objects.
jnested() {
  local -n nm=$1
  local k
  for k in "${!nm[@]}"; do echo "$k ${nm[$k]}"; done | LC_ALL=C sort | awk '
    { split($1, p, "/"); if (p[1] != cur) { if (cur != "") printf "}, "; else printf "{"; printf "\"%s\": {", p[1]; cur = p[1]; n = 0 }
      if (n++) printf ", "; printf "\"%s\": %s", p[2], $2 }
    END { if (cur == "") printf "{}"; else printf "}}" }'
}
jjoin() { local first=1 s; printf '['; for s in "$@"; do [ $first = 1 ] || printf ', '; first=0; printf '%s' "$s"; done; printf ']'; }

# ---------------------------------------------------------------------------------------------
# The Cyrillic content (UTF-8 here; the server stores and logs it in each database's encoding)
# ---------------------------------------------------------------------------------------------
CYR_DBS=(cyr_utf8 cyr_win1251 cyr_koi8r)
declare -A DB_ENCODING=([postgres]=UTF8 [bench]=UTF8 [cyr_utf8]=UTF8 [cyr_win1251]=WIN1251 [cyr_koi8r]=KOI8R)
CYR_IDENTIFIERS=("клиенты" "ид" "имя" "город" "баланс" "заказы" "номер" "клиент" "сумма" "комментарий"
  "клиенты_имя_уник" "заказы_по_клиенту" "несуществующая_таблица")
CYR_LITERALS=("Иван Петров" "Мария Сидорова" "Пётр Ёжиков" "Москва" "Санкт-Петербург" "Ёлкино"
  "Клиент-" "Город-" "Первый заказ" "Заказ через pgbench"
  "Ошибка проверки баланса: клиент %" "Баланс клиента отрицательный" "Пополните счёт")
# Messages the server produces from the statements above (to check decoding of error text).
CYR_MESSAGES=("Ошибка проверки баланса: клиент Пётр Ёжиков" "Баланс клиента отрицательный" "Пополните счёт")

cyr_setup_session() {
  local db=$1
  session "setup_$db" "$db" app loggen_setup
  ok 'CREATE TABLE "клиенты" ("ид" serial PRIMARY KEY, "имя" text NOT NULL, "город" text, "баланс" numeric(12,2) NOT NULL DEFAULT 0, CONSTRAINT "клиенты_имя_уник" UNIQUE ("имя"));'
  ok 'CREATE TABLE "заказы" ("номер" bigserial PRIMARY KEY, "клиент" text NOT NULL, "сумма" integer NOT NULL, "комментарий" text) WITH (autovacuum_enabled = off);'
  ok 'CREATE INDEX "заказы_по_клиенту" ON "заказы" ("клиент");'
  ok "INSERT INTO \"клиенты\" (\"имя\", \"город\", \"баланс\") VALUES ('Иван Петров', 'Москва', 100.50), ('Мария Сидорова', 'Санкт-Петербург', 250), ('Пётр Ёжиков', 'Ёлкино', 0);"
  ok "INSERT INTO \"клиенты\" (\"имя\", \"город\") SELECT 'Клиент-' || g, 'Город-' || g FROM generate_series(1, 300) AS g;"
  ok "INSERT INTO \"заказы\" (\"клиент\", \"сумма\", \"комментарий\") VALUES ('Иван Петров', 100, 'Первый заказ');"
}

cyr_load_session() {
  local db=$1
  session "load_$db" "$db" app "psql_cyr"
  ok "SELECT \"имя\", \"баланс\" FROM \"клиенты\" WHERE \"город\" = 'Москва';"
  ok "UPDATE \"клиенты\" SET \"баланс\" = \"баланс\" + 10 WHERE \"имя\" = 'Мария Сидорова';"
  ok 'UPDATE "клиенты" SET "баланс" = "баланс" + 1;'
  ok 'UPDATE "клиенты" SET "баланс" = "баланс" + 1;'
  ok 'UPDATE "клиенты" SET "баланс" = "баланс" - 2;'
  err 23505 "INSERT INTO \"клиенты\" (\"имя\", \"город\") VALUES ('Иван Петров', 'Москва');"
  err P0001 "DO \$\$ BEGIN RAISE EXCEPTION 'Ошибка проверки баланса: клиент %', 'Пётр Ёжиков' USING DETAIL = 'Баланс клиента отрицательный', HINT = 'Пополните счёт'; END \$\$;"
  err 42P01 'SELECT * FROM "несуществующая_таблица";'
  ok "SELECT count(*) FROM \"заказы\" WHERE \"клиент\" = 'Иван Петров';"
}

# compare_severity SEVERITY EXPECTED_ARRAY JSONLOG: entries of that severity by SQLSTATE.
compare_severity() {
  local sev=$1 exp=$2 j=$3 c st
  declare -A SEEN=()
  while read -r c st; do [ -n "${st:-}" ] && SEEN[$st]=$c; done < <(
    { grep -a "\"error_severity\":\"$sev\"" "$j" || true; } | { grep -a -o '"state_code":"[0-9A-Z]*"' || true; } | cut -d'"' -f4 | sort | uniq -c)
  [ "$(jmap SEEN)" = "$(jmap "$exp")" ] || die "run $RUN_NAME: $sev by SQLSTATE: expected $(jmap "$exp"), found $(jmap SEEN)"
}

# ---------------------------------------------------------------------------------------------
# The test scenario (one run = one cluster, one log_line_prefix)
# ---------------------------------------------------------------------------------------------
PGBENCH_SCALE=4

scenario_run() {
  local name=$1 prefix=$2
  local t0=$SECONDS
  RUN_NAME=$name
  say "run $name: starting PostgreSQL (log_line_prefix '$prefix')"
  reset_counts
  start_cluster "$name" "$prefix" 'stderr,csvlog,jsonlog'

  # Bookkeeping before the counted part: neither logged (log_min_duration_statement = -1 in
  # these sessions) nor counted (pg_stat_statements is reset afterwards).
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

  # ---- setup (autovacuum still off, so no DDL ever waits for an autovacuum worker) ----
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
  local init_stmts=$((16 + 11 * PGBENCH_SCALE))
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

  # ---- load: autovacuum on (its reload shows up in the log) ----
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

  say "run $name: waiting for autovacuum and autoanalyze"
  local av_tables=("bench.public.av_target")
  admin bench -c "DO \$\$ DECLARE i int := 0; BEGIN LOOP PERFORM pg_stat_clear_snapshot(); EXIT WHEN (SELECT autovacuum_count > 0 AND autoanalyze_count > 0 FROM pg_stat_user_tables WHERE relid = 'av_target'::regclass); i := i + 1; IF i > 1200 THEN RAISE EXCEPTION 'autovacuum did not process av_target within 120 s'; END IF; PERFORM pg_sleep(0.1); END LOOP; END \$\$" \
    || die "autovacuum/autoanalyze did not run on bench.av_target"
  for db in "${CYR_DBS[@]}"; do
    admin "$db" -c "DO \$\$ DECLARE i int := 0; BEGIN LOOP PERFORM pg_stat_clear_snapshot(); EXIT WHEN (SELECT autovacuum_count > 0 AND autoanalyze_count > 0 FROM pg_stat_user_tables WHERE relid = '\"клиенты\"'::regclass); i := i + 1; IF i > 1200 THEN RAISE EXCEPTION 'autovacuum did not process клиенты within 120 s'; END IF; PERFORM pg_sleep(0.1); END LOOP; END \$\$" \
      || die "autovacuum/autoanalyze did not run on $db.клиенты"
    av_tables+=("$db.public.клиенты")
  done

  # ---- read the independent counts (admin: not logged, excluded by userid) ----
  local pgss_rows; pgss_rows=$(admin postgres -F '|' -c "
    SELECT d.datname, coalesce(sum(s.calls), 0)
    FROM pg_database AS d
    LEFT JOIN pg_stat_statements AS s ON s.dbid = d.oid AND s.toplevel AND s.userid <> 'loggen_admin'::regrole
    WHERE NOT d.datistemplate
    GROUP BY d.datname ORDER BY d.datname")
  local dealloc; dealloc=$(admin postgres -c 'SELECT dealloc FROM pg_stat_statements_info')
  [ "$dealloc" = 0 ] || die "pg_stat_statements evicted entries (dealloc=$dealloc): counts would be wrong"
  # (backend statistics were flushed when the load's sessions ended, seconds ago)
  local stat_rows; stat_rows=$(admin postgres -F '|' -c "SELECT sum(deadlocks), sum(temp_files) FROM pg_stat_database")
  local ckpt_req; ckpt_req=$(admin postgres -c 'SELECT checkpoints_req FROM pg_stat_bgwriter')

  stop_cluster
  say "run $name: server stopped after $((SECONDS - t0)) s; verifying"

  declare -A PGSS=()
  local line total_pgss=0 total_known=0 d c
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
  local n_stderr n_csv n_json
  n_stderr=$(grep -a -c 'LOG:  duration: [0-9.]* ms  \(statement\|execute [^:]*\): ' "$L/postgresql.log" || true)
  n_csv=$(grep -a -c ',"duration: [0-9.]* ms  \(statement\|execute [^:]*\): ' "$L/postgresql.csv" || true)
  n_json=$(grep -a -c '"message":"duration: [0-9.]* ms  \(statement\|execute [^:]*\): ' "$L/postgresql.json" || true)
  [ "$n_stderr" = "$total_pgss" ] && [ "$n_csv" = "$total_pgss" ] && [ "$n_json" = "$total_pgss" ] \
    || die "run $name: logged statement executions stderr=$n_stderr csv=$n_csv json=$n_json, pg_stat_statements=$total_pgss"
  check_count() { # what expected actual
    [ "$2" = "$3" ] || die "run $name: $1: expected $2, found $3 in the log"
  }
  local j=$L/postgresql.json
  check_count "deadlocks" "$DEADLOCKS" "$(grep -a -c '"message":"deadlock detected"' "$j" || true)"
  check_count "still waiting" "$LOCK_PAIRS" "$(grep -a -c '"message":"process [0-9]* still waiting for ' "$j" || true)"
  check_count "acquired" "$LOCK_PAIRS" "$(grep -a -c '"message":"process [0-9]* acquired ' "$j" || true)"
  check_count "temporary files" "$TEMP_FILES" "$(grep -a -c '"message":"temporary file: path ' "$j" || true)"
  check_count "requested checkpoints" "$CHECKPOINTS" "$(grep -a -c '"message":"checkpoint starting: immediate force wait"' "$j" || true)"
  check_count "all checkpoints" "$((CHECKPOINTS + 1))" "$(grep -a -c '"message":"checkpoint starting: ' "$j" || true)"
  check_count "text plans" "$PLANS_TEXT" "$(grep -a '"message":"duration: [0-9.]* ms  plan:' "$j" | grep -a -c -v 'plan:\\n{' || true)"
  check_count "json plans" "$PLANS_JSON" "$(grep -a -c '"message":"duration: [0-9.]* ms  plan:\\n{' "$j" || true)"
  compare_severity ERROR ERRS "$j"
  compare_severity FATAL FATALS "$j"
  compare_severity WARNING WARNS "$j"
  declare -A SEEN_DB=()
  while read -r c st; do [ -n "${st:-}" ] && SEEN_DB[$st]=$c; done < <(
    { grep -a '"error_severity":"\(ERROR\|FATAL\)"' "$j" || true; } \
      | sed -n 's/.*"dbname":"\([^"]*\)".*"error_severity":"[A-Z]*","state_code":"\([0-9A-Z]*\)".*/\1\/\2/p' | sort | uniq -c)
  [ "$(jnested SEEN_DB)" = "$(jnested ERRS_DB)" ] \
    || die "run $name: errors by database: expected $(jnested ERRS_DB), found $(jnested SEEN_DB)"
  local conn_r conn_a conn_d
  read -r conn_r conn_a conn_d < <(awk '{ r += $2; a += $3; d += $4 } END { print r, a, d }' "$RUN_DIR/connections.txt")
  check_count "connection received" "$conn_r" "$(grep -a -c '"message":"connection received: ' "$j" || true)"
  check_count "connection authorized" "$conn_a" "$(grep -a -c '"message":"connection authorized: ' "$j" || true)"
  check_count "disconnection" "$conn_d" "$(grep -a -c '"message":"disconnection: ' "$j" || true)"
  local conn_apps; conn_apps=$(awk '{ r[$1] += $2; a[$1] += $3; d[$1] += $4 } END { for (k in r) print k, r[k], a[k], d[k] }' "$RUN_DIR/connections.txt" \
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

  # ---- copy the logs and write this run's part of the manifest ----
  mkdir -p "$STAGE/$name"
  cp "$L/postgresql.log" "$L/postgresql.csv" "$L/postgresql.json" "$STAGE/$name/"
  chmod 0644 "$STAGE/$name"/postgresql.*
  local cyr_json=() pg_json
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
  say "run $name: ok: $total_pgss statement executions, $(du -sh "$STAGE/$name" | cut -f1) of logs, $((SECONDS - t0)) s"
}

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

# ---------------------------------------------------------------------------------------------
T_START=$SECONDS
if [ "$MODE" = bench ]; then
  bench_mode
else
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
fi
if command -v node >/dev/null 2>&1; then
  node -e 'JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"))' "$STAGE/manifest.json" \
    || die "internal: manifest.json is not valid JSON"
fi
rm -f "$STAGE/owner.pid"
echo "$GEN_HASH" >"$STAGE/.loggen-stamp"

# Move into place: the stamp travels with the complete result, so a killed run never leaves
# something that looks complete.
if [ -e "$OUT" ]; then
  OLD="$OUT.old.$$"
  mv "$OUT" "$OLD"
  mv "$STAGE" "$OUT"
  rm -rf "$OLD"
else
  mv "$STAGE" "$OUT"
fi
STAGE=""
say "done in $((SECONDS - T_START)) s: $OUT"
