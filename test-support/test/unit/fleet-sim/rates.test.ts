// The simulated fleet's rates: seeded (the same fleet every run), log-normal with the asked
// median and spread, capped, and the promotion threshold that puts the asked share above it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { DEFAULT_RATE_SHAPE, drawRates, promotionThreshold, standardNormalQuantile } from '../../../src/fleet-sim/rates.ts';

test('the same seed draws the same rates; another seed others', () => {
  assert.deepEqual(drawRates(100, DEFAULT_RATE_SHAPE, 7), drawRates(100, DEFAULT_RATE_SHAPE, 7));
  assert.notDeepEqual(drawRates(100, DEFAULT_RATE_SHAPE, 7), drawRates(100, DEFAULT_RATE_SHAPE, 8));
});

test('20,000 draws: median within 5 % of the shape, the share above a threshold as the normal quantile says, none above the cap', () => {
  const shape = { medianBytesPerSecond: 2000, sigma: 1, capBytesPerSecond: 64_000 };
  const rates = drawRates(20_000, shape).sort((a, b) => a - b);
  const median = rates[rates.length / 2]!;
  assert.ok(Math.abs(median - 2000) / 2000 < 0.05, `median ${median}`);
  const threshold = promotionThreshold(shape, 0.05);
  const above = rates.filter((r) => r > threshold).length / rates.length;
  assert.ok(Math.abs(above - 0.05) < 0.008, `share above ${threshold.toFixed(0)} B/s: ${above}`);
  assert.ok(rates.at(-1)! <= 64_000);
});

test('the quantile inverts the normal distribution at known points', () => {
  assert.ok(Math.abs(standardNormalQuantile(0.5)) < 1e-9);
  assert.ok(Math.abs(standardNormalQuantile(0.975) - 1.959964) < 1e-5);
  assert.ok(Math.abs(standardNormalQuantile(0.01) + 2.326348) < 1e-5);
  fc.assert(fc.property(fc.double({ min: 0.001, max: 0.999, noNaN: true }), (p) => Math.abs(standardNormalQuantile(p) + standardNormalQuantile(1 - p)) < 1e-6));
  assert.throws(() => standardNormalQuantile(1), RangeError);
});

test('a shape without a positive median or cap is refused', () => {
  assert.throws(() => drawRates(1, { ...DEFAULT_RATE_SHAPE, medianBytesPerSecond: 0 }), /positive median/);
  assert.throws(() => drawRates(1, { ...DEFAULT_RATE_SHAPE, capBytesPerSecond: -1 }), /positive median and cap/);
});
