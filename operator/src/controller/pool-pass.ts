/**
 * What the phases of one pool reconcile share: the options of the PoolReconciler, what the
 * pass read from the caches and planned (the pure desired state), the problems found so far
 * and the count of writes. The reconciler builds it once per pass; each phase
 * (pool-owned-objects, pool-shards, pool-transitions, pool-target-status, pool-status-writer)
 * reads it and adds its writes and problems.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { OwnerReference } from '@pglog/common/api/common.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';

import type { PoolPlan } from '../desired/assignment.ts';
import type { PolicyRefusal, PoolPolicy } from '../desired/pool-policy.ts';
import type { PoolProblem, StatefulSetState } from '../desired/pool-status.ts';
import type { OperatorMetrics } from './operator-metrics.ts';

/** Reads of the informer caches. */
export interface CacheReader<T> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(): T[];
}

export interface EventSink {
  record(regarding: KubeObject, type: 'Normal' | 'Warning', reason: string, note: string): Promise<void>;
}

export interface PoolReconcilerOptions {
  client: KubeClient;
  pools: CacheReader<CollectorPool>;
  targets: CacheReader<TargetObject>;
  shards: CacheReader<CollectorShard>;
  statefulSets: CacheReader<KubeObject & { status?: StatefulSetState }>;
  services: CacheReader<KubeObject>;
  podDisruptionBudgets: CacheReader<KubeObject>;
  events: EventSink;
  metrics: OperatorMetrics;
  /** Image of collector and sidecar when the pool names none (the operator's own). */
  defaultImage: string;
  serviceAccountName?: string;
  /** Allowed images and namespaces (pool-policy.ts); undefined: any (tests of the reconcile alone). */
  policy?: PoolPolicy;
  fieldManager: string;
  now: () => number;
  /** Parallel status writes (first reconcile of 1,000 targets). */
  statusConcurrency?: number;
}

/** What the reconciler remembers between passes, per pool (`namespace/name`). */
export interface PoolMemory {
  /** Last shard count, to drop the metrics of shards a scale-down removed. */
  shardCounts: Map<string, number>;
  /**
   * The problem last announced: the informer may not have the status written by the last
   * pass yet, so it alone cannot tell whether the Warning went out already.
   */
  announced: Map<string, string>;
}

/** One pass over one pool. */
export interface PoolPass {
  o: PoolReconcilerOptions;
  memory: PoolMemory;
  pool: CollectorPool;
  namespace: string;
  name: string;
  /** The pool's uid (objects from the API server always have one) and the owner reference it gives. */
  uid: string;
  owner: OwnerReference;
  nowIso: string;
  /** The targets the pool selects and its shards, as the caches hold them. */
  selected: TargetObject[];
  existingShards: CollectorShard[];
  plan: PoolPlan;
  /** A refused image: the StatefulSet is left as it is. */
  refusal: PolicyRefusal | undefined;
  /** Name of the pool's StatefulSet (set by the owned-objects phase), whose status the pool's reports. */
  statefulSetName?: string;
  /** Problems found so far; the status phase reports them. */
  problems: PoolProblem[];
  writes: number;
  /** Writes left out because their object changed after the pass read it (the pass is repeated soon). */
  skipped: number;
}
