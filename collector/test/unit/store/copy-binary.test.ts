// The binary COPY encoder, byte for byte against the PostgreSQL wire format (hex expectations
// and fast-check properties): header and trailer, NULLs, each column type at its edges
// (timestamptz's range, int4[] layout), and values it must refuse with row, column and type,
// after which the encoder starts clean.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import fc from 'fast-check';

import type { ColumnType } from '../../../src/store/copy-binary.ts';
import { CopyBinaryEncoder } from '../../../src/store/copy-binary.ts';

const hex = (b: Buffer): string => b.toString('hex');

/** Splits encoded tuples back into raw field bytes (null for NULL). */
function splitTuples(b: Buffer): (Buffer | null)[][] {
  const rows: (Buffer | null)[][] = [];
  let off = 0;
  while (off < b.length) {
    const n = b.readInt16BE(off);
    off += 2;
    const fields: (Buffer | null)[] = [];
    for (let i = 0; i < n; i++) {
      const len = b.readInt32BE(off);
      off += 4;
      if (len === -1) {
        fields.push(null);
        continue;
      }
      fields.push(b.subarray(off, off + len));
      off += len;
    }
    rows.push(fields);
  }
  return rows;
}

/** The bytes of one field of a one-column, one-row batch. */
function field(type: ColumnType, v: unknown): string {
  const rows = splitTuples(new CopyBinaryEncoder([type]).encodeRows([[v]]));
  const f = rows[0]?.[0];
  assert.ok(f !== undefined && f !== null);
  return hex(f);
}

function throwsEncoding(fn: () => unknown, message: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(isPglogError(e), `expected a PglogError, got ${String(e)}`);
    assert.equal(e.code, 'STORE_ENCODING');
    assert.match(e.message, message);
    return true;
  });
}

test('header and trailer are the binary COPY signature, flags, extension length and -1', () => {
  const enc = new CopyBinaryEncoder(['int4']);
  assert.equal(hex(enc.header()), '5047434f50590aff0d0a00' + '00000000' + '00000000');
  assert.equal(hex(enc.trailer()), 'ffff');
});

test('exact bytes of a small batch, NULLs included', () => {
  const enc = new CopyBinaryEncoder(['int4', 'text', 'bool']);
  const out = enc.encodeRows([
    [1, 'ab', true],
    [null, '', false],
    [-2, undefined, null],
  ]);
  assert.equal(
    hex(out),
    [
      '0003',
      '00000004',
      '00000001',
      '00000002',
      '6162',
      '00000001',
      '01',
      '0003',
      'ffffffff',
      '00000000',
      '00000001',
      '00',
      '0003',
      '00000004',
      'fffffffe',
      'ffffffff',
      'ffffffff',
    ].join(''),
  );
  assert.equal(enc.encodeRows([]).length, 0);
});

test('int2 and int4 edges', () => {
  assert.equal(field('int2', -32768), '8000');
  assert.equal(field('int2', 32767), '7fff');
  assert.equal(field('int2', -1), 'ffff');
  assert.equal(field('int4', -2147483648), '80000000');
  assert.equal(field('int4', 2147483647), '7fffffff');
  assert.equal(field('int4', 0), '00000000');
});

test('int8 from bigint and from number', () => {
  assert.equal(field('int8', -(2n ** 63n)), '8000000000000000');
  assert.equal(field('int8', 2n ** 63n - 1n), '7fffffffffffffff');
  assert.equal(field('int8', -1), 'ffffffffffffffff');
  assert.equal(field('int8', 2 ** 32), '0000000100000000');
  assert.equal(field('int8', -(2 ** 32) - 1), 'fffffffeffffffff');
  assert.equal(field('int8', Number.MAX_SAFE_INTEGER), '001fffffffffffff');
  assert.equal(field('int8', Number.MIN_SAFE_INTEGER), 'ffe0000000000001');
  fc.assert(fc.property(fc.maxSafeInteger(), (n) => field('int8', n) === field('int8', BigInt(n))));
});

test('float8 edges: NaN, infinities, -0', () => {
  assert.equal(field('float8', 1), '3ff0000000000000');
  assert.equal(field('float8', Number.NaN), '7ff8000000000000');
  assert.equal(field('float8', Infinity), '7ff0000000000000');
  assert.equal(field('float8', -Infinity), 'fff0000000000000');
  assert.equal(field('float8', -0), '8000000000000000');
  assert.equal(field('float8', Number.MIN_VALUE), '0000000000000001');
});

