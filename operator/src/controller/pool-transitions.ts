/**
 * The transitions phase of a pool reconcile: what the plan moved (targets to another shard,
 * transports promoted to the sidecar or demoted back) compared with the shards as they were,
 * as Events and metrics, and the per-shard load gauges.
 */
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';

import type { PoolPass } from './pool-pass.ts';

export async function transitionsPhase(pass: PoolPass): Promise<void> {
  const { o, pool, namespace, name } = pass;
  const previous = previousAssignments(pass.existingShards);
  let moved = 0;
  let promoted = 0;
  let demoted = 0;
  for (const [target, next] of pass.plan.targets) {
    const before = previous.get(target);
    if (before === undefined) continue;
    if (before.shard !== next.shard) moved++;
    else if (before.transport !== next.transport) {
      if (next.transport === 'proxy') promoted++;
      else demoted++;
    }
  }
  o.metrics.transportChanges(namespace, name, promoted, demoted, moved);
  if (moved > 0) await o.events.record(pool, 'Normal', 'Rebalanced', `${moved} targets moved to another shard`);
  if (promoted + demoted > 0)
    await o.events.record(pool, 'Normal', 'TransportsChanged', `${promoted} targets moved to the sshproxy sidecar, ${demoted} back to the in-process client`);
  const key = `${namespace}/${name}`;
  o.metrics.shards(namespace, name, pass.plan.loads, pass.memory.shardCounts.get(key) ?? 0);
  pass.memory.shardCounts.set(key, pass.plan.loads.length);
}

function previousAssignments(shards: readonly CollectorShard[]): Map<string, { shard: number; transport: 'inproc' | 'proxy' }> {
  const out = new Map<string, { shard: number; transport: 'inproc' | 'proxy' }>();
  for (const s of shards) for (const t of s.spec.targets) out.set(t.name, { shard: s.spec.index, transport: t.transport });
  return out;
}
