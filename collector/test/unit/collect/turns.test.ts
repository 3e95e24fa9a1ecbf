// Turns for the streams' parsing: a quiet loop lets a stream go on at the cost of a clock
// read; past TURN_MS of work in one loop iteration the streams wait, and are resumed one per
// iteration, in order, so timers and sockets run between any two of them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { mayGoOn, nextTurn, TURN_MS } from '../../../src/collect/turns.ts';

const nextIteration = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    /* holding the loop, as parsing does */
  }
}

test('a stream may go on until the loop has been busy for TURN_MS in this iteration, and again in the next', async () => {
  await nextIteration();
  assert.equal(mayGoOn(), true, 'the first slice of an iteration');
  busy(TURN_MS / 4);
  assert.equal(mayGoOn(), true, 'still within the turn');
  busy(TURN_MS);
  assert.equal(mayGoOn(), false, 'past the turn');
  await nextIteration();
  await nextIteration();
  assert.equal(mayGoOn(), true, 'a new iteration is a new turn');
});

test('waiting streams resume one per loop iteration, in the order they asked; a timer runs between them', async () => {
  await nextIteration();
  const order: string[] = [];
  let iteration = 0;
  let counting = true;
  const tick = (): void => {
    iteration++;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  const resumedAt: number[] = [];
  const streams = ['a', 'b', 'c'].map(async (name) => {
    await nextTurn();
    order.push(name);
    resumedAt.push(iteration);
    // Each holds the loop past its turn, as a stream parsing a large slice does.
    busy(TURN_MS + 1);
  });
  let timerRan = false;
  setTimeout(() => (timerRan = true), 0);
  await Promise.all(streams);
  counting = false;
  assert.deepEqual(order, ['a', 'b', 'c']);
  assert.equal(new Set(resumedAt).size, 3, `each in an iteration of its own (${resumedAt.join(', ')})`);
  assert.ok(timerRan, 'the timer ran while the streams took turns');
});
