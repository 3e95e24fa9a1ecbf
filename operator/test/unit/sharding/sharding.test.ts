// Sharding by example: murmur3 against reference vectors, option and weight checks, and
// bounded consistent hashing on small hand-made fleets (dedicated heavy targets, bins that
// cannot fit, stickiness, 5 → 6 → 5 shards, new targets), with modulo hashing as the baseline.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  boundedConsistentHashing,
  buildRing,
  DEFAULT_SHARDING_OPTIONS,
  moduloHashing,
  movedWeight,
  murmur3,
  planBoundedAssignment,
  type ShardingTarget,
  shardLoads,
  targetRingPosition,
  targetWeights,
  validateShardingOptions,
} from '../../../src/sharding/index.ts';

const shardNames = (n: number): string[] => Array.from({ length: n }, (_, i) => `pool-${i}`);

describe('murmur3', () => {
  it('matches the reference MurmurHash3_x86_32 vectors (UTF-8 bytes)', () => {
    assert.equal(murmur3(''), 0);
    assert.equal(murmur3('', 1), 0x514e28b7);
    assert.equal(murmur3('a'), 0x3c2569b2);
    assert.equal(murmur3('abc'), 0xb3dd93fa);
    assert.equal(murmur3('hello'), 0x248bfa47);
    assert.equal(murmur3('aaaa', 0x9747b28c), 0x5a97808a);
    assert.equal(murmur3('The quick brown fox jumps over the lazy dog'), 0x2e4ff723);
    // Non-ASCII names hash their UTF-8 bytes (checked against an independent implementation).
    assert.equal(murmur3('prod/café-é'), 0x6dc66989);
    assert.equal(murmur3('日本'), 0xc4d9f942);
  });
});

describe('options and weights', () => {
  it('defaults and validation name the option', () => {
    assert.deepEqual(validateShardingOptions(), { minWeightBytesPerSecond: 1024, loadFactor: 1.25, virtualNodes: 160 });
    assert.deepEqual(validateShardingOptions({ loadFactor: 1 }), { ...DEFAULT_SHARDING_OPTIONS, loadFactor: 1 });
    assert.throws(() => validateShardingOptions({ loadFactor: 0.9 }), /loadFactor must be a finite number >= 1, got 0.9/);
    assert.throws(() => validateShardingOptions({ loadFactor: Number.NaN }), /loadFactor/);
    assert.throws(() => validateShardingOptions({ minWeightBytesPerSecond: 0 }), /minWeightBytesPerSecond must be a finite number > 0/);
    assert.throws(() => validateShardingOptions({ virtualNodes: 1.5 }), /virtualNodes must be a whole number from 1 to 10000, got 1.5/);
    assert.throws(() => validateShardingOptions({ virtualNodes: 0 }), /virtualNodes/);
  });

  it('unmeasured, idle and slow targets weigh the floor; non-finite rates are rejected', () => {
    const weights = targetWeights([
      { name: 'new', bytesPerSecond: null },
      { name: 'idle', bytesPerSecond: 0 },
      { name: 'slow', bytesPerSecond: 10 },
      { name: 'odd', bytesPerSecond: -5 },
      { name: 'busy', bytesPerSecond: 5e6 },
    ]);
    assert.deepEqual(
      [...weights],
      [
        ['new', 1024],
        ['idle', 1024],
        ['slow', 1024],
        ['odd', 1024],
        ['busy', 5e6],
      ],
    );
    assert.throws(() => targetWeights([{ name: 'x', bytesPerSecond: Number.NaN }]), /bytesPerSecond of target "x" must be finite or null, got NaN/);
    assert.throws(() => targetWeights([{ name: 'x', bytesPerSecond: Number.POSITIVE_INFINITY }]), /must be finite/);
  });

  it('rejects duplicate targets and shards', () => {
    assert.throws(
      () =>
        boundedConsistentHashing.assign({
          shards: ['a'],
          targets: [
            { name: 't', bytesPerSecond: 1 },
            { name: 't', bytesPerSecond: 2 },
          ],
          previous: new Map(),
        }),
      /duplicate target "t"/,
    );
    assert.throws(() => boundedConsistentHashing.assign({ shards: ['a', 'b', 'a'], targets: [], previous: new Map() }), /duplicate shard "a"/);
    assert.throws(() => moduloHashing.assign({ shards: ['a', 'a'], targets: [], previous: new Map() }), /duplicate shard/);
  });

  it('shardLoads lists every shard; movedWeight counts targets whose shard changed', () => {
    const weights = new Map([
      ['t1', 10],
      ['t2', 20],
      ['t3', 5],
    ]);
    const prev = new Map([
      ['t1', 'b'],
      ['t2', 'a'],
    ]);
    const next = new Map([
      ['t1', 'b'],
      ['t2', 'b'],
      ['t3', 'a'],
    ]);
    assert.deepEqual(
      [...shardLoads(next, weights, ['c', 'b', 'a'])],
      [
        ['a', 5],
        ['b', 30],
        ['c', 0],
      ],
    );
    assert.equal(movedWeight(prev, next, weights), 25); // t2 moved, t3 is new
    assert.throws(() => shardLoads(new Map([['zz', 'a']]), weights, ['a']), /no weight for target "zz"/);
  });
});

