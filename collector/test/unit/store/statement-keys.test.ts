// Statement keys: kept between handovers, each noted once per handover with its rows' times,
// bounded against names a role chooses, and never standing in for a row whose template needs
// repair or whose time a number cannot hold. What a commit reads from them (the rollup, the
// templates) equals what it read from the rows and events before, whatever the rows hold.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import type { StatementEvent } from '../../../src/logformat/events.ts';
import { handoverTemplates, RowEncoder } from '../../../src/store/encoded-rows.ts';
import { mapEvent, rowContext } from '../../../src/store/event-rows.ts';
import { StatementRollup } from '../../../src/store/rollup.ts';
import { KEY_LOG_STRIDE, MAX_KEPT_CHARS, StatementKeyRecorder, StatementKeys } from '../../../src/store/statement-keys.ts';
import { statementEvent } from '../../helpers/events.ts';
import { ROW_MAX_TEXT, ROW_READ_AT, ROW_SOURCE } from '../../helpers/row-fixture.ts';

const MAX = ROW_MAX_TEXT;

test('a key is kept once per target, instance, database and fingerprint, NULLs apart from every text', () => {
  const keys = new StatementKeys();
  const a = keys.key('t', 'i', 'app', 'f1', 'f1', 'select $1', MAX);
  assert.ok(a !== null);
  assert.equal(keys.key('t', 'i', 'app', 'f1', 'f1', 'select $1', MAX), a);
  assert.notEqual(keys.key('t', 'i', 'shop', 'f1', 'f1', 'select $1', MAX), a);
  assert.notEqual(keys.key('t', 'i2', 'app', 'f1', 'f1', 'select $1', MAX), a);
  assert.notEqual(keys.key('t', 'i', null, 'f1', 'f1', 'select $1', MAX), a);
  assert.notEqual(keys.key('t', 'i', 'app', 'f2', 'f2', 'select $2', MAX), a);
  const nullDb = keys.key('t', 'i', null, 'f1', 'f1', 'select $1', MAX);
  assert.equal(nullDb?.database, null);
  assert.equal(keys.key('t', 'i', null, 'f1', 'f1', 'select $1', MAX), nullDb);
  assert.equal(keys.size, 5);
  const untemplated = keys.key('t', 'i', 'app', '', '', '', MAX);
  assert.equal(untemplated?.templateFingerprint, null, "fingerprint '' has no template, as TemplateSet.see");
});

test('a template that cleaning would repair is not kept, and its repairs are left to the row', () => {
  const keys = new StatementKeys();
  assert.equal(keys.key('t', 'i', 'app', 'f1', 'f1', 'select \ud800', MAX), null, 'a lone surrogate');
  assert.equal(keys.key('t', 'i', 'app', 'f1', 'f1', 'x'.repeat(MAX + 1), MAX), null, 'longer than the text limit');
  assert.equal(keys.size, 0);
  // The refusal is remembered (the next rows of that key are not cleaned again), within the bounds.
  const bounded = new StatementKeys(2);
  assert.equal(bounded.key('t', 'i', 'app', 'f1', 'f1', 'select \ud800', MAX), null);
  assert.equal(bounded.key('t', 'i', 'app', 'f1', 'f1', 'select \ud800', MAX), null, 'refused again');
  assert.ok(bounded.key('t', 'i', 'app', 'f2', 'f2', 'select 2', MAX) !== null);
  assert.equal(bounded.size, 1, 'a refusal is no kept key');
  assert.ok(bounded.key('t', 'i', 'app', 'f3', 'f3', 'select 3', MAX) !== null);
  assert.equal(bounded.size, 1, 'but counts against the bound: the third entry forgot the other two');
  // The row's own TemplateSet.see counts the repair, once.
  const ctx = rowContext(MAX, keys, new StatementKeyRecorder());
  ctx.keyRecorder?.open();
  mapEvent(ROW_SOURCE, statementEvent({ normalized: 'select \ud800' }), ROW_READ_AT, ctx);
  assert.equal(ctx.repairs.invalidReplaced, 1);
  assert.equal(ctx.templates.size, 1);
});

