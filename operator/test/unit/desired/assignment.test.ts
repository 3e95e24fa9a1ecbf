// planPool, a pool's desired CollectorShard specs, on sample pools, targets and shards
// (helpers/pool-fixtures.ts) with the API's written state simulated: placement, determinism,
// replanning its own output as a no-op, which rate counts, epochs on staying and moving, scale
// up and down, promotion, pins, heap sizing; a fast-check property over random fleets and resizes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import fc from 'fast-check';

import { epochFloor, planPool, type PoolPlan } from '../../../src/desired/assignment.ts';
import { samplePool, sampleShard, sampleTarget } from '../../helpers/pool-fixtures.ts';

const NOW = Date.parse('2026-11-23T12:00:00.000Z');
const NOW_ISO = new Date(NOW).toISOString();

/** The CollectorShards as the API would hold them after the plan was written, with the collectors reporting `rates`. */
function written(plan: PoolPlan, rates: ReadonlyMap<string, number> = new Map()): CollectorShard[] {
  return plan.shards
    .map((s) =>
      sampleShard(
        s.spec.pool,
        s.index,
        s.spec.targets,
        s.spec.targets
          .filter((t) => rates.has(t.name))
          .map((t) => ({ name: t.name, bytesPerSecond: rates.get(t.name)!, epoch: t.epoch, transport: t.transport })),
      ),
    )
    .map((shard, i) => ({ ...shard, spec: plan.shards[i]!.spec }));
}

function fleet(n: number, rate = (i: number): number | undefined => (i + 1) * 10_000): PostgresTarget[] {
  return Array.from({ length: n }, (_, i) => {
    const r = rate(i);
    return sampleTarget({ name: `db-${String(i).padStart(3, '0')}`, ...(r === undefined ? {} : { bytesPerSecond: r }) });
  });
}

const shardOf = (plan: PoolPlan, target: string): number => plan.targets.get(target)!.shard;
const entry = (plan: PoolPlan, target: string) => plan.shards[shardOf(plan, target)]!.spec.targets.find((t) => t.name === target)!;

