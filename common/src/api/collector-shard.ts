/**
 * The `CollectorShard` resource (group `pglog.io`, version `v1alpha1`): one per replica of a
 * `CollectorPool`, named `<pool>-<index>`, owned by the pool. Like a Node object, its spec
 * comes from the control plane (the operator's assignment) and its status from the agent
 * (the collector pod with the same ordinal).
 *
 * The doc comments and JSDoc tags become the CRD schema (see collector-pool.ts).
 */
import type { Condition, ObjectMeta } from './common.ts';

export const SHARD_KIND = 'CollectorShard';

/** One shard of a pool: the targets one collector pod collects. */
export interface CollectorShard {
  /** Always `pglog.io/v1alpha1`. */
  apiVersion: 'pglog.io/v1alpha1';
  /** Always `CollectorShard`. */
  kind: 'CollectorShard';
  metadata: ObjectMeta;
  spec: CollectorShardSpec;
  /** Written by the collector pod that owns the shard. */
  status?: CollectorShardStatus;
}

/** The assignment, written by the operator. */
export interface CollectorShardSpec {
  /**
   * Name of the `CollectorPool`.
   * @pattern ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
   * @maxLength 63
   */
  pool: string;
  /**
   * Index of the shard: pod `<pool>-<index>` of the pool's StatefulSet collects it.
   * @minimum 0
   */
  index: number;
  /**
   * The targets this shard collects, sorted by name.
   * @listMapKey name
   */
  targets: ShardTarget[];
  /**
   * Number of entries in `targets`, for the `Targets` column of `kubectl get collectorshards`
   * (a printer column's JSONPath cannot count a list).
   * @minimum 0
   */
  targetCount?: number;
  /** Node.js settings the collector process starts with; a change restarts it after a clean flush. */
  tuning: ShardTuning;
}

/** One assigned target. */
export interface ShardTarget {
  /** Name of the `PostgresTarget` in the shard's namespace. */
  name: string;
  /**
   * Transport to use now, as chosen by the operator.
   * @enum inproc proxy
   */
  transport: 'inproc' | 'proxy';
  /**
   * Assignment epoch: raised each time the target moves to another shard. The collector claims
   * the target's streams in the store with it, so an older owner that still reads is fenced
   * and nothing is written twice.
   * @minimum 1
   */
  epoch: number;
  /** When the transport was last changed (RFC 3339); the minimum dwell time counts from it. */
  transportSince?: string;
}

/** Process settings of the collector. */
export interface ShardTuning {
  /**
   * `UV_THREADPOOL_SIZE`.
   * @minimum 1
   * @maximum 1024
   */
  uvThreadpoolSize: number;
  /**
   * V8 `--max-old-space-size`, MiB.
   * @minimum 64
   */
  maxOldSpaceSizeMiB: number;
  /**
   * V8 `--max-semi-space-size`, MiB.
   * @minimum 1
   * @maximum 256
   */
  maxSemiSpaceSizeMiB: number;
  /**
   * V8 `--heap-growing-percent`: how far the old generation grows past what survived the last
   * mark-compact before the next one (100: to twice that). Absent in a shard written by an
   * operator before it was tuned: the launcher's own default then (50, ADR 0018).
   * @minimum 10
   * @maximum 400
   */
  heapGrowingPercent?: number;
}

/** What the collector pod reports. */
export interface CollectorShardStatus {
  /** The `metadata.generation` of the spec the collector runs. */
  observedGeneration?: number;
  /** Name of the pod that wrote this status. */
  pod?: string;
  /** The tuning the running collector process started with. */
  tuning?: ShardTuning;
  /** When the collector last wrote this status (RFC 3339). */
  updatedAt?: string;
  /**
   * Per-target state, sorted by name.
   * @listMapKey name
   */
  targets?: ShardTargetStatus[];
  /**
   * `Ready` (every assigned target is collecting), as in Kubernetes.
   * @listMapKey type
   */
  conditions?: Condition[];
}

/** One target as its collector sees it. */
export interface ShardTargetStatus {
  /** Name of the `PostgresTarget`. */
  name: string;
  /**
   * The transport its streams use now.
   * @enum inproc proxy
   */
  transport: 'inproc' | 'proxy';
  /**
   * Smoothed rate of log bytes read per second, all instances.
   * @type number
   */
  bytesPerSecond: number;
  /**
   * Smoothed rate of log lines read per second, all instances.
   * @type number
   */
  linesPerSecond: number;
  /** Bytes between the committed offsets and the ends of the logs. */
  lagBytes: number;
  /** Whether every stream of the target is connected. */
  connected: boolean;
  /** The epoch the streams were claimed with. */
  epoch: number;
  /** Time of the newest entry committed (RFC 3339). */
  lastEntryTime?: string;
  /** Stable error code of the last failure, if the target is failing now. */
  error?: string;
  /**
   * Stable error code of the failing SQL snapshots (`SQL_CONNECT_FAILED`, `SQL_TIMEOUT`, ...),
   * if the newest snapshot of one of its instances failed; absent while they succeed or when
   * the target takes none.
   */
  snapshotError?: string;
  /**
   * Why the SQL role of one of its instances is more powerful than monitoring needs, as
   * found at the start of its newest SQL session: `SQL_ROLE_SUPERUSER` or `SQL_ROLE_CAN_WRITE`
   * (the stronger when instances differ); absent when no role is, or none was checked yet.
   */
  sqlRoleWarning?: string;
  /**
   * Committed read positions, one per instance.
   * @listMapKey instance
   */
  offsets?: ShardOffset[];
}

/** A committed read position. */
export interface ShardOffset {
  /** Instance name. */
  instance: string;
  /** Log file path on the server. */
  file: string;
  /**
   * Byte offset committed in that file.
   * @minimum 0
   */
  offset: number;
}
