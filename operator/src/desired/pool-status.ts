/**
 * The CollectorPool's status: what the scale subresource reads (`replicas`, `selector`), the
 * load per shard and the conditions. Pure.
 */
import type { CollectorPool, CollectorPoolStatus, ShardLoad } from '@pglog/common/api/collector-pool.ts';
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { Condition } from '@pglog/common/api/common.ts';

import { setCondition } from './conditions.ts';

export interface StatefulSetState {
  replicas?: number;
  readyReplicas?: number;
}

/** A problem that keeps the pool from being reconciled as asked: a condition reason and message. */
export interface PoolProblem {
  reason: string;
  message: string;
}

export interface PoolObservation {
  pool: CollectorPool;
  selector: string;
  /** `status` of the pool's StatefulSet, when it exists. */
  statefulSet: StatefulSetState | undefined;
  targets: number;
  loads: ShardLoad[];
  /** The pool's shards as they are now (status written by collectors). */
  shards: readonly CollectorShard[];
  /** A problem that stops the reconcile (a terminal error, a refused image, a name conflict). */
  problem?: PoolProblem;
}

export function desiredPoolStatus(o: PoolObservation, nowIso: string): CollectorPoolStatus {
  const generation = o.pool.metadata.generation;
  const wanted = o.pool.spec.replicas;
  const replicas = o.statefulSet?.replicas ?? 0;
  const readyReplicas = o.statefulSet?.readyReplicas ?? 0;
  const reporting = o.shards.filter((s) => s.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true).length;
  let conditions: Condition[] | undefined = o.pool.status?.conditions;
  if (o.problem !== undefined) {
    conditions = setCondition(conditions, { type: 'Ready', status: 'False', ...o.problem }, nowIso, generation);
    conditions = setCondition(conditions, { type: 'Degraded', status: 'True', ...o.problem }, nowIso, generation);
  } else {
    const ready = readyReplicas >= wanted && reporting >= wanted;
    conditions = setCondition(
      conditions,
      ready
        ? { type: 'Ready', status: 'True', reason: 'AllShardsCollecting', message: `${wanted} of ${wanted} pods ready and collecting` }
        : {
            type: 'Ready',
            status: 'False',
            reason: 'ShardsNotReady',
            message: `${readyReplicas} of ${wanted} pods ready, ${reporting} of ${wanted} shards report Ready`,
          },
      nowIso,
      generation,
    );
    conditions = setCondition(conditions, { type: 'Degraded', status: 'False', reason: 'Reconciled', message: 'the pool is reconciled' }, nowIso, generation);
  }
  conditions = setCondition(
    conditions,
    replicas === wanted
      ? { type: 'Progressing', status: 'False', reason: 'Stable', message: `${replicas} replicas` }
      : { type: 'Progressing', status: 'True', reason: 'Scaling', message: `${replicas} replicas, scaling to ${wanted}` },
    nowIso,
    generation,
  );
  const status: CollectorPoolStatus = {
    replicas,
    selector: o.selector,
    readyReplicas,
    targets: o.targets,
    shards: o.loads,
    conditions,
  };
  if (generation !== undefined) status.observedGeneration = generation;
  return status;
}
