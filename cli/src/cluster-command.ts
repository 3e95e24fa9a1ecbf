/**
 * `pglog collect --shard NAME`: cluster mode. Without `--launched` this process is the
 * launcher (launcher.ts); with it, the collector child: Collector + ShardCollector, metrics
 * and health, until stopped (exit 0) or until its tuning changes (exit EXIT_TUNING_CHANGED).
 */
import type { Writable } from 'node:stream';

import { runLauncher } from '@pglog/collector/cluster/launcher.ts';
import { ShardCollector } from '@pglog/collector/cluster/shard-collector.ts';
import { EXIT_TUNING_CHANGED } from '@pglog/collector/cluster/tuning.ts';
import type { CollectConfig } from '@pglog/collector/collect/collect-types.ts';
import type { ClusterConfig } from '@pglog/collector/collect/collect-types.ts';
import { Collector } from '@pglog/collector/collect/collector.ts';
import { createCollectorMetrics } from '@pglog/collector/observability/metrics.ts';
import { describeStore } from '@pglog/collector/store/store-url.ts';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { loadKubeAccess } from '@pglog/common/kube/kube-access.ts';
import { createLogger } from '@pglog/common/observability/logger.ts';
import { settleWithin } from '@pglog/common/time/retry.ts';

import { startCollectHttp } from './collect-http.ts';

export interface ClusterIO {
  stdout: Writable;
  /** Calls `handler` once, with the signal, when the process is asked to stop. */
  onStopRequest(handler: (signal?: NodeJS.Signals) => void): void;
  /** [node, ...node flags, main script]. */
  selfCommand: readonly string[];
  /** This process's `collect` arguments (the launcher passes them on). */
  collectArgs: readonly string[];
  /** The environment (the launcher passes it on, with UV_THREADPOOL_SIZE set). */
  env: Readonly<Record<string, string | undefined>>;
}

export async function runClusterCollect(config: CollectConfig, cluster: ClusterConfig, io: ClusterIO): Promise<number> {
  const log = createLogger({ level: config.logLevel, destination: io.stdout });
  const stop = new AbortController();
  let stopSignal: NodeJS.Signals = 'SIGTERM';
  io.onStopRequest((signal) => {
    stopSignal = signal ?? 'SIGTERM';
    stop.abort();
  });
  const kubeConfig = await loadKubeAccess(cluster.kube);
  const namespace = cluster.namespace ?? kubeConfig.namespace ?? 'default';
  const kube = createKubeClient(kubeConfig, { userAgent: cluster.launched === null ? 'pglog-launcher' : 'pglog-collector' });
  try {
    if (cluster.launched === null) {
      return await runLauncher({
        kube,
        namespace,
        shard: cluster.shard,
        selfCommand: io.selfCommand,
        collectArgs: io.collectArgs,
        env: io.env,
        log,
        stop: stop.signal,
        stopSignal: () => stopSignal,
      });
    }
    return await runShardChild(config, cluster, cluster.launched, kube, namespace, io, log, stop.signal);
  } finally {
    kube.close();
  }
}

async function runShardChild(
  config: CollectConfig,
  cluster: ClusterConfig,
  tuning: NonNullable<ClusterConfig['launched']>,
  kube: KubeClient,
  namespace: string,
  io: ClusterIO,
  log: ReturnType<typeof createLogger>,
  stop: AbortSignal,
): Promise<number> {
  const metrics = createCollectorMetrics();
  const collector = new Collector({
    config,
    targets: [],
    credentials: new Map(),
    log,
    metrics,
    selfCommand: io.selfCommand,
    logOutput: io.stdout,
    env: io.env,
  });
  const shard = new ShardCollector({
    kube,
    namespace,
    shard: cluster.shard,
    pod: cluster.pod,
    tuning,
    collector,
    statusIntervalMs: cluster.statusIntervalMs,
    resolveIntervalMs: cluster.resolveIntervalMs,
    drainTimeoutMs: config.stopTimeoutMs,
    log,
  });
  const http = await startCollectHttp(
    config.listen,
    metrics,
    () => {
      const a = collector.readiness();
      const b = shard.readiness();
      return { ready: a.ready && b.ready, reasons: [...a.reasons, ...b.reasons] };
    },
    log,
  );
  log.info(
    { store: describeStore(config.storeUrl), shard: cluster.shard, namespace, pid: process.pid, tuning },
    `pglog collect starting for CollectorShard ${namespace}/${cluster.shard}`,
  );
  const started = collector.start();
  const how = await shard.run(stop);
  await settleWithin(started, 1000);
  log.info(how === 'stopped' ? `stop requested: flushing (at most ${config.stopTimeoutMs} ms)` : 'stopping for the new tuning');
  await collector.stop(Date.now() + config.stopTimeoutMs - 250);
  await http?.close();
  log.info('pglog collect stopped');
  return how === 'tuning-changed' ? EXIT_TUNING_CHANGED : 0;
}
