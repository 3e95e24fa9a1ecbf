/**
 * The owned-objects phase of a pool reconcile: the StatefulSet, the headless Service and the
 * PodDisruptionBudget, created with POST when absent and server-side applied when they differ
 * from the desired ones. An object of the same name that the pool does not control is left
 * untouched and reported as a problem, also one created between the read that found none and
 * the create (ADR 0031); a refused image leaves the StatefulSet as it is (the pods running
 * keep theirs).
 */
import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import { POD_DISRUPTION_BUDGETS, SERVICES, STATEFUL_SETS } from '@pglog/common/kube/resources.ts';

import { desiredHeadlessService, desiredPodDisruptionBudget, desiredStatefulSet } from '../desired/pool-resources.ts';
import { applyOwned, controlledBy, createOwned, currentObject } from './owned-objects.ts';
import type { PoolPass } from './pool-pass.ts';
import { orInvalidSpec } from './pool-status-writer.ts';

export async function ownedObjectsPhase(pass: PoolPass): Promise<void> {
  const { o, pool, namespace, uid } = pass;
  const [sts, service, pdb] = await orInvalidSpec(
    { ...pass, targets: pass.selected.length, shards: pass.existingShards },
    () =>
      [
        desiredStatefulSet(pool, { defaultImage: o.defaultImage, serviceAccountName: o.serviceAccountName }),
        desiredHeadlessService(pool),
        desiredPodDisruptionBudget(pool),
      ] as const,
  );
  pass.statefulSetName = sts.metadata.name;
  const apply = { fieldManager: o.fieldManager, force: true };
  const conflicts: string[] = [];
  for (const [type, desired, cache] of [
    [STATEFUL_SETS, sts, o.statefulSets],
    [SERVICES, service, o.services],
    [POD_DISRUPTION_BUDGETS, pdb, o.podDisruptionBudgets],
  ] as const) {
    if (type === STATEFUL_SETS && pass.refusal !== undefined) continue;
    const objectName = (desired as KubeObject).metadata.name;
    const current = await currentObject(o.client, type, namespace, objectName, cache.get(namespace, objectName));
    if (current !== null && !controlledBy(current, uid)) {
      conflicts.push(`${type.kind} ${objectName}`);
      continue;
    }
    const result =
      current === null
        ? await createOwned(o.client, type, desired as KubeObject, apply)
        : await applyOwned(o.client, type, desired as KubeObject, current, apply);
    if (result === 'conflict') {
      conflicts.push(`${type.kind} ${objectName}`);
      continue;
    }
    if (result !== 'unchanged') pass.writes++;
    if (result === 'created') await o.events.record(pool, 'Normal', 'Created', `created ${type.kind} ${objectName}`);
  }
  if (conflicts.length > 0) {
    const one = conflicts.length === 1;
    pass.problems.push({
      reason: 'OwnedObjectConflict',
      message:
        `${conflicts.join(' and ')} in namespace ${namespace} already exist${one ? 's' : ''} and ${one ? 'is' : 'are'} not controlled by this pool: ` +
        'left untouched; rename the pool or remove the object',
    });
  }
}
