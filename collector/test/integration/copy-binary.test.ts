// The COPY BINARY encoder against a real PostgreSQL 15: what the server stores is what was encoded.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import type { TestPostgres } from '@pglog/test-support/postgres.ts';
import { startPostgres } from '@pglog/test-support/postgres.ts';
import fc from 'fast-check';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

import type { ColumnType } from '../../src/store/copy-binary.ts';
import { CopyBinaryEncoder } from '../../src/store/copy-binary.ts';

const COLUMNS: readonly (readonly [string, ColumnType])[] = [
  ['n', 'int4'],
  ['i2', 'int2'],
  ['i4', 'int4'],
  ['i8', 'int8'],
  ['f8', 'float8'],
  ['b', 'bool'],
  ['t', 'text'],
  ['by', 'bytea'],
  ['ts', 'timestamptz'],
  ['j', 'jsonb'],
];
const TYPES = COLUMNS.map(([, t]) => t);
const CREATE = `CREATE TABLE t (${COLUMNS.map(([n, t]) => `${n} ${t}`).join(', ')})`;
const COPY = `COPY t (${COLUMNS.map(([n]) => n).join(', ')}) FROM STDIN WITH (FORMAT binary)`;
// Everything comes back as text or bytes, so no value is rounded by a JavaScript type on the
// way back: int8 and float8 as text, jsonb as text, timestamps as the server's own 8 bytes
// (timestamptz_send; extract(epoch) rounds near the end of the timestamp range).
const SELECT = `SELECT n, i2, i4, i8::text, f8::text, b, t, by, timestamptz_send(ts) AS ts, j::text
  FROM t ORDER BY n`;
const PG_EPOCH_UNIX_US = 946_684_800_000_000n;

type Row = readonly unknown[];

let server: TestPostgres;
let client: pg.Client;

before(async () => {
  server = await startPostgres();
  client = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres', database: 'postgres' });
  await client.connect();
  await client.query(CREATE);
});

after(async () => {
  await client?.end().catch(() => {
    /* the server may be gone already */
  });
  await server?.stop();
});

async function copyBatches(batches: readonly Buffer[], encoder: CopyBinaryEncoder): Promise<void> {
  await client.query('TRUNCATE t');
  const stream = client.query(copyFrom(COPY));
  await pipeline(Readable.from([encoder.header(), ...batches, encoder.trailer()]), stream);
}

/** The row as the SELECT above returns it, computed from what was encoded. */
function expected(row: Row): unknown[] {
  const [n, i2, i4, i8, f8, b, t, by, ts, j] = row;
  const orNull = <T>(v: unknown, f: (x: NonNullable<unknown>) => T): T | null => (v === null || v === undefined ? null : f(v));
  return [
    n,
    i2 ?? null,
    i4 ?? null,
    orNull(i8, (x) => (x as bigint | number).toString()),
    orNull(f8, (x) => x as number),
    b ?? null,
    orNull(t, (x) => Buffer.from(x as string, 'utf8').toString('utf8')),
    orNull(by, (x) => Buffer.from(x as Uint8Array)),
    orNull(ts, (x) => (x instanceof Date ? BigInt(x.getTime()) * 1000n : (x as bigint)).toString()),
    orNull(j, (x) => JSON.parse(x as string) as unknown),
  ];
}

function actual(r: Record<string, unknown>): unknown[] {
  return [
    r.n,
    r.i2,
    r.i4,
    r.i8,
    r.f8 === null ? null : Number(r.f8),
    r.b,
    r.t,
    r.by,
    r.ts === null ? null : ((r.ts as Buffer).readBigInt64BE(0) + PG_EPOCH_UNIX_US).toString(),
    r.j === null ? null : (JSON.parse(r.j as string) as unknown),
  ];
}

async function selectAll(): Promise<unknown[][]> {
  const res = await client.query<Record<string, unknown>>(SELECT);
  return res.rows.map(actual);
}

