// RateMeter, the smoothed read rate that transport promotion decides on, fed bytes at chosen
// times (no clock): convergence and decay against the closed form, fast-check properties that
// irregular sampling gives the same rate and one sample raises it by at most 8 * bytes / tau,
// no spike after a quiet start, clock steps backwards, an initial rate, bad options refused.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { DEFAULT_RATE_TIME_CONSTANT_MS, RateMeter } from '../../../src/promotion/rate-meter.ts';

const TAU = DEFAULT_RATE_TIME_CONSTANT_MS;

/** Feed `bytesPerS` for `seconds` in one-second reads and samples, starting at `fromMs`. */
function feed(meter: RateMeter, fromMs: number, seconds: number, bytesPerS: number): number {
  let t = fromMs;
  for (let i = 0; i < seconds; i++) {
    meter.add(bytesPerS);
    t += 1000;
    meter.sample(t);
  }
  return t;
}

function close(actual: number, expected: number, relTol: number, what: string): void {
  assert.ok(Math.abs(actual - expected) <= relTol * Math.abs(expected), `${what}: ${actual} is not within ${relTol * 100}% of ${expected}`);
}

describe('RateMeter', () => {
  it('starts at 0 and uses a 30 s time constant by default', () => {
    const m = new RateMeter(0);
    assert.equal(m.timeConstantMs, 30_000);
    assert.equal(m.bitsPerS, 0);
    assert.equal(m.sample(1000), 0);
  });

  it('converges to a constant input within a few time constants', () => {
    const m = new RateMeter(5_000);
    // 125 000 B/s = 1 Mbit/s; after 5 tau the deficit is e^-5 (0.7 %).
    feed(m, 5_000, (5 * TAU) / 1000, 125_000);
    close(m.bitsPerS, 1e6, 0.01, 'after 5 tau');
    assert.ok(m.bitsPerS <= 1e6 * (1 + 1e-12), 'never overshoots');
    close(m.bytesPerS, 125_000, 0.01, 'bytes per second');
    // Exactly the continuous smoother's value.
    close(m.bitsPerS, 1e6 * (1 - Math.exp(-5)), 1e-9, 'closed form');
  });

  it('reaches 63 % of a step after one time constant', () => {
    const m = new RateMeter(0, { timeConstantMs: 10_000 });
    let t = feed(m, 0, 60, 0);
    assert.equal(m.bitsPerS, 0);
    t = feed(m, t, 10, 250_000); // 2 Mbit/s for exactly one tau
    const fraction = m.bitsPerS / 2e6;
    assert.ok(fraction > 0.63 && fraction < 0.633, `fraction after one tau: ${fraction}`);
    assert.equal(t, 70_000);
  });

  it('gives the same rate for irregular sample intervals as for regular ones at a constant rate', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 20_000 }), { minLength: 1, maxLength: 60 }),
        fc.double({ min: 0, max: 1e8, noNaN: true }),
        fc.integer({ min: 1000, max: 120_000 }),
        (intervals, bytesPerS, tau) => {
          const irregular = new RateMeter(0, { timeConstantMs: tau });
          let t = 0;
          for (const dt of intervals) {
            irregular.add((bytesPerS * dt) / 1000);
            t += dt;
            irregular.sample(t);
          }
          const regular = new RateMeter(0, { timeConstantMs: tau });
          const step = t / intervals.length;
          for (let i = 1; i <= intervals.length; i++) {
            regular.add((bytesPerS * step) / 1000);
            regular.sample(i * step);
          }
          const expected = 8 * bytesPerS * -Math.expm1(-t / tau);
          const tol = 1e-9 * Math.max(1, expected);
          assert.ok(Math.abs(irregular.bitsPerS - expected) <= tol, `irregular ${irregular.bitsPerS} vs ${expected}`);
          assert.ok(Math.abs(regular.bitsPerS - expected) <= tol, `regular ${regular.bitsPerS} vs ${expected}`);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('decays toward 0 without input, monotonically and never below 0', () => {
    const m = new RateMeter(0);
    let t = feed(m, 0, 300, 1_000_000);
    const start = m.bitsPerS;
    let previous = start;
    for (let i = 0; i < 300; i++) {
      t += 1000;
      const r = m.sample(t);
      assert.ok(r <= previous && r >= 0);
      previous = r;
    }
    close(m.bitsPerS, start * Math.exp(-10), 1e-9, 'after 10 tau of silence');
    assert.ok(m.bitsPerS < start * 1e-4);
  });

  it('does not spike on the first sample after a quiet start, however short the interval', () => {
    // A 1 MB burst right after start, sampled 1 ms later: the interval rate is 8 Gbit/s, the
    // smoothed rate rises by less than 8 * bytes / tau = 266 kbit/s.
    const m = new RateMeter(10_000);
    m.add(1_000_000);
    const r = m.sample(10_001);
    assert.ok(r > 0 && r <= (8 * 1_000_000) / (TAU / 1000), `first sample ${r}`);
    // A burst after 10 quiet minutes is averaged over the whole first interval.
    const late = new RateMeter(0);
    late.add(600_000);
    close(late.sample(600_000), 8 * 1000 * -Math.expm1(-20), 1e-9, 'after a long quiet start');
  });

  it('raises the rate by at most 8 * bytes / tau in one sample (property)', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        fc.double({ min: 1e-3, max: 1e7, noNaN: true }),
        fc.double({ min: 0, max: 1e9, noNaN: true }),
        (before, dt, bytes) => {
          const m = new RateMeter(0);
          m.add(before);
          m.sample(1000);
          const r0 = m.bitsPerS;
          m.add(bytes);
          const r1 = m.sample(1000 + dt);
          assert.ok(r1 - r0 <= ((8 * bytes) / (TAU / 1000)) * (1 + 1e-9) + 1e-9, `rise ${r1 - r0} for ${bytes} B in ${dt} ms`);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('keeps the bytes of a sample at the same time, or at an earlier time, for the next interval', () => {
    const m = new RateMeter(0);
    m.add(1000);
    assert.equal(m.sample(0), 0);
    const a = new RateMeter(0);
    a.add(1000);
    assert.equal(m.sample(1000), a.sample(1000));
    // A clock step backwards only moves the reference time.
    m.add(500);
    const before = m.bitsPerS;
    assert.equal(m.sample(900), before);
    assert.equal(m.sample(Number.NaN), before);
    a.add(500);
    a.sample(1100);
    assert.equal(m.sample(1000), a.bitsPerS);
  });

  it('an initial rate (measured elsewhere) is where it starts: a steady input at that rate keeps it, with no climb from 0', () => {
    const m = new RateMeter(0, { initialBitsPerS: 80_000 });
    assert.equal(m.bitsPerS, 80_000);
    for (let t = 1000; t <= 60_000; t += 1000) {
      m.add(10_000); // 10 kB/s = 80 kbit/s
      assert.ok(Math.abs(m.sample(t) - 80_000) < 1e-6, `steady at ${t} ms`);
    }
    // Without the hint the same input is at 63 % after one tau.
    const cold = new RateMeter(0);
    for (let t = 1000; t <= DEFAULT_RATE_TIME_CONSTANT_MS; t += 1000) {
      cold.add(10_000);
      cold.sample(t);
    }
    assert.ok(cold.bitsPerS < 0.65 * 80_000);
    assert.throws(() => new RateMeter(0, { initialBitsPerS: -1 }), /initial rate/);
    assert.throws(() => new RateMeter(0, { initialBitsPerS: Number.NaN }), /initial rate/);
  });

  it('a catch-up is not a rate: bytes taken back (the backlog shrinking) cancel the reads they were, in full', () => {
    // A server writing 2 kB/s; its collector restarts 600 kB behind and reads 64 kB a second
    // until caught up; it learns the backlog every 5 s. Before, an interval could not count
    // below nothing and the backlog's reads stayed in the rate: 9 kB/s after 30 s, 4.6 after 60
    // (the fleet soak: catching-up shards looked twice as loaded and shed targets).
    const written = 2000;
    const m = new RateMeter(0, { initialBitsPerS: written * 8 });
    let unreceived = 600_000;
    let known = unreceived;
    let sum = 0;
    const at: number[] = [];
    for (let t = 1; t <= 600; t++) {
      unreceived += written;
      const read = Math.min(64_000, unreceived);
      unreceived -= read;
      m.add(read);
      if (t % 5 === 0) {
        m.add(unreceived - known);
        known = unreceived;
      }
      const rate = m.sample(t * 1000) / 8;
      assert.ok(rate >= 0);
      sum += rate;
      at[t] = rate;
    }
    assert.ok(at[30]! < 1.5 * written && at[60]! < 1.5 * written, `${at[30]} and ${at[60]} B/s at 30 and 60 s`);
    close(at[300]!, written, 0.01, 'after 10 tau');
    // Over the whole run the meter averages what the server wrote, not what was read.
    close(sum / 600, written, 0.05, 'the mean over 10 minutes');
  });

  it('rejects a time constant that is not positive and a start that is not finite', () => {
    assert.throws(() => new RateMeter(0, { timeConstantMs: 0 }), /time constant must be a positive number/);
    assert.throws(() => new RateMeter(0, { timeConstantMs: -1 }), /time constant/);
    assert.throws(() => new RateMeter(0, { timeConstantMs: Number.NaN }), /time constant/);
    assert.throws(() => new RateMeter(Number.NaN), /start time/);
  });
});
