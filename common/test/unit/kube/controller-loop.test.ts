// The generic controller loop on a FakeClock: a Result forgets the backoff and requeues when
// asked; an error is retried with the key's growing backoff; a conflict is retried after the
// first (short) step; a TerminalError is counted but not retried until the key is added again;
// the outcome hooks see every reconcile.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { PglogError } from '@pglog/common/errors.ts';
import { type LoopOutcome, type Result, runControllerLoop, TerminalError } from '@pglog/common/kube/controller-loop.ts';
import { KubeError } from '@pglog/common/kube/errors.ts';
import { WorkQueue } from '@pglog/common/kube/workqueue.ts';
import { FakeClock } from '@pglog/test-support/fake-clock.ts';

const silent = { debug: () => undefined, warn: () => undefined };

/** Lets the workers run what the last add or timer made ready. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

function harness(reconcile: (key: string, call: number) => Result) {
  const clock = new FakeClock();
  const queue = new WorkQueue<string>({ clock, baseDelayMs: 100, maxDelayMs: 10_000 });
  const calls: Array<{ key: string; at: number }> = [];
  const outcomes: Array<{ outcome: LoopOutcome; code?: string }> = [];
  const controller = new AbortController();
  const done = runControllerLoop<string>(
    {
      queue,
      workers: 2,
      log: silent,
      now: () => clock.now(),
      controllerOf: () => 'pool',
      reconciled: (_c, outcome, _s, code) => outcomes.push(code === undefined ? { outcome } : { outcome, code }),
      reconcile: (key) => {
        calls.push({ key, at: clock.now() });
        return Promise.resolve().then(() => reconcile(key, calls.length));
      },
    },
    controller.signal,
  );
  const stop = async (): Promise<void> => {
    controller.abort();
    queue.shutDown();
    await done;
  };
  return { clock, queue, calls, outcomes, stop };
}

describe('runControllerLoop', () => {
  test('a Result without requeue is reconciled once; with requeueAfterMs again after that time', async () => {
    const h = harness((key) => (key === 'b' ? { requeueAfterMs: 500 } : {}));
    h.queue.add('a');
    h.queue.add('b');
    await settle();
    assert.deepEqual(h.calls.map((c) => c.key).sort(), ['a', 'b']);
    h.clock.advance(499);
    await settle();
    assert.equal(h.calls.length, 2);
    h.clock.advance(1);
    await settle();
    assert.deepEqual(h.calls.slice(2), [{ key: 'b', at: 500 }]);
    assert.deepEqual(
      h.outcomes
        .slice(0, 2)
        .map((o) => o.outcome)
        .sort(),
      ['requeue', 'success'],
    );
    await h.stop();
  });

  test('an error is retried with backoff that doubles, and forgotten after a success', async () => {
    const h = harness((_key, call) => {
      if (call <= 3) throw new PglogError('KUBE_UNAVAILABLE', 'down');
      return {};
    });
    h.queue.add('a');
    await settle();
    for (let i = 0; i < 3; i++) {
      h.clock.advance(100 * 2 ** i);
      await settle();
    }
    assert.deepEqual(
      h.calls.map((c) => c.at),
      [0, 100, 300, 700],
    );
    assert.deepEqual(h.outcomes, [
      { outcome: 'error', code: 'KUBE_UNAVAILABLE' },
      { outcome: 'error', code: 'KUBE_UNAVAILABLE' },
      { outcome: 'error', code: 'KUBE_UNAVAILABLE' },
      { outcome: 'success' },
    ]);
    assert.equal(h.queue.numRequeues('a'), 0, 'backoff forgotten');
    await h.stop();
  });

  test('a conflict is retried after the first backoff step; an error without a code counts as UNKNOWN', async () => {
    const h = harness((key, call) => {
      if (key === 'a' && call === 1) throw new KubeError('KUBE_CONFLICT', 'changed', 409, 'Conflict');
      if (key === 'b') throw new Error('plain');
      return {};
    });
    h.queue.add('a');
    await settle();
    h.clock.advance(100);
    await settle();
    assert.deepEqual(
      h.calls.map((c) => c.at),
      [0, 100],
    );
    h.queue.add('b');
    await settle();
    assert.deepEqual(h.outcomes.at(-1), { outcome: 'error', code: 'UNKNOWN' });
    await h.stop();
  });

  test('a TerminalError is not retried: no backoff, only when the key is added again (the object changed)', async () => {
    const h = harness((_key, call) => {
      if (call === 1) throw new TerminalError('CONFIG_INVALID', 'spec.x is invalid');
      return {};
    });
    h.queue.add('a');
    await settle();
    assert.deepEqual(h.outcomes, [{ outcome: 'error', code: 'CONFIG_INVALID' }]);
    assert.equal(h.clock.pending(), 0, 'no retry scheduled');
    assert.equal(h.queue.numRequeues('a'), 0);
    h.clock.advance(60_000);
    await settle();
    assert.equal(h.calls.length, 1, 'not reconciled again by itself');
    h.queue.add('a');
    await settle();
    assert.equal(h.calls.length, 2);
    assert.deepEqual(h.outcomes.at(-1), { outcome: 'success' });
    await h.stop();
  });
});