test('every column type round-trips through COPY BINARY, over several batches', async () => {
  const rows: Row[] = [
    [0, 1, 2, 3n, 1.5, true, 'plain', Buffer.from('bytes'), new Date('2024-05-06T07:08:09.123Z'), '{"a": 1}'],
    [1, null, null, null, null, null, null, null, null, null],
    [2, -32768, -2147483648, -(2n ** 63n), Number.NaN, false, '', Buffer.alloc(0), 946_684_800_000_001n, '[]'],
    [
      3,
      32767,
      2147483647,
      2n ** 63n - 1n,
      Infinity,
      true,
      'Привет, мир — ёжик',
      Buffer.from([0, 255, 10, 13]),
      946_684_799_999_999n,
      '{"ключ": "значение", "n": [1, 2.5, null, true]}',
    ],
    [
      4,
      0,
      0,
      Number.MAX_SAFE_INTEGER,
      -Infinity,
      false,
      'emoji 😀 and \t tab \n newline \\ backslash',
      Buffer.alloc(1000, 7),
      1_715_000_000_123_456n,
      '"строка"',
    ],
    [5, -1, -1, -1, -0, true, 'ж'.repeat(5000), null, 0n, '{"deep": {"x": [{"y": "z"}]}}'],
    [6, 7, 8, Number.MIN_SAFE_INTEGER, Number.MIN_VALUE, null, "it's", Buffer.from('\\x00'), -62_135_596_800_000_000n, '1.25e3'],
    [7, 9, 10, 11, Number.MAX_VALUE, true, 'x', Buffer.from([1]), new Date('1969-07-20T20:17:40Z'), 'null'],
  ];
  const encoder = new CopyBinaryEncoder(TYPES, { initialSize: 64 });
  const batches = [encoder.encodeRows(rows.slice(0, 2)), encoder.encodeRows(rows.slice(2, 5)), encoder.encodeRows([]), encoder.encodeRows(rows.slice(5))];
  await copyBatches(batches, encoder);
  const got = await selectAll();
  assert.equal(got.length, rows.length);
  rows.forEach((row, i) => assert.deepStrictEqual(got[i], expected(row), `row ${i}`));
  // A few values checked by the server itself, independently of the comparison above.
  const check = await client.query<{ ts: string; len: number; i8: string }>(
    "SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS ts, octet_length(t) AS len, i8::text AS i8 FROM t WHERE n IN (3, 4) ORDER BY n",
  );
  assert.deepStrictEqual(check.rows, [
    { ts: '1999-12-31 23:59:59.999999', len: Buffer.byteLength('Привет, мир — ёжик'), i8: '9223372036854775807' },
    { ts: '2024-05-06 12:53:20.123456', len: Buffer.byteLength('emoji 😀 and \t tab \n newline \\ backslash'), i8: '9007199254740991' },
  ]);
});

const MIN_TS_UNIX_US = -211_813_488_000_000_000n + 946_684_800_000_000n;
const END_TS_UNIX_US = 9_223_371_331_200_000_000n + 946_684_800_000_000n;
const nullable = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.option(a, { nil: null, freq: 5 });
const noNul = (s: string): boolean => !s.includes('\0');
const jsonText = fc
  .jsonValue({ maxDepth: 3, stringUnit: 'grapheme' })
  .map((v) => JSON.stringify(v))
  .filter((s) => !s.includes('\\u0000'));

const rowArb = fc.tuple(
  nullable(fc.integer({ min: -32768, max: 32767 })),
  nullable(fc.integer({ min: -2147483648, max: 2147483647 })),
  nullable(fc.oneof(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), fc.maxSafeInteger())),
  nullable(fc.double()),
  nullable(fc.boolean()),
  nullable(fc.string({ unit: 'binary', maxLength: 40 }).filter(noNul)),
  nullable(fc.uint8Array({ maxLength: 40 })),
  nullable(
    fc.oneof(
      fc.bigInt({ min: MIN_TS_UNIX_US, max: END_TS_UNIX_US - 1n }),
      fc.date({ noInvalidDate: true, min: new Date('1800-01-01'), max: new Date('2300-01-01') }),
    ),
  ),
  nullable(jsonText),
);

test('property: what the server stores equals what was encoded (random rows, small batches)', async () => {
  const encoder = new CopyBinaryEncoder(TYPES, { initialSize: 32 });
  await fc.assert(
    fc.asyncProperty(fc.array(fc.array(rowArb, { maxLength: 6 }), { minLength: 1, maxLength: 4 }), async (batchRows) => {
      let n = 0;
      const rows = batchRows.map((batch) => batch.map((r): Row => [n++, ...r]));
      await copyBatches(
        rows.map((b) => encoder.encodeRows(b)),
        encoder,
      );
      const got = await selectAll();
      assert.deepStrictEqual(got, rows.flat().map(expected));
    }),
    { numRuns: 50 },
  );
});

