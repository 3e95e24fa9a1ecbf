/**
 * Weighted consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, "Consistent
 * Hashing with Bounded Loads", 2018), made sticky: a target stays on its current shard unless
 * that shard is gone, over the keep bound, or taken by a target too heavy to share one, or
 * unless its ring home is a fresh (empty) shard. Everything else walks the ring.
 *
 *   capacity C = loadFactor × total weight / shards           (where targets are placed)
 *   keep bound K = (2 × loadFactor - 1) × total weight / shards (where they may stay)
 *
 * The keep bound is hysteresis: measured rates move with every report (a fleet's simulated
 * servers under faults moved the total by a third within minutes), and a shard whose load
 * crossed C by a few per cent shed its lightest targets at once, which raised other shards
 * over C in turn (`make fleet N=1000`: 159 moves a minute at 6 shards, each a reconnect and a
 * new epoch). Staying is allowed as far above the mean as placing is (1.5 × mean for the
 * default 1.25); loadFactor 1 keeps it strict.
 *
 * 1. Dedicated: a target heavier than C cannot share any shard within the bound; each gets a
 *    shard of its own (its current one when it can, else the first unclaimed one on the ring).
 * 2. Keep (heaviest first): a target stays on its current shard if that shard exists, is not
 *    dedicated to another target, still has room for it (load + weight <= K), and the target's
 *    ring home is not a fresh shard. A fresh shard is one that holds none of the current
 *    targets in `previous` (a shard just added by a scale-up, or one emptied out): the targets
 *    whose ring home it is go there, which is what moves about 1/(N+1) of the load to a new
 *    shard instead of nothing.
 * 3. Place (heaviest first): every other target walks the ring from its hash to the first
 *    non-dedicated shard with room within C (a target released towards a fresh home that turns
 *    out to be full stays on its current shard within K before walking on). If none has room (possible only when some target weighs
 *    more than (loadFactor - 1) × mean, see below), the strict placement is dropped and steps
 *    2-3 run again with the room of a shared shard rounded up by one target, C + the heaviest
 *    shared target (the weighted form of the paper's ceil(C)); the shards above C are reported
 *    in `overBound`.
 *
 * Bound: if every target weighs either at most (loadFactor - 1) × mean or more than C, then
 * every shard's load is at most C = loadFactor × mean from scratch and at most K from any
 * previous assignment, except a dedicated shard, whose load is its single target's weight. (If a target w <= (loadFactor - 1) × W/N found no room, every
 * non-dedicated shard would hold more than C - w, so W >= d·C + (N - d)·(C - w) + w > W.)
 * In general: max load <= max(K, heaviest target) unless `overBound` is non-empty, and then
 * at most max(K, C + the heaviest shared target).
 *
 * Stability: a no-op recompute (same shards and weights, `previous` within the bound and no
 * fresh or dedicated shards) keeps every target, and so does one whose rates moved as long as
 * no shard went over K. Removing a shard moves only its targets (the
 * others' loads were within a smaller capacity), unless a dedicated target was on the removed
 * shard and claims another one. Adding a shard moves the targets whose ring home it becomes
 * (about 1/(N+1) of the load, the ring's share) and the lightest targets of shards that are now
 * over the tighter bound.
 *
 * Cost: O(S·V·log(S·V) + T·log T + T·log(S·V)) plus the ring walks of targets whose nearest
 * shards are full; about 13 ms for 10,000 targets over 100 shards (warm, 2-core machine).
 */
import { murmur3 } from './hash.ts';
import {
  compareStrings,
  DEFAULT_SHARDING_OPTIONS,
  type ShardingInput,
  type ShardingOptions,
  type ShardingStrategy,
  sortedShards,
  targetWeight,
  validateShardingOptions,
} from './types.ts';

/** Different seeds, so a target named like a virtual node does not land exactly on it. */
const TARGET_SEED = 0x5bd1e995;
const VNODE_SEED = 0x2545f491;
/** Ring points pack (hash, shard index) into one float: hash × 2^21 + index stays below 2^53. */
const MAX_SHARDS = 1 << 21;

export interface BoundedAssignment {
  /** Target name -> shard name, every target, in the order of the sorted target names. */
  readonly assignment: Map<string, string>;
  /** The bound C = loadFactor × total weight / shards (0 when there are no shards): where targets are placed. */
  readonly capacity: number;
  /** The keep bound K = (2 × loadFactor - 1) × total weight / shards: how full a shard may get by keeping its targets. */
  readonly keepCapacity: number;
  readonly totalWeight: number;
  /** Targets heavier than C, each alone on its shard. */
  readonly dedicated: readonly string[];
  /** Shards over K because no shard had room (empty when the bound holds). */
  readonly overBound: readonly string[];
}

