// DurationStats, the bounded-memory duration accumulator: exact count, sum, min, max, mean
// and stddev; fast-check properties that percentiles stay within RELATIVE_ERROR of the exact
// nearest-rank value and that merging equals adding every sample to one; non-durations ignored.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { DurationStats, RELATIVE_ERROR } from '../../../src/stats/histogram.ts';

function exactQuantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

test('count, sum, min, max, mean and stddev are exact', () => {
  const s = new DurationStats();
  for (const v of [1, 2, 3, 4, 10]) s.add(v);
  assert.equal(s.count, 5);
  assert.equal(s.sum, 20);
  assert.equal(s.min, 1);
  assert.equal(s.max, 10);
  assert.equal(s.average, 4);
  assert.ok(Math.abs(s.stddev - Math.sqrt((9 + 4 + 1 + 0 + 36) / 5)) < 1e-12);
});

test('percentiles are within the bucket error of the exact nearest-rank value', () => {
  fc.assert(
    fc.property(
      fc.array(fc.double({ min: 0.001, max: 1e7, noNaN: true }), { minLength: 1, maxLength: 500 }),
      fc.constantFrom(0.5, 0.9, 0.95, 0.99, 1),
      (values, q) => {
        const s = new DurationStats();
        for (const v of values) s.add(v);
        const exact = exactQuantile(values, q);
        const got = s.quantile(q);
        assert.ok(got >= exact * (1 - 1e-9) && got <= exact * (1 + RELATIVE_ERROR) * (1 + 1e-9), `q=${q} exact=${exact} got=${got}`);
      },
    ),
  );
});

test('merge equals adding every sample to one accumulator', () => {
  fc.assert(
    fc.property(fc.array(fc.double({ min: 0, max: 1e5, noNaN: true })), fc.array(fc.double({ min: 0, max: 1e5, noNaN: true })), (a, b) => {
      const left = new DurationStats();
      const right = new DurationStats();
      const all = new DurationStats();
      for (const v of a) {
        left.add(v);
        all.add(v);
      }
      for (const v of b) {
        right.add(v);
        all.add(v);
      }
      left.merge(right);
      assert.equal(left.count, all.count);
      assert.ok(Math.abs(left.sum - all.sum) <= 1e-6 * Math.max(1, all.sum));
      assert.ok(Math.abs(left.stddev - all.stddev) <= 1e-6 * Math.max(1, all.stddev));
      assert.equal(left.quantile(0.95), all.quantile(0.95));
    }),
  );
});

test('ignores values that are not durations', () => {
  const s = new DurationStats();
  s.add(Number.NaN);
  s.add(-1);
  s.add(Number.POSITIVE_INFINITY);
  assert.equal(s.count, 0);
  assert.equal(s.quantile(0.95), 0);
  assert.equal(s.stddev, 0);
});