test('kept keys are bounded by number and by characters, and forgotten all at once past either', () => {
  const keys = new StatementKeys(3);
  const first = keys.key('t', 'i', 'd', 'f0', 'f0', 'n0', MAX);
  for (let i = 1; i < 3; i++) keys.key('t', 'i', 'd', `f${i}`, `f${i}`, `n${i}`, MAX);
  assert.equal(keys.size, 3);
  const fourth = keys.key('t', 'i', 'd', 'f3', 'f3', 'n3', MAX);
  assert.ok(fourth !== null);
  assert.equal(keys.size, 1, 'the three were forgotten, the fourth kept');
  const again = keys.key('t', 'i', 'd', 'f0', 'f0', 'n0', MAX);
  assert.notEqual(again, first, 'a forgotten key is made anew');
  assert.deepEqual({ ...again, logEpoch: 0, logSlot: 0 }, { ...first, logEpoch: 0, logSlot: 0 }, 'with the same names');

  const big = new StatementKeys();
  const huge = 'x'.repeat(MAX_KEPT_CHARS);
  assert.equal(big.key('t', 'i', 'd', 'f', 'f', huge, 2 * MAX_KEPT_CHARS), null, 'one key over the budget is never kept');
  const half = 'y'.repeat(MAX_KEPT_CHARS / 2);
  assert.ok(big.key('t', 'i', 'd', 'f1', 'f1', half, 2 * MAX_KEPT_CHARS) !== null);
  assert.ok(big.key('t', 'i', 'd', 'f2', 'f2', half, 2 * MAX_KEPT_CHARS) !== null);
  assert.equal(big.size, 1, 'the second half pushed the first out');
});

test('a handover notes each key once with its first and last time, and one entry per encoded row', () => {
  const keys = new StatementKeys();
  const a = keys.key('t', 'i', 'd', 'fa', 'fa', 'na', MAX);
  const b = keys.key('t', 'i', 'd', 'fb', 'fb', 'nb', MAX);
  const recorder = new StatementKeyRecorder();
  recorder.open();
  assert.equal(recorder.doubles, 0);
  assert.equal(recorder.finishApart(), null, 'nothing noted');
  recorder.open();
  assert.ok(recorder.see(a, 2_000, 1.5));
  recorder.encoded();
  assert.ok(recorder.see(b, 1_000, null));
  // Refused by the encoder: its time still counts for the template, it is no row.
  assert.ok(recorder.see(a, 500, 2));
  assert.ok(recorder.see(a, 3_000, 0.25));
  recorder.encoded();
  assert.equal(recorder.see(a, 10n ** 20n, 1), false, 'a bigint time');
  recorder.encoded();
  assert.equal(recorder.see(b, 4_000, NaN), false, 'a NaN duration');
  recorder.encoded();
  assert.equal(recorder.see(null, 4_000, 1), false, 'no key');
  const log = recorder.finishApart();
  assert.ok(log !== null);
  assert.deepEqual(log.keys, [a, b]);
  assert.deepEqual([...log.times], [500, 3_000, 1_000, 1_000]);
  assert.deepEqual([...log.rows], [0, 2_000, 1.5, 0, 3_000, 0.25, -1, 0, NaN, -1, 0, NaN]);
  assert.equal(log.rows.length, 4 * KEY_LOG_STRIDE);

  recorder.open();
  assert.ok(recorder.see(b, 7, 1));
  recorder.encoded();
  const next = recorder.finishApart();
  assert.deepEqual(next?.keys, [b], "the next handover's slots start again");
  assert.deepEqual([...(next?.rows ?? [])], [0, 7, 1]);
  assert.deepEqual([...log.rows.subarray(0, 3)], [0, 2_000, 1.5], 'an earlier log is its own copy');
});

/** Statement events of a few keys, some with what keys cannot stand for. */
const statements = fc.array(
  fc.record({
    database: fc.constantFrom('app', 'shop', null),
    fingerprint: fc.constantFrom('f1', 'f2', 'f3', ''),
    // Around a minute's end, and far beyond the years a number of microseconds holds.
    ts: fc.constantFrom('2026-11-21T13:29:59.999999Z', '2026-11-21T13:30:00.000001Z', '2026-11-21T13:31:10Z', '2300-01-01T00:00:00Z', null),
    duration: fc.constantFrom(0.004, 1.25, 30_000, null),
    repaired: fc.boolean(),
  }),
  { maxLength: 40 },
);

