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

/** What one pass over a namespace's unassigned targets did. */
export interface UnassignedOutcome {
  writes: number;
  /** Targets left alone because they changed, or a pool took them, after the pass looked (the next pass decides). */
  skipped: number;
}

export async function reconcileUnassignedTargets(
  namespace: string,
  o: { client: KubeClient; pools: CacheReader<CollectorPool>; targets: CacheReader<TargetObject>; now: () => number },
): Promise<UnassignedOutcome> {
  const targets = o.targets.list().filter((t) => t.metadata.namespace === namespace);
  const selected = selectedNames(o.pools, namespace, targets);
  const nowIso = new Date(o.now()).toISOString();
  const patches = targets.flatMap((t) => {
    if (selected.has(t.metadata.name)) return [];
    const patch = unassignedStatusPatch(t, nowIso);
    return patch === null ? [] : [{ target: t, patch }];
  });
  let writes = 0;
  await mapLimit(patches, 16, async ({ target, patch }) => {
    // Decided from the caches when the pass began; a write seconds later (10,000 targets take a
    // while) must not overwrite what a pool created meanwhile wrote, nor a target that changed.
    const now = o.targets.get(namespace, target.metadata.name);
    if (now === undefined || now.metadata.resourceVersion !== target.metadata.resourceVersion || selectedNames(o.pools, namespace, [now]).size > 0) return;
    // The resourceVersion decided on goes with the write: the API server refuses it (409) if the
    // target changed after the cache saw it (a pool's write whose event has not arrived yet).
    try {
      await o.client.mergePatch(
        POSTGRES_TARGETS,
        namespace,
        target.metadata.name,
        { metadata: { resourceVersion: target.metadata.resourceVersion }, ...patch },
        'status',
      );
      writes++;
    } catch (e) {
      if (!isKubeError(e, 'KUBE_NOT_FOUND') && !isKubeError(e, 'KUBE_CONFLICT')) throw e;
    }
  });
  return { writes, skipped: patches.length - writes };
}

/** Names of the `targets` that a pool of the namespace (not being deleted) selects now. */
function selectedNames(pools: CacheReader<CollectorPool>, namespace: string, targets: readonly TargetObject[]): Set<string> {
  const live = pools.list().filter((p) => p.metadata.namespace === namespace && p.metadata.deletionTimestamp === undefined);
  return new Set([...selectPoolTargets(live, targets).values()].flat().map((t) => t.metadata.name));
}
