/**
 * The baseline for tests and benchmarks: shard = hash(target) mod N over the sorted shard
 * names. Ignores weights, bounds and the previous assignment; going from N to N+1 shards moves
 * about N/(N+1) of the targets. Not for production use.
 */
import { murmur3 } from './hash.ts';
import { type ShardingInput, type ShardingStrategy, sortedShards } from './types.ts';

export const moduloHashing: ShardingStrategy = Object.freeze({
  name: 'modulo-hashing',
  assign: (input: ShardingInput) => {
    const shards = sortedShards(input.shards);
    const assignment = new Map<string, string>();
    if (shards.length === 0) return assignment;
    for (const target of input.targets) {
      if (assignment.has(target.name)) throw new Error(`duplicate target ${JSON.stringify(target.name)}`);
      assignment.set(target.name, shards[murmur3(target.name) % shards.length]!);
    }
    return assignment;
  },
});
