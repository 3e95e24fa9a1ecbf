/**
 * Reading back a row that CopyBinaryEncoder wrote (pure): the values of an encoded row, as the
 * encoder takes them. Rows wait for the store already encoded (encoded-rows.ts); the few paths
 * that need a row's values again (a row the server refused goes to the quarantine as JSON, the
 * statement rollup of the rows a bisection let in) decode it here instead of keeping the values
 * of every row for them.
 *
 * What comes back per column type: int2, int4, float8 a number; int8 and timestamptz a number
 * while it is a safe integer, else a bigint (timestamptz as microseconds since 1970, like the
 * encoder's input); bool a boolean; text a string; jsonb the JSON text; bytea a Buffer;
 * int4[] a number[]; SQL NULL null.
 */
import { PglogError } from '@pglog/common/errors.ts';

import type { ColumnType } from './copy-binary.ts';

const PG_EPOCH_UNIX_US = 946_684_800_000_000n;

/** The values of the row that starts at `start` of `data`, one per column of `types`. */
export function decodeRow(types: readonly ColumnType[], data: Buffer, start: number): unknown[] {
  let at = start;
  const need = (n: number, what: string): void => {
    if (at + n > data.length)
      throw new PglogError('STORE_ENCODING', `encoded row at byte ${start}: ${what} runs past the end of the data (${data.length} bytes)`);
  };
  need(2, 'the field count');
  const fields = data.readInt16BE(at);
  at += 2;
  if (fields !== types.length) throw new PglogError('STORE_ENCODING', `encoded row at byte ${start}: ${fields} fields, expected ${types.length}`);
  const values: unknown[] = [];
  for (const type of types) {
    need(4, `the length of column ${values.length}`);
    const length = data.readInt32BE(at);
    at += 4;
    if (length === -1) {
      values.push(null);
      continue;
    }
    need(length, `column ${values.length} (${length} bytes)`);
    values.push(decodeField(type, data, at, length));
    at += length;
  }
  return values;
}

function decodeField(type: ColumnType, data: Buffer, at: number, length: number): unknown {
  switch (type) {
    case 'int2':
      return data.readInt16BE(at);
    case 'int4':
      return data.readInt32BE(at);
    case 'int8':
      return safeNumber(data.readBigInt64BE(at));
    case 'float8':
      return data.readDoubleBE(at);
    case 'bool':
      return data[at] !== 0;
    case 'text':
      return data.toString('utf8', at, at + length);
    case 'bytea':
      return Buffer.from(data.subarray(at, at + length));
    case 'timestamptz':
      return safeNumber(data.readBigInt64BE(at) + PG_EPOCH_UNIX_US);
    case 'jsonb':
      // The version byte (1), then the JSON text.
      return data.toString('utf8', at + 1, at + length);
    case 'int4[]':
      return int4Array(data, at);
  }
}

/** array_send's layout as the encoder writes it: ndim, flags, oid, [length, lower bound], elements. */
function int4Array(data: Buffer, at: number): number[] {
  const dims = data.readInt32BE(at);
  if (dims === 0) return [];
  const n = data.readInt32BE(at + 12);
  const out: number[] = [];
  for (let i = 0, p = at + 20; i < n; i++, p += 8) out.push(data.readInt32BE(p + 4));
  return out;
}

function safeNumber(v: bigint): number | bigint {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v;
}
