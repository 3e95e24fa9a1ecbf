# One image for every pglog process: `pglog operator`, `pglog collect` (with its launcher) and
# `pglog sshproxy` (the OpenSSH sidecar). Node.js 24 runs the TypeScript sources directly (type
# stripping, ADR 0001), so there is no build step beyond the npm dependencies.
#
# Runs as uid/gid 65532 with a read-only root filesystem: nothing is written outside the
# volumes the pod mounts (/tmp, and the sidecar directory /run/pglog/sshproxy). HOME is /tmp
# so OpenSSH finds a writable home if it ever looks for one (pglog passes -F /dev/null and its
# own known_hosts, so it does not).
#
# Built by `make image` (scripts/build-image.sh). No `# syntax=` line on purpose: the daemon's
# own Dockerfile frontend handles `RUN --mount=type=secret`, and naming one would pull it from
# a public registry.

# The same Node.js as the Makefile pins for development and tests (NODE_VERSION); the tests
# pass a locally built stand-in with the same layout (scripts/build-base-image.sh).
ARG NODE_IMAGE=node:24.21.0-bookworm-slim

# ssh2's native AES-GCM binding and cpu-features are compiled here, against this Node; the
# compiler stays in this stage.
FROM ${NODE_IMAGE} AS deps
ENV npm_config_update_notifier=false
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
# Every workspace's package.json (npm ci checks them against the lockfile); test-support's only
# for that: its files are not in the image.
COPY common/package.json common/
COPY collector/package.json collector/
COPY operator/package.json operator/
COPY cli/package.json cli/
COPY test-support/package.json test-support/
# node-gyp uses the headers that ship with the image's Node (/usr/local/include/node) instead of
# downloading them, which fails offline and which ssh2's installer reports as success. The CA
# bundle npm must trust (the machine's `npm config get cafile`) arrives as a secret, so it is in
# no layer; without it npm uses its own CAs. The build fails when ssh2's binding is missing:
# without it every pod would decrypt with ssh2's JavaScript AES-GCM, several times slower.
RUN --mount=type=secret,id=npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export npm_config_cafile=/run/secrets/npm-ca; fi \
 && npm_config_nodedir=/usr/local npm ci --omit=dev --no-audit --no-fund --loglevel=error --cache /tmp/npm-cache \
 && rm -rf /tmp/npm-cache \
 && test -f node_modules/ssh2/lib/protocol/crypto/build/Release/sshcrypto.node \
 && node -e 'require("./node_modules/ssh2/lib/protocol/crypto/build/Release/sshcrypto.node")'
# The SBOM of exactly what `npm ci --omit=dev` installed: the lockfile's production packages
# (the dev ones are absent from node_modules, which `npm sbom` would otherwise report as missing).
RUN npm sbom --sbom-format cyclonedx --omit dev --package-lock-only >/app/sbom.cdx.json

FROM ${NODE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-client ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && groupadd --gid 65532 pglog \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin pglog
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
# The CycloneDX SBOM of the npm packages above; `make image` also writes it beside the image.
COPY --from=deps /app/sbom.cdx.json sbom.cdx.json
COPY package.json package-lock.json ./
COPY common/package.json common/
COPY common/src common/src
COPY collector/package.json collector/
COPY collector/src collector/src
COPY operator/package.json operator/
COPY operator/src operator/src
COPY cli/package.json cli/
COPY cli/bin cli/bin
COPY cli/src cli/src
RUN ln -s /app/cli/bin/pglog /usr/local/bin/pglog \
 && install -d -o 65532 -g 65532 /app/compile-cache
ENV NODE_ENV=production HOME=/tmp
USER 65532:65532
# Node's compile cache, warmed at build time: every pod then starts with its modules already
# type-stripped and compiled (no TypeScript stripper in memory: about 17 MB of peak RSS and
# 0.5 s of CPU less per container start, docs/benchmarks.md) and reads it from the read-only
# root filesystem. Node keys the cache by the user id and by some V8 flags, so it is warmed as
# the user pods run as, for `collect` (the launcher's heap flags) and for every other command
# (`help` loads them all); another uid runs as before, compiling at start-up.
ENV NODE_COMPILE_CACHE=/app/compile-cache
RUN pglog help >/dev/null && pglog collect --help >/dev/null
# tini reaps the ssh processes the sidecar starts and forwards SIGTERM; pods override the
# command with `pglog ...` (see the operator's StatefulSet), `docker run IMAGE collect ...` works too.
ENTRYPOINT ["/usr/bin/tini", "--", "pglog"]
CMD ["help"]
