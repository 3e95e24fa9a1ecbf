// The Node.js settings computed for a collector pod (thread pool, old and semi space, the old
// generation's growing factor): auto
// values for sample shards, steps that do not move on a small change (no restart), a
// fast-check property that heap plus young generation stays within 75 % of the memory limit;
// explicit values and CONFIG_INVALID for out-of-range ones.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { autoSemiSpaceMiB, autoThreadpoolSize, computeTuning, type TuningInput } from '../../../src/desired/tuning.ts';

const MiB = 2 ** 20;
const GiB = 2 ** 30;
const base: TuningInput = {
  nodeTuning: { mode: 'auto' },
  memoryLimitBytes: GiB,
  inprocTargets: 10,
  proxyTargets: 0,
  instances: 10,
  sqlSessions: 0,
  ingestBytesPerSecond: 0,
};

describe('computeTuning, auto', () => {
  it('a small shard with 1 GiB: libuv default threads, the working old space, a small young generation', () => {
    assert.deepEqual(computeTuning(base), { uvThreadpoolSize: 4, maxOldSpaceSizeMiB: 256, maxSemiSpaceSizeMiB: 4, heapGrowingPercent: 50 });
  });
  it('threads grow with inproc targets (their DNS lookups), in powers of two, within [4, 64]', () => {
    assert.equal(autoThreadpoolSize(0, 0), 4);
    assert.equal(autoThreadpoolSize(25, 0), 4); // 2 + 1 -> 4
    assert.equal(autoThreadpoolSize(100, 0), 8); // 2 + 4 -> 8
    assert.equal(autoThreadpoolSize(300, 0), 16); // 2 + 12 -> 16
    assert.equal(autoThreadpoolSize(1000, 0), 64); // 2 + 40 -> 64
    assert.equal(autoThreadpoolSize(100_000, 0), 64);
    assert.equal(autoThreadpoolSize(0, 128), 4); // 2 + 2 -> 4
    assert.ok(autoThreadpoolSize(0, 500) < autoThreadpoolSize(500, 0), 'proxy targets need fewer threads than inproc ones');
  });
  it('a target switching transport in a 60-target shard does not change the tuning (no restart)', () => {
    const a = computeTuning({ ...base, inprocTargets: 60, proxyTargets: 0 });
    const b = computeTuning({ ...base, inprocTargets: 59, proxyTargets: 1 });
    assert.deepEqual(a, b);
  });
  it('targets moving in and out at an edge keep the threadpool and old space the shard runs with (no restart); a clear change moves them', () => {
    // 50 inproc targets want 2 + 2 = 4 threads, 51 want 5 -> 8: an edge a single move crosses.
    const at50 = computeTuning({ ...base, inprocTargets: 50, instances: 64 });
    const at51 = computeTuning({
      ...base,
      inprocTargets: 51,
      instances: 65,
      previousThreadpoolSize: at50.uvThreadpoolSize,
      previousOldSpaceMiB: at50.maxOldSpaceSizeMiB,
    });
    assert.equal(at51.uvThreadpoolSize, at50.uvThreadpoolSize);
    assert.equal(at51.maxOldSpaceSizeMiB, at50.maxOldSpaceSizeMiB);
    // Without the shard's present values the edge would have moved both.
    const fresh = computeTuning({ ...base, inprocTargets: 51, instances: 65 });
    assert.notEqual(fresh.uvThreadpoolSize, at50.uvThreadpoolSize);
    assert.notEqual(fresh.maxOldSpaceSizeMiB, at50.maxOldSpaceSizeMiB);
    // Four times the targets: the threadpool moves; far more streams: the old space moves.
    const grown = computeTuning({ ...base, inprocTargets: 200, instances: 200, previousThreadpoolSize: 4, previousOldSpaceMiB: 256 });
    assert.equal(grown.uvThreadpoolSize, 16);
    assert.equal(grown.maxOldSpaceSizeMiB, computeTuning({ ...base, inprocTargets: 200, instances: 200 }).maxOldSpaceSizeMiB);
    // A limit lowered under the old space the shard runs with: that one is not kept.
    const squeezed = computeTuning({ ...base, memoryLimitBytes: 256 * MiB, previousOldSpaceMiB: 256 });
    assert.ok(squeezed.maxOldSpaceSizeMiB < 256);
  });
  it('property: with the values a shard runs with, one target more or less never changes its tuning twice in a row', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2000 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 512, max: 4096 }), (targets, perTarget, limitMiB) => {
        const input = (n: number): TuningInput => ({ ...base, memoryLimitBytes: limitMiB * MiB, inprocTargets: n, instances: n * perTarget });
        const first = computeTuning(input(targets));
        const next = computeTuning({ ...input(targets + 1), previousThreadpoolSize: first.uvThreadpoolSize, previousOldSpaceMiB: first.maxOldSpaceSizeMiB });
        const back = computeTuning({ ...input(targets), previousThreadpoolSize: next.uvThreadpoolSize, previousOldSpaceMiB: next.maxOldSpaceSizeMiB });
        // Back and forth over any edge: the second step keeps what the first chose.
        assert.deepEqual(back, next);
      }),
    );
  });
  it('semi-space: small (memory), a step up above 8 and above 20 MB/s, capped by the limit', () => {
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 5e6 }).maxSemiSpaceSizeMiB, 4);
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 8e6 }).maxSemiSpaceSizeMiB, 4);
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 9e6 }).maxSemiSpaceSizeMiB, 8);
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 20e6 }).maxSemiSpaceSizeMiB, 8);
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 25e6 }).maxSemiSpaceSizeMiB, 16);
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 25e6, memoryLimitBytes: 4 * GiB }).maxSemiSpaceSizeMiB, 16, 'a larger limit does not grow it');
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 25e6, memoryLimitBytes: 256 * MiB }).maxSemiSpaceSizeMiB, 8, '256 MiB / 24 caps it at 8');
  });
  it('growing factor: 50 % for the small young generation, 100 % once the semi-space is sized for speed', () => {
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 5e6 }).heapGrowingPercent, 50);
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 8e6 }).heapGrowingPercent, 50);
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 9e6 }).heapGrowingPercent, 100);
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 25e6 }).heapGrowingPercent, 100);
    // A limit that caps the semi-space at 4 MiB (96 MiB / 24) keeps the small growing factor too.
    assert.equal(computeTuning({ ...base, ingestBytesPerSecond: 25e6, memoryLimitBytes: 96 * MiB }).heapGrowingPercent, 50);
    // It follows the semi-space the hysteresis keeps, so the two never restart a pod apart.
    const kept = computeTuning({ ...base, ingestBytesPerSecond: 7e6, previousSemiSpaceMiB: 8 });
    assert.deepEqual([kept.maxSemiSpaceSizeMiB, kept.heapGrowingPercent], [8, 100]);
  });
  it('a rate wobbling around a step keeps the semi-space (no restart); a clear change moves it', () => {
    const GiB4 = 4 * 2 ** 30;
    let semi = autoSemiSpaceMiB(18e6, GiB4);
    assert.equal(semi, 8);
    for (const rate of [21e6, 19e6, 22e6, 17e6, 23.5e6]) {
      semi = autoSemiSpaceMiB(rate, GiB4, semi);
      assert.equal(semi, 8, `at ${rate} B/s`);
    }
    semi = autoSemiSpaceMiB(28e6, GiB4, semi);
    assert.equal(semi, 16, 'well above the step');
    for (const rate of [18e6, 22e6, 17e6]) assert.equal(autoSemiSpaceMiB(rate, GiB4, semi), 16, `kept at ${rate} B/s`);
    assert.equal(autoSemiSpaceMiB(12e6, GiB4, semi), 8, 'well below the step');
    semi = 8;
    for (const rate of [7e6, 9.5e6, 6.8e6]) assert.equal(autoSemiSpaceMiB(rate, GiB4, semi), 8, `8 kept at ${rate} B/s, near the lower step`);
    assert.equal(autoSemiSpaceMiB(5e6, GiB4, semi), 4, 'well below the lower step');
    assert.equal(autoSemiSpaceMiB(9e6, GiB4, 4), 4, '4 kept just above the lower step');
  });

  it('old space: what the streams need (at least 256 MiB), within the limit, never below 128 MiB', () => {
    assert.equal(computeTuning({ ...base, memoryLimitBytes: 4 * GiB }).maxOldSpaceSizeMiB, 256, 'a larger limit does not grow it');
    // 128 + 2 × 500 + 4 × 100 = 1528 -> 1536, within 3072 - 64 - 3 × 4.
    assert.equal(computeTuning({ ...base, memoryLimitBytes: 4 * GiB, instances: 500, sqlSessions: 100 }).maxOldSpaceSizeMiB, 1536);
    // ... and capped by 1 GiB: 768 - 64 - 3 × 4 (an unmeasured shard's 4 MiB semi-space).
    assert.equal(computeTuning({ ...base, instances: 500, sqlSessions: 100 }).maxOldSpaceSizeMiB, 692);
    assert.equal(computeTuning({ ...base, memoryLimitBytes: 256 * MiB }).maxOldSpaceSizeMiB, 128);
  });
  it('without a limit: 1 GiB, more for a shard with many streams', () => {
    assert.equal(computeTuning({ ...base, memoryLimitBytes: null }).maxOldSpaceSizeMiB, 1024);
    assert.equal(computeTuning({ ...base, memoryLimitBytes: null, instances: 500, sqlSessions: 100 }).maxOldSpaceSizeMiB, 1536); // 128 + 1000 + 400 -> 1536
  });
  it('property: within the CRD ranges, heap plus young generation within 75 % of any limit >= 512 MiB', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 512, max: 64 * 1024 }),
        fc.nat(5000),
        fc.nat(5000),
        fc.nat(20000),
        fc.nat(5000),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        (limitMiB, inproc, proxy, instances, sql, rate) => {
          const t = computeTuning({
            nodeTuning: { mode: 'auto' },
            memoryLimitBytes: limitMiB * MiB,
            inprocTargets: inproc,
            proxyTargets: proxy,
            instances,
            sqlSessions: sql,
            ingestBytesPerSecond: rate,
          });
          assert.ok(t.uvThreadpoolSize >= 4 && t.uvThreadpoolSize <= 64);
          assert.ok(t.maxSemiSpaceSizeMiB >= 1 && t.maxSemiSpaceSizeMiB <= 64);
          assert.ok(t.maxOldSpaceSizeMiB >= 128);
          assert.ok(t.maxOldSpaceSizeMiB + 3 * t.maxSemiSpaceSizeMiB <= 0.75 * limitMiB);
          assert.ok(t.heapGrowingPercent !== undefined && t.heapGrowingPercent >= 10 && t.heapGrowingPercent <= 400);
          for (const v of Object.values(t)) assert.ok(Number.isInteger(v));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('computeTuning, explicit', () => {
  it('uses the given values, computes the missing ones', () => {
    assert.deepEqual(computeTuning({ ...base, nodeTuning: { mode: 'explicit', uvThreadpoolSize: 12, maxOldSpaceSizeMiB: 900, maxSemiSpaceSizeMiB: 8 } }), {
      uvThreadpoolSize: 12,
      maxOldSpaceSizeMiB: 900,
      maxSemiSpaceSizeMiB: 8,
      heapGrowingPercent: 100,
    });
    assert.equal(
      computeTuning({ ...base, nodeTuning: { mode: 'explicit', maxSemiSpaceSizeMiB: 8, heapGrowingPercent: 30 } }).heapGrowingPercent,
      30,
      'a given growing factor wins over the one the semi-space implies',
    );
    // Semi-space given: old space is computed with it (the cap 768 - 64 - 3 × 64 = 512 is above the 256 needed).
    assert.deepEqual(computeTuning({ ...base, nodeTuning: { mode: 'explicit', maxSemiSpaceSizeMiB: 64 } }), {
      uvThreadpoolSize: 4,
      maxOldSpaceSizeMiB: 256,
      maxSemiSpaceSizeMiB: 64,
      heapGrowingPercent: 100,
    });
    // ... and bounds it under a small limit: 512 × 0.75 - 64 - 3 × 64 = 128.
    assert.deepEqual(
      computeTuning({ ...base, memoryLimitBytes: 512 * MiB, nodeTuning: { mode: 'explicit', maxSemiSpaceSizeMiB: 64 } }).maxOldSpaceSizeMiB,
      128,
    );
  });
  it('auto mode ignores values left in the spec', () => {
    assert.deepEqual(computeTuning({ ...base, nodeTuning: { mode: 'auto', uvThreadpoolSize: 99 } }), computeTuning(base));
  });
  it('rejects values out of range and unknown modes with CONFIG_INVALID', () => {
    for (const nodeTuning of [
      { mode: 'explicit', uvThreadpoolSize: 0 },
      { mode: 'explicit', uvThreadpoolSize: 1025 },
      { mode: 'explicit', uvThreadpoolSize: 2.5 },
      { mode: 'explicit', maxOldSpaceSizeMiB: 63 },
      { mode: 'explicit', maxSemiSpaceSizeMiB: 257 },
      { mode: 'explicit', heapGrowingPercent: 9 },
      { mode: 'explicit', heapGrowingPercent: 401 },
      { mode: 'fast' },
    ]) {
      assert.throws(() => computeTuning({ ...base, nodeTuning }), { code: 'CONFIG_INVALID' }, JSON.stringify(nodeTuning));
    }
    assert.throws(() => computeTuning({ ...base, inprocTargets: -1 }), { code: 'CONFIG_INVALID' });
    assert.throws(() => computeTuning({ ...base, ingestBytesPerSecond: Number.NaN }), { code: 'CONFIG_INVALID' });
  });
});
