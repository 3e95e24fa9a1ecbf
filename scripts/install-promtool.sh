#!/usr/bin/env bash
# Installs promtool, which the chart's alert tests run (`promtool check rules` and `promtool
# test rules` on the PrometheusRule the chart renders; operator/test/chart-alerts.test.ts),
# idempotently, cached under ~/.cache/pglog/prometheus/<version>/bin:
#   built with `go install github.com/prometheus/prometheus/cmd/promtool@<version>` (the Go
#   module versions of Prometheus 3.x are v0.3xx.y: v0.316.0 is Prometheus 3.16), through the
#   module proxy go is configured with. Go is the machine's, or the toolchain that
#   scripts/install-kube-tools.sh caches (`make kube-tools` runs first in `make test`).
# Prints the binary's path on its last line.
#
#   scripts/install-promtool.sh
set -euo pipefail

PROMETHEUS_MODULE_VERSION=${PROMETHEUS_MODULE_VERSION:-v0.316.0}
GO_VERSION=${GO_VERSION:-1.26.8}
CACHE=${PGLOG_CACHE:-$HOME/.cache/pglog}
BIN=$CACHE/prometheus/$PROMETHEUS_MODULE_VERSION/bin

say() { printf 'install-promtool: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [ -x "$BIN/promtool" ] && [ "$(cat "$BIN/.stamp" 2>/dev/null)" = "$PROMETHEUS_MODULE_VERSION" ]; then
  echo "$BIN/promtool"
  exit 0
fi

go_ok() { command -v go >/dev/null && [ "$(printf '%s\n' "go$GO_VERSION" "$(go env GOVERSION 2>/dev/null)" | sort -V | head -n 1)" = "go$GO_VERSION" ]; }
if ! go_ok; then
  # The toolchain install-kube-tools.sh unpacks when the machine's Go is older.
  GOROOT_DIR=$CACHE/go/toolchain/go$GO_VERSION
  [ -x "$GOROOT_DIR/bin/go" ] || die "no Go $GO_VERSION or newer: run \`make kube-tools\` first (it installs one under $CACHE/go/toolchain)"
  export PATH=$GOROOT_DIR/bin:$PATH GOROOT=$GOROOT_DIR
fi

mkdir -p "$BIN"
export GOBIN=$BIN GOTOOLCHAIN=local
export GOMODCACHE=${GOMODCACHE:-$CACHE/go/mod} GOCACHE=${GOCACHE:-$CACHE/go/build}
say "building promtool $PROMETHEUS_MODULE_VERSION (a few minutes the first time)"
go install "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE_VERSION" || die "building promtool $PROMETHEUS_MODULE_VERSION failed"
echo "$PROMETHEUS_MODULE_VERSION" >"$BIN/.stamp"
say "ready: $("$BIN/promtool" --version 2>/dev/null | head -n 1)"
echo "$BIN/promtool"
