#!/usr/bin/env bash
# Installs the Debian packages that tests, benchmarks and the demo use: a real PostgreSQL 15
# server (its package carries auto_explain and pg_stat_statements), pgbench, pgBadger (the benchmark's
# reference) the compressors the parser reads, GNU time (peak RSS in benchmarks), a real OpenSSH
# server and client (the collector's integration tests and the demo run sshd on loopback
# addresses), logrotate (rename and copytruncate rotation in tests), and the compiler toolchain
# that builds ssh2's optional native crypto binding at `npm ci`; curl and etcd for the operator's
# real control plane (scripts/install-kube-tools.sh builds the rest); iproute2 (the HPA test's
# custom metrics host in a network namespace) and openssl (its aggregator certificates); perf
# (linux-perf: counting the processes a followed log starts on its server, in a test and a benchmark);
# and `make check` runs shellcheck over the scripts; chromium (the HTML report is opened in it
# headless by a test, through playwright-core).
# Idempotent: apt is only touched
# when a package is missing.
set -euo pipefail
packages=(postgresql-15 postgresql-client-15 pgbadger chromium gzip bzip2 time openssh-server openssh-client logrotate procps make g++ python3 curl ca-certificates etcd-server iproute2 openssl linux-perf shellcheck)
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
