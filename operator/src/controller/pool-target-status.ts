/**
 * The target-status phase of a pool reconcile: each selected target's shard, transport, rates
 * and conditions (what `kubectl get postgrestargets` shows), written where they changed, a
 * bounded number at a time.
 */
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import { isKubeError } from '@pglog/common/kube/errors.ts';
import { POSTGRES_TARGETS } from '@pglog/common/kube/resources.ts';

import { desiredTargetStatus, targetStatusChanged } from '../desired/target-status.ts';
import { mapLimit } from './map-limit.ts';
import type { PoolPass } from './pool-pass.ts';

export async function targetStatusPhase(pass: PoolPass): Promise<void> {
  const { o, namespace } = pass;
  const reported = reportedTargets(pass.existingShards);
  const statusWrites = pass.selected.flatMap((target) => {
    const assignment = pass.plan.targets.get(target.metadata.name);
    if (assignment === undefined) return [];
    const next = desiredTargetStatus(target, assignment, reported.get(target.metadata.name), pass.nowIso);
    return targetStatusChanged(target, next) ? [{ target, next }] : [];
  });
  let writes = 0;
  await mapLimit(statusWrites, o.statusConcurrency ?? 16, async ({ target, next }) => {
    // Decided from the cache when the pass began; a target that changed since (deleted, moved to
    // another pool, its status rewritten) is left to the next pass, which reads it again.
    // The cache can lag behind the API server (the event of a write made by the previous pass may
    // not have arrived yet), so the write carries the resourceVersion it was decided on: the API
    // server refuses it (409) if the target changed meanwhile.
    if (o.targets.get(namespace, target.metadata.name)?.metadata.resourceVersion !== target.metadata.resourceVersion) return;
    const patch = { metadata: { resourceVersion: target.metadata.resourceVersion }, status: next };
    try {
      await o.client.mergePatch(POSTGRES_TARGETS, namespace, target.metadata.name, patch, 'status');
      writes++;
    } catch (e) {
      // Deleted, or changed, since the cache was read: nothing to write now.
      if (!isKubeError(e, 'KUBE_NOT_FOUND') && !isKubeError(e, 'KUBE_CONFLICT')) throw e;
    }
  });
  pass.writes += writes;
  pass.skipped += statusWrites.length - writes;
}

type ReportedTarget = NonNullable<NonNullable<CollectorShard['status']>['targets']>[number];

/** Each target's entry in the status of the shard that is assigned it now. */
function reportedTargets(shards: readonly CollectorShard[]): Map<string, ReportedTarget> {
  const out = new Map<string, ReportedTarget>();
  for (const s of shards) {
    const assigned = new Set(s.spec.targets.map((t) => t.name));
    for (const t of s.status?.targets ?? []) if (assigned.has(t.name)) out.set(t.name, t);
  }
  return out;
}
