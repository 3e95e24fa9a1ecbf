// Events held as encoded COPY rows: the bytes a handover holds are the rows the event mapping
// and the encoder make, row by row (so a bisection can cut between them), and what a commit
// derives besides them (rollup, templates, refused rows) is what the events give; a row read
// back (copy-binary-decode) is the row that was encoded.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import type { PglogEvent } from '../../../src/logformat/events.ts';
import type { ColumnType } from '../../../src/store/copy-binary.ts';
import { CopyBinaryEncoder } from '../../../src/store/copy-binary.ts';
import { decodeRow } from '../../../src/store/copy-binary-decode.ts';
import { decodedRow, handoverTemplates, newestLogMs, RowEncoder, rowRange } from '../../../src/store/encoded-rows.ts';
import { mapEvent, rowContext } from '../../../src/store/event-rows.ts';
import { EVENT_TABLES, TABLES } from '../../../src/store/event-tables.ts';
import { StatementRollup } from '../../../src/store/rollup.ts';
import { statementEvent } from '../../helpers/events.ts';
import { pipelineEvents, ROW_MAX_TEXT, ROW_READ_AT, ROW_SOURCE } from '../../helpers/row-fixture.ts';

const SOURCE = ROW_SOURCE;
const READ_AT = ROW_READ_AT;
const MAX = ROW_MAX_TEXT;

const fixture = pipelineEvents();

test("a handover's rows are the mapped events encoded, per table in event order, each row's end recorded", () => {
  const encoded = new RowEncoder(MAX).encode(SOURCE, fixture, READ_AT);
  assert.equal(encoded.refused.length, 0);
  assert.equal(
    EVENT_TABLES.reduce((n, t) => n + (encoded.tables[t]?.ends.length ?? 0), 0),
    fixture.length,
    'every event is a row of its table',
  );
  for (const t of EVENT_TABLES) {
    const ctx = rowContext(MAX);
    const rows = fixture.map((e) => mapEvent(SOURCE, e, READ_AT, ctx)).filter((r) => r.table === t);
    const block = encoded.tables[t];
    if (rows.length === 0) {
      assert.equal(block, undefined, t);
      continue;
    }
    assert.ok(block !== undefined, t);
    const encoder = new CopyBinaryEncoder(TABLES[t].types);
    assert.deepEqual(block.data, encoder.encodeRows(rows.map((r) => r.values)), `${t}: the same bytes as one encodeRows`);
    assert.equal(block.ends.length, rows.length);
    rows.forEach((row, i) => {
      const [start, end] = rowRange(block, i);
      assert.deepEqual(block.data.subarray(start, end), encoder.encodeRows([row.values]), `${t} row ${i} alone`);
      const back = decodedRow(t, block, i, SOURCE);
      assert.deepEqual(back.values, row.values, `${t} row ${i} decodes to its values`);
      assert.equal(back.offset, row.offset);
      assert.equal(back.kind, row.kind);
    });
  }
  assert.ok(encoded.cost > 0 && encoded.cost < 2 * (fixture.at(-1)!.end - fixture[0]!.offset) + 4096, `cost ${encoded.cost} is about the log's size`);
});

test("the rollup read from a handover's encoded rows and its templates are those of its rows", () => {
  const encoded = new RowEncoder(MAX).encode(SOURCE, fixture, READ_AT);
  const ctx = rowContext(MAX);
  const rollup = new StatementRollup();
  for (const e of fixture) {
    const row = mapEvent(SOURCE, e, READ_AT, ctx);
    if (row.table === 'statement_events') rollup.addRow(row.values);
  }
  assert.ok(rollup.size > 0);
  const block = encoded.tables.statement_events!;
  const fromBytes = new StatementRollup();
  fromBytes.addEncoded(block.data, block.ends, 0, block.ends.length);
  assert.deepEqual(fromBytes.rows(), rollup.rows(), 'addEncoded over the rows equals addRow over their values');
  const rowByRow = new StatementRollup();
  for (let i = 0; i < block.ends.length; i++) rowByRow.addEncoded(block.data, block.ends, i, i + 1);
  assert.deepEqual(rowByRow.rows(), rollup.rows(), 'row by row (a bisection) too');
  assert.ok(block.keys !== null && block.keys !== undefined, 'the encoder noted the keys of its statement rows');
  // One piece of a slab: no ArrayBuffer of their own per handover, which would wait for a mark-compact.
  assert.equal(block.ends.buffer, block.data.buffer, "the row ends are in the rows' slab");
  assert.equal(block.keys.rows.buffer, block.data.buffer, "the key log is in the rows' slab");
  assert.equal(block.keys.rows.byteOffset % 8, 0);
  const recorded = new StatementRollup();
  recorded.addTable(block, 0, block.ends.length);
  assert.deepEqual(recorded.rows(), rollup.rows(), 'addTable over the noted keys equals addRow over their values');
  const recordedRowByRow = new StatementRollup();
  for (let i = 0; i < block.ends.length; i++) recordedRowByRow.addTable(block, i, i + 1);
  assert.deepEqual(recordedRowByRow.rows(), rollup.rows(), 'noted keys row by row (a bisection) too');
  assert.deepEqual(handoverTemplates(encoded).sorted(), ctx.templates.sorted());
  assert.equal(encoded.newestMs, newestLogMs(fixture));
});

