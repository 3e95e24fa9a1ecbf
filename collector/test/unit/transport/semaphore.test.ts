// The FIFO Semaphore behind SSH session and handshake limits: grants in arrival order, no
// overtaking by newcomers, aborted and rejected waiters; a fast-check property that no more
// than the limit is ever held and every acquire is eventually granted.
import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import { type Release, Semaphore } from '../../../src/transport/semaphore.ts';

describe('Semaphore', { timeout: 20_000 }, () => {
  test('grants up to the limit at once, then in arrival order as permits come back', async () => {
    const s = new Semaphore(2);
    const order: number[] = [];
    const held = [0, 1, 2, 3, 4].map((i) =>
      s.acquire().then((r) => {
        order.push(i);
        return r;
      }),
    );
    await Promise.resolve();
    assert.deepEqual(order, [0, 1]);
    assert.equal(s.inUse, 2);
    assert.equal(s.waiting, 3);
    for (let i = 0; i < 5; i++) (await held[i])?.();
    assert.deepEqual(order, [0, 1, 2, 3, 4]);
    assert.equal(s.inUse, 0);
  });

  test('a newcomer does not overtake a waiter when a permit is released', async () => {
    const s = new Semaphore(1);
    const first = await s.acquire();
    const waiter = s.acquire();
    first();
    const late = s.acquire();
    const got: string[] = [];
    void waiter.then((r) => {
      got.push('waiter');
      r();
    });
    void late.then((r) => {
      got.push('late');
      r();
    });
    await late;
    assert.deepEqual(got, ['waiter', 'late']);
  });

  test('abort removes the waiter; rejectWaiters fails all waiters', async () => {
    const s = new Semaphore(1);
    const r = await s.acquire();
    const c = new AbortController();
    const a = s.acquire(c.signal);
    const b = s.acquire();
    c.abort(new Error('gone'));
    await assert.rejects(a, /gone/);
    assert.equal(s.waiting, 1);
    s.rejectWaiters(new Error('shutdown'));
    await assert.rejects(b, /shutdown/);
    r();
    assert.equal(s.inUse, 0);
    await assert.rejects(s.acquire(AbortSignal.abort(new Error('already'))), /already/);
  });

  test('property: never more than the limit held, every acquire eventually granted', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 40 }), async (limit, ops) => {
        const s = new Semaphore(limit);
        const held: Release[] = [];
        let granted = 0;
        let requested = 0;
        for (const acquire of ops) {
          if (acquire || held.length === 0) {
            requested++;
            void s.acquire().then((r) => {
              granted++;
              held.push(r);
            });
          } else {
            held.shift()?.();
          }
          await Promise.resolve();
          await Promise.resolve();
          assert.ok(s.inUse <= limit);
        }
        while (held.length > 0) {
          held.shift()?.();
          await Promise.resolve();
          await Promise.resolve();
        }
        assert.equal(granted, requested);
        assert.equal(s.inUse, 0);
      }),
      { numRuns: 200 },
    );
  });
});
