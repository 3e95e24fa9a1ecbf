/**
 * The sharding strategy interface: a pure function from (shards, targets with their measured
 * rates, the current assignment) to a new assignment. No I/O, no clock, no randomness: the
 * same input (in any order) gives the same output. See
 * docs/decisions/0008-sharding-bounded-consistent-hashing.md.
 */

export interface ShardingTarget {
  /** Unique within one input (e.g. the PostgresTarget's namespace/name). */
  readonly name: string;
  /** Smoothed byte rate; null (not measured yet) or anything below the floor counts as the floor. */
  readonly bytesPerSecond: number | null;
}

export interface ShardingInput {
  /** Shard names (e.g. 'pool-0'..'pool-4'), any order, unique. */
  readonly shards: readonly string[];
  /** Targets, any order, unique names. */
  readonly targets: readonly ShardingTarget[];
  /** Target name -> shard name of the current assignment; entries for unknown targets are ignored. */
  readonly previous: ReadonlyMap<string, string>;
}

export interface ShardingOptions {
  /** Weight of a new or idle target (bytes per second), > 0. */
  readonly minWeightBytesPerSecond: number;
  /** No shard above loadFactor × mean load (1 + epsilon of the paper), >= 1. */
  readonly loadFactor: number;
  /** Points per shard on the hash ring, a whole number >= 1. */
  readonly virtualNodes: number;
}

export interface ShardingStrategy {
  readonly name: string;
  /** Target name -> shard name for every target (empty when there are no shards). */
  assign(input: ShardingInput, options?: ShardingOptions): Map<string, string>;
}

export const DEFAULT_SHARDING_OPTIONS: ShardingOptions = Object.freeze({
  minWeightBytesPerSecond: 1024,
  loadFactor: 1.25,
  virtualNodes: 160,
});

/** Fills in the defaults and rejects options that make no sense, naming the option. */
export function validateShardingOptions(options: Partial<ShardingOptions> = {}): ShardingOptions {
  const merged: ShardingOptions = { ...DEFAULT_SHARDING_OPTIONS, ...options };
  const { minWeightBytesPerSecond, loadFactor, virtualNodes } = merged;
  if (!Number.isFinite(minWeightBytesPerSecond) || minWeightBytesPerSecond <= 0) {
    throw new RangeError(`minWeightBytesPerSecond must be a finite number > 0, got ${minWeightBytesPerSecond}`);
  }
  if (!Number.isFinite(loadFactor) || loadFactor < 1) {
    throw new RangeError(`loadFactor must be a finite number >= 1, got ${loadFactor}`);
  }
  if (!Number.isInteger(virtualNodes) || virtualNodes < 1 || virtualNodes > 10_000) {
    throw new RangeError(`virtualNodes must be a whole number from 1 to 10000, got ${virtualNodes}`);
  }
  return merged;
}

/** A target's weight: its rate, or the floor for unmeasured, idle or slow targets. */
export function targetWeight(target: ShardingTarget, options: ShardingOptions): number {
  const rate = target.bytesPerSecond;
  if (rate === null) return options.minWeightBytesPerSecond;
  if (!Number.isFinite(rate)) throw new RangeError(`bytesPerSecond of target ${JSON.stringify(target.name)} must be finite or null, got ${rate}`);
  return Math.max(rate, options.minWeightBytesPerSecond);
}

/** Target name -> weight; throws on duplicate names. */
export function targetWeights(targets: readonly ShardingTarget[], options: ShardingOptions = DEFAULT_SHARDING_OPTIONS): Map<string, number> {
  const weights = new Map<string, number>();
  for (const target of targets) {
    if (weights.has(target.name)) throw new Error(`duplicate target ${JSON.stringify(target.name)}`);
    weights.set(target.name, targetWeight(target, options));
  }
  return weights;
}

/** Shard name -> summed weight of its targets; every shard in `shards` appears, empty ones with 0. */
export function shardLoads(assignment: ReadonlyMap<string, string>, weights: ReadonlyMap<string, number>, shards: readonly string[]): Map<string, number> {
  const loads = new Map<string, number>();
  for (const shard of [...shards].sort(compareStrings)) loads.set(shard, 0);
  for (const [target, shard] of assignment) {
    const weight = weights.get(target);
    if (weight === undefined) throw new Error(`no weight for target ${JSON.stringify(target)}`);
    loads.set(shard, (loads.get(shard) ?? 0) + weight);
  }
  return loads;
}

/** Summed weight of the targets of `next` that are on another shard (or none) in `previous`. */
export function movedWeight(previous: ReadonlyMap<string, string>, next: ReadonlyMap<string, string>, weights: ReadonlyMap<string, number>): number {
  let moved = 0;
  for (const [target, shard] of next) {
    if (previous.get(target) !== shard) moved += weights.get(target) ?? 0;
  }
  return moved;
}

/** Code-unit order: stable and locale-independent (localeCompare is neither). */
export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sorted shard names; throws on duplicates. */
export function sortedShards(shards: readonly string[]): string[] {
  const sorted = [...shards].sort(compareStrings);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]) throw new Error(`duplicate shard ${JSON.stringify(sorted[i])}`);
  }
  return sorted;
}
