/**
 * What configures a `pglog collect` process, as the collector receives it: one plain object,
 * parsed and validated once from the command line by the pglog command (@pglog/cli,
 * collect-config.ts, transport-config.ts, cluster-config.ts); nothing here reads argv or the
 * environment.
 */
import type { ShardTuning } from '@pglog/common/api/collector-shard.ts';
import type { StartPoint } from '@pglog/common/api/postgres-target.ts';
import type { KubeAccess } from '@pglog/common/kube/kube-access.ts';
import type { OptionLogLevel } from '@pglog/common/observability/logger.ts';
import type { PolicySettings } from '@pglog/common/promotion/policy.ts';

import type { BatcherOptions } from './batcher.ts';

export interface CollectConfig {
  /** Standalone mode: the targets file; null in cluster mode. */
  targetsFile: string | null;
  /** Cluster mode (`--shard`); null standalone. */
  cluster: ClusterConfig | null;
  storeUrl: string;
  listen: { host: string; port: number } | null;
  logLevel: OptionLogLevel;
  /** Where a log never collected before starts, for targets that do not say (spec.startAt). */
  startAt: StartPoint;
  batcher: BatcherOptions;
  /** Store connections, one batch committing on each at a time (the batcher's lanes). */
  storeConnections: number;
  maxEntryBytes: number;
  /** Bytes of the process's query template cache (sql-template-cache.ts). */
  templateCacheBytes: number;
  retentionDays: number | null;
  stopTimeoutMs: number;
  keepaliveIntervalMs: number;
  /** SSH window of each session channel of an `inproc` target (ssh-window.ts). */
  sshWindowBytes: number;
  transport: TransportConfig;
}

export type SidecarMode = 'child' | 'external' | 'off';

export interface TransportConfig {
  /** Thresholds, minimum dwell and capacity of promotion (validated). */
  policy: PolicySettings;
  /** Time constant of the smoothed rate. */
  rateTimeConstantMs: number;
  /** How the sidecar runs: started by this process, started by someone else (a pod's second container), or not at all. */
  sidecar: SidecarMode;
  /** The shared directory; null: a private temporary one (child mode only). */
  sidecarDir: string | null;
}

export interface ClusterConfig {
  /** Name of the CollectorShard this process collects. */
  shard: string;
  /** Its namespace; null: the kubeconfig context's or the pod's namespace, else `default`. */
  namespace: string | null;
  kube: KubeAccess;
  /** Shortest time between two status writes. */
  statusIntervalMs: number;
  /** Targets and Secrets are read again this often (edits, key rotation). */
  resolveIntervalMs: number;
  /** Name of this pod (status.pod): POD_NAME, else HOSTNAME. */
  pod: string | null;
  /** Set in the collector child: the tuning the launcher started it with. Null: this is the launcher. */
  launched: ShardTuning | null;
}
