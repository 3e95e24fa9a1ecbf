/**
 * Encoder for PostgreSQL's binary COPY format (`COPY ... FROM STDIN WITH (FORMAT binary)`).
 * Pure: no I/O. The store writer sends `header()`, then any number of `encodeRows()` batches,
 * then `trailer()` through one COPY.
 *
 * Every batch is written into one scratch Buffer that is reused between batches and doubles
 * when a batch does not fit; nothing is allocated per row or per field (no 1-4 byte Buffers
 * for lengths and NULL markers, which would each hold an 8 KB pool slab). Each batch is then
 * copied once into a Buffer the caller owns, so it may be handed to a stream that keeps it
 * until the socket has written it. See docs/decisions/0004-copy-binary-encoder.md.
 *
 * Values are checked at this boundary: a value of the wrong JavaScript type or out of range for
 * its column, or text the server would refuse (NUL characters), throws
 * PglogError('STORE_ENCODING') naming the row, the column and the type, and the batch is
 * discarded whole, so nothing of a bad batch is ever sent. The database must use the UTF8
 * encoding: text is sent as UTF-8 bytes (lone UTF-16 surrogates become U+FFFD).
 *
 * JavaScript values per column type (`null` or `undefined` is SQL NULL in every column):
 *   int2, int4   number (an integer in range)
 *   int8         bigint, or number (a safe integer)
 *   float8       number (NaN, Infinity and -0 included)
 *   bool         boolean
 *   text         string without NUL characters
 *   bytea        Uint8Array (Buffer)
 *   timestamptz  Date (millisecond precision), or microseconds since 1970-01-01 UTC: a bigint,
 *                or a number that is a safe integer (years 1685 to 2255; no bigint to allocate)
 *   jsonb        string holding JSON text (not checked for syntax: the server does that);
 *                no NUL characters and no `\u0000` escapes, which jsonb refuses
 *   int4[]       number[] of int4 integers: a one-dimensional array with lower bound 1 (an
 *                empty array has no dimension, as the server's own '{}'); no NULL elements
 */
import { PglogError } from '@pglog/common/errors.ts';

export const COLUMN_TYPES = ['int2', 'int4', 'int8', 'float8', 'bool', 'text', 'bytea', 'timestamptz', 'jsonb', 'int4[]'] as const;
export type ColumnType = (typeof COLUMN_TYPES)[number];

/** Signature `PGCOPY\n\377\r\n\0`, int32 flags 0, int32 header extension length 0. */
export const COPY_BINARY_HEADER = Buffer.from([0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]);
/** A field count of -1 ends the data. */
export const COPY_BINARY_TRAILER = Buffer.from([0xff, 0xff]);

/** PostgreSQL's timestamps count microseconds from 2000-01-01 00:00:00 UTC. */
const PG_EPOCH_UNIX_MS = 946_684_800_000;
const PG_EPOCH_UNIX_US = 946_684_800_000_000n;
const PG_EPOCH_UNIX_US_NUMBER = 946_684_800_000_000;
/**
 * Text up to this many UTF-16 units is copied by a loop here while it is ASCII (the usual log
 * text), checking for NUL on the way: a call into the runtime's UTF-8 writer costs more than
 * the copy for short values. Longer or non-ASCII text goes to Buffer#write.
 */
const ASCII_LOOP_MAX = 64;
/** The valid timestamp range relative to 2000-01-01 (MIN_TIMESTAMP, END_TIMESTAMP in timestamp.h). */
const PG_MIN_TIMESTAMP = -211_813_488_000_000_000n;
const PG_END_TIMESTAMP = 9_223_371_331_200_000_000n;
const INT8_MIN = -(2n ** 63n);
const INT8_MAX = 2n ** 63n - 1n;
const TWO_32 = 4_294_967_296;
/** pg_type.oid of int4: the element type written into an int4[] value. */
const INT4_OID = 23;
/**
 * The most elements an array may have (MaxArraySize in utils/array.h, 2^30 / sizeof(Datum) - 1):
 * the server refuses longer ones, so they are refused here before anything is sent.
 */