interface StatementSpec {
  database: string | null;
  fingerprint: string;
  ts: string | null;
  duration: number | null;
  repaired: boolean;
}

function eventsOf(list: readonly StatementSpec[]): StatementEvent[] {
  return list.map((s, i) =>
    statementEvent({
      offset: 100 * i,
      end: 100 * i + 90,
      database: s.database,
      // One text per fingerprint, as the parser's: a fingerprint is its normalized text's hash.
      fingerprint: s.repaired && s.fingerprint !== '' ? `${s.fingerprint}r` : s.fingerprint,
      normalized: s.repaired ? `select ${s.fingerprint} \ud800` : `select ${s.fingerprint}`,
      ts: s.ts,
      duration_ms: s.duration,
    }),
  );
}

test('the rollup and the templates from noted keys are those of the rows and events, whole and row by row', () => {
  const encoder = new RowEncoder(MAX);
  fc.assert(
    fc.property(statements, fc.integer({ min: 1, max: 4 }), (list, handovers) => {
      const events = eventsOf(list);
      const ctx = rowContext(MAX);
      const expected = new StatementRollup();
      for (const e of events) expected.addRow(mapEvent(ROW_SOURCE, e, ROW_READ_AT, ctx).values);
      const whole = new StatementRollup();
      const rowByRow = new StatementRollup();
      const templates = rowContext(MAX).templates;
      const step = Math.ceil(events.length / handovers) || 1;
      for (let from = 0; from < events.length; from += step) {
        const encoded = encoder.encode(ROW_SOURCE, events.slice(from, from + step), ROW_READ_AT);
        templates.merge(handoverTemplates(encoded));
        const block = encoded.tables.statement_events;
        if (block === undefined) continue;
        whole.addTable(block, 0, block.ends.length);
        for (let i = 0; i < block.ends.length; i++) rowByRow.addTable(block, i, i + 1);
      }
      const sorted = (rows: unknown[][]): string[] => rows.map((r) => JSON.stringify(r, (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))).sort();
      assert.deepEqual(sorted(whole.rows()), sorted(expected.rows()));
      assert.deepEqual(sorted(rowByRow.rows()), sorted(expected.rows()));
      assert.deepEqual(templates.sorted(), ctx.templates.sorted());
    }),
  );
});

test('two rollups reading the same keys at once keep their own parts', () => {
  const encoder = new RowEncoder(MAX);
  const events = eventsOf([
    { database: 'app', fingerprint: 'f1', ts: '2026-11-21T13:29:33Z', duration: 1, repaired: false },
    { database: 'app', fingerprint: 'f1', ts: '2026-11-21T13:29:34Z', duration: 2, repaired: false },
  ]);
  const block = encoder.encode(ROW_SOURCE, events, ROW_READ_AT).tables.statement_events!;
  const one = new StatementRollup();
  const two = new StatementRollup();
  one.addTable(block, 0, 1);
  two.addTable(block, 0, 2);
  one.addTable(block, 1, 2);
  assert.deepEqual(one.rows(), two.rows());
  const rowsOfOne = one.rows();
  assert.equal(rowsOfOne[0]?.[5], 2, 'two calls');
  const key = block.keys!.keys[0]!;
  assert.notEqual(key.rollupPart, null, 'the key points at the part of the rollup that read it last');
  two.release();
  assert.notEqual(key.rollupPart, null, 'a rollup that did not read the key last leaves it alone');
  one.release();
  assert.equal(key.rollupPart, null, 'released: a key kept between commits keeps no part alive');
  assert.equal(key.rollupOwner, 0);
  assert.equal(one.size, 0, 'a released rollup is empty');
  const spare = key.sparePart;
  assert.notEqual(spare, null, 'the key kept a part of the released rollup');
  const three = new StatementRollup();
  three.addTable(block, 0, 2);
  assert.equal(key.rollupPart, spare, 'which the next rollup reuses');
  assert.deepEqual(three.rows(), rowsOfOne, 'and reads as before');
  three.release();
  const four = new StatementRollup();
  four.addTable(block, 1, 2);
  const [row] = four.rows();
  assert.equal(row?.[5], 1, 'emptied before reuse: one call');
  assert.equal((row?.[9] as number[]).length, 1, 'and one bin, not the two it had');
});
