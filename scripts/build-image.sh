#!/usr/bin/env bash
# `make image`: builds the pglog image from the Dockerfile with the daemon's BuildKit, from the
# base image given (the official Node image for users, the local stand-in in tests), and writes
# the CycloneDX SBOM of its npm packages beside it.
#
#   scripts/build-image.sh IMAGE BASE_IMAGE SBOM_FILE
#
# npm inside the build must trust what the machine's npm trusts: the CA bundle that
# `npm config get cafile` names (else NODE_EXTRA_CA_CERTS, which Node's npm also honours) is
# handed to the build as a BuildKit secret, so it is in no layer of the image.
set -euo pipefail
image=${1:?usage: build-image.sh IMAGE BASE_IMAGE SBOM_FILE}
base=${2:?usage: build-image.sh IMAGE BASE_IMAGE SBOM_FILE}
sbom=${3:?usage: build-image.sh IMAGE BASE_IMAGE SBOM_FILE}
DOCKER=${DOCKER:-/usr/bin/docker}
here=$(cd "$(dirname "$0")/.." && pwd)
say() { printf 'build-image: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

secret=()
cafile=$(npm config get cafile 2>/dev/null || true)
case "$cafile" in null | undefined | "") cafile=${NODE_EXTRA_CA_CERTS:-} ;; esac
if [ -n "$cafile" ]; then
  [ -r "$cafile" ] || die "npm's CA file $cafile is not readable"
  secret=(--secret "id=npm-ca,src=$cafile")
fi

say "building $image from $base"
DOCKER_BUILDKIT=1 "$DOCKER" build --progress=plain \
  --build-arg "NODE_IMAGE=$base" "${secret[@]}" -t "$image" "$here" \
  || die "docker build failed"

mkdir -p "$(dirname "$sbom")"
"$DOCKER" run --rm --network none --entrypoint cat "$image" /app/sbom.cdx.json >"$sbom.part" || die "cannot read the SBOM from $image"
mv "$sbom.part" "$sbom"
say "$image: $("$DOCKER" image inspect -f '{{ .Size }}' "$image" | awk '{ printf "%.0f MB", $1 / 1e6 }'), SBOM in $sbom"
