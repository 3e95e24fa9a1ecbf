/**
 * csvlog: one RFC 4180 row per entry (PostgreSQL 13: 24 columns, 14+: 26). Quoted fields may
 * hold newlines, so an entry may span many lines: the quote state is carried from line to
 * line (each `"` toggles it; an escaped `""` toggles twice). A row that lies in one line is
 * read in place; a row over several lines is joined once when it is complete.
 *
 * Fields are views into the line (subarray); a quoted field holding `""` is unescaped into a
 * new Buffer. Empty fields are null (message: an empty Buffer).
 *
 * Rows that cannot be read (fewer than 14 columns, a quoted field that never ends before the
 * input does) still give a record, counted in stats.malformed: severity `UNKNOWN` when the
 * row has no severity column, the columns it has otherwise.
 *
 * After a line cut by the line splitter the quote state is unknown; while such an entry is
 * open, a line that starts like a new row (`YYYY-MM-DD HH:MM:SS.mmm ZONE,`) starts a new entry.
 */
import { emptyRecord } from './record.ts';
import type { AssemblerStats, EntryAssembler, LogRecord, RecordSink } from './record.ts';
import { DEFAULT_MAX_ENTRY_BYTES } from './line-splitter.ts';
import { FieldCache, latin1 } from './prefix.ts';
import { UNKNOWN_SEVERITY } from './stderr-assembler.ts';

const QUOTE = 0x22;
const COMMA = 0x2c;
const NL = Buffer.from('\n');
const EMPTY = Buffer.alloc(0);

/** Column indexes. */
const C_TIME = 0, C_USER = 1, C_DB = 2, C_PID = 3, C_FROM = 4, C_SESSION = 5, C_LINE = 6, C_TAG = 7,
  C_START = 8, C_VXID = 9, C_TXID = 10, C_SEVERITY = 11, C_SQLSTATE = 12, C_MESSAGE = 13, C_DETAIL = 14,
  C_HINT = 15, C_IQUERY = 16, C_IQUERY_POS = 17, C_CONTEXT = 18, C_QUERY = 19, C_QUERY_POS = 20, C_LOCATION = 21, C_APP = 22,
  C_BTYPE = 23, C_LEADER = 24, C_QUERYID = 25;
const MAX_COLUMNS = 32;
/** Columns whose text repeats from row to row: their strings are reused (FieldCache). */
const CACHED = new Uint8Array(MAX_COLUMNS);
for (const k of [C_TIME, C_FROM, C_SESSION, C_TAG, C_START, C_TXID, C_SEVERITY, C_SQLSTATE, C_BTYPE, C_QUERYID]) CACHED[k] = 1;

