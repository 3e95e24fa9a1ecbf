/**
 * The `CollectorPool` resource (group `pglog.io`, version `v1alpha1`): a set of collector pods
 * (one StatefulSet) that collects the targets naming the pool, sharded by measured load.
 * `spec.replicas` is served through the scale subresource, so `kubectl scale` and an HPA
 * drive it.
 *
 * As with target-types.ts, the doc comments become the CRD's OpenAPI descriptions (`kubectl
 * explain`) and the JSDoc tags (`@default`, `@minimum`, `@maximum`, `@pattern`, `@enum`,
 * `@validation`) become its schema: crds/ is generated from these files (scripts/gen-crds.ts)
 * and a test fails when the two differ.
 */
import type { Condition, LabelSelector, ObjectMeta, ResourceRequirements, SecretKeySelector } from './common.ts';

export const POOL_KIND = 'CollectorPool';

/**
 * A pool of collector pods.
 * @validation self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63 :: metadata.name must be a DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit (it names the pool's StatefulSet and is the spec.pool of its targets)
 */
export interface CollectorPool {
  /** Always `pglog.io/v1alpha1`. */
  apiVersion: 'pglog.io/v1alpha1';
  /** Always `CollectorPool`. */
  kind: 'CollectorPool';
  metadata: ObjectMeta;
  spec: CollectorPoolSpec;
  /** Written by the operator. */
  status?: CollectorPoolStatus;
}

/** The pool's size, targets, store, sharding, transports and pods. */
export interface CollectorPoolSpec {
  /**
   * Number of collector pods (and shards). Served by the scale subresource: `kubectl scale`
   * and a HorizontalPodAutoscaler change it.
   * @default 1
   * @minimum 0
   * @maximum 1000
   */
  replicas: number;
  /**
   * Targets with a matching label are collected by this pool as well as those whose
   * `spec.pool` names it. A target matched by two pools is collected by the one its
   * `spec.pool` names, or else by the pool whose name sorts first.
   */
  targetSelector?: LabelSelector;
  /** Where the collectors write: a PostgreSQL connection URL in a Secret. */
  store: PoolStore;
  /**
   * How targets are spread over the pool's shards.
   * @default {}
   */
  sharding: PoolSharding;
  /**
   * When `auto` targets move to and from the sshproxy sidecar.
   * @default {}
   */
  transport: PoolTransport;
  /**
   * The collector container.
   * @default {}
   */
  collector: PoolContainer;
  /**
   * The sshproxy sidecar container.
   * @default {}
   */
  sidecar: PoolSidecar;
  /**
   * Node.js settings of each collector process.
   * @default {}
   */
  nodeTuning: NodeTuning;
}

/** The store connection. */
export interface PoolStore {
  /** Key of a Secret in the pool's namespace holding a `postgresql://` URL. */
  secretRef: SecretKeySelector;
}

/** Sharding parameters (consistent hashing with bounded loads). */
export interface PoolSharding {
  /**
   * Targets are placed on shards within this factor times the mean load, and stay on theirs up
   * to `2 × loadFactor − 1` times it (1.5 by default). Lower spreads load more evenly but moves
   * more targets when rates change; 1 is strict.
   * @type number
   * @default 1.25
   * @minimum 1
   * @maximum 4
   */
  loadFactor: number;
  /**
   * Weight, in bytes per second, of a target that is new, idle or slower than this.
   * @default 1024
   * @minimum 1
   */
  minWeightBytesPerSecond: number;
}

/**
 * Transport promotion thresholds (hysteresis) for targets with `spec.transport: auto`.
 * (The rules test has(): the API server checks them against the `{}` default too, before nested
 * defaults apply; on objects it stores, the defaults have been applied.)
 * @validation !has(self.demoteBelowBitsPerSecond) || !has(self.promoteAboveBitsPerSecond) || self.demoteBelowBitsPerSecond < self.promoteAboveBitsPerSecond :: demoteBelowBitsPerSecond must be below promoteAboveBitsPerSecond
 */