test('a row the encoder refuses becomes a quarantine record; the rows around it are kept and counted', () => {
  const good = statementEvent({ offset: 0, end: 100 });
  const bad: PglogEvent = { ...statementEvent({ offset: 100, end: 200 }), pid: 2 ** 40 };
  const after = statementEvent({ offset: 200, end: 300, query: 'SELECT 3' });
  const encoded = new RowEncoder(MAX).encode(SOURCE, [good, bad, after], READ_AT);
  const block = encoded.tables.statement_events;
  assert.ok(block !== undefined);
  assert.equal(block.ends.length, 2);
  assert.deepEqual(
    [0, 1].map((i) => decodedRow('statement_events', block, i, SOURCE).offset),
    [0, 200],
  );
  assert.equal(encoded.refused.length, 1);
  const [refused] = encoded.refused;
  assert.equal(refused?.table, 'statement_events');
  assert.match(refused?.record.reason ?? '', /^statement_events: STORE_ENCODING: column pid/);
  assert.equal(refused?.record.fileOffset, 100);
  const rollup = new StatementRollup();
  rollup.addEncoded(block.data, block.ends, 0, block.ends.length);
  assert.equal(
    rollup.rows().reduce((n, r) => n + (r[5] as number), 0),
    2,
    'the refused row is not in the rollup',
  );
});

const VALUES: Record<ColumnType, fc.Arbitrary<unknown>> = {
  int2: fc.integer({ min: -32768, max: 32767 }),
  int4: fc.integer({ min: -2147483648, max: 2147483647 }),
  int8: fc.oneof(
    fc.maxSafeInteger(),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).filter((b) => !Number.isSafeInteger(Number(b))),
  ),
  float8: fc.double(),
  bool: fc.boolean(),
  text: fc.string({ unit: 'grapheme' }).filter((s) => !s.includes('\0')),
  bytea: fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a)),
  // Numbers of microseconds the encoder takes: 2000-01-01 less the safe range up to its top.
  timestamptz: fc.integer({ min: Number.MIN_SAFE_INTEGER + 946_684_800_000_000, max: Number.MAX_SAFE_INTEGER }),
  jsonb: fc.json().filter((s) => !s.includes('\\u0000')),
  'int4[]': fc.array(fc.integer({ min: -2147483648, max: 2147483647 }), { maxLength: 20 }),
};

test('property: decodeRow reads back every value of every column type the encoder wrote (NULL included)', () => {
  const types = Object.keys(VALUES) as ColumnType[];
  const encoder = new CopyBinaryEncoder(types);
  const row = fc.tuple(...types.map((t) => fc.option(VALUES[t], { nil: null })));
  fc.assert(
    fc.property(fc.array(row, { minLength: 1, maxLength: 5 }), (rows) => {
      encoder.startRows();
      const ends = rows.map((r) => encoder.appendRow(r));
      const data = encoder.endRows();
      rows.forEach((r, i) => {
        const back = decodeRow(types, data, i === 0 ? 0 : (ends[i - 1] as number));
        assert.deepEqual(back, r);
      });
    }),
  );
});

test('decodeRow says where encoded data is cut short or has the wrong field count', () => {
  const encoder = new CopyBinaryEncoder(['int4', 'text']);
  const data = encoder.encodeRows([[1, 'hello']]);
  assert.throws(() => decodeRow(['int4', 'text'], data.subarray(0, data.length - 2), 0), /encoded row at byte 0: column 1 \(5 bytes\) runs past the end/);
  assert.throws(() => decodeRow(['int4'], data, 0), /2 fields, expected 1/);
});

test('appendRow takes a refused row back whole: the block holds the rows before it, then goes on', () => {
  const encoder = new CopyBinaryEncoder(['int4', 'text']);
  encoder.startRows();
  const first = encoder.appendRow([1, 'a']);
  assert.throws(() => encoder.appendRow([2, 'b\0'], 1), /row 1, column 1/);
  const second = encoder.appendRow([3, 'c']);
  const data = encoder.endRows();
  assert.equal(data.length, second);
  assert.deepEqual(decodeRow(['int4', 'text'], data, 0), [1, 'a']);
  assert.deepEqual(decodeRow(['int4', 'text'], data, first), [3, 'c']);
});

test("recycle() gives a committed handover's slabs back, once: the next handovers reuse them", () => {
  const rows = new RowEncoder(MAX);
  const first = rows.encode(SOURCE, fixture, READ_AT);
  const made = rows.slabs.made;
  rows.recycle(first);
  rows.recycle(first);
  for (let i = 0; i < 50; i++) rows.recycle(rows.encode(SOURCE, fixture, READ_AT));
  assert.equal(rows.slabs.made, made, 'no new slab for handovers that commit as fast as they come');
  assert.ok(Object.values(first.tables).every((t) => t.slab === null));
});
