#!/usr/bin/env bash
# Builds the sandbox ("pause") image of the real-node tests, cached under
# ~/.cache/pglog/node: a static pause process compiled here with gcc (public container
# registries are unreachable, so the usual registry.k8s.io/pause cannot be pulled), packed as
# a `docker save` tarball that `ctr -n k8s.io images import` reads. Prints the tarball's path.
#
#   scripts/build-pause-image.sh IMAGE_REF
set -euo pipefail
REF=${1:?usage: build-pause-image.sh IMAGE_REF}
CACHE=${PGLOG_CACHE:-$HOME/.cache/pglog}
OUT=$CACHE/node/pause-${REF//[^A-Za-z0-9.-]/_}.tar
if [ -s "$OUT" ]; then echo "$OUT"; exit 0; fi
command -v gcc >/dev/null || { echo "build-pause-image: gcc is missing (apt-get install gcc libc6-dev)" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs" "$work/image" "$(dirname "$OUT")"
# The sandbox's only job is to hold the pod's namespaces until it is told to stop; it also
# reaps zombies, as PID 1 of a shared PID namespace must.
cat >"$work/pause.c" <<'C'
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
C
gcc -static -Os -s -o "$work/rootfs/pause" "$work/pause.c"
tar -C "$work/rootfs" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$work/image/layer.tar" pause
diff_id=sha256:$(sha256sum "$work/image/layer.tar" | cut -d' ' -f1)
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["%s"]},"history":[{"created_by":"scripts/build-pause-image.sh"}]}' "$diff_id" >"$work/image/config.json"
printf '[{"Config":"config.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$REF" >"$work/image/manifest.json"
tar -C "$work/image" -cf "$OUT.part" manifest.json config.json layer.tar
mv "$OUT.part" "$OUT"
echo "$OUT"