/** The hash ring: sorted point hashes and the shard index owning each point. */
export interface Ring {
  readonly points: Float64Array;
  readonly owners: Int32Array;
}

export function buildRing(shards: readonly string[], virtualNodes: number): Ring {
  if (shards.length >= MAX_SHARDS) throw new RangeError(`at most ${MAX_SHARDS - 1} shards`);
  const packed = new Float64Array(shards.length * virtualNodes);
  let n = 0;
  for (let s = 0; s < shards.length; s++) {
    const prefix = `${shards[s]!}\u0000`;
    for (let v = 0; v < virtualNodes; v++) packed[n++] = murmur3(prefix + String(v), VNODE_SEED) * MAX_SHARDS + s;
  }
  packed.sort(); // numeric for typed arrays; equal hashes are ordered by shard index
  const points = new Float64Array(packed.length);
  const owners = new Int32Array(packed.length);
  for (let i = 0; i < packed.length; i++) {
    const key = packed[i]!;
    const owner = key % MAX_SHARDS;
    owners[i] = owner;
    points[i] = (key - owner) / MAX_SHARDS;
  }
  return { points, owners };
}

/** Index of the first ring point at or after `hash`, wrapping to 0. */
export function ringPosition(ring: Ring, hash: number): number {
  const { points } = ring;
  let lo = 0;
  let hi = points.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (points[mid]! < hash) lo = mid + 1;
    else hi = mid;
  }
  return lo === points.length ? 0 : lo;
}

/** The ring position of a target: its walk starts there, and the shard owning it is its home. */
export function targetRingPosition(ring: Ring, targetName: string): number {
  return ringPosition(ring, murmur3(targetName, TARGET_SEED));
}