const MAX_ARRAY_ELEMENTS = 134_217_727;

const DEFAULT_INITIAL_SIZE = 64 * 1024;
/** A float8's bytes, through one shared scratch: Buffer#writeDoubleBE checks its arguments at every call. */
const DOUBLE = new Float64Array(1);
const DOUBLE_BYTES = new Uint8Array(DOUBLE.buffer);
/** DOUBLE_BYTES' indexes in network (big-endian) order, on a machine of either byte order. */
const NETWORK_ORDER = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? [7, 6, 5, 4, 3, 2, 1, 0] : [0, 1, 2, 3, 4, 5, 6, 7];
const NO_BYTES = Buffer.alloc(0);

/** What Buffer#write(s, offset, 'utf8') ends in. */
interface Utf8Writer {
  utf8Write(s: string, offset: number, length: number): number;
}

export interface CopyBinaryEncoderOptions {
  /** Initial size of the scratch buffer in bytes (default 64 KiB); it doubles as needed. */
  initialSize?: number;
}

// Column types as small integers: the per-field dispatch switches on these (a jump table)
// instead of comparing the type strings one case after another.
const TY_INT2 = 0,
  TY_INT4 = 1,
  TY_INT8 = 2,
  TY_FLOAT8 = 3,
  TY_BOOL = 4,
  TY_TEXT = 5,
  TY_BYTEA = 6,
  TY_TIMESTAMPTZ = 7,
  TY_JSONB = 8,
  TY_INT4_ARRAY = 9;

export class CopyBinaryEncoder {
  readonly types: readonly ColumnType[];
  /** `types` as TY_* codes (the index of each in COLUMN_TYPES). */
  private readonly codes: Uint8Array;
  private buf: Buffer;
  private off = 0;
  /** The column the next appendRow takes from stagedBytes (stageUtf8), or -1. */
  private stagedColumn = -1;
  private stagedBytes: Buffer = NO_BYTES;
  private stagedStart = 0;
  private stagedEnd = 0;

  constructor(types: readonly ColumnType[], options: CopyBinaryEncoderOptions = {}) {
    if (types.length === 0 || types.length > 1600) {
      throw new PglogError('STORE_ENCODING', `a COPY BINARY row needs 1 to 1600 columns, got ${types.length}`);
    }
    types.forEach((t, i) => {
      if (!(COLUMN_TYPES as readonly string[]).includes(t)) {
        throw new PglogError('STORE_ENCODING', `column ${i}: unsupported type ${JSON.stringify(t)} (supported: ${COLUMN_TYPES.join(', ')})`);
      }
    });
    this.types = [...types];
    this.codes = Uint8Array.from(types, (t) => COLUMN_TYPES.indexOf(t));
    const size = options.initialSize ?? DEFAULT_INITIAL_SIZE;
    if (!Number.isSafeInteger(size) || size < 16) {
      throw new PglogError('STORE_ENCODING', `initialSize must be an integer of at least 16 bytes, got ${size}`);
    }
    this.buf = Buffer.allocUnsafeSlow(size);
  }

  /** The file header; send once before the first batch. Shared: do not modify. */
  header(): Buffer {
    return COPY_BINARY_HEADER;
  }

  /** The file trailer; send once after the last batch. Shared: do not modify. */
  trailer(): Buffer {
    return COPY_BINARY_TRAILER;
  }

  /** Current size of the scratch buffer (grows, never shrinks). */
  get capacity(): number {
    return this.buf.length;
  }

  /**
   * Encodes the tuples of one batch (no header, no trailer) into a new Buffer the caller owns.
   * Throws PglogError('STORE_ENCODING') for the first value that cannot be encoded.
   */
  encodeRows(rows: readonly (readonly unknown[])[]): Buffer {
    this.off = 0;
    for (let r = 0; r < rows.length; r++) this.writeRow(r, rows[r]);
    return this.endRows();
  }

