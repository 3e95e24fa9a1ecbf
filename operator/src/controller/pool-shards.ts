/**
 * The shards phase of a pool reconcile: one CollectorShard per replica whose spec is the
 * planned assignment; changed ones are replaced (optimistically: a concurrent writer makes it
 * a 409 and the loop reads again), surplus ones (a scale-down) deleted.
 */
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import { COLLECTOR_SHARDS } from '@pglog/common/kube/resources.ts';

import { semanticEqual } from '../desired/conditions.ts';
import { poolLabels } from '../desired/pool-resources.ts';
import type { PoolPass } from './pool-pass.ts';

export async function shardsPhase(pass: PoolPass): Promise<void> {
  const { o, pool, namespace } = pass;
  const byName = new Map(pass.existingShards.map((s) => [s.metadata.name, s]));
  for (const planned of pass.plan.shards) {
    // The count is redundant with the list; it is there for the printer column.
    const shard = { ...planned, spec: { ...planned.spec, targetCount: planned.spec.targets.length } };
    const current = byName.get(shard.name);
    byName.delete(shard.name);
    if (current === undefined) {
      const created: CollectorShard = {
        apiVersion: 'pglog.io/v1alpha1',
        kind: 'CollectorShard',
        metadata: { name: shard.name, namespace, labels: { ...poolLabels(pool), 'pglog.io/shard-index': String(shard.index) }, ownerReferences: [pass.owner] },
        spec: shard.spec,
      };
      await o.client.create(COLLECTOR_SHARDS, created);
      pass.writes++;
    } else if (!semanticEqual(current.spec, shard.spec)) {
      await o.client.replace(COLLECTOR_SHARDS, { ...current, spec: shard.spec });
      pass.writes++;
    }
  }
  for (const surplus of byName.values()) {
    await o.client.delete(COLLECTOR_SHARDS, namespace, surplus.metadata.name, { preconditions: { uid: surplus.metadata.uid } });
    pass.writes++;
  }
}