test('text and jsonb are UTF-8 with their byte length; jsonb has version 1 first', () => {
  assert.equal(field('text', ''), '');
  assert.equal(field('text', 'привет'), Buffer.from('привет').toString('hex'));
  assert.equal(field('text', 'привет').length / 2, 12);
  assert.equal(field('text', '😀'), 'f09f9880');
  assert.equal(field('text', 'a€'), '61e282ac');
  assert.equal(field('text', '\ud800'), 'efbfbd'); // a lone surrogate becomes U+FFFD
  assert.equal(field('jsonb', '{}'), '017b7d');
  assert.equal(field('jsonb', '"ё"'), '0122d19122');
  assert.equal(field('jsonb', '"\\\\u0000"'), '01' + Buffer.from('"\\\\u0000"').toString('hex'));
  fc.assert(
    fc.property(
      fc.string({ unit: 'binary' }).filter((s) => !s.includes('\0')),
      (s) => {
        assert.equal(field('text', s), Buffer.from(s, 'utf8').toString('hex'));
      },
    ),
  );
  // Short ASCII is copied by a loop, longer or non-ASCII text by Buffer#write: both ways, and
  // text that turns non-ASCII (or NUL) after an ASCII start, at every length around the switch.
  fc.assert(
    fc.property(
      fc.string({ unit: fc.constantFrom('a', 'Z', '~', ' ', 'é', '€', '\u007f', '\u0080'), maxLength: 140 }),
      fc.constantFrom<ColumnType>('text', 'jsonb'),
      (s, type) => {
        assert.equal(field(type, s), (type === 'jsonb' ? '01' : '') + Buffer.from(s, 'utf8').toString('hex'));
      },
    ),
  );
  for (const length of [1, 63, 64, 65, 200]) {
    const s = `${'a'.repeat(length - 1)}\0`;
    throwsEncoding(() => new CopyBinaryEncoder(['text']).encodeRows([[s]]), /NUL/);
    throwsEncoding(() => new CopyBinaryEncoder(['jsonb']).encodeRows([[s]]), /NUL/);
  }
});

test('bool and bytea', () => {
  assert.equal(field('bool', true), '01');
  assert.equal(field('bool', false), '00');
  assert.equal(field('bytea', Buffer.alloc(0)), '');
  assert.equal(field('bytea', new Uint8Array([0, 255, 10])), '00ff0a');
});

test('timestamptz counts microseconds from 2000-01-01 UTC, before 2000 negative', () => {
  assert.equal(field('timestamptz', new Date('2000-01-01T00:00:00Z')), '0000000000000000');
  assert.equal(field('timestamptz', new Date('1999-12-31T23:59:59.999Z')), 'fffffffffffffc18');
  assert.equal(field('timestamptz', 946_684_800_000_001n), '0000000000000001');
  assert.equal(field('timestamptz', 946_684_799_999_999n), 'ffffffffffffffff');
  assert.equal(field('timestamptz', 0n), hex(Buffer.from(new BigInt64Array([-946_684_800_000_000n]).buffer).reverse()));
  // Microseconds as a safe integer number: the same bytes as the bigint, without one.
  assert.equal(field('timestamptz', 946_684_800_000_001), '0000000000000001');
  assert.equal(field('timestamptz', 0), field('timestamptz', 0n));
  fc.assert(
    fc.property(fc.integer({ min: Number.MIN_SAFE_INTEGER + 946_684_800_000_000, max: Number.MAX_SAFE_INTEGER }), (us) => {
      assert.equal(field('timestamptz', us), field('timestamptz', BigInt(us)));
    }),
  );
  throwsEncoding(() => new CopyBinaryEncoder(['timestamptz']).encodeRows([[1.5]]), /timestamptz.*safe integer/);
  throwsEncoding(() => new CopyBinaryEncoder(['timestamptz']).encodeRows([[2 ** 60]]), /timestamptz.*safe integer/);
  // Dates far from 2000 take the bigint path; both paths agree with the bigint input.
  fc.assert(
    fc.property(fc.date({ noInvalidDate: true, min: new Date(-200_000_000_000_000), max: new Date(8_000_000_000_000_000) }), (d) => {
      assert.equal(field('timestamptz', d), field('timestamptz', BigInt(d.getTime()) * 1000n));
    }),
  );
});

