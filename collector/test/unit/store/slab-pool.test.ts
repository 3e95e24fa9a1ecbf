// Reused memory for encoded rows: views handed out never overlap one still in use, a slab is
// reused only once all its views are given back, a steady state makes no new slabs, and large
// blocks get memory of their own.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { type Slab, SlabPool } from '../../../src/store/slab-pool.ts';

test('property: a view in use is never handed out again, whatever the order views are given back in', () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(fc.integer({ min: 1, max: 300 }), fc.constant(-1)), { maxLength: 200 }),
      fc.array(fc.nat(), { maxLength: 200 }),
      (steps, picks) => {
        const pool = new SlabPool(1024);
        const live: Array<{ buf: Buffer; slab: Slab | null; mark: number }> = [];
        let mark = 0;
        steps.forEach((n, i) => {
          if (n < 0) {
            if (live.length === 0) return;
            const [gone] = live.splice((picks[i] ?? 0) % live.length, 1);
            pool.give(gone!.slab);
            return;
          }
          const view = pool.take(n);
          assert.equal(view.buf.length, n);
          view.buf.fill(++mark & 0xff);
          live.push({ ...view, mark: mark & 0xff });
          // Every view still in use holds what was written into it.
          for (const v of live) assert.ok(v.buf.every((b) => b === v.mark));
        });
      },
    ),
  );
});

test('in a steady state (take, commit, give back) no new slab is made', () => {
  const pool = new SlabPool(64 * 1024);
  const inFlight: Array<Slab | null> = [];
  for (let i = 0; i < 10_000; i++) {
    inFlight.push(pool.take(5_000 + (i % 7) * 1_000).slab);
    // About 40 handovers wait at any time, as batches commit behind the streams.
    if (inFlight.length > 40) pool.give(inFlight.shift()!);
  }
  assert.ok(pool.made <= 12, `made ${pool.made} slabs for 10,000 handovers`);
  for (const s of inFlight) pool.give(s);
  assert.ok(pool.freeSlabs <= 8, 'a bounded number of free slabs is kept');
});

test('a block larger than a quarter of a slab gets a Buffer of its own; giving a slab back twice is refused', () => {
  const pool = new SlabPool(1024);
  const large = pool.take(300);
  assert.equal(large.slab, null);
  assert.equal(large.buf.length, 300);
  pool.give(large.slab);
  const small = pool.take(100);
  assert.ok(small.slab !== null);
  pool.give(small.slab);
  assert.throws(() => pool.give(small.slab), /given back more often than it was taken/);
});

test('each lane fills slabs of its own: a lane that lags pins only its own slabs', () => {
  const pool = new SlabPool(4096);
  const slow = pool.take(500, 0);
  const fast = Array.from({ length: 40 }, () => pool.take(500, 1));
  assert.ok(
    fast.every((v) => v.slab !== slow.slab),
    'no view of lane 1 shares the slab of lane 0',
  );
  // Lane 1 commits everything; lane 0 still waits: lane 1's full slabs are free again.
  for (const v of fast) pool.give(v.slab);
  const madeBefore = pool.made;
  for (let i = 0; i < 40; i++) pool.give(pool.take(500, 1).slab);
  assert.equal(pool.made, madeBefore, 'lane 1 reuses its freed slabs while lane 0 holds on');
  pool.give(slow.slab);
});

// A batch's slabs all come back at its commit and the next batch needs as many again: letting
// them go there made the pool allocate that many anew every second (issue 15).
test('batches that commit all at once reuse the slabs of the batch before', () => {
  const pool = new SlabPool(4096);
  const batch = (): Array<Slab | null> => Array.from({ length: 200 }, () => pool.take(1000).slab);
  for (const s of batch()) pool.give(s);
  const made = pool.made;
  assert.ok(made >= 40, `a batch fills ${made} slabs`);
  for (let i = 0; i < 20; i++) for (const s of batch()) pool.give(s);
  assert.equal(pool.made, made, 'no slab made for batches of the same size');
});

test('after a burst, the free slabs beyond what is in use are let go over time, not kept for good', () => {
  const pool = new SlabPool(4096);
  const burst = Array.from({ length: 2000 }, () => pool.take(1000).slab);
  for (const s of burst) pool.give(s);
  const afterBurst = pool.freeSlabs;
  assert.ok(afterBurst > 100, `${afterBurst} free slabs kept right after the burst`);
  // A steady trickle: one handover in flight at a time.
  for (let i = 0; i < 200_000; i++) pool.give(pool.take(1000).slab);
  assert.ok(pool.freeSlabs <= 8, `${pool.freeSlabs} free slabs kept once the burst is long past`);
});