function isDigits(s: string, from: number): boolean {
  for (let i = from; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

/**
 * Reads the fields of one row in `b[s, e)`. Field k is `b[fs[k], fe[k])`; `fx[k]` is 1 when
 * the field holds `""` escapes. Returns the field count; `open` tells whether the row ended
 * inside a quoted field.
 */
export class CsvRowReader {
  readonly fs = new Int32Array(MAX_COLUMNS);
  readonly fe = new Int32Array(MAX_COLUMNS);
  readonly fx = new Uint8Array(MAX_COLUMNS);
  count = 0;
  open = false;

  read(b: Buffer, s: number, e: number): number {
    const fs = this.fs, fe = this.fe, fx = this.fx;
    let k = 0;
    let i = s;
    this.open = false;
    for (;;) {
      if (k >= MAX_COLUMNS) break;
      if (i < e && b[i] === QUOTE) {
        let j = i + 1;
        let esc = 0;
        let close = -1;
        for (;;) {
          // Short fields: a loop; long ones: memchr. No quote before `e`: still open at the row's end.
          let q = -1;
          const stop = j + 24 < e ? j + 24 : e;
          for (let x = j; x < stop; x++) if (b[x] === QUOTE) { q = x; break; }
          if (q < 0 && stop < e) q = b.indexOf(QUOTE, stop);
          if (q < 0 || q >= e) break;
          if (q + 1 < e && b[q + 1] === QUOTE) { esc = 1; j = q + 2; continue; }
          close = q;
          break;
        }
        fs[k] = i + 1;
        fx[k] = esc;
        if (close < 0) {
          fe[k] = e;
          k++;
          this.open = true;
          break;
        }
        fe[k] = close;
        k++;
        i = close + 1;
        // Anything between the closing quote and the comma is not RFC 4180; skip it.
        while (i < e && b[i] !== COMMA) i++;
      } else {
        let j = i;
        while (j < e && b[j] !== COMMA) j++;
        fs[k] = i;
        fe[k] = j;
        fx[k] = 0;
        k++;
        i = j;
      }
      if (i >= e) break;
      i++; // the comma
    }
    this.count = k;
    return k;
  }
}

function unescape(b: Buffer, s: number, e: number): Buffer {
  const out = Buffer.allocUnsafe(e - s);
  let o = 0;
  for (let i = s; i < e; i++) {
    const c = b[i]!;
    out[o++] = c;
    if (c === QUOTE && i + 1 < e && b[i + 1] === QUOTE) i++;
  }
  return out.subarray(0, o);
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

/** True when b[s..] starts like a csvlog row: `YYYY-MM-DD HH:MM:SS.mmm ZONE,`. */
export function looksLikeCsvRow(b: Buffer, s: number, e: number): boolean {
  if (e - s < 26) return false;
  if (!(isDigit(b[s]) && isDigit(b[s + 3]) && b[s + 4] === 0x2d && b[s + 7] === 0x2d && b[s + 10] === 0x20 &&
    b[s + 13] === 0x3a && b[s + 16] === 0x3a && b[s + 19] === 0x2e && isDigit(b[s + 22]) && b[s + 23] === 0x20)) return false;
  for (let i = s + 24; i < e && i < s + 40; i++) {
    const c = b[i]!;
    if (c === COMMA) return i > s + 24;
    if (c === 0x20 || c === QUOTE) return false;
  }
  return false;
}

export class CsvAssembler implements EntryAssembler {
  readonly stats: AssemblerStats = { entries: 0, truncated: 0, malformed: 0 };
  private readonly sink: RecordSink;
  private readonly max: number;
  private readonly reader = new CsvRowReader();
  private readonly cache: FieldCache[] = [];
  /** An entry spanning lines: its pieces (with "\n" between), start, size. */
  private pieces: Buffer[] = [];
  private inEntry = false;
  private inQuote = false;
  private start = 0;
  private end = 0;
  private size = 0;
  private kept = 0;
  private truncated = false;
  /** A line of the open entry was cut by the splitter: its quote state is a guess. */
  private lostParity = false;
  /** The last connection_from column and the host and port read from it. */
  private lastFrom: string | null = null;
  private lastHost: string | null = null;
  private lastPort: string | null = null;

  constructor(sink: RecordSink, maxEntryBytes: number = DEFAULT_MAX_ENTRY_BYTES) {
    this.sink = sink;
    this.max = maxEntryBytes;
    for (let k = 0; k < MAX_COLUMNS; k++) this.cache.push(new FieldCache());
  }

  pushLine(bytes: Buffer, from: number, to: number, offset: number, next: number, truncated: boolean): void {
    if (this.inEntry && this.lostParity && looksLikeCsvRow(bytes, from, to)) this.finish(false);
    if (!this.inEntry) {
      if (!truncated) {
        const r = this.reader;
        r.read(bytes, from, to);
        if (!r.open) {
          this.emitRow(bytes, offset, next, false, false, from, to);
          return;
        }
      }
      this.inEntry = true;
      this.inQuote = false;
      this.start = offset;
      this.size = 0;
      this.kept = 0;
      this.truncated = false;
      this.lostParity = false;
    } else {
      this.addPiece(NL, 1);
    }
    this.end = next;
    if (truncated) { this.truncated = true; this.lostParity = true; }
    let q = this.inQuote;
    for (let i = from; i < to; i++) if (bytes[i] === QUOTE) q = !q;
    this.inQuote = q;
    this.addPiece(bytes.subarray(from, to), to - from);
    if (!q) this.finish(false);
  }

  private addPiece(piece: Buffer, n: number): void {
    const size = this.size + n;
    this.size = size;
    if (this.kept >= this.max) { this.truncated = true; return; }
    if (this.kept + n > this.max) {
      piece = piece.subarray(0, this.max - this.kept);
      this.truncated = true;
    }
    this.pieces.push(piece);
    this.kept += piece.length;
  }

  /** Emits the open multi-line entry. */
  private finish(eof: boolean): void {
    const pieces = this.pieces;
    const row = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces, this.kept);
    this.pieces = [];
    this.inEntry = false;
    const open = this.inQuote;
    this.inQuote = false;
    this.reader.read(row, 0, row.length);
    this.emitRow(row, this.start, this.end, this.truncated, eof && open && !this.truncated, 0, row.length);
  }

  private emitRow(b: Buffer, start: number, end: number, truncated: boolean, unterminated: boolean, from: number, to: number): void {
    const n = this.reader.count;
    let rec: LogRecord;
    if (n <= C_MESSAGE) {
      // Not a csvlog row: keep the raw bytes.
      rec = emptyRecord(start, end, UNKNOWN_SEVERITY, b.subarray(from, to));
      this.stats.malformed++;
    } else {
      rec = emptyRecord(start, end, this.str(b, C_SEVERITY) ?? UNKNOWN_SEVERITY, this.text(b, C_MESSAGE) ?? EMPTY);
      rec.time = this.str(b, C_TIME);
      rec.user = this.text(b, C_USER);
      rec.database = this.text(b, C_DB);
      rec.pid = this.int(b, C_PID);
      const fromField = this.str(b, C_FROM);
      if (fromField !== null) {
        // The same string as the last row's (the column cache): the same host and port.
        if (fromField !== this.lastFrom) {
          const colon = fromField.lastIndexOf(':');
          if (colon > 0 && colon < fromField.length - 1 && isDigits(fromField, colon + 1)) {
            this.lastHost = fromField.slice(0, colon);
            this.lastPort = fromField.slice(colon + 1);
          } else {
            this.lastHost = fromField;
            this.lastPort = null;
          }
          this.lastFrom = fromField;
        }
        rec.remoteHost = this.lastHost;
        rec.remotePort = this.lastPort;
      }
      rec.sessionId = this.str(b, C_SESSION);
      rec.sessionLine = this.int(b, C_LINE);
      rec.commandTag = this.str(b, C_TAG);
      rec.sessionStart = this.str(b, C_START);
      rec.vxid = this.str(b, C_VXID);
      rec.txid = this.str(b, C_TXID);
      rec.sqlstate = this.str(b, C_SQLSTATE);
      if (n > C_DETAIL) {
        rec.detail = this.text(b, C_DETAIL);
        rec.hint = this.text(b, C_HINT);
        rec.internalQuery = this.text(b, C_IQUERY);
        rec.context = this.text(b, C_CONTEXT);
        rec.statement = this.text(b, C_QUERY);
        rec.internalPosition = this.int(b, C_IQUERY_POS);
        rec.cursorPosition = this.int(b, C_QUERY_POS);
        rec.location = this.str(b, C_LOCATION);
        rec.application = this.text(b, C_APP);
        rec.backendType = this.str(b, C_BTYPE);
        rec.leaderPid = this.int(b, C_LEADER);
        rec.queryId = this.str(b, C_QUERYID);
      }
      if (unterminated) this.stats.malformed++;
    }
    rec.truncated = truncated;
    if (truncated) this.stats.truncated++;
    this.stats.entries++;
    this.sink(rec);
  }

  /** Column k as bytes: a view, a new Buffer when it holds `""`, a shared one for repeated names. */
  private text(b: Buffer, k: number): Buffer | null {
    const r = this.reader;
    if (k >= r.count) return null;
    const s = r.fs[k]!, e = r.fe[k]!;
    if (e <= s) return null;
    if (r.fx[k] === 1) return unescape(b, s, e);
    if (k === C_USER || k === C_DB || k === C_APP) return this.cache[k]!.buffer(b, s, e);
    return b.subarray(s, e);
  }

  private str(b: Buffer, k: number): string | null {
    const r = this.reader;
    if (k >= r.count) return null;
    const s = r.fs[k]!, e = r.fe[k]!;
    if (e <= s) return null;
    if (r.fx[k] === 1) return unescape(b, s, e).toString('latin1');
    return CACHED[k] === 1 ? this.cache[k]!.string(b, s, e) : latin1(b, s, e);
  }

  private int(b: Buffer, k: number): number | null {
    const r = this.reader;
    if (k >= r.count) return null;
    const s = r.fs[k]!, e = r.fe[k]!;
    if (e <= s) return null;
    let v = 0;
    for (let i = s; i < e; i++) {
      const c = b[i]!;
      if (c < 0x30 || c > 0x39) return null;
      v = v * 10 + (c - 0x30);
    }
    return v;
  }

  flush(): void {
    if (this.inEntry) this.finish(true);
  }
}
