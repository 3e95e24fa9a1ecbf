#!/usr/bin/env bash
# Installs the Debian packages that tests, benchmarks and the demo use: a real PostgreSQL 15
# server (its package carries auto_explain and pg_stat_statements), pgbench, pgBadger (the benchmark's
# reference) the compressors the parser reads, and GNU time (peak RSS in benchmarks). Idempotent: apt is only touched when a
# package is missing.
set -euo pipefail
packages=(postgresql-15 postgresql-client-15 pgbadger gzip bzip2 time)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-system-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