  /**
   * Starts a block of rows appended one at a time (appendRow), for a caller that needs each
   * row's end and keeps going past a row that cannot be encoded; endRows() copies it out.
   */
  startRows(): void {
    this.off = 0;
  }

  /**
   * Appends one row to the block; returns the block's length after it (the row's end). A
   * value that cannot be encoded throws PglogError('STORE_ENCODING') naming row `r` and its
   * column, and the row is taken back whole: the block holds only the rows before it.
   */
  appendRow(row: unknown, r = 0): number {
    const start = this.off;
    try {
      this.writeRow(r, row);
    } catch (e) {
      this.off = start;
      throw e;
    } finally {
      if (this.stagedColumn >= 0) {
        this.stagedColumn = -1;
        this.stagedBytes = NO_BYTES;
      }
    }
    return this.off;
  }

  /**
   * For the next appendRow only: text column `c` is `bytes[start, end)`, whatever the row
   * holds there, copied as it is. The caller vouches that the bytes are UTF-8 without NUL
   * (ASCII taken from a log entry: statement-sink.ts), which saves making the string and
   * encoding it back.
   */
  stageUtf8(c: number, bytes: Buffer, start: number, end: number): void {
    if (this.codes[c] !== TY_TEXT) throw new PglogError('STORE_ENCODING', `column ${c}: only a text column takes UTF-8 bytes, not ${String(this.types[c])}`);
    this.stagedColumn = c;
    this.stagedBytes = bytes;
    this.stagedStart = start;
    this.stagedEnd = end;
  }

  /** The block's rows, copied into a Buffer the caller owns. */
  endRows(): Buffer {
    const out = Buffer.allocUnsafeSlow(this.off);
    this.buf.copy(out, 0, 0, this.off);
    return out;
  }

  /** Bytes of the block so far. */
  get blockLength(): number {
    return this.off;
  }

  /** Copies the block into `target` (at least blockLength bytes: memory the caller reuses, slab-pool.ts). */
  copyBlockTo(target: Uint8Array): void {
    this.buf.copy(target, 0, 0, this.off);
  }

  private writeRow(r: number, row: unknown): void {
    const n = this.types.length;
    if (!Array.isArray(row)) {
      throw new PglogError('STORE_ENCODING', `row ${r}: expected an array of ${n} values, got ${describe(row)}`);
    }
    if (row.length !== n) {
      throw new PglogError('STORE_ENCODING', `row ${r}: expected ${n} values, got ${row.length}`);
    }
    this.ensure(2);
    this.buf[this.off] = n >>> 8;
    this.buf[this.off + 1] = n;
    this.off += 2;
    const staged = this.stagedColumn;
    for (let c = 0; c < n; c++) {
      if (c === staged) this.writeStaged();
      else this.writeField(r, c, row[c] as unknown);
    }
  }

  private writeStaged(): void {
    this.utf8BytesField(this.stagedBytes, this.stagedStart, this.stagedEnd);
  }

  // Rows written field by field by a writer that knows its table's column types
  // (statement-row.ts), without appendRow's dispatch on each column's type. Each field method
  // takes any value and returns false, having written nothing, for one its type cannot take;
  // the writer then rewinds the row (rewindRow) and appendRow says what was wrong.

  /** Starts a row of this encoder's columns; returns where it starts, for rewindRow. */
  beginRow(): number {
    const start = this.off;
    const n = this.codes.length;
    this.ensure(2);
    this.buf[start] = n >>> 8;
    this.buf[start + 1] = n;
    this.off = start + 2;
    return start;
  }

  /** Takes back the row begun at `start` (beginRow): the block ends where it did before it. */
  rewindRow(start: number): void {
    this.off = start;
  }

