/**
 * The operator benchmark's stand-in for running collectors: each round writes every
 * CollectorShard's status as the shard's collector would (every assigned target connected,
 * a byte rate near 20 kB/s that wobbles a few per cent from round to round, a lag under
 * 1 MiB, the newest entry's time now), so the steady state's target status writes can be
 * counted: what the operator writes per round once nothing changes but the numbers.
 */
import type { CollectorShard, CollectorShardStatus } from '@pglog/common/api/collector-shard.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_SHARDS } from '@pglog/common/kube/resources.ts';

/** Relative wobble of a reported rate between rounds (± this fraction). */
export const RATE_WOBBLE = 0.03;

/** A small deterministic hash of a name and round in [0, 1). */
function unit(name: string, round: number): number {
  let h = 2166136261 ^ round;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  return ((h >>> 0) % 100_000) / 100_000;
}

/** The status the collector of `shard` would write in `round`. */
export function reportedStatus(shard: CollectorShard, round: number, now: Date): CollectorShardStatus {
  const targets = [...shard.spec.targets]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((t) => {
      const bytesPerSecond = Math.round(20_000 * (1 + RATE_WOBBLE * (2 * unit(t.name, round) - 1)));
      return {
        name: t.name,
        transport: t.transport,
        bytesPerSecond,
        linesPerSecond: Math.round(bytesPerSecond / 12) / 10,
        lagBytes: Math.round(unit(t.name, round + 1000) * 512 * 1024),
        connected: true,
        epoch: t.epoch,
        lastEntryTime: now.toISOString(),
      };
    });
  return {
    observedGeneration: shard.metadata.generation ?? 1,
    pod: shard.metadata.name,
    updatedAt: now.toISOString(),
    targets,
    conditions: [
      { type: 'Ready', status: 'True', reason: 'Collecting', message: `collecting ${targets.length} targets`, lastTransitionTime: now.toISOString() },
    ],
  };
}

/** The sharding floor: a target weighs at least this (operator/src/sharding, minWeightBytesPerSecond). */
const FLOOR_BYTES_PER_SECOND = 1024;

/**
 * Writes one round of reports to every shard of the pool (at most 8 at a time). Returns the
 * pool's total weight these reports make (the sum of every target's rate, at least the
 * floor): once the pool's status shows it, a pass has read the whole round.
 */
export async function writeReports(client: KubeClient, shards: readonly CollectorShard[], round: number): Promise<number> {
  const now = new Date();
  let next = 0;
  let total = 0;
  const worker = async (): Promise<void> => {
    while (next < shards.length) {
      const s = shards[next++]!;
      const status = reportedStatus(s, round, now);
      for (const t of status.targets ?? []) total += Math.max(t.bytesPerSecond, FLOOR_BYTES_PER_SECOND);
      await client.mergePatch(COLLECTOR_SHARDS, s.metadata.namespace, s.metadata.name, { status }, 'status');
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, shards.length) }, worker));
  return total;
}