describe('boundedConsistentHashing: examples', () => {
  it('assigns nothing without shards and everything to the only shard', () => {
    const targets = [
      { name: 'a', bytesPerSecond: 5 },
      { name: 'b', bytesPerSecond: null },
    ];
    assert.equal(boundedConsistentHashing.assign({ shards: [], targets, previous: new Map() }).size, 0);
    assert.deepEqual(
      [...boundedConsistentHashing.assign({ shards: ['only'], targets, previous: new Map([['a', 'gone']]) })],
      [
        ['a', 'only'],
        ['b', 'only'],
      ],
    );
    assert.deepEqual(planBoundedAssignment({ shards: ['only'], targets: [], previous: new Map() }).assignment, new Map());
  });

  it('gives a target heavier than the bound a shard of its own, its current one if it can', () => {
    const targets: ShardingTarget[] = [
      { name: 'huge', bytesPerSecond: 1e9 },
      ...Array.from({ length: 300 }, (_, i) => ({ name: `small-${i}`, bytesPerSecond: 1e5 })),
    ];
    const shards = shardNames(4);
    // Everything was on pool-2, the huge one included.
    const previous = new Map(targets.map((t) => [t.name, 'pool-2']));
    const result = planBoundedAssignment({ shards, targets, previous });
    assert.deepEqual(result.dedicated, ['huge']);
    assert.equal(result.assignment.get('huge'), 'pool-2');
    assert.deepEqual(
      [...result.assignment].filter(([, s]) => s === 'pool-2').map(([n]) => n),
      ['huge'],
    );
    assert.deepEqual(result.overBound, []);
    // Others share the three remaining shards within the bound (1.25 × the mean over all four).
    const loads = shardLoads(result.assignment, targetWeights(targets), shards);
    for (const [shard, load] of loads) if (shard !== 'pool-2') assert.ok(load <= result.capacity && load > 0, `${shard}: ${load}`);
  });

  it('reports a shard pushed over the bound when no shard has room (bin packing cannot always fit)', () => {
    // Three targets of 0.6 × W/2 ... on 2 shards with loadFactor 1: the third fits nowhere.
    const targets = [
      { name: 'a', bytesPerSecond: 100 },
      { name: 'b', bytesPerSecond: 100 },
      { name: 'c', bytesPerSecond: 100 },
    ];
    const result = planBoundedAssignment(
      { shards: ['x', 'y'], targets, previous: new Map() },
      { ...DEFAULT_SHARDING_OPTIONS, minWeightBytesPerSecond: 1, loadFactor: 1 },
    );
    assert.equal(result.capacity, 150);
    assert.equal(result.assignment.size, 3);
    assert.equal(result.overBound.length, 1);
  });

  it('when targets cannot fit within C, the bound is rounded up by one target (the weighted ceil(C)), reported, and stable', () => {
    // Capacity 127.5: 100 and 95 cannot share, and 30 + 30 fit beside neither: some shard must go over.
    const targets = [
      { name: 'big', bytesPerSecond: 100 },
      { name: 'mid', bytesPerSecond: 95 },
      { name: 'x1', bytesPerSecond: 30 },
      { name: 'x2', bytesPerSecond: 30 },
    ];
    const options = { ...DEFAULT_SHARDING_OPTIONS, minWeightBytesPerSecond: 1, loadFactor: 1 };
    const result = planBoundedAssignment({ shards: ['s0', 's1'], targets, previous: new Map() }, options);
    const a = result.assignment;
    assert.equal(a.size, 4);
    assert.notEqual(a.get('big'), a.get('mid'));
    const loads = shardLoads(a, new Map(targets.map((t) => [t.name, t.bytesPerSecond])), ['s0', 's1']);
    assert.ok(
      [...loads.values()].every((l) => l <= 127.5 + 100),
      'within C + the heaviest shared target',
    );
    assert.deepEqual(
      result.overBound,
      [...loads].filter(([, l]) => l > 127.5).map(([s]) => s),
      'the shards above C are reported',
    );
    // Planning again from its own output keeps every target: no move on every reconcile.
    const again = planBoundedAssignment({ shards: ['s0', 's1'], targets, previous: a }, options);
    assert.deepEqual([...again.assignment], [...a]);
  });

  it('4 equal targets over 3 shards (cannot fit 1.25 × 4/3): stable, and 2 -> 3 moves only targets whose home is the new shard', () => {
    const targets = ['alpha', 'bravo', 'charlie', 'delta'].map((name) => ({ name, bytesPerSecond: 5000 }));
    const two = planBoundedAssignment({ shards: ['p-0', 'p-1'], targets, previous: new Map() }).assignment;
    const three = planBoundedAssignment({ shards: ['p-0', 'p-1', 'p-2'], targets, previous: two }).assignment;
    for (const [name, shard] of three)
      assert.ok(shard === two.get(name) || shard === 'p-2', `${name} moved ${two.get(name)} -> ${shard}, not to the new shard`);
    assert.deepEqual(
      [...planBoundedAssignment({ shards: ['p-0', 'p-1', 'p-2'], targets, previous: three }).assignment],
      [...three],
      'a recompute keeps every target',
    );
    const back = planBoundedAssignment({ shards: ['p-0', 'p-1'], targets, previous: three }).assignment;
    for (const [name, shard] of back) if (three.get(name) !== 'p-2') assert.equal(shard, three.get(name), `${name} stays`);
  });

  it('a target whose fresh home is full stays where it was instead of walking on', () => {
    const options = { minWeightBytesPerSecond: 1, loadFactor: 1.1, virtualNodes: 6 };
    const targets = Array.from({ length: 60 }, (_, i) => ({ name: `t${i}`, bytesPerSecond: 100 }));
    const ring = buildRing(['a', 'b', 'c'], options.virtualNodes);
    const homedOnC = targets.filter((t) => ring.owners[targetRingPosition(ring, t.name)] === 2).length;
    assert.equal(homedOnC, 23); // more than c can take: capacity 1.1 × 6000 / 3 = 2200, 22 targets
    const before = boundedConsistentHashing.assign({ shards: ['a', 'b'], targets, previous: new Map() }, options);
    const after = boundedConsistentHashing.assign({ shards: ['a', 'b', 'c'], targets, previous: before }, options);
    const moved = [...after].filter(([name, shard]) => before.get(name) !== shard);
    assert.equal(moved.length, 22);
    assert.ok(moved.every(([, shard]) => shard === 'c'));
  });

  it("kubectl scale 5 → 6 → 5: about a sixth of the load moves, the rest stays; back to 5 only the sixth shard's targets move", () => {
    const targets = Array.from({ length: 2000 }, (_, i) => ({ name: `prod/db-${i}`, bytesPerSecond: i % 10 === 0 ? null : 1000 + ((i * 7919) % 200_000) }));
    const weights = targetWeights(targets);
    const five = boundedConsistentHashing.assign({ shards: shardNames(5), targets, previous: new Map() });
    const six = boundedConsistentHashing.assign({ shards: shardNames(6), targets, previous: five });
    const total = [...weights.values()].reduce((a, b) => a + b, 0);
    const up = movedWeight(five, six, weights) / total;
    assert.ok(up > 1 / 6 - 0.05 && up < 1 / 6 + 0.05, `moved ${up} on scale-up`);
    const intoNew = [...six].filter(([n, s]) => s !== five.get(n) && s === 'pool-5').reduce((a, [n]) => a + weights.get(n)!, 0) / total;
    assert.ok(intoNew / up > 0.8, `only ${intoNew} of ${up} went to the new shard`);
    const back = boundedConsistentHashing.assign({ shards: shardNames(5), targets, previous: six });
    for (const [name, shard] of back) if (six.get(name) !== 'pool-5') assert.equal(shard, six.get(name), name);
    assert.ok(movedWeight(six, back, weights) > 0);
    // A recompute without changes moves nothing.
    assert.deepEqual(boundedConsistentHashing.assign({ shards: shardNames(5), targets, previous: back }), back);
  });

  it('places new targets without moving existing ones when there is room', () => {
    const targets = Array.from({ length: 500 }, (_, i) => ({ name: `t${i}`, bytesPerSecond: 2000 }));
    const before = boundedConsistentHashing.assign({ shards: shardNames(8), targets, previous: new Map() });
    const more = [...targets, ...Array.from({ length: 20 }, (_, i) => ({ name: `new${i}`, bytesPerSecond: null }))];
    const after = boundedConsistentHashing.assign({ shards: shardNames(8), targets: more, previous: before });
    for (const [name, shard] of before) assert.equal(after.get(name), shard);
    assert.equal(after.size, 520);
  });

  it('modulo hashing spreads by hash and ignores the previous assignment', () => {
    const targets = Array.from({ length: 1000 }, (_, i) => ({ name: `t${i}`, bytesPerSecond: 1 }));
    const a = moduloHashing.assign({ shards: shardNames(4), targets, previous: new Map() });
    const counts = [...shardLoads(a, targetWeights(targets), shardNames(4)).values()];
    assert.ok(Math.min(...counts) > 200 * 1024, counts.join(','));
    assert.deepEqual(moduloHashing.assign({ shards: shardNames(4).reverse(), targets, previous: new Map([['t1', 'x']]) }), a);
    assert.equal(moduloHashing.assign({ shards: [], targets, previous: new Map() }).size, 0);
  });
});
