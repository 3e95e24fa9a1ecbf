# shellcheck shell=bash
# loggen, sourced by generate.sh: the unprivileged user, the work directory, the cleanup traps,
# and the throw-away cluster (initdb, start, stop, client programs).
# Uses from generate.sh: PGBIN, LOGGEN_USER, PORT, OUT, STAGE, say, die.

# ---------------------------------------------------------------------------------------------
# Work directory, unprivileged user, cleanup
# ---------------------------------------------------------------------------------------------
WORK=""
SERVER_DATA=""
BG_PIDS=()
AS=()

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

# Called once from generate.sh's top level. Traps and `exec` redirections set in a function
# apply to the whole shell, so these fire on any exit of the script.
install_cleanup_traps() {
  # fd 3 stays the script's own stderr: a signal may run the EXIT trap while stderr is
  # redirected into a session's output file.
  exec 3>&2
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# Leftovers of generators that were killed hard (SIGKILL): stop their clusters, remove them.
remove_stale_clusters() {
  local owner stale pidfile postmaster
  for owner in /tmp/pglog-loggen.*/owner.pid; do
    [ -f "$owner" ] || continue
    stale=$(dirname "$owner")
    if [ ! -d "/proc/$(cat "$owner" 2>/dev/null || echo none)" ]; then
      say "removing the leftovers of a killed run: $stale"
      for pidfile in "$stale"/*/data/postmaster.pid; do
        [ -f "$pidfile" ] || continue
        postmaster=$(head -n 1 "$pidfile")
        if [[ "$postmaster" =~ ^[0-9]+$ ]]; then kill -QUIT "$postmaster" 2>/dev/null || true; fi
      done
      rm -rf "$stale" 2>/dev/null || true
    fi
  done
}

# make_work_dir: WORK, owned by the cluster's OS user (created if missing when run as root).
make_work_dir() {
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
}

# Run a command as the cluster's OS user, from a directory that user can read. Without fd 9
# (generate.sh's lock on DIR.lock): a cluster orphaned by a SIGKILL must not hold the lock,
# or the next run for the same DIR would wait for it forever instead of removing it.
as_pg() { (cd "$WORK" && "${AS[@]}" "$@") 9>&-; }

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