test('a bad row is refused by the encoder before anything is sent', async () => {
  await client.query('TRUNCATE t');
  const encoder = new CopyBinaryEncoder(TYPES);
  const good: Row = [0, 1, 1, 1n, 1, true, 'ok', null, null, null];
  const bad: Row = [1, 1, 1, 1n, 1, true, 42, null, null, null];
  assert.throws(
    () => encoder.encodeRows([good, bad]),
    (e: unknown) => {
      assert.ok(isPglogError(e));
      assert.equal(e.code, 'STORE_ENCODING');
      assert.equal(e.message, 'row 1, column 6 (text): expected a string, got number 42');
      return true;
    },
  );
  const count = await client.query<{ n: string }>('SELECT count(*) AS n FROM t');
  assert.equal(count.rows[0]?.n, '0');
});

// int4[] in its own table, so the tests above keep their columns. The server reads the array
// back in its own terms (dimensions, bounds, text form), not only through pg's array parser.
const ARRAY_TABLE = 'CREATE TABLE IF NOT EXISTS arr (n int4, a int4[])';
const ARRAY_COPY = 'COPY arr (n, a) FROM STDIN WITH (FORMAT binary)';

async function copyArrays(rows: readonly Row[], encoder: CopyBinaryEncoder): Promise<void> {
  await client.query(ARRAY_TABLE);
  await client.query('TRUNCATE arr');
  const stream = client.query(copyFrom(ARRAY_COPY));
  await pipeline(Readable.from([encoder.header(), encoder.encodeRows(rows), encoder.trailer()]), stream);
}

test('int4[] round-trips: one dimension from 1, the empty array, NULL, the int4 edges', async () => {
  const encoder = new CopyBinaryEncoder(['int4', 'int4[]']);
  await copyArrays(
    [
      [0, [101, 102]],
      [1, []],
      [2, null],
      [3, [-2147483648, 2147483647, 0, -1]],
      [4, [7]],
    ],
    encoder,
  );
  const res = await client.query<{
    n: number;
    a: number[] | null;
    text: string | null;
    ndims: number | null;
    lower: number | null;
    upper: number | null;
    empty: boolean | null;
  }>(
    `SELECT n, a, a::text AS text, array_ndims(a) AS ndims, array_lower(a, 1) AS lower, array_upper(a, 1) AS upper,
            a = '{}'::int4[] AS empty
     FROM arr ORDER BY n`,
  );
  assert.deepStrictEqual(res.rows, [
    { n: 0, a: [101, 102], text: '{101,102}', ndims: 1, lower: 1, upper: 2, empty: false },
    { n: 1, a: [], text: '{}', ndims: null, lower: null, upper: null, empty: true },
    { n: 2, a: null, text: null, ndims: null, lower: null, upper: null, empty: null },
    { n: 3, a: [-2147483648, 2147483647, 0, -1], text: '{-2147483648,2147483647,0,-1}', ndims: 1, lower: 1, upper: 4, empty: false },
    { n: 4, a: [7], text: '{7}', ndims: 1, lower: 1, upper: 1, empty: false },
  ]);
  // The array operators work on what was sent (a stored array the server could not use would fail here).
  const hit = await client.query<{ n: number }>('SELECT n FROM arr WHERE a @> ARRAY[102] OR 7 = ANY(a) ORDER BY n');
  assert.deepStrictEqual(
    hit.rows.map((r) => r.n),
    [0, 4],
  );
});

test('property: random int4 arrays are stored as encoded', async () => {
  const encoder = new CopyBinaryEncoder(['int4', 'int4[]'], { initialSize: 16 });
  await fc.assert(
    fc.asyncProperty(fc.array(nullable(fc.array(fc.integer({ min: -2147483648, max: 2147483647 }), { maxLength: 20 })), { maxLength: 10 }), async (arrays) => {
      await copyArrays(
        arrays.map((a, n): Row => [n, a]),
        encoder,
      );
      const res = await client.query<{ a: number[] | null }>('SELECT a FROM arr ORDER BY n');
      assert.deepStrictEqual(
        res.rows.map((r) => r.a),
        arrays,
      );
    }),
    { numRuns: 50 },
  );
});
