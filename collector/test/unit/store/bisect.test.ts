// Bisection finds exactly the rows the server refuses; every other row goes in exactly once.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import type { Rejection } from '../../../src/store/bisect.ts';
import { writeWithBisection } from '../../../src/store/bisect.ts';

/** A fake store that refuses a set when it holds a poison row; `hint` says what it reports. */
function fakeStore(poison: ReadonlySet<number>, hint: 'first-bad' | 'none' | 'wrong') {
  const accepted: number[] = [];
  const attempt = (rows: readonly number[]): Promise<Rejection | null> => {
    const at = rows.findIndex((r) => poison.has(r));
    if (at === -1) {
      accepted.push(...rows);
      return Promise.resolve(null);
    }
    const rowIndex = hint === 'first-bad' ? at : hint === 'wrong' ? (at + 1) % rows.length : null;
    return Promise.resolve({ reason: `row ${rows[at]} is poison`, rowIndex });
  };
  return { accepted, attempt };
}

test('no poison: one attempt', async () => {
  const store = fakeStore(new Set(), 'none');
  const out = await writeWithBisection([1, 2, 3], store.attempt);
  assert.deepEqual(out, { rejected: [], attempts: 1 });
  assert.deepEqual(store.accepted, [1, 2, 3]);
});

test('1,000 rows with 3 poison rows: 997 go in, the 3 are rejected with their reasons', async () => {
  const rows = Array.from({ length: 1000 }, (_, i) => i);
  const poison = new Set([7, 500, 999]);
  for (const hint of ['first-bad', 'none'] as const) {
    const store = fakeStore(poison, hint);
    const out = await writeWithBisection(rows, store.attempt);
    assert.deepEqual(
      out.rejected.map((r) => r.row).sort((a, b) => a - b),
      [7, 500, 999],
    );
    assert.deepEqual(out.rejected.map((r) => r.rejection.reason).sort(), ['row 500 is poison', 'row 7 is poison', 'row 999 is poison']);
    assert.deepEqual(
      [...store.accepted].sort((a, b) => a - b),
      rows.filter((r) => !poison.has(r)),
    );
    // The server's line hint finds each poison row in a few attempts, halving in about 2·log2(n) each.
    if (hint === 'first-bad') assert.ok(out.attempts <= 10, `${out.attempts} attempts with hints`);
    else assert.ok(out.attempts <= 60, `${out.attempts} attempts by halving`);
  }
});

test('an error that is not a rejection ends the bisection', async () => {
  let calls = 0;
  await assert.rejects(
    writeWithBisection([1, 2, 3, 4], () => {
      calls++;
      if (calls === 1) return Promise.resolve({ reason: 'bad', rowIndex: null });
      return Promise.reject(new Error('connection lost'));
    }),
    /connection lost/,
  );
  assert.equal(calls, 2);
});

test('property: whatever the hints say, exactly the poison rows are rejected and every other row goes in once', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 0, max: 300 }),
      fc.array(fc.nat(), { maxLength: 20 }),
      fc.constantFrom('first-bad' as const, 'none' as const, 'wrong' as const),
      async (n, picks, hint) => {
        const rows = Array.from({ length: n }, (_, i) => i);
        const poison = new Set(n === 0 ? [] : picks.map((p) => p % n));
        const store = fakeStore(poison, hint);
        const out = await writeWithBisection(rows, store.attempt);
        assert.deepEqual(
          out.rejected.map((r) => r.row).sort((a, b) => a - b),
          [...poison].sort((a, b) => a - b),
        );
        assert.deepEqual(
          [...store.accepted].sort((a, b) => a - b),
          rows.filter((r) => !poison.has(r)),
        );
      },
    ),
    { numRuns: 300 },
  );
});
