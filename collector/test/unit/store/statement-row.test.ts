// The statement_events row writer (statement-row.ts) against the encoder's own appendRow: for
// any values, including ones a column cannot take (a pid past int4, a NUL in a name, a bigint
// or a Date where a number is expected, a wrong type), what it writes is appendRow's bytes, and
// when it declines a row it writes nothing, so the row encoder's fallback to appendRow ends as
// appendRow alone would. For values of the kinds the row mapper makes, it declines exactly the
// rows appendRow refuses.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { CopyBinaryEncoder } from '../../../src/store/copy-binary.ts';
import { STATEMENT_TABLE } from '../../../src/store/event-tables.ts';
import { appendStatementRow } from '../../../src/store/statement-row.ts';

const QUERY = 9;

const text = fc.oneof(
  fc.constant(null),
  fc.constantFrom('bench', 'app', 'postgresql.log', 'simple', 'extended', '', 'a\0b', 'żółw', '\ud800'),
  fc.string({ maxLength: 80 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
);
/** Values of any kind, for a column that should refuse most of them. */
const anything = fc.oneof(
  fc.constant(null),
  fc.constant(undefined),
  fc.integer(),
  fc.double(),
  fc.bigInt(),
  fc.string({ maxLength: 8 }),
  fc.boolean(),
  fc.date(),
);
const micros = fc.oneof(
  fc.integer({ min: 1_600_000_000_000_000, max: 1_900_000_000_000_000 }),
  fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 0.5, Number.NaN),
  anything,
);
const pid = fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 4_194_304 }), fc.constantFrom(2 ** 31 - 1, 2 ** 31, -(2 ** 31) - 1, 1.5), anything);
const duration = fc.oneof(fc.constant(null), fc.double(), anything);
const offset = fc.oneof(fc.nat({ max: 2 ** 40 }), fc.constantFrom(Number.MAX_SAFE_INTEGER, 2 ** 53, -1, 0.25), anything);

const row = fc.tuple(micros, text, text, text, text, text, pid, duration, text, fc.constant(null), text, text, text, offset, text);
/** The query's bytes: ASCII without NUL (as the parser hands them over), in a larger chunk. */
const sql = fc
  .tuple(fc.string({ unit: fc.integer({ min: 1, max: 0x7f }).map((c) => String.fromCharCode(c)), maxLength: 300 }), fc.nat({ max: 8 }))
  .map(([q, pad]) => ({
    bytes: Buffer.from(`${'#'.repeat(pad)}${q}!!`, 'latin1'),
    start: pad,
    end: pad + q.length,
  }));

/** appendRow's answer for the row: the block's length after it, or -1 when it refuses it. */
function generic(enc: CopyBinaryEncoder, values: readonly unknown[], q: { bytes: Buffer; start: number; end: number }): number {
  try {
    enc.stageUtf8(QUERY, q.bytes, q.start, q.end);
    return enc.appendRow(values);
  } catch {
    return -1;
  }
}

test('appendStatementRow, and appendRow when it declines, write what appendRow alone does', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(row, sql), { minLength: 1, maxLength: 6 }), (rows) => {
      const fast = new CopyBinaryEncoder(STATEMENT_TABLE.types, { initialSize: 16 });
      const alone = new CopyBinaryEncoder(STATEMENT_TABLE.types, { initialSize: 16 });
      fast.startRows();
      alone.startRows();
      for (const [values, q] of rows) {
        const before = fast.blockLength;
        let end = appendStatementRow(fast, values, q.bytes, q.start, q.end);
        if (end < 0) {
          assert.equal(fast.blockLength, before, 'a declined row writes nothing');
          end = generic(fast, values, q);
        }
        assert.equal(end, generic(alone, values, q));
        assert.deepEqual(fast.endRows(), alone.endRows());
      }
    }),
    { numRuns: 3000 },
  );
});

test('for values of the kinds the row mapper makes, it declines exactly the rows appendRow refuses', () => {
  const mapped = fc.tuple(
    fc.oneof(fc.integer({ min: 1_600_000_000_000_000, max: 1_900_000_000_000_000 }), fc.constantFrom(Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER)),
    text,
    text,
    text,
    text,
    text,
    fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 4_194_304 }), fc.constantFrom(2 ** 31 - 1, 2 ** 31, 99_999_999_999)),
    fc.oneof(fc.constant(null), fc.double()),
    text,
    fc.constant(null),
    fc.constantFrom('simple', 'extended'),
    text,
    text,
    fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    fc.constant(null),
  );
  fc.assert(
    fc.property(mapped, sql, (values, q) => {
      const fast = new CopyBinaryEncoder(STATEMENT_TABLE.types);
      const alone = new CopyBinaryEncoder(STATEMENT_TABLE.types);
      fast.startRows();
      alone.startRows();
      assert.equal(appendStatementRow(fast, values, q.bytes, q.start, q.end), generic(alone, values, q));
    }),
    { numRuns: 3000 },
  );
});

test('a refused row leaves the rows before it as they were, and the next row follows them', () => {
  const enc = new CopyBinaryEncoder(STATEMENT_TABLE.types);
  const q = Buffer.from('SELECT 1');
  const good = [1_700_000_000_000_000, 't', 'i', 'db', 'u', null, 42, 0.5, 'f', null, 'simple', null, 'postgresql.log', 10, null];
  enc.startRows();
  const first = appendStatementRow(enc, good, q, 0, q.length);
  assert.ok(first > 0);
  // A pid past int4 (the log decides it) comes back -1 with nothing written.
  assert.equal(appendStatementRow(enc, good.with(6, 2 ** 31), q, 0, q.length), -1);
  assert.equal(enc.blockLength, first);
  assert.equal(appendStatementRow(enc, good.with(4, 'u\0'), q, 0, q.length), -1);
  assert.equal(enc.blockLength, first);
  assert.equal(appendStatementRow(enc, good, q, 0, q.length), 2 * first);
  const block = enc.endRows();
  assert.deepEqual(block.subarray(first), block.subarray(0, first));
});