test('int4[]: ndim, has-null flag, element oid 23, length and lower bound 1, then length 4 and each int32', () => {
  assert.equal(
    field('int4[]', [1, -2]),
    [
      '00000001',
      '00000000',
      '00000017', // one dimension, no NULLs, elements are int4 (oid 23)
      '00000002',
      '00000001', // two elements, lower bound 1
      '00000004',
      '00000001',
      '00000004',
      'fffffffe',
    ].join(''),
  );
  // An empty array has no dimension at all, as the server's own '{}'.
  assert.equal(field('int4[]', []), '00000000' + '00000000' + '00000017');
  assert.equal(field('int4[]', [-2147483648, 2147483647, 0]).slice(40), '00000004' + '80000000' + '00000004' + '7fffffff' + '00000004' + '00000000');
  // NULL as a whole is SQL NULL, like every column type.
  const out = new CopyBinaryEncoder(['int4[]', 'int4']).encodeRows([
    [null, 7],
    [[5], 8],
  ]);
  assert.equal(
    hex(out),
    '0002' +
      'ffffffff' +
      '00000004' +
      '00000007' +
      '0002' +
      '0000001c' +
      '00000001' +
      '00000000' +
      '00000017' +
      '00000001' +
      '00000001' +
      '00000004' +
      '00000005' +
      '00000004' +
      '00000008',
  );
  // The field length is the bytes that follow it: 12 + 8 per dimension + 8 per element.
  fc.assert(
    fc.property(fc.array(fc.integer({ min: -2147483648, max: 2147483647 }), { maxLength: 50 }), (a) => {
      const f = Buffer.from(field('int4[]', a), 'hex');
      assert.equal(f.length, a.length === 0 ? 12 : 20 + 8 * a.length);
      assert.equal(f.readInt32BE(0), a.length === 0 ? 0 : 1);
      const back: number[] = [];
      for (let i = 0; i < a.length; i++) back.push(f.readInt32BE(24 + 8 * i));
      assert.deepEqual(back, a);
    }),
  );
});

test('int4[]: anything but an array of int4 integers is refused, naming the element; the encoder stays clean', () => {
  const enc = new CopyBinaryEncoder(['int4', 'int4[]']);
  throwsEncoding(
    () =>
      enc.encodeRows([
        [1, [1, 2]],
        [2, [1, 2.5]],
      ]),
    /^row 1, column 1 \(int4\[\]\): expected an array of integers from -2147483648 to 2147483647 without nulls, got number 2\.5 at index 1$/,
  );
  throwsEncoding(() => enc.encodeRows([[1, [null]]]), /column 1 \(int4\[\]\).*got null at index 0$/);
  throwsEncoding(() => enc.encodeRows([[1, [2147483648]]]), /got number 2147483648 at index 0$/);
  throwsEncoding(() => enc.encodeRows([[1, [-2147483649]]]), /at index 0$/);
  throwsEncoding(() => enc.encodeRows([[1, [1n]]]), /got bigint 1n at index 0$/);
  throwsEncoding(() => enc.encodeRows([[1, ['3']]]), /got string "3" at index 0$/);
  throwsEncoding(() => enc.encodeRows([[1, [Number.NaN]]]), /got number NaN at index 0$/);
  // eslint-disable-next-line no-sparse-arrays -- a hole is not an element: refused like undefined
  throwsEncoding(() => enc.encodeRows([[1, [1, , 3]]]), /got undefined at index 1$/);
  throwsEncoding(() => enc.encodeRows([[1, '{1,2}']]), /^row 0, column 1 \(int4\[\]\): expected an array of integers.*got string "\{1,2\}"$/);
  throwsEncoding(() => enc.encodeRows([[1, new Int32Array([1])]]), /got object Int32Array$/);
  throwsEncoding(() => enc.encodeRows([[1, 5]]), /got number 5$/);
  throwsEncoding(() => enc.encodeRows([[1, [[1]]]]), /got object Array at index 0$/);
  assert.equal(hex(enc.encodeRows([[0, []]])), '0002' + '00000004' + '00000000' + '0000000c' + '00000000' + '00000000' + '00000017');
});