export interface PoolTransport {
  /**
   * An `auto` target whose read rate stays above this many bits per second moves to the sidecar.
   * @default 1250000
   * @minimum 1
   */
  promoteAboveBitsPerSecond: number;
  /**
   * An `auto` target in the sidecar whose rate falls below this many bits per second moves back
   * to the in-process client. Must be below `promoteAboveBitsPerSecond`.
   * @default 750000
   * @minimum 0
   */
  demoteBelowBitsPerSecond: number;
  /**
   * A target stays on a transport at least this many seconds before it moves again.
   * @default 60
   * @minimum 0
   */
  minDwellSeconds: number;
  /**
   * Most targets one pod runs through its sidecar (pinned ones included).
   * @default 64
   * @minimum 0
   */
  proxyCapacityPerPod: number;
}

/** The collector container. */
export interface PoolContainer {
  /**
   * Container image with the `pglog` command. Default: the operator's own image. Must be one
   * the operator allows (`--allowed-images`); another leaves the pool Ready False, reason ImageNotAllowed.
   */
  image?: string;
  /**
   * When to pull the image.
   * @default "IfNotPresent"
   * @enum Always IfNotPresent Never
   */
  imagePullPolicy: string;
  /** CPU and memory requests and limits. The memory limit sizes the V8 heap. */
  resources?: ResourceRequirements;
}

/** The sidecar container. */
export interface PoolSidecar {
  /** Container image with `pglog` and the OpenSSH client. Default: the collector's image. Must be allowed like it. */
  image?: string;
  /** CPU and memory requests and limits. */
  resources?: ResourceRequirements;
}

/**
 * Node.js tuning of the collector process: computed per pod, or fixed.
 * @validation !has(self.mode) || self.mode != 'explicit' || (has(self.uvThreadpoolSize) && has(self.maxOldSpaceSizeMiB) && has(self.maxSemiSpaceSizeMiB)) :: mode explicit needs uvThreadpoolSize, maxOldSpaceSizeMiB and maxSemiSpaceSizeMiB
 */
export interface NodeTuning {
  /**
   * `auto`: the operator computes the values per pod from its shard and container limits;
   * `explicit`: the values below are used as given.
   * @default "auto"
   * @enum auto explicit
   */
  mode: string;
  /**
   * `UV_THREADPOOL_SIZE` (explicit mode).
   * @minimum 1
   * @maximum 1024
   */
  uvThreadpoolSize?: number;
  /**
   * V8 `--max-old-space-size` in MiB (explicit mode).
   * @minimum 64
   */
  maxOldSpaceSizeMiB?: number;
  /**
   * V8 `--max-semi-space-size` in MiB (explicit mode).
   * @minimum 1
   * @maximum 256
   */
  maxSemiSpaceSizeMiB?: number;
  /**
   * V8 `--heap-growing-percent` (explicit mode; computed from the semi-space when left out).
   * @minimum 10
   * @maximum 400
   */
  heapGrowingPercent?: number;
}

/** Observed state of the pool, written by the operator. */
export interface CollectorPoolStatus {
  /** Number of shards (pods) the operator runs now; the scale subresource reads it. */
  replicas?: number;
  /** Label selector of the pool's pods, in string form; the scale subresource reads it (HPA). */
  selector?: string;
  /** Pods that are ready. */
  readyReplicas?: number;
  /** Number of targets assigned to the pool. */
  targets?: number;
  /**
   * Load per shard.
   * @listMapKey index
   */
  shards?: ShardLoad[];
  /**
   * `Ready`, `Progressing`, `Degraded`, as in Kubernetes.
   * @listMapKey type
   */
  conditions?: Condition[];
  /** The `metadata.generation` this status describes. */
  observedGeneration?: number;
}

/** One shard's share of the pool. */
export interface ShardLoad {
  /** Shard index (the pod's ordinal). */
  index: number;
  /** Targets assigned. */
  targets: number;
  /**
   * Summed weight of its targets in bytes per second.
   * @type number
   */
  bytesPerSecond: number;
  /** Targets it runs through its sidecar. */
  proxied: number;
}