describe('planPool', () => {
  it('new targets: every one on one shard, epoch = the time floor, inproc, transportSince now, sorted; shards <pool>-<i>', () => {
    const plan = planPool({ pool: samplePool(), targets: fleet(12).reverse(), shards: [], nowMs: NOW });
    assert.deepEqual(
      plan.shards.map((s) => [s.name, s.index, s.spec.pool, s.spec.index]),
      [
        ['main-0', 0, 'main', 0],
        ['main-1', 1, 'main', 1],
        ['main-2', 2, 'main', 2],
      ],
    );
    const all = plan.shards.flatMap((s) => s.spec.targets.map((t) => t.name));
    assert.deepEqual(
      [...all].sort(),
      fleet(12).map((t) => t.metadata.name),
    );
    for (const s of plan.shards) {
      assert.deepEqual(
        s.spec.targets.map((t) => t.name),
        s.spec.targets.map((t) => t.name).sort(),
        'sorted by name',
      );
      for (const t of s.spec.targets)
        assert.deepEqual(
          { transport: t.transport, epoch: t.epoch, transportSince: t.transportSince },
          { transport: 'inproc', epoch: epochFloor(NOW), transportSince: NOW_ISO },
        );
      assert.ok(s.spec.tuning.uvThreadpoolSize >= 4);
    }
    assert.deepEqual(
      [...plan.targets.keys()],
      fleet(12).map((t) => t.metadata.name),
    );
    assert.equal(plan.targets.get('db-003')!.bytesPerSecond, 40_000);
    assert.deepEqual(
      plan.loads.map((l) => l.index),
      [0, 1, 2],
    );
    assert.equal(
      plan.loads.reduce((n, l) => n + l.targets, 0),
      12,
    );
    assert.equal(
      plan.loads.reduce((n, l) => n + l.bytesPerSecond, 0),
      780_000,
    );
    for (const l of plan.loads) assert.ok(l.bytesPerSecond <= (1.25 * 780_000) / 3 + 1e-6, 'within the bound');
  });

  it('deterministic: the same input in another order gives the same plan', () => {
    const targets = fleet(30);
    const first = planPool({ pool: samplePool(), targets, shards: [], nowMs: NOW });
    const shards = written(first);
    const again = planPool({ pool: samplePool(), targets: [...targets].reverse(), shards: [...shards].reverse(), nowMs: NOW });
    const again2 = planPool({ pool: samplePool(), targets: [...targets].reverse(), shards: [...shards].reverse(), nowMs: NOW });
    assert.deepEqual(again, again2);
    assert.deepEqual(planPool({ pool: samplePool(), targets: [...targets].reverse(), shards: [], nowMs: NOW }), first);
  });

  it('no-op: planning again from its own output changes nothing, later too while rates stay in the band', () => {
    // 100-129 kB/s: 0.8-1.03 Mbit/s, between the demotion and promotion thresholds.
    const targets = fleet(30, (i) => 100_000 + i * 1000);
    const first = planPool({ pool: samplePool(), targets, shards: [], nowMs: NOW });
    const rates = new Map(targets.map((t) => [t.metadata.name, t.status!.rates!.bytesPerSecond]));
    const second = planPool({ pool: samplePool(), targets, shards: written(first, rates), nowMs: NOW });
    assert.deepEqual(second, first);
    const later = planPool({ pool: samplePool(), targets, shards: written(second, rates), nowMs: NOW + 3_600_000 });
    assert.deepEqual(later.shards, first.shards);
  });

  it("rates: the owning collector's report first, then the target's status", () => {
    const targets = [sampleTarget({ name: 'a', bytesPerSecond: 100 }), sampleTarget({ name: 'b', bytesPerSecond: 200 }), sampleTarget({ name: 'c' })];
    const shards = [
      sampleShard(
        'main',
        0,
        [{ name: 'a', transport: 'inproc', epoch: 1 }],
        [
          { name: 'a', bytesPerSecond: 5000 },
          { name: 'b', bytesPerSecond: 7000 },
        ],
      ),
    ];
    const plan = planPool({ pool: samplePool({ replicas: 1 }), targets, shards, nowMs: NOW });
    assert.equal(plan.targets.get('a')!.bytesPerSecond, 5000);
    assert.equal(plan.targets.get('b')!.bytesPerSecond, 7000, 'a report of a non-owner beats the target status');
    assert.equal(plan.targets.get('c')!.bytesPerSecond, null);
    assert.equal(plan.loads[0]!.bytesPerSecond, 5000 + 7000 + 1024, 'the unmeasured target weighs the floor');
  });

  it('epochs: staying keeps it; moving raises the highest known by one (at least the time floor); new gets the time floor', () => {
    const targets = fleet(40, () => 10_000);
    const two = planPool({ pool: samplePool({ replicas: 2 }), targets, shards: [], nowMs: NOW });
    // Pretend a few targets went through earlier moves.
    const shards = written(two).map((s) => ({
      ...s,
      spec: { ...s.spec, targets: s.spec.targets.map((t) => ({ ...t, epoch: t.name.endsWith('7') ? 4 : t.epoch })) },
    }));
    // A stale report of an older owner with a higher epoch (it must be outranked on a move).
    shards[0]!.status = {
      targets: [{ name: 'db-017', transport: 'inproc', bytesPerSecond: 10_000, linesPerSecond: 1, lagBytes: 0, connected: true, epoch: 9 }],
    };
    const three = planPool({ pool: samplePool({ replicas: 3 }), targets: [...targets, sampleTarget({ name: 'zz-new' })], shards, nowMs: NOW + 1000 });
    let moved = 0;
    for (const t of targets) {
      const name = t.metadata.name;
      const before = entry(two, name);
      const beforeEpoch = name.endsWith('7') ? 4 : before.epoch;
      const after = entry(three, name);
      if (shardOf(two, name) === shardOf(three, name)) assert.equal(after.epoch, beforeEpoch, name);
      else {
        moved++;
        assert.equal(after.epoch, Math.max(name === 'db-017' ? 10 : beforeEpoch + 1, epochFloor(NOW + 1000)), name);
        assert.equal(after.transportSince, new Date(NOW + 1000).toISOString(), 'the dwell restarts on the new shard');
      }
    }
    assert.ok(moved > 0 && moved < 25, `scale-up 2 -> 3 moves about a third (${moved} of 40)`);
    assert.equal(entry(three, 'zz-new').epoch, epochFloor(NOW + 1000));
  });

  it("scale-down: the removed shard's targets move (epoch + 1), the others stay", () => {
    const targets = fleet(30, () => 10_000);
    const three = planPool({ pool: samplePool({ replicas: 3 }), targets, shards: [], nowMs: NOW });
    const two = planPool({ pool: samplePool({ replicas: 2 }), targets, shards: written(three), nowMs: NOW });
    assert.equal(two.shards.length, 2);
    for (const t of targets) {
      const name = t.metadata.name;
      if (shardOf(three, name) === 2) assert.equal(entry(two, name).epoch, epochFloor(NOW) + 1, name);
      else if (shardOf(three, name) === shardOf(two, name)) assert.equal(entry(two, name).epoch, epochFloor(NOW), name);
    }
    assert.ok(targets.some((t) => shardOf(three, t.metadata.name) === 2));
  });

  it('transports: a hot target that has dwelt is promoted; a moved one keeps proxy with a fresh dwell', () => {
    const hot = sampleTarget({ name: 'hot' });
    const shards = [
      sampleShard(
        'main',
        0,
        [{ name: 'hot', transport: 'inproc', epoch: 1, transportSince: '2026-11-23T11:00:00.000Z' }],
        [{ name: 'hot', bytesPerSecond: 500_000 }],
      ),
    ];
    const plan = planPool({ pool: samplePool({ replicas: 1 }), targets: [hot], shards, nowMs: NOW });
    assert.deepEqual(entry(plan, 'hot'), { name: 'hot', transport: 'proxy', epoch: 1, transportSince: NOW_ISO });
    assert.equal(plan.loads[0]!.proxied, 1);
    assert.equal(plan.targets.get('hot')!.transport, 'proxy');

    const moved = [
      sampleShard(
        'main',
        5,
        [{ name: 'hot', transport: 'proxy', epoch: 3, transportSince: '2026-11-23T11:00:00.000Z' }],
        [{ name: 'hot', bytesPerSecond: 1, epoch: 3 }],
      ),
    ];
    const after = planPool({ pool: samplePool({ replicas: 1 }), targets: [hot], shards: moved, nowMs: NOW });
    assert.deepEqual(
      entry(after, 'hot'),
      { name: 'hot', transport: 'proxy', epoch: epochFloor(NOW), transportSince: NOW_ISO },
      'cold, but its dwell restarted',
    );
  });

  it('pins are honoured and the memory limit sizes the heap', () => {
    const targets = [sampleTarget({ name: 'p', transport: 'proxy' }), sampleTarget({ name: 'i', transport: 'inproc', bytesPerSecond: 1e7 })];
    const pool = samplePool({ replicas: 1, collector: { imagePullPolicy: 'IfNotPresent', resources: { limits: { memory: '4Gi' } } } });
    const plan = planPool({ pool, targets, shards: [], nowMs: NOW });
    assert.equal(plan.targets.get('p')!.transport, 'proxy');
    assert.equal(plan.targets.get('i')!.transport, 'inproc');
    assert.equal(plan.shards[0]!.spec.tuning.maxSemiSpaceSizeMiB, 8, '10 MB/s');
    assert.equal(plan.shards[0]!.spec.tuning.maxOldSpaceSizeMiB, 256, 'what 2 streams need, not the 4Gi limit');
    const many = planPool({
      pool,
      targets: Array.from({ length: 600 }, (_, i) => sampleTarget({ name: `t${i}`, transport: 'inproc' })),
      shards: [],
      nowMs: NOW,
    });
    assert.equal(many.shards[0]!.spec.tuning.maxOldSpaceSizeMiB, 1344, '128 + 2 MiB for each of 600 streams');
    const defaults = planPool({
      pool: samplePool({ replicas: 1 }),
      targets: Array.from({ length: 600 }, (_, i) => sampleTarget({ name: `t${i}`, transport: 'inproc' })),
      shards: [],
      nowMs: NOW,
    });
    assert.equal(
      defaults.shards[0]!.spec.tuning.maxOldSpaceSizeMiB,
      768 - 64 - 3 * 4,
      'capped by the default 1Gi limit of the StatefulSet, less 3 semi-spaces of 4 MiB',
    );
  });

  it('no replicas: nothing assigned; bad settings: CONFIG_INVALID', () => {
    assert.deepEqual(planPool({ pool: samplePool({ replicas: 0 }), targets: fleet(3), shards: [], nowMs: NOW }), { shards: [], targets: new Map(), loads: [] });
    assert.throws(() => planPool({ pool: samplePool({ sharding: { loadFactor: 0.5, minWeightBytesPerSecond: 1 } }), targets: [], shards: [], nowMs: NOW }), {
      code: 'CONFIG_INVALID',
    });
    assert.throws(() => planPool({ pool: samplePool({ replicas: -1 }), targets: [], shards: [], nowMs: NOW }), { code: 'CONFIG_INVALID' });
    assert.throws(() => planPool({ pool: samplePool(), targets: [sampleTarget({ name: 'a' }), sampleTarget({ name: 'a' })], shards: [], nowMs: NOW }), {
      code: 'CONFIG_INVALID',
    });
  });
});