test('the scratch buffer grows across its initial size and batches stay independent', () => {
  const types: ColumnType[] = ['int8', 'text', 'bytea'];
  const rows = Array.from({ length: 500 }, (_, i) => [BigInt(i), 'ж'.repeat(i % 97), Buffer.alloc(i % 13, i)]);
  const small = new CopyBinaryEncoder(types, { initialSize: 16 });
  const big = new CopyBinaryEncoder(types, { initialSize: 1 << 20 });
  const a = small.encodeRows(rows);
  assert.ok(small.capacity >= a.length && small.capacity > 16);
  assert.deepEqual(a, big.encodeRows(rows));
  const copy = Buffer.from(a);
  const b = small.encodeRows([[1n, 'x', null]]);
  assert.deepEqual(a, copy, 'an earlier batch is not overwritten by the next');
  assert.equal(hex(b), '0003' + '00000008' + '0000000000000001' + '00000001' + '78' + 'ffffffff');
  const parsed = splitTuples(a);
  assert.equal(parsed.length, 500);
  assert.equal(parsed[96]?.[1]?.toString('utf8'), 'ж'.repeat(96));
});

test('wrong types and values are refused with row, column and type', () => {
  const enc = new CopyBinaryEncoder(['text', 'int4']);
  throwsEncoding(
    () =>
      enc.encodeRows([
        ['ok', 1],
        [5, 2],
      ]),
    /^row 1, column 0 \(text\): expected a string, got number 5$/,
  );
  throwsEncoding(() => enc.encodeRows([['a\0b', 1]]), /row 0, column 0 \(text\).*NUL/);
  throwsEncoding(() => enc.encodeRows([['a', 1.5]]), /row 0, column 1 \(int4\).*got number 1\.5/);
  throwsEncoding(() => enc.encodeRows([['a', 2 ** 31]]), /column 1 \(int4\)/);
  throwsEncoding(() => enc.encodeRows([['a', '1']]), /column 1 \(int4\).*got string "1"/);
  throwsEncoding(() => enc.encodeRows([['a']]), /^row 0: expected 2 values, got 1$/);
  throwsEncoding(() => enc.encodeRows(['ab' as unknown as unknown[]]), /^row 0: expected an array/);
  const one =
    (type: ColumnType, v: unknown): (() => Buffer) =>
    () =>
      new CopyBinaryEncoder([type]).encodeRows([[v]]);
  throwsEncoding(one('int2', 32768), /column 0 \(int2\)/);
  throwsEncoding(one('int2', 1n), /column 0 \(int2\).*got bigint 1n/);
  throwsEncoding(one('int8', 2 ** 53), /column 0 \(int8\)/);
  throwsEncoding(one('int8', 2n ** 63n), /column 0 \(int8\)/);
  throwsEncoding(one('int8', '1'), /column 0 \(int8\)/);
  throwsEncoding(one('float8', 1n), /column 0 \(float8\)/);
  throwsEncoding(one('bool', 1), /column 0 \(bool\)/);
  throwsEncoding(one('bytea', 'abc'), /column 0 \(bytea\)/);
  throwsEncoding(one('timestamptz', '2024-01-01'), /column 0 \(timestamptz\)/);
  throwsEncoding(one('timestamptz', new Date(Number.NaN)), /column 0 \(timestamptz\).*Invalid Date/);
  // PostgreSQL's range relative to 2000-01-01: [-211813488000000000, 9223371331200000000) µs.
  throwsEncoding(one('timestamptz', 9_223_371_331_200_000_000n + 946_684_800_000_000n), /column 0 \(timestamptz\).*range/);
  throwsEncoding(one('timestamptz', -211_813_488_000_000_001n + 946_684_800_000_000n), /column 0 \(timestamptz\).*range/);
  assert.equal(field('timestamptz', 9_223_371_331_199_999_999n + 946_684_800_000_000n), '7fffff5bb3b29fff');
  assert.equal(
    field('timestamptz', -211_813_488_000_000_000n + 946_684_800_000_000n),
    hex(Buffer.from(new BigInt64Array([-211_813_488_000_000_000n]).buffer).reverse()),
  );
  throwsEncoding(one('timestamptz', new Date(-8_000_000_000_000_000)), /column 0 \(timestamptz\).*range/);
  throwsEncoding(one('jsonb', { a: 1 }), /column 0 \(jsonb\).*got object Object/);
  throwsEncoding(one('jsonb', '"\\u0000"'), /column 0 \(jsonb\).*u0000/);
  throwsEncoding(one('jsonb', '"\\\\\\u0000"'), /column 0 \(jsonb\)/);
  throwsEncoding(() => new CopyBinaryEncoder(['int4', 'uuid' as ColumnType]), /column 1: unsupported type "uuid"/);
  throwsEncoding(() => new CopyBinaryEncoder([]), /1 to 1600 columns/);
  // After a refused batch the encoder starts clean.
  assert.equal(hex(enc.encodeRows([['', 0]])), '0002' + '00000000' + '00000004' + '00000000');
});