  /** text: a string without NUL characters, or null. */
  textField(v: unknown): boolean {
    if (v === null || v === undefined) return this.nullField();
    return typeof v === 'string' && this.writeUtf8(v, 0);
  }

  /** int4: an integer from -2^31 to 2^31-1, or null. */
  int4Field(v: unknown): boolean {
    if (v === null || v === undefined) return this.nullField();
    if (typeof v !== 'number' || !Number.isInteger(v) || v < -2147483648 || v > 2147483647) return false;
    this.ensure(8);
    this.int32(4);
    this.int32(v);
    return true;
  }

  /** float8: any number, or null. */
  float8Field(v: unknown): boolean {
    if (v === null || v === undefined) return this.nullField();
    if (typeof v !== 'number') return false;
    this.ensure(12);
    this.int32(8);
    DOUBLE[0] = v;
    for (let k = 0; k < 8; k++) this.buf[this.off + k] = DOUBLE_BYTES[NETWORK_ORDER[k]!]!;
    this.off += 8;
    return true;
  }

  /** int8 from a number: a safe integer, or null. */
  int8NumberField(v: unknown): boolean {
    if (v === null || v === undefined) return this.nullField();
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) return false;
    this.writeInt64FromNumber(v);
    return true;
  }

  /** timestamptz from microseconds since 1970 as a number: a safe integer (as is its distance from 2000), or null. */
  timestampMicrosField(v: unknown): boolean {
    if (v === null || v === undefined) return this.nullField();
    if (typeof v !== 'number') return false;
    const rel = v - PG_EPOCH_UNIX_US_NUMBER;
    if (!Number.isSafeInteger(v) || !Number.isSafeInteger(rel)) return false;
    this.writeInt64FromNumber(rel);
    return true;
  }

  /** text as its UTF-8 bytes `bytes[start, end)`, which the caller vouches for (as stageUtf8). */
  utf8BytesField(bytes: Buffer, start: number, end: number): void {
    const n = end - start;
    this.ensure(4 + n);
    this.int32(n);
    const at = this.off;
    // A short copy costs less in a loop than through Buffer#copy's native call.
    if (n <= ASCII_LOOP_MAX) for (let i = 0; i < n; i++) this.buf[at + i] = bytes[start + i]!;
    else bytes.copy(this.buf, at, start, end);
    this.off = at + n;
  }

  private nullField(): true {
    this.ensure(4);
    this.int32(-1);
    return true;
  }

  private writeField(r: number, c: number, v: unknown): void {
    if (v === null || v === undefined) {
      this.nullField();
      return;
    }
    const code = this.codes[c]!;
    const type = COLUMN_TYPES[code]!;
    switch (code) {
      case TY_INT2:
        if (typeof v !== 'number' || !Number.isInteger(v) || v < -32768 || v > 32767) throw bad(r, c, type, v, 'an integer from -32768 to 32767');
        this.ensure(6);
        this.int32(2);
        this.buf[this.off] = v >>> 8;
        this.buf[this.off + 1] = v;
        this.off += 2;
        return;
      case TY_INT4:
        if (!this.int4Field(v)) throw bad(r, c, type, v, 'an integer from -2147483648 to 2147483647');
        return;
      case TY_INT8:
        if (typeof v === 'number') {
          if (!this.int8NumberField(v)) throw bad(r, c, type, v, 'a bigint, or a number that is a safe integer');
          return;
        }
        if (typeof v !== 'bigint' || v < INT8_MIN || v > INT8_MAX) throw bad(r, c, type, v, 'a bigint from -2^63 to 2^63-1, or a safe integer number');
        this.writeInt64(v);
        return;
      case TY_FLOAT8:
        if (!this.float8Field(v)) throw bad(r, c, type, v, 'a number');
        return;
      case TY_BOOL:
        if (typeof v !== 'boolean') throw bad(r, c, type, v, 'a boolean');
        this.ensure(5);
        this.int32(1);
        this.buf[this.off++] = v ? 1 : 0;
        return;
      case TY_TEXT:
        if (typeof v !== 'string') throw bad(r, c, type, v, 'a string');
        if (!this.writeUtf8(v, 0)) throw bad(r, c, type, v, 'a string without NUL characters (PostgreSQL text cannot hold them)');
        return;
      case TY_BYTEA:
        if (!(v instanceof Uint8Array)) throw bad(r, c, type, v, 'a Uint8Array or Buffer');
        this.ensure(4 + v.length);
        this.int32(v.length);
        this.buf.set(v, this.off);
        this.off += v.length;
        return;
      case TY_TIMESTAMPTZ:
        this.writeTimestamp(r, c, v);
        return;
      case TY_JSONB:
        if (typeof v !== 'string') throw bad(r, c, type, v, 'a string of JSON text');
        if (hasEscapedNul(v) || !this.writeUtf8(v, 1)) throw bad(r, c, type, v, 'JSON text without NUL characters or \\u0000 escapes (jsonb cannot hold them)');
        return;
      case TY_INT4_ARRAY:
        this.writeInt4Array(r, c, v);
        return;
      default:
        throw new PglogError('STORE_ENCODING', `column ${c}: unsupported type ${String(type)}`);
    }
  }

  /**
   * Length, then the optional jsonb version byte, then the UTF-8 bytes of `s`; false (and
   * nothing written) when `s` holds a NUL character.
   */
  private writeUtf8(s: string, version: 0 | 1): boolean {
    const n = s.length;
    // A UTF-16 code unit never takes more than 3 UTF-8 bytes (a surrogate pair: 4 for 2).
    this.ensure(5 + n * 3);
    const b = this.buf;
    const lengthAt = this.off;
    let at = lengthAt + 4;
    if (version === 1) b[at++] = 1;
    let i = 0;
    if (n <= ASCII_LOOP_MAX) {
      for (; i < n; i++) {
        const ch = s.charCodeAt(i);
        if (ch === 0 || ch >= 0x80) break;
        b[at + i] = ch;
      }
    }
    if (i === n) {
      at += n;
    } else {
      if (s.includes('\0')) return false;
      // Buffer's native utf8Write, without Buffer#write's argument checks (room is ensured above).
      at += (b as unknown as Utf8Writer).utf8Write(s, at, b.length - at);
    }
    this.off = lengthAt;
    this.int32(at - lengthAt - 4);
    this.off = at;
    return true;
  }

  /** A big-endian int32 at the offset (room ensured by the caller): plain stores, no range check (the caller's values are in range). */
  private int32(v: number): void {
    const b = this.buf;
    const o = this.off;
    b[o] = v >>> 24;
    b[o + 1] = v >>> 16;
    b[o + 2] = v >>> 8;
    b[o + 3] = v;
    this.off = o + 4;
  }

  /**
   * array_send's layout: ndim, has-null flag, element type oid, then per dimension its length
   * and lower bound, then each element as length 4 and the int32. Checked whole before the
   * first byte is written, so a refused value leaves nothing behind in the scratch buffer.
   */
  private writeInt4Array(r: number, c: number, v: unknown): void {
    const expected = 'an array of integers from -2147483648 to 2147483647 without nulls';
    if (!Array.isArray(v)) throw bad(r, c, 'int4[]', v, expected);
    const n = v.length;
    if (n > MAX_ARRAY_ELEMENTS) throw bad(r, c, 'int4[]', v, `an array of at most ${MAX_ARRAY_ELEMENTS} elements (PostgreSQL's limit)`);
    for (let i = 0; i < n; i++) {
      const x: unknown = v[i];
      if (typeof x !== 'number' || !Number.isInteger(x) || x < -2147483648 || x > 2147483647) {
        throw new PglogError('STORE_ENCODING', `row ${r}, column ${c} (int4[]): expected ${expected}, got ${describe(x)} at index ${i}`);
      }
    }
    const dims = n === 0 ? 0 : 1;
    const bytes = 12 + dims * 8 + n * 8;
    this.ensure(4 + bytes);
    this.int32(bytes);
    this.int32(dims);
    this.int32(0);
    this.int32(INT4_OID);
    if (n === 0) return;
    this.int32(n);
    this.int32(1);
    for (let i = 0; i < n; i++) {
      this.int32(4);
      this.int32(v[i] as number);
    }
  }

  private writeTimestamp(r: number, c: number, v: unknown): void {
    let us: bigint;
    if (typeof v === 'number') {
      if (!this.timestampMicrosField(v)) throw bad(r, c, 'timestamptz', v, 'microseconds as a safe integer number, or a bigint');
      return;
    }
    if (v instanceof Date) {
      const ms = v.getTime();
      if (Number.isNaN(ms)) throw bad(r, c, 'timestamptz', v, 'a valid Date');
      const rel = (ms - PG_EPOCH_UNIX_MS) * 1000;
      // Every Date in years 1685-2255 fits a safe integer of microseconds: no bigint needed.
      if (Number.isSafeInteger(rel)) {
        this.writeInt64FromNumber(rel);
        return;
      }
      us = BigInt(ms - PG_EPOCH_UNIX_MS) * 1000n;
    } else if (typeof v === 'bigint') {
      us = v - PG_EPOCH_UNIX_US;
    } else {
      throw bad(r, c, 'timestamptz', v, 'a Date, or microseconds since 1970-01-01 UTC (a bigint, or a safe integer number)');
    }
    if (us < PG_MIN_TIMESTAMP || us >= PG_END_TIMESTAMP) {
      throw bad(r, c, 'timestamptz', v, "a time from 4714-11-24 BC to 294276-12-31 AD (PostgreSQL's timestamp range)");
    }
    this.writeInt64(us);
  }

  private writeInt64(v: bigint): void {
    this.ensure(12);
    this.int32(8);
    this.off = this.buf.writeBigInt64BE(v, this.off);
  }

  /** `v` is a safe integer: written as two 32-bit halves, without a bigint. */
  private writeInt64FromNumber(v: number): void {
    this.ensure(12);
    const high = Math.floor(v / TWO_32);
    this.int32(8);
    this.int32(high);
    this.int32(v - high * TWO_32);
  }

  private ensure(bytes: number): void {
    const need = this.off + bytes;
    if (need <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < need) size *= 2;
    const next = Buffer.allocUnsafeSlow(size);
    this.buf.copy(next, 0, 0, this.off);
    this.buf = next;
  }
}

