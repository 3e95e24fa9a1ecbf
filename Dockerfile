# syntax=docker/dockerfile:1
# One image for every pglog process: `pglog operator`, `pglog collect` (with its launcher) and
# `pglog sshproxy` (the OpenSSH sidecar). Node.js 24 runs the TypeScript sources directly (type
# stripping, ADR 0001), so there is no build step beyond the npm dependencies.
#
# Runs as uid/gid 65532 with a read-only root filesystem: nothing is written outside the
# volumes the pod mounts (/tmp, and the sidecar directory /run/pglog/sshproxy). HOME is /tmp
# so OpenSSH finds a writable home if it ever looks for one (pglog passes -F /dev/null and its
# own known_hosts, so it does not).

# The same Node.js as the Makefile pins for development and tests (NODE_VERSION).
ARG NODE_IMAGE=node:24.21.0-slim

# ssh2's native AES-GCM binding and cpu-features are compiled here, against this Node.
FROM ${NODE_IMAGE} AS deps
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
COPY collector/package.json collector/
COPY operator/package.json operator/
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error

FROM ${NODE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends openssh-client ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 pglog \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin pglog
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY package.json package-lock.json ./
COPY collector/package.json collector/
COPY collector/bin collector/bin
COPY collector/src collector/src
COPY operator/package.json operator/
COPY operator/src operator/src
RUN ln -s /app/collector/bin/pglog /usr/local/bin/pglog
ENV NODE_ENV=production HOME=/tmp
USER 65532:65532
# tini reaps the ssh processes the sidecar starts and forwards SIGTERM; pods override the
# command with `pglog ...` (see the operator's StatefulSet), `docker run IMAGE collect ...` works too.
ENTRYPOINT ["/usr/bin/tini", "--", "pglog"]
CMD ["help"]
