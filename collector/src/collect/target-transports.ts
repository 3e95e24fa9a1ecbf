/**
 * The transports of one target, made when it starts: its SSH connection in the process's pool
 * (connects on first use; state changes go to metrics and the log) and, with a sidecar, its
 * server entry there (key and known_hosts written to the shared directory) and a ProxyShell.
 */
import type { PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { isLastingSshFailure } from '@pglog/common/errors.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';

import type { CollectorMetrics } from '../observability/metrics.ts';
import { ProxyShell } from '../transport/proxy-shell.ts';
import type { SidecarClient } from '../transport/sidecar-client.ts';
import { cryptoBindingAvailable } from '../transport/ssh-algorithms.ts';
import type { SshConnectionPool } from '../transport/ssh-pool.ts';
import type { CollectConfig } from './collect-types.ts';
import type { TargetCredentials } from './credentials.ts';
import { TargetStreams } from './target-streams.ts';

export interface TargetTransportsOptions {
  config: CollectConfig;
  connections: SshConnectionPool;
  /** Null when there is no sidecar (--sshproxy off). */
  sidecar: SidecarClient | null;
  metrics: CollectorMetrics;
  log: Logger;
  /** The target's rate as last measured (by its previous owner), to start its meters from. */
  rateHint?: RateHint;
}

/** A target's rate as last reported (PostgresTarget status.rates). */
export interface RateHint {
  bytesPerSecond: number;
  linesPerSecond: number;
}

/** A target's transports: its SSH connection (connects on first use) and its sidecar server. */
export async function openTargetStreams(target: PostgresTarget, creds: TargetCredentials, o: TargetTransportsOptions): Promise<TargetStreams> {
  const { config, log, metrics, sidecar } = o;
  const name = target.metadata.name;
  // Set below; the connection reports state changes only once it is used, after that.
  let streams: TargetStreams | null = null;
  const connection = o.connections.get({
    target: name,
    host: target.spec.host,
    port: target.spec.port,
    username: target.spec.user,
    privateKey: creds.privateKey,
    privateKeySource: creds.privateKeySource,
    knownHosts: creds.knownHosts,
    keepaliveIntervalMs: config.keepaliveIntervalMs,
    channelWindowBytes: config.sshWindowBytes,
    onStateChange: (state, error) => {
      // Through the sidecar, its master's state is what counts (TransportControl sets it).
      if (streams?.transport !== 'proxy') metrics.targetConnected(name, state === 'ready');
      if (state === 'ready') {
        if (connection.connects > 1) metrics.reconnect(name);
        log.info(
          { target: name, cipher: connection.negotiatedCipher, nativeCrypto: cryptoBindingAvailable() },
          `ssh ${name}: connected to ${target.spec.host}:${target.spec.port} (cipher ${connection.negotiatedCipher ?? 'unknown'})`,
        );
      }
      // A refused host key or key is a lasting, security-relevant refusal: an error, not a blip.
      if (error !== undefined)
        log[isLastingSshFailure(error.code) ? 'error' : 'warn'](
          { target: name, state, code: error.code, err: error },
          `ssh ${name}: ${state}: ${error.message}`,
        );
    },
  });
  let proxy: ProxyShell | null = null;
  if (sidecar !== null) {
    await sidecar.setServer({
      name,
      host: target.spec.host,
      port: target.spec.port,
      user: target.spec.user,
      privateKey: creds.privateKey,
      knownHosts: creds.knownHosts.text,
      maxSessions: 10,
      serverAliveIntervalS: Math.max(1, Math.round(config.keepaliveIntervalMs / 1000)),
      connectTimeoutS: 20,
    });
    proxy = new ProxyShell({ client: sidecar, server: name, endpoint: `${target.spec.host}:${target.spec.port}` });
  }
  streams = new TargetStreams({
    target,
    inproc: connection,
    proxy,
    startAt: config.startAt,
    rateTimeConstantMs: config.transport.rateTimeConstantMs,
    initialBytesPerSecond: o.rateHint?.bytesPerSecond ?? 0,
    metrics,
    log,
  });
  return streams;
}