/** True when JSON text holds a `\u0000` escape (a backslash that is not itself escaped). */
function hasEscapedNul(s: string): boolean {
  for (let i = s.indexOf('\\u0000'); i !== -1; i = s.indexOf('\\u0000', i + 1)) {
    let backslashes = 0;
    for (let j = i; j >= 0 && s.charCodeAt(j) === 0x5c; j--) backslashes++;
    if (backslashes % 2 === 1) return true;
  }
  return false;
}

function bad(r: number, c: number, type: ColumnType, v: unknown, expected: string): PglogError {
  return new PglogError('STORE_ENCODING', `row ${r}, column ${c} (${type}): expected ${expected}, got ${describe(v)}`);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'number':
      return `number ${v}`;
    case 'bigint':
      return `bigint ${v}n`;
    case 'boolean':
      return `boolean ${v}`;
    case 'string':
      return v.length <= 40 ? `string ${JSON.stringify(v)}` : `string of ${v.length} characters`;
    case 'object':
      return v instanceof Date ? `Date ${Number.isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString()}` : `object ${v.constructor?.name ?? 'Object'}`;
    case 'undefined':
      return 'undefined';
    case 'function':
      return 'function';
    case 'symbol':
      return 'symbol';
    default:
      return typeof v;
  }
}