export function planBoundedAssignment(input: ShardingInput, options: ShardingOptions = DEFAULT_SHARDING_OPTIONS): BoundedAssignment {
  const opts = validateShardingOptions(options);
  const shards = sortedShards(input.shards);
  const shardCount = shards.length;

  // Heaviest first, ties by name: the order (and so every float sum) is independent of input order.
  const seen = new Set<string>();
  const order = input.targets.map((target) => {
    if (seen.has(target.name)) throw new Error(`duplicate target ${JSON.stringify(target.name)}`);
    seen.add(target.name);
    return { name: target.name, weight: targetWeight(target, opts) };
  });
  order.sort((a, b) => b.weight - a.weight || compareStrings(a.name, b.name));
  const count = order.length;
  let totalWeight = 0;
  for (const t of order) totalWeight += t.weight;

  if (shardCount === 0) return { assignment: new Map(), capacity: 0, keepCapacity: 0, totalWeight, dedicated: [], overBound: [] };

  const capacity = (opts.loadFactor * totalWeight) / shardCount;
  const keepCapacity = ((2 * opts.loadFactor - 1) * totalWeight) / shardCount;
  const ring = buildRing(shards, opts.virtualNodes);
  const ringSize = ring.owners.length;
  const shardIndex = new Map(shards.map((name, i) => [name, i]));

  const hasPrevious = new Uint8Array(shardCount);
  const previousOf = new Int32Array(count);
  const start = new Int32Array(count); // ring position of the target's hash
  for (let i = 0; i < count; i++) {
    const name = order[i]!.name;
    const prev = input.previous.get(name);
    const p = prev === undefined ? -1 : (shardIndex.get(prev) ?? -1);
    previousOf[i] = p;
    if (p >= 0) hasPrevious[p] = 1;
    start[i] = targetRingPosition(ring, name);
  }

  // Ring walk: the first shard, in ring order from `from`, that `fits`; -1 if none does.
  const stamp = new Int32Array(shardCount);
  let generation = 0;
  const walk = (from: number, fits: (shard: number) => boolean): number => {
    generation++;
    let distinct = 0;
    for (let k = 0, i = from; k < ringSize; k++, i = i + 1 === ringSize ? 0 : i + 1) {
      const shard = ring.owners[i]!;
      if (stamp[shard] === generation) continue;
      stamp[shard] = generation;
      if (fits(shard)) return shard;
      if (++distinct === shardCount) break;
    }
    return -1;
  };
  const leastLoaded = (load: Float64Array, claimed: Uint8Array, allowClaimed: boolean): number => {
    let best = -1;
    for (let s = 0; s < shardCount; s++) {
      if (!allowClaimed && claimed[s] === 1) continue;
      if (best < 0 || load[s]! < load[best]!) best = s;
    }
    return best;
  };

  // One placement with `shareCapacity` as the room of every shared shard for a target placed,
  // `keepRoom` for one staying (steps 1-3 below).
  const place = (shareCapacity: number, keepRoom: number): { result: Int32Array; load: Float64Array; over: Set<number> } => {
    const load = new Float64Array(shardCount);
    const claimed = new Uint8Array(shardCount); // 1: dedicated to one heavy target
    const result = new Int32Array(count).fill(-1);
    // 1. Targets heavier than the bound get a shard each: their current one first, in weight order.
    const homeless: number[] = [];
    for (const i of dedicated) {
      const p = previousOf[i]!;
      if (p >= 0 && claimed[p] === 0) {
        claimed[p] = 1;
        result[i] = p;
        load[p] = order[i]!.weight;
      } else homeless.push(i);
    }
    for (const i of homeless) {
      // Unreachable for loadFactor >= 1 (fewer than N targets can be heavier than the mean),
      // but never leave a target unassigned.
      let s = walk(start[i]!, (shard) => claimed[shard] === 0);
      if (s < 0) s = leastLoaded(load, claimed, true);
      claimed[s] = 1;
      result[i] = s;
      load[s] = load[s]! + order[i]!.weight;
    }

    // 2. Keep targets where they are while their shard has room and their home is not fresh.
    for (let i = 0; i < count; i++) {
      if (result[i]! >= 0) continue;
      const p = previousOf[i]!;
      if (p < 0 || claimed[p] === 1) continue;
      const home = ring.owners[start[i]!]!;
      if (home !== p && hasPrevious[home] === 0 && claimed[home] === 0) continue;
      const weight = order[i]!.weight;
      if (load[p]! + weight <= keepRoom) {
        result[i] = p;
        load[p] = load[p]! + weight;
      }
    }

    // 3. Everything else: the first shard with room, walking the ring from the target's hash.
    const over = new Set<number>();
    for (let i = 0; i < count; i++) {
      if (result[i]! >= 0) continue;
      const weight = order[i]!.weight;
      const fits = (shard: number): boolean => claimed[shard] === 0 && load[shard]! + weight <= shareCapacity;
      // A target released towards a fresh home that has no room after all stays where it was.
      const home = ring.owners[start[i]!]!;
      const p = previousOf[i]!;
      const stays = p >= 0 && claimed[p] === 0 && load[p]! + weight <= keepRoom;
      let s = fits(home) ? home : stays ? p : walk(start[i]!, fits);
      if (s < 0) {
        s = leastLoaded(load, claimed, false);
        if (s < 0) s = leastLoaded(load, claimed, true);
        over.add(s);
      }
      result[i] = s;
      load[s] = load[s]! + weight;
    }
    return { result, load, over };
  };

  // Targets of similar weight may not fit within C at all (4 targets on 3 shards at 1.25: every
  // shard can take one, 4/3 × 1.25 < 2). The paper rounds the bound up to whole items, ceil(C);
  // the weighted counterpart is one more target's worth of room: C + the heaviest shared
  // target. That placement is only used when the strict one overflows; it depends on the
  // weights and shards alone, so a recompute from its own output keeps every target (no
  // flapping), and the shards above C are still reported in `overBound`.
  const dedicated: number[] = [];
  for (let i = 0; i < count && order[i]!.weight > capacity; i++) dedicated.push(i);
  let placed = place(capacity, keepCapacity);
  if (placed.over.size > 0) {
    const heaviestShared = dedicated.length < count ? order[dedicated.length]!.weight : 0;
    placed = place(capacity + heaviestShared, Math.max(keepCapacity, capacity + heaviestShared));
  }
  const { result, load } = placed;

  const byName = order.map((t, i) => ({ name: t.name, shard: shards[result[i]!]! }));
  byName.sort((a, b) => compareStrings(a.name, b.name));
  return {
    assignment: new Map(byName.map((e) => [e.name, e.shard])),
    capacity,
    keepCapacity,
    totalWeight,
    dedicated: dedicated.map((i) => order[i]!.name).sort(compareStrings),
    overBound: shardsOverBound(load, keepCapacity, new Set(dedicated.map((i) => result[i]!)))
      .map((s) => shards[s]!)
      .sort(compareStrings),
  };
}

export const boundedConsistentHashing: ShardingStrategy = Object.freeze({
  name: 'bounded-consistent-hashing',
  assign: (input: ShardingInput, options?: ShardingOptions) => planBoundedAssignment(input, options).assignment,
});

/** Shared shards (not dedicated to one heavy target) whose load is above `capacity`. */
function shardsOverBound(load: Float64Array, capacity: number, dedicatedShards: ReadonlySet<number>): number[] {
  const over: number[] = [];
  for (let s = 0; s < load.length; s++) if (!dedicatedShards.has(s) && load[s]! > capacity) over.push(s);
  return over;
}
