#!/usr/bin/env bash
# Installs and starts the Docker engine that `make image` and the image tests use, idempotently:
# Debian's docker.io (dockerd with containerd and runc; its CLI still builds with the daemon's
# own BuildKit, which the Dockerfile's `RUN --mount=type=secret` needs) and mmdebstrap (the
# stand-in base image, scripts/build-base-image.sh). apt is only touched when a package is
# missing; dockerd is only started when nothing answers on its socket. Its data stays in
# Debian's default /var/lib/docker (override with PGLOG_DOCKER_DATA) and its log goes to
# ~/.cache/pglog/docker/dockerd.log.
#
# Prints the docker CLI to use on its last line: Debian's /usr/bin/docker, because a newer CLI
# earlier in PATH without the buildx plugin cannot build with BuildKit at all.
set -euo pipefail
CACHE=${PGLOG_CACHE:-$HOME/.cache/pglog}
say() { printf 'install-docker: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo

packages=(docker.io mmdebstrap)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; } \
    || die "apt-get install ${missing[*]} failed"
fi

DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || die "$DOCKER missing after installing docker.io"
if ! $SUDO "$DOCKER" version >/dev/null 2>&1; then
  # No systemd here (or it did not start it): run dockerd in the background ourselves.
  if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    $SUDO systemctl start docker >/dev/null 2>&1 || true
  fi
  if ! $SUDO "$DOCKER" version >/dev/null 2>&1; then
    mkdir -p "$CACHE/docker"
    data=${PGLOG_DOCKER_DATA:-/var/lib/docker}
    say "starting dockerd (data in $data, log in $CACHE/docker/dockerd.log)"
    # setsid: dockerd outlives the make that started it, like a system service would.
    $SUDO setsid /usr/sbin/dockerd --data-root "$data" >>"$CACHE/docker/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 1 120); do
      $SUDO "$DOCKER" version >/dev/null 2>&1 && break
      sleep 0.5
    done
    $SUDO "$DOCKER" version >/dev/null 2>&1 || { tail -n 20 "$CACHE/docker/dockerd.log" >&2; die "dockerd did not start"; }
  fi
fi
echo "$DOCKER"
