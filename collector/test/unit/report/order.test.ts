// The order of report rows, written once for the SQL and for merging stores (order.ts): the
// ORDER BY text it renders, and a comparator that agrees with PostgreSQL's "C" collation
// (UTF-8 byte order), its NULL placement and millisecond timestamps.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { comparator, compareCodePoints, numberKey, orderBySql, textKey, timeKey } from '../../../src/report/order.ts';
import { ERROR_ORDER, STATEMENT_ORDER } from '../../../src/report/query.ts';

const sign = (n: number): number => Math.sign(n);

test('property: strings compare by code point, as UTF-8 bytes compare (COLLATE "C")', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (a, b) => {
      assert.equal(sign(compareCodePoints(a, b)), sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'))), JSON.stringify([a, b]));
    }),
    { numRuns: 2000 },
  );
  // A character above U+FFFF sorts after U+FFFD although its first UTF-16 unit (0xD83D) is smaller.
  assert.ok(compareCodePoints('\u{1F600}', '\uFFFD') > 0);
  assert.ok('\u{1F600}' < '\uFFFD', 'JavaScript alone would order them the other way');
  assert.ok(compareCodePoints('db-2', 'db1') < 0, "'-' before '1', as in C (en_US would ignore the '-')");
});

test('ORDER BY: text keys with COLLATE "C", timestamps truncated to the millisecond, NULLS only where not the default', () => {
  assert.equal(
    orderBySql(STATEMENT_ORDER),
    'ORDER BY total_ms DESC, calls DESC, target COLLATE "C", database COLLATE "C" NULLS FIRST, fingerprint COLLATE "C" NULLS FIRST',
  );
  assert.equal(
    orderBySql(ERROR_ORDER),
    `ORDER BY count DESC, date_trunc('milliseconds', max(ts)) DESC, target COLLATE "C", database COLLATE "C" NULLS FIRST, severity COLLATE "C", sqlstate COLLATE "C" NULLS FIRST, left(message, 500) COLLATE "C"`,
  );
});

test('the comparator puts NULLs where PostgreSQL does: last ascending, first descending, or as told', () => {
  type R = { v: number | null };
  const rows: R[] = [{ v: 2 }, { v: null }, { v: 1 }];
  const sorted = (keys: Parameters<typeof comparator<R>>[0]): Array<number | null> => [...rows].sort(comparator(keys)).map((r) => r.v);
  assert.deepEqual(sorted([numberKey((r: R) => r.v, 'v')]), [1, 2, null]);
  assert.deepEqual(sorted([numberKey((r: R) => r.v, 'v', { desc: true })]), [null, 2, 1]);
  assert.deepEqual(sorted([numberKey((r: R) => r.v, 'v', { nulls: 'first' })]), [null, 1, 2]);
  assert.deepEqual(sorted([numberKey((r: R) => r.v, 'v', { desc: true, nulls: 'last' })]), [2, 1, null]);
});

test('later keys break ties; timestamps compare by their milliseconds', () => {
  type R = { t: Date; s: string | null };
  const keys = [timeKey((r: R) => r.t, 't', { desc: true }), textKey((r: R) => r.s, 's', { nulls: 'first' })];
  const a = { t: new Date(1000), s: 'b' };
  const b = { t: new Date(1000), s: null };
  const c = { t: new Date(1001), s: 'z' };
  assert.deepEqual([a, b, c].sort(comparator(keys)), [c, b, a]);
  assert.equal(comparator(keys)(a, { ...a }), 0);
});