describe('planPool properties', () => {
  const scenario = fc.record({
    fleet: fc.array(
      fc.record({
        rate: fc.option(fc.integer({ min: 0, max: 400_000 }), { nil: null }),
        pin: fc.constantFrom<'auto' | 'inproc' | 'proxy'>('auto', 'auto', 'auto', 'inproc', 'proxy'),
      }),
      { maxLength: 40 },
    ),
    before: fc.integer({ min: 0, max: 6 }),
    after: fc.integer({ min: 0, max: 6 }),
    capacity: fc.integer({ min: 0, max: 8 }),
    elapsed: fc.integer({ min: 0, max: 600_000 }),
  });

  it('every target on exactly one shard; staying keeps the epoch, moving raises it; replanning the output is a no-op', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const targets = s.fleet.map((f, i) =>
          sampleTarget({ name: `t${String(i).padStart(2, '0')}`, transport: f.pin, ...(f.rate === null ? {} : { bytesPerSecond: f.rate }) }),
        );
        const rates = new Map(targets.flatMap((t) => (t.status?.rates === undefined ? [] : [[t.metadata.name, t.status.rates.bytesPerSecond] as const])));
        const pool = (replicas: number) =>
          samplePool({
            replicas,
            transport: { promoteAboveBitsPerSecond: 1_250_000, demoteBelowBitsPerSecond: 750_000, minDwellSeconds: 60, proxyCapacityPerPod: s.capacity },
          });
        const first = planPool({ pool: pool(s.before), targets, shards: [], nowMs: NOW });
        const second = planPool({ pool: pool(s.after), targets, shards: written(first, rates), nowMs: NOW + s.elapsed });
        const seen = second.shards.flatMap((sh) => sh.spec.targets.map((t) => t.name));
        assert.equal(new Set(seen).size, seen.length, 'no target twice');
        assert.equal(seen.length, s.after === 0 ? 0 : targets.length);
        for (const sh of second.shards) {
          const pinnedProxy = sh.spec.targets.filter((t) => targets.find((x) => x.metadata.name === t.name)!.spec.transport === 'proxy').length;
          assert.ok(sh.spec.targets.filter((t) => t.transport === 'proxy').length <= Math.max(s.capacity, pinnedProxy));
          for (const t of sh.spec.targets) {
            if (s.before === 0 || !first.targets.has(t.name)) assert.equal(t.epoch, epochFloor(NOW + s.elapsed));
            else
              assert.equal(
                t.epoch,
                first.targets.get(t.name)!.shard === sh.index ? epochFloor(NOW) : Math.max(epochFloor(NOW) + 1, epochFloor(NOW + s.elapsed)),
                t.name,
              );
          }
        }
        const third = planPool({ pool: pool(s.after), targets, shards: written(second, rates), nowMs: NOW + s.elapsed });
        assert.deepEqual(third.shards, second.shards);
      }),
      { numRuns: 150, endOnFailure: true },
    );
  });
});
