// The SSH transport's pacing, on a fake clock and injected randomness: Backoff's full-jitter
// delays (a property over attempts), the cap, and the reset after a connection that stayed up;
// ConnectLimiter's limit on concurrent handshakes, spacing of starts, aborted waiters and the
// initial spread.
import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import { Backoff, fullJitterDelay } from '@pglog/common/time/backoff.ts';
import { FakeClock } from '@pglog/test-support/fake-clock.ts';
import fc from 'fast-check';

import { ConnectLimiter } from '../../../src/transport/connect-limiter.ts';

/** Deterministic "random" numbers in [0, 1). */
function sequence(values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length] ?? 0;
}

describe('Backoff', { timeout: 20_000 }, () => {
  test('full jitter stays within the doubling ceiling and the cap', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 100 }), fc.double({ min: 0, max: 0.9999999, noNaN: true }), (attempt, r) => {
        const d = fullJitterDelay(attempt, 1000, 60_000, () => r);
        assert.ok(d >= 0 && d < Math.min(60_000, 1000 * 2 ** attempt) + 1e-9, `attempt ${attempt}: ${d}`);
      }),
    );
  });

  test('delays grow as 1, 2, 4, ... s until the 60 s cap (with random near 1)', () => {
    const b = new Backoff({ random: () => 0.999999 });
    const ceilings = Array.from({ length: 9 }, () => Math.ceil(b.next() / 1000));
    assert.deepEqual(ceilings, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    assert.equal(b.attempts, 9);
  });

  test('jitter uses the injected random source', () => {
    const b = new Backoff({ baseMs: 1000, random: sequence([0, 0.5]) });
    assert.equal(b.next(), 0);
    assert.equal(b.next(), 1000);
  });

  test('lasting failures wait at least half the cap, at most the cap', () => {
    assert.equal(new Backoff({ random: () => 0 }).nextAtCap(), 30_000);
    assert.ok(new Backoff({ random: () => 0.999999 }).nextAtCap() < 60_000);
    assert.ok(new Backoff({ random: () => 0.999999 }).nextAtCap() >= 59_999);
  });

  test('a connection that stayed up long enough resets the count; a flapping one does not', () => {
    const b = new Backoff({ resetAfterMs: 60_000, random: () => 0.999999 });
    b.next();
    b.next();
    b.next();
    b.connected(1000);
    b.disconnected(2000); // up 1 s: flapping
    assert.equal(b.attempts, 3);
    b.connected(10_000);
    b.disconnected(70_000); // up 60 s
    assert.equal(b.attempts, 0);
    assert.ok(b.next() < 1000);
  });

  test('rejects nonsense bounds', () => {
    assert.throws(() => new Backoff({ baseMs: 0 }), RangeError);
    assert.throws(() => new Backoff({ baseMs: 10, capMs: 5 }), RangeError);
  });
});

describe('ConnectLimiter', { timeout: 20_000 }, () => {
  test('at most maxConcurrent handshakes; the next starts when one ends', async () => {
    const clock = new FakeClock();
    const limiter = new ConnectLimiter({ maxConcurrent: 2, minSpacingMs: 0, clock });
    const granted: number[] = [];
    const releases = [0, 1, 2, 3].map((i) =>
      limiter.acquire().then((release) => {
        granted.push(i);
        return release;
      }),
    );
    await clock.advanceSettled(0);
    assert.deepEqual(granted, [0, 1]);
    assert.equal(limiter.active, 2);
    assert.equal(limiter.waiting, 2);
    (await releases[1])?.();
    await clock.advanceSettled(0);
    assert.deepEqual(granted, [0, 1, 2], 'served in arrival order');
    (await releases[0])?.();
    (await releases[0])?.(); // releasing twice frees one slot only
    await clock.advanceSettled(0);
    assert.deepEqual(granted, [0, 1, 2, 3]);
    assert.equal(limiter.active, 2);
  });

  test('starts are spaced by minSpacingMs', async () => {
    const clock = new FakeClock();
    const limiter = new ConnectLimiter({ maxConcurrent: 10, minSpacingMs: 20, clock });
    const startedAt: number[] = [];
    const all = [0, 1, 2, 3].map(() =>
      limiter.acquire().then((release) => {
        startedAt.push(clock.now());
        release();
      }),
    );
    await clock.advanceSettled(100);
    await Promise.all(all);
    assert.deepEqual(startedAt, [0, 20, 40, 60]);
    // After a quiet period, the next start is immediate.
    await clock.advanceSettled(1000);
    const t = clock.now();
    const release = await limiter.acquire();
    assert.equal(clock.now(), t);
    release();
  });

  test('an aborted waiter leaves the queue and frees its place', async () => {
    const clock = new FakeClock();
    const limiter = new ConnectLimiter({ maxConcurrent: 1, minSpacingMs: 0, clock });
    const first = await limiter.acquire();
    const controller = new AbortController();
    const aborted = limiter.acquire(controller.signal);
    const third = limiter.acquire();
    controller.abort(new Error('stop'));
    await assert.rejects(aborted, /stop/);
    first();
    await clock.advanceSettled(0);
    (await third)();
    assert.equal(limiter.active, 0);
  });

  test('the initial spread is uniform in [0, spreadMs)', () => {
    assert.equal(new ConnectLimiter({ spreadMs: 1000, random: () => 0.25 }).initialDelayMs(), 250);
    assert.equal(new ConnectLimiter({ spreadMs: 0, random: () => 0.9 }).initialDelayMs(), 0);
  });
});
