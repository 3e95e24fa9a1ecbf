#!/usr/bin/env bash
# Installs the real Kubernetes control plane the operator's tests run against, idempotently,
# cached under ~/.cache/pglog/kube/<version>:
#   - etcd from Debian's etcd-server package (apt);
#   - kube-apiserver, kube-controller-manager and kubectl, and for the real node kubelet,
#     kube-scheduler and kube-proxy, built with `go install` from the
#     k8s.io/kubernetes module, whose k8s.io/* staging modules are pinned with `replace` lines
#     to the matching published v0.x versions (the module's own go.mod points them at
#     ./staging, which `go install` from the module proxy cannot use);
#   - helm built with `go install helm.sh/helm/v3/cmd/helm`;
#   - containerd, runc and containernetworking-plugins (apt) for the real node.
# Prints the bin directory on its last line.
#
#   scripts/install-kube-tools.sh [--print-bin]
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
CACHE=${PGLOG_CACHE:-$HOME/.cache/pglog}
ROOT=$CACHE/kube/$KUBE_VERSION
BIN=$ROOT/bin
STAGING_VERSION=v0.${KUBE_VERSION#v1.}

say() { printf 'install-kube-tools: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# Go: the machine's if it is new enough, else the pinned toolchain from the Go module proxy
# (golang.org/toolchain, the same zip `GOTOOLCHAIN` downloads), cached.
GO_VERSION=${GO_VERSION:-1.26.8}
go_ok() { command -v go >/dev/null && [ "$(printf '%s\n' "go$GO_VERSION" "$(go env GOVERSION 2>/dev/null)" | sort -V | head -n 1)" = "go$GO_VERSION" ]; }
if ! go_ok; then
  GOROOT_DIR=$CACHE/go/toolchain/go$GO_VERSION
  if [ ! -x "$GOROOT_DIR/bin/go" ]; then
    say "installing Go $GO_VERSION from the Go module proxy"
    mkdir -p "$CACHE/go/toolchain"
    zip=$CACHE/go/toolchain/go$GO_VERSION.zip
    curl -fsS "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-amd64.zip" -o "$zip.part" || die "cannot download Go $GO_VERSION"
    rm -rf "$GOROOT_DIR.tmp" && mkdir -p "$GOROOT_DIR.tmp"
    python3 -m zipfile -e "$zip.part" "$GOROOT_DIR.tmp" || die "cannot unpack Go $GO_VERSION"
    mv "$GOROOT_DIR.tmp/golang.org/toolchain@v0.0.1-go$GO_VERSION.linux-amd64" "$GOROOT_DIR"
    chmod -R u+x "$GOROOT_DIR/bin" "$GOROOT_DIR/pkg/tool"
    rm -rf "$GOROOT_DIR.tmp" "$zip.part"
  fi
  export PATH=$GOROOT_DIR/bin:$PATH GOROOT=$GOROOT_DIR
fi

if ! command -v etcd >/dev/null; then
  say "installing etcd-server (apt)"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get install -y -q etcd-server >/dev/null || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q etcd-server >/dev/null; }
  # The package starts a system etcd; the tests run their own on other ports.
  $SUDO systemctl disable --now etcd >/dev/null 2>&1 || true
fi

mkdir -p "$BIN"
export GOBIN=$BIN GOFLAGS=-mod=mod GOTOOLCHAIN=local
export GOMODCACHE=${GOMODCACHE:-$CACHE/go/mod} GOCACHE=${GOCACHE:-$CACHE/go/build}

# The version the binaries report (discovery, `kubectl version`, Helm's kubeVersion checks):
# a build from the module proxy has no git metadata, so it is stamped in as `make` would.
MINOR=${KUBE_VERSION#v1.}; MINOR=${MINOR%%.*}
LDFLAGS="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean"
LDFLAGS="$LDFLAGS -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$MINOR"
# build_kube NAME CMD...: one `go install` of the k8s.io/kubernetes commands CMD... in their own
# module directory $ROOT/module-NAME with their own stamp, so the control plane's binaries and
# the node's are cached (and rebuilt) independently.
build_kube() {
  local name=$1; shift
  local stamp_file=$BIN/.kube-stamp MOD=$ROOT/module
  if [ "$name" != control-plane ]; then stamp_file=$BIN/.kube-$name-stamp MOD=$ROOT/module-$name; fi
  local stamp="$KUBE_VERSION $* $LDFLAGS"
  [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp" ] || return 0
  say "building $* $KUBE_VERSION (staging modules $STAGING_VERSION; several minutes the first time)"
  rm -rf "$MOD"; mkdir -p "$MOD"
  curl -fsS "https://proxy.golang.org/k8s.io/kubernetes/@v/$KUBE_VERSION.mod" -o "$MOD/kubernetes.mod" \
    || die "cannot fetch the go.mod of k8s.io/kubernetes $KUBE_VERSION from the module proxy"
  {
    echo "module pglog.io/kube-tools"
    echo
    echo "go $(sed -n 's/^go //p' "$MOD/kubernetes.mod")"
    echo
    echo "require k8s.io/kubernetes $KUBE_VERSION"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#\t\1 => \1 '"$STAGING_VERSION"'#p' "$MOD/kubernetes.mod"
    echo ")"
  } >"$MOD/go.mod"
  local pkgs=() cmd
  { printf 'package tools\n\nimport (\n'; for cmd in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done; printf ')\n'; } >"$MOD/tools.go"
  for cmd in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$cmd"); done
  (cd "$MOD" && go mod tidy >/dev/null 2>"$MOD/tidy.log") || { cat "$MOD/tidy.log" >&2; die "go mod tidy failed for k8s.io/kubernetes $KUBE_VERSION"; }
  (cd "$MOD" && go install -ldflags "$LDFLAGS" "${pkgs[@]}") || die "building $* failed"
  echo "$stamp" >"$stamp_file"
}
build_kube control-plane kube-apiserver kube-controller-manager kubectl
# The node of the real-node tests (test-support/src/real-node.ts).
build_kube node kubelet kube-scheduler kube-proxy

# The node's container runtime and network: Debian's containerd and runc (Docker's engine
# pulls in the same packages; the tests run a containerd of their own beside Docker's, with its
# own socket, root and state) and the CNI plugins (bridge, host-local, portmap in /usr/lib/cni).
node_pkgs=()
command -v containerd >/dev/null || node_pkgs+=(containerd)
command -v runc >/dev/null || node_pkgs+=(runc)
[ -x /usr/lib/cni/bridge ] || node_pkgs+=(containernetworking-plugins)
if [ ${#node_pkgs[@]} -gt 0 ]; then
  say "installing ${node_pkgs[*]} (apt)"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get install -y -q "${node_pkgs[@]}" >/dev/null || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "${node_pkgs[@]}" >/dev/null; }
  # A freshly installed containerd starts as a system service; the tests run their own.
  if [[ " ${node_pkgs[*]} " == *" containerd "* ]]; then $SUDO systemctl disable --now containerd >/dev/null 2>&1 || true; fi
fi

if [ ! -x "$BIN/helm" ]; then
  say "building helm $HELM_VERSION"
  go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" || die "building helm failed"
fi

say "ready: $("$BIN/kube-apiserver" --version 2>/dev/null), etcd $(etcd --version 2>/dev/null | sed -n 's/^etcd Version: //p'), helm $("$BIN/helm" version --short 2>/dev/null)"
echo "$BIN"
