#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# loggen: generates REAL PostgreSQL 15 logs for pglog's tests and benchmarks.
#
#   scripts/loggen/generate.sh --out DIR              test logs: DIR/A, DIR/B, DIR/manifest.json
#   scripts/loggen/generate.sh --out DIR --bench-mb N benchmark log: DIR/stderr/postgresql.log (>= N MB)
#
# A throw-away PostgreSQL 15 cluster (Debian's /usr/lib/postgresql/15/bin) runs in a temporary
# directory as an unprivileged user (pglog-loggen when started as root), listening on a Unix
# socket only. The result is cached: DIR/.loggen-stamp holds a hash of every file under this
# directory (lib/ included), the arguments and the server version; when it matches, the script
# exits at once. A new result is built in a temporary directory next to DIR and moved into
# place only when complete and verified. See docs/loggen.md.
#
# This file: arguments, prerequisites, cache stamp, lock, staging directory, dispatch, atomic
# move. The rest is in lib/, sourced into this shell (same set -euo pipefail, traps, globals):
#   lib/cluster.sh   unprivileged user, work directory, cleanup traps, initdb/start/stop, pg/admin
#   lib/sessions.sh  the load's bookkeeping: scripted psql sessions, connections, pgbench runs
#   lib/json.sh      JSON helpers for the manifest
#   lib/cyrillic.sh  the Cyrillic content and the sessions that use it
#   lib/scenario.sh  the test scenario (runs A and B): setup, load, lock waits, deadlock
#   lib/verify.sh    checks a run's logs against the independent counts, writes its manifest
#   lib/bench.sh     bench mode: one big stderr log
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

# Libraries: function definitions and global data only; nothing runs while they are sourced.
# shellcheck source=lib/cluster.sh
. "$HERE/lib/cluster.sh"
# shellcheck source=lib/sessions.sh
. "$HERE/lib/sessions.sh"
# shellcheck source=lib/json.sh
. "$HERE/lib/json.sh"
# shellcheck source=lib/cyrillic.sh
. "$HERE/lib/cyrillic.sh"
# shellcheck source=lib/scenario.sh
. "$HERE/lib/scenario.sh"
# shellcheck source=lib/verify.sh
. "$HERE/lib/verify.sh"
# shellcheck source=lib/bench.sh
. "$HERE/lib/bench.sh"

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
if ! { [ -f "$PGBIN/../lib/auto_explain.so" ] && [ -f "$PGBIN/../lib/pg_stat_statements.so" ]; }; then
  die "auto_explain / pg_stat_statements missing under $PGBIN/../lib"
fi

# ---------------------------------------------------------------------------------------------
# Cache check. The hash covers every file under $HERE, recursively (lib/ too): editing any of
# them invalidates earlier results.
# ---------------------------------------------------------------------------------------------
if [ "$BENCH_MB" -gt 0 ]; then MODE='bench'; else MODE='test'; fi
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
# Cleanup traps, leftovers of killed runs, staging directory, work directory
# ---------------------------------------------------------------------------------------------
STAGE=""
install_cleanup_traps   # lib/cluster.sh: from here on, every exit stops the cluster and cleans up
remove_stale_clusters
for stale in "$(dirname "$OUT")/.$(basename "$OUT").tmp."*; do
  if [ -f "$stale/owner.pid" ] && [ ! -d "/proc/$(cat "$stale/owner.pid" 2>/dev/null || echo none)" ]; then
    rm -rf "$stale" 2>/dev/null || true
  fi
done

STAGE=$(mktemp -d "$(dirname "$OUT")/.$(basename "$OUT").tmp.XXXXXX")
echo $$ >"$STAGE/owner.pid"
chmod 0755 "$STAGE"
make_work_dir

# ---------------------------------------------------------------------------------------------
T_START=$SECONDS
if [ "$MODE" = bench ]; then
  bench_mode
else
  test_mode
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
