// WorkQueue on a FakeClock: dedup of queued keys, no key to two workers, re-add while
// processing, abort and shutdown, delayed adds, per-key backoff and the overall bucket; a
// fast-check property over random operation sequences that every add is processed after it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { WorkQueue } from '@pglog/common/kube/workqueue.ts';
import { FakeClock } from '@pglog/test-support/fake-clock.ts';
import fc from 'fast-check';

describe('WorkQueue', () => {
  test('a key queued twice is handed out once, in FIFO order', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    q.add('b');
    q.add('a');
    assert.equal(q.length, 2);
    assert.equal(await q.get(), 'a');
    assert.equal(await q.get(), 'b');
    assert.equal(q.length, 0);
  });

  test('a key being processed goes to no other worker; re-added meanwhile, it comes back after done', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    assert.equal(await q.get(), 'a');
    q.add('a');
    q.add('a');
    assert.equal(q.length, 0, 'not queued while processing');
    const second = q.get();
    let handed: string | null | undefined;
    void second.then((k) => {
      handed = k;
    });
    await Promise.resolve();
    assert.equal(handed, undefined, 'the second worker waits');
    q.done('a');
    assert.equal(await second, 'a', 'processed again after done');
    q.done('a');
    assert.equal(q.length, 0);
  });

  test('a waiting worker gets a key added later; abort and shutDown resolve null', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    const waiting = q.get();
    q.add('x');
    assert.equal(await waiting, 'x');
    const abort = new AbortController();
    const aborted = q.get(abort.signal);
    abort.abort();
    assert.equal(await aborted, null);
    q.add('y');
    assert.equal(await q.get(), 'y', 'an aborted get took nothing');
    const pending = q.get();
    q.shutDown();
    assert.equal(await pending, null);
    q.add('z');
    assert.equal(await q.get(), null);
    assert.equal(q.isShutDown(), true);
  });

  test('addAfter waits for the clock; the earlier of two delays wins', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('a', 100);
    q.addAfter('a', 50);
    q.addAfter('a', 500);
    clock.advance(49);
    assert.equal(q.length, 0);
    clock.advance(1);
    assert.equal(q.length, 1);
    assert.equal(await q.get(), 'a');
    q.done('a');
    clock.advance(1000);
    assert.equal(q.length, 0, 'one delayed add, not three');
    assert.equal(clock.pending(), 0);
  });

  test('addRateLimited backs off 5 ms doubling to a 60 s cap; forget resets', async () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    const delays: number[] = [];
    for (let i = 0; i < 16; i++) {
      const start = clock.now();
      q.addRateLimited('k');
      let waited = 0;
      while (q.length === 0 && waited < 100_000) {
        clock.advance(1);
        waited++;
      }
      delays.push(waited);
      q.done((await q.get())!);
      assert.equal(clock.now() - start, waited);
    }
    assert.deepEqual(delays.slice(0, 5), [5, 10, 20, 40, 80]);
    assert.equal(delays.at(-1), 60_000);
    assert.equal(q.numRequeues('k'), 16);
    q.forget('k');
    assert.equal(q.numRequeues('k'), 0);
  });

  test('the overall bucket spaces out rate-limited adds of many keys after its burst', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, bucket: { perSecond: 10, burst: 2 } });
    for (const k of ['a', 'b', 'c', 'd']) q.addRateLimited(k);
    clock.advance(5);
    assert.equal(q.length, 2, 'the burst goes after the per-key 5 ms');
    clock.advance(95);
    assert.equal(q.length, 3, 'then one per 100 ms');
    clock.advance(100);
    assert.equal(q.length, 4);
  });

  test('property: no key handed out twice at once, no duplicates, every add is processed after it', async () => {
    const keys = ['a', 'b', 'c', 'd'];
    const op = fc.oneof(
      fc.record({ op: fc.constant('add' as const), key: fc.constantFrom(...keys) }),
      fc.record({ op: fc.constant('addAfter' as const), key: fc.constantFrom(...keys), ms: fc.integer({ min: 0, max: 50 }) }),
      fc.record({ op: fc.constant('rateLimited' as const), key: fc.constantFrom(...keys) }),
      fc.record({ op: fc.constant('get' as const) }),
      fc.record({ op: fc.constant('done' as const), index: fc.nat() }),
      fc.record({ op: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 40 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60 }), async (ops) => {
        const clock = new FakeClock();
        const q = new WorkQueue({ clock });
        const processing: string[] = [];
        // Keys whose latest add (or delayed add's due time) came after their last hand-out.
        const owed = new Set<string>();
        const scheduled = new Map<string, number>();
        const handOut = async (): Promise<void> => {
          const k = await q.get();
          assert.ok(k !== null);
          assert.ok(!processing.includes(k), `${k} handed out while being processed`);
          processing.push(k);
          owed.delete(k);
        };
        const fire = (upTo: number): void => {
          for (const [k, at] of scheduled)
            if (at <= upTo) {
              owed.add(k);
              scheduled.delete(k);
            }
        };
        for (const o of ops) {
          switch (o.op) {
            case 'add':
              q.add(o.key);
              owed.add(o.key);
              break;
            case 'addAfter': {
              q.addAfter(o.key, o.ms);
              if (o.ms <= 0) owed.add(o.key);
              else scheduled.set(o.key, Math.min(scheduled.get(o.key) ?? Infinity, clock.now() + o.ms));
              break;
            }
            case 'rateLimited': {
              const delay = Math.min(60_000, 5 * 2 ** q.numRequeues(o.key));
              q.addRateLimited(o.key);
              scheduled.set(o.key, Math.min(scheduled.get(o.key) ?? Infinity, clock.now() + delay));
              break;
            }
            case 'get':
              if (q.length > 0) await handOut();
              break;
            case 'done':
              if (processing.length > 0) q.done(processing.splice(o.index % processing.length, 1)[0]!);
              break;
            case 'advance':
              clock.advance(o.ms);
              fire(clock.now());
              break;
          }
          const queuedKeys = new Set<string>();
          // length counts distinct keys: at most one entry per key, none of them being processed.
          assert.ok(q.length <= keys.length);
          for (const k of processing) queuedKeys.add(k);
          assert.equal(queuedKeys.size, processing.length, 'a key processed by two workers');
        }
        // Drain: finish everything, let all timers fire; every owed key must come out.
        for (const k of processing.splice(0)) q.done(k);
        clock.advance(120_000);
        fire(Infinity);
        const seen: string[] = [];
        while (q.length > 0) {
          const k = (await q.get())!;
          seen.push(k);
          q.done(k);
        }
        assert.equal(new Set(seen).size, seen.length, 'a key queued twice');
        for (const k of owed) assert.ok(seen.includes(k), `${k} was added but never processed`);
      }),
      { numRuns: 300 },
    );
  });
});
