/**
 * Targets no pool collects (their `spec.pool` names no CollectorPool, or their pool was
 * deleted) must not keep showing a shard and `Ready True` from the past: their status loses
 * shard, transport, rates and lag, and `Ready` becomes False with reason `NoPool`. Reconciled
 * per namespace, level-triggered like the pools.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { Condition } from '@pglog/common/api/common.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { isKubeError } from '@pglog/common/kube/errors.ts';
import { POSTGRES_TARGETS } from '@pglog/common/kube/resources.ts';

import { selectPoolTargets } from '../desired/assignment.ts';
import { findCondition, setCondition } from '../desired/conditions.ts';
import { mapLimit } from './map-limit.ts';
import type { CacheReader } from './pool-pass.ts';

/** The merge patch that marks `target` unassigned, or null when its status already says so. */
export function unassignedStatusPatch(target: TargetObject, nowIso: string): { status: Record<string, unknown> } | null {
  const status = target.status ?? {};
  const pool = target.spec.pool;
  const ready = {
    type: 'Ready',
    status: 'False' as const,
    reason: 'NoPool',
    message:
      pool === undefined
        ? 'no CollectorPool selects this target (spec.pool is not set and no targetSelector matches)'
        : `no CollectorPool ${pool} in this namespace selects this target`,
  };
  const current = findCondition(status.conditions, 'Ready');
  const stale = status.shard !== undefined || status.transport !== undefined || status.rates !== undefined || status.lag !== undefined;
  if (!stale && current?.status === ready.status && current.reason === ready.reason && current.message === ready.message) return null;
  const conditions: Condition[] = setCondition(status.conditions, ready, nowIso, target.metadata.generation);
  // null removes a field in a JSON merge patch.
  return { status: { shard: null, transport: null, rates: null, lag: null, conditions } };
}

export async function reconcileUnassignedTargets(
  namespace: string,
  o: { client: KubeClient; pools: CacheReader<CollectorPool>; targets: CacheReader<TargetObject>; now: () => number },
): Promise<number> {
  const pools = o.pools.list().filter((p) => p.metadata.namespace === namespace && p.metadata.deletionTimestamp === undefined);
  const targets = o.targets.list().filter((t) => t.metadata.namespace === namespace);
  const selected = new Set([...selectPoolTargets(pools, targets).values()].flat().map((t) => t.metadata.name));
  const nowIso = new Date(o.now()).toISOString();
  const patches = targets.flatMap((t) => {
    if (selected.has(t.metadata.name)) return [];
    const patch = unassignedStatusPatch(t, nowIso);
    return patch === null ? [] : [{ name: t.metadata.name, patch }];
  });
  await mapLimit(patches, 16, async ({ name, patch }) => {
    try {
      await o.client.mergePatch(POSTGRES_TARGETS, namespace, name, patch, 'status');
    } catch (e) {
      if (!isKubeError(e, 'KUBE_NOT_FOUND')) throw e;
    }
  });
  return patches.length;
}
