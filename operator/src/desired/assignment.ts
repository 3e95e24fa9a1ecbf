/**
 * The desired CollectorShard specs of one pool: which shard collects each target (sharding by
 * measured load), over which transport, with which assignment epoch, and each pod's Node.js
 * tuning. Pure and deterministic: the same input (in any order) gives the same output, and
 * planning again from the output (the same rates and time) changes nothing, so a reconcile
 * pass with nothing new writes nothing.
 *
 * Epochs fence the store (collector-shard.ts, ShardTarget.epoch): a target staying on its shard
 * keeps its epoch; one that moves gets one more than the highest epoch any shard's spec or
 * status knows for it, so the new owner's claim outranks whatever the old owner may still hold.
 * A new or moved target gets at least the current time in seconds: a target that left every
 * shard (deleted and created again, or moved out of the pool and back) has no epoch left in
 * any shard, but the store still holds its old claim, which a fresh count from 1 could never
 * outrank. Time only sets the floor; the count keeps epochs rising within one second.
 */
import type { CollectorPool, ShardLoad } from '@pglog/common/api/collector-pool.ts';
import type { CollectorShard, CollectorShardSpec, ShardTarget, ShardTuning } from '@pglog/common/api/collector-shard.ts';
import type { ActiveTransport, PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';

import { planBoundedAssignment, type ShardingOptions, type ShardingTarget, targetWeight, validateShardingOptions } from '../sharding/index.ts';
import { collectorResources } from './pool-resources.ts';
import { parseQuantity } from './quantity.ts';
import { chooseTransports, type TransportCandidate } from './transport-choice.ts';
import { computeTuning, type TuningInput } from './tuning.ts';

export { matchesLabelSelector, selectPoolTargets } from './selection.ts';

export interface PlanInput {
  pool: CollectorPool;
  /** The targets this pool collects (selectPoolTargets), any order. */
  targets: readonly PostgresTarget[];
  /** The pool's existing CollectorShards, any index (surplus ones of a scale-down included), with spec and status. */
  shards: readonly CollectorShard[];
  nowMs: number;
}

export interface PlannedShard {
  /** `<pool>-<index>`. */
  name: string;
  index: number;
  spec: CollectorShardSpec;
}

export interface TargetPlacement {
  /** Index of the owning shard. */
  shard: number;
  transport: ActiveTransport;
  /** The measured rate the plan used; null when no one has measured it yet. */
  bytesPerSecond: number | null;
}

export interface PoolPlan {
  /** One per replica, by index. */
  shards: PlannedShard[];
  /** Target name → placement, in name order. Empty when the pool has no replicas. */
  targets: Map<string, TargetPlacement>;
  /** Per shard, by index. */
  loads: ShardLoad[];
}

/** What the existing shards say about one target. */
interface Known {
  /** The shard whose spec assigns it (the newest one if two do), with that entry. */
  owner?: { index: number; entry: ShardTarget };
  /** Highest epoch in any spec or status. */
  maxEpoch: number;
  /** The rate its owner reported, else the highest-epoch report of another shard. */
  reported?: { bytesPerSecond: number; epoch: number; fromOwner: boolean };
}

/** The lowest epoch a new assignment gets: seconds since 1970 (the store keeps epochs in int8). */
export function epochFloor(nowMs: number): number {
  return Math.max(1, Math.floor(nowMs / 1000));
}

export function shardName(pool: string, index: number): string {
  return `${pool}-${index}`;
}

function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The existing shards, read into one record per target (input order does not matter: ties go to the lower index). */
function readExisting(shards: readonly CollectorShard[]): Map<string, Known> {
  const known = new Map<string, Known>();
  const get = (name: string): Known => {
    let k = known.get(name);
    if (k === undefined) known.set(name, (k = { maxEpoch: 0 }));
    return k;
  };
  const sorted = [...shards].sort((a, b) => a.spec.index - b.spec.index || compareNames(a.metadata.name, b.metadata.name));
  for (const shard of sorted) {
    for (const entry of shard.spec.targets) {
      const k = get(entry.name);
      k.maxEpoch = Math.max(k.maxEpoch, entry.epoch);
      if (k.owner === undefined || entry.epoch > k.owner.entry.epoch) k.owner = { index: shard.spec.index, entry };
    }
  }
  for (const shard of sorted) {
    for (const report of shard.status?.targets ?? []) {
      const k = get(report.name);
      k.maxEpoch = Math.max(k.maxEpoch, report.epoch);
      if (!Number.isFinite(report.bytesPerSecond) || report.bytesPerSecond < 0) continue;
      const fromOwner = k.owner?.index === shard.spec.index;
      const r = k.reported;
      if (r === undefined || (fromOwner && !r.fromOwner) || (fromOwner === r.fromOwner && report.epoch > r.epoch)) {
        k.reported = { bytesPerSecond: report.bytesPerSecond, epoch: report.epoch, fromOwner };
      }
    }
  }
  return known;
}

function shardingOptions(pool: CollectorPool): ShardingOptions {
  try {
    return validateShardingOptions({ loadFactor: pool.spec.sharding.loadFactor, minWeightBytesPerSecond: pool.spec.sharding.minWeightBytesPerSecond });
  } catch (e) {
    throw new PglogError('CONFIG_INVALID', `spec.sharding: ${(e as Error).message}`, { cause: e });
  }
}

function parseSince(text: string | undefined): number | null {
  if (text === undefined) return null;
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : null;
}

function memoryLimitBytes(pool: CollectorPool): number | null {
  const limit = collectorResources(pool).limits?.memory;
  return limit === undefined ? null : parseQuantity(limit);
}

/** Rounds of the strategy on its own output before giving up on a fixpoint (two in practice, see below). */
const MAX_SHARDING_ROUNDS = 8;

/**
 * The strategy's assignment, run again on its own output until it keeps every target. The
 * bounded strategy is stable on its own output (also when the bound cannot hold and it rounds
 * the bound up by one target), so this normally ends after one extra run; it guards the
 * promise that a replan is a no-op for any strategy, so the next reconcile pass never moves a
 * target (and raises its epoch) that this plan could have placed.
 */
function stableAssignment(
  shards: readonly string[],
  targets: readonly ShardingTarget[],
  previous: ReadonlyMap<string, string>,
  options: ShardingOptions,
): Map<string, string> {
  let current = planBoundedAssignment({ shards, targets, previous }, options).assignment;
  for (let round = 1; round < MAX_SHARDING_ROUNDS; round++) {
    const next = planBoundedAssignment({ shards, targets, previous: current }, options).assignment;
    if ([...next].every(([name, shard]) => current.get(name) === shard)) break;
    current = next;
  }
  return current;
}

export function planPool(input: PlanInput): PoolPlan {
  const { pool } = input;
  const poolName = pool.metadata.name;
  const replicas = pool.spec.replicas;
  if (!Number.isSafeInteger(replicas) || replicas < 0) throw new PglogError('CONFIG_INVALID', `spec.replicas must be a whole number >= 0, got ${replicas}`);
  const options = shardingOptions(pool);
  const targets = [...input.targets].sort((a, b) => compareNames(a.metadata.name, b.metadata.name));
  for (let i = 1; i < targets.length; i++) {
    if (targets[i]!.metadata.name === targets[i - 1]!.metadata.name)
      throw new PglogError('CONFIG_INVALID', `planPool: target ${targets[i]!.metadata.name} given twice`);
  }
  const known = readExisting(input.shards);
  const rateOf = (t: PostgresTarget): number | null => known.get(t.metadata.name)?.reported?.bytesPerSecond ?? t.status?.rates?.bytesPerSecond ?? null;

  const shardNames = Array.from({ length: replicas }, (_, i) => shardName(poolName, i));
  const previous = new Map<string, string>();
  for (const [name, k] of known) if (k.owner !== undefined) previous.set(name, shardName(poolName, k.owner.index));
  const placed = stableAssignment(
    shardNames,
    targets.map((t) => ({ name: t.metadata.name, bytesPerSecond: rateOf(t) })),
    previous,
    options,
  );
  const indexOf = new Map(shardNames.map((n, i) => [n, i]));

  const perShard: PostgresTarget[][] = shardNames.map(() => []);
  for (const t of targets) {
    const shard = placed.get(t.metadata.name);
    if (shard !== undefined) perShard[indexOf.get(shard)!]!.push(t);
  }

  const memoryLimit = memoryLimitBytes(pool);
  const placements = new Map<string, TargetPlacement>();
  const shards: PlannedShard[] = [];
  const loads: ShardLoad[] = [];
  perShard.forEach((members, index) => {
    const planned = planShard({ input, options, known, rateOf, memoryLimit, placements }, shardNames[index]!, index, members);
    shards.push(planned.shard);
    loads.push(planned.load);
  });

  return {
    shards,
    targets: new Map([...placements].sort(([a], [b]) => compareNames(a, b))),
    loads,
  };
}

/** What planning each shard shares: the pool's input, sharding options and what the shards reported. */
interface ShardContext {
  input: PlanInput;
  options: ShardingOptions;
  known: ReturnType<typeof readExisting>;
  rateOf: (t: PostgresTarget) => number | null;
  memoryLimit: number | null;
  /** Filled with each member's placement. */
  placements: Map<string, TargetPlacement>;
}

/** One shard's spec (entries with transports and epochs, tuning) and load, from its members. */
function planShard(ctx: ShardContext, shardNameOf: string, index: number, members: readonly PostgresTarget[]): { shard: PlannedShard; load: ShardLoad } {
  const { input, options, known, rateOf, memoryLimit, placements } = ctx;
  const { pool, nowMs } = input;
  const poolName = pool.metadata.name;
  const candidates: TransportCandidate[] = members.map((t) => {
    const owner = known.get(t.metadata.name)?.owner;
    const stayed = owner?.index === index;
    const rate = rateOf(t);
    return {
      name: t.metadata.name,
      pinned: t.spec.transport,
      // A moved target keeps its transport; its dwell restarts on the new shard (since null).
      current: owner?.entry.transport ?? null,
      since: stayed ? parseSince(owner.entry.transportSince) : null,
      bitsPerSecond: rate === null ? null : rate * 8,
    };
  });
  const choices = chooseTransports({ targets: candidates, settings: pool.spec.transport, nowMs });

  const entries: ShardTarget[] = [];
  let proxied = 0;
  let weight = 0;
  let ingest = 0;
  let instances = 0;
  let sqlSessions = 0;
  for (const t of members) {
    const name = t.metadata.name;
    const k = known.get(name);
    const owner = k?.owner;
    const choice = choices.get(name)!;
    entries.push({
      name,
      transport: choice.transport,
      epoch: owner !== undefined && owner.index === index ? owner.entry.epoch : Math.max((k?.maxEpoch ?? 0) + 1, epochFloor(input.nowMs)),
      transportSince: new Date(choice.since).toISOString(),
    });
    const rate = rateOf(t);
    placements.set(name, { shard: index, transport: choice.transport, bytesPerSecond: rate });
    if (choice.transport === 'proxy') proxied++;
    weight += targetWeight({ name, bytesPerSecond: rate }, options);
    ingest += rate ?? 0;
    const streams = t.spec.collect.logs ? t.spec.instances.length : 0;
    instances += streams;
    const c = t.spec.collect;
    if (c.activity || c.locks || c.statements) sqlSessions += t.spec.instances.length;
  }
  const tuning = computeTuning({
    nodeTuning: pool.spec.nodeTuning,
    memoryLimitBytes: memoryLimit,
    inprocTargets: members.length - proxied,
    proxyTargets: proxied,
    instances,
    sqlSessions,
    ingestBytesPerSecond: ingest,
    ...previousTuning(input.shards.find((s) => s.spec.index === index)?.spec.tuning),
  });
  return {
    shard: { name: shardNameOf, index, spec: { pool: poolName, index, targets: entries, tuning } },
    load: { index, targets: members.length, bytesPerSecond: weight, proxied },
  };
}

/** The tuning a shard runs with now, as computeTuning takes it (kept while its needs stay near it). */
function previousTuning(t: ShardTuning | undefined): Pick<TuningInput, 'previousSemiSpaceMiB' | 'previousThreadpoolSize' | 'previousOldSpaceMiB'> {
  if (t === undefined) return {};
  return { previousSemiSpaceMiB: t.maxSemiSpaceSizeMiB, previousThreadpoolSize: t.uvThreadpoolSize, previousOldSpaceMiB: t.maxOldSpaceSizeMiB };
}
