/**
 * csvlog: one RFC 4180 row per entry (PostgreSQL 9.0 to 12: 23 columns, 13: 24, 14+: 26). Quoted fields may
 * hold newlines, so an entry may span many lines: the quote state is carried from line to
 * line (each `"` toggles it; an escaped `""` toggles twice). A row that lies in one line is
 * read in place; a row over several lines is joined once when it is complete.
 *
 * Fields are views into the line (subarray); a quoted field holding `""` is unescaped into a
 * new Buffer. Empty fields are null (message: an empty Buffer).
 *
 * Damage (a write cut short, garbage, a NUL run) loses only itself and at most the row after
 * it. A row cut inside a quoted field leaves the quote parity wrong for every later row, so
 * parity alone would join the rest of the file into one entry. While an entry is open, a line
 * that starts like a row (`YYYY-MM-DD HH:MM:SS.mmm ZONE,`) therefore starts a new entry when
 * the open one can no longer be a row PostgreSQL wrote (CsvRowShape, csv-row.ts: signals no
 * role can produce, since its text only lands in quoted fields with `"` doubled). A row-like
 * line alone is never enough: a role can log one inside its message. Read with the wrong
 * parity, the row after the damage always shows such a signal at a quoted column whose text
 * the server chose: backend_type (13+), else the command tag of a session's row or the
 * message of a background process's, so the entry is ended at the next row-like line after
 * that one row, and the rows after it are emitted as they arrive. The same happens after a
 * line cut at the entry cap by the line splitter, whose quote state is unknown.
 *
 * Rows that cannot be read still give a record, counted in stats.malformed: an entry ended
 * that way, and a row that is not shaped like a row PostgreSQL writes (too few or too many
 * columns, text after a closing quote, not starting with the log time), give severity
 * `UNKNOWN` and their raw bytes as message, so that no record carries columns of two rows;
 * a quoted field still open at the end of input gives the columns the row has.
 */
import { CsvRowReader, CsvRowShape, isWrittenRow, looksLikeCsvRow, MAX_COLUMNS, QUOTE } from './csv-row.ts';
import { DEFAULT_MAX_ENTRY_BYTES } from './line-splitter.ts';
import { PieceList, worthCopying } from './piece-list.ts';
import { FieldCache, latin1 } from './prefix.ts';
import type { AssemblerStats, EntryAssembler, LogRecord, RecordSink } from './record.ts';
import { emptyRecord } from './record.ts';
import { UNKNOWN_SEVERITY } from './stderr-assembler.ts';

const NL = Buffer.from('\n');
/** How emitRow gives a row (see there). */
const ROW = 0,
  UNTERMINATED = 1,
  RAW = 2;
type EmitAs = typeof ROW | typeof UNTERMINATED | typeof RAW;
const EMPTY = Buffer.alloc(0);

/** Column indexes. */
const C_TIME = 0,
  C_USER = 1,
  C_DB = 2,
  C_PID = 3,
  C_FROM = 4,
  C_SESSION = 5,
  C_LINE = 6,
  C_TAG = 7,
  C_START = 8,
  C_VXID = 9,
  C_TXID = 10,
  C_SEVERITY = 11,
  C_SQLSTATE = 12,
  C_MESSAGE = 13,
  C_DETAIL = 14,
  C_HINT = 15,
  C_IQUERY = 16,
  C_IQUERY_POS = 17,
  C_CONTEXT = 18,
  C_QUERY = 19,
  C_QUERY_POS = 20,
  C_LOCATION = 21,
  C_APP = 22,
  C_BTYPE = 23,
  C_LEADER = 24,
  C_QUERYID = 25;
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

export class CsvAssembler implements EntryAssembler {
  readonly stats: AssemblerStats = { entries: 0, truncated: 0, malformed: 0 };
  private readonly sink: RecordSink;
  private readonly max: number;
  private readonly reader = new CsvRowReader();
  private readonly cache: FieldCache[] = [];
  /** An entry spanning lines: its pieces (with "\n" between), start, size. */
  private readonly pieces = new PieceList();
  private inEntry = false;
  /** The open entry's quote parity and whether it can still be a row PostgreSQL wrote. */
  private readonly shape = new CsvRowShape();
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
    // Resynchronize only on what a role cannot forge (csv-row.ts): the open entry is already
    // no row PostgreSQL wrote, or its quote state was lost at the cap. The row-like line then
    // starts the next entry; by itself it proves nothing.
    if (this.inEntry && (this.lostParity || this.shape.damaged) && looksLikeCsvRow(bytes, from, to)) {
      if (this.lostParity) this.finish(false);
      else this.finishDamaged();
    }
    if (!this.inEntry) {
      if (!truncated) {
        const r = this.reader;
        r.read(bytes, from, to);
        if (!r.open) {
          this.emitRow(bytes, offset, next, false, isWrittenRow(r, bytes, from, to) ? ROW : RAW, from, to);
          return;
        }
      }
      this.inEntry = true;
      this.start = offset;
      this.size = 0;
      this.kept = 0;
      this.truncated = false;
      this.lostParity = false;
      this.shape.begin(bytes, from, to);
    } else {
      this.addPiece(NL, 1);
      this.shape.next(bytes, from, to);
    }
    this.end = next;
    if (truncated) {
      this.truncated = true;
      this.lostParity = true;
    }
    this.addPiece(bytes.subarray(from, to), to - from);
    if (!this.shape.open) this.finish(false);
  }

  private addPiece(piece: Buffer, n: number): void {
    const size = this.size + n;
    this.size = size;
    if (this.kept >= this.max) {
      this.truncated = true;
      return;
    }
    if (this.kept + n > this.max) {
      piece = piece.subarray(0, this.max - this.kept);
      this.truncated = true;
    }
    this.pieces.push(piece);
    this.kept += piece.length;
  }

  private takeEntry(): Buffer {
    const row = this.pieces.take();
    this.inEntry = false;
    return row;
  }

  /** Emits the open multi-line entry. */
  private finish(eof: boolean): void {
    const damaged = this.shape.damaged;
    const row = this.takeEntry();
    const r = this.reader;
    r.read(row, 0, row.length);
    this.emitRow(row, this.start, this.end, this.truncated, this.finishedAs(damaged, eof, r, row), 0, row.length);
  }

  private finishedAs(damaged: boolean, eof: boolean, r: CsvRowReader, row: Buffer): EmitAs {
    // Cut at the cap: what is kept of it is read as far as it goes (counted as truncated).
    if (this.truncated) return ROW;
    if (damaged) return RAW;
    if (eof && this.shape.open) return UNTERMINATED;
    return isWrittenRow(r, row, 0, row.length) ? ROW : RAW;
  }

  /** Ends the open entry, damaged, before a line that starts the next row. */
  private finishDamaged(): void {
    const row = this.takeEntry();
    this.emitRow(row, this.start, this.end, this.truncated, RAW, 0, row.length);
  }

  /**
   * `how`: ROW, the columns of a complete row; UNTERMINATED, the columns of a row still open
   * at the end of input (counted malformed); RAW, the bytes as an `UNKNOWN` record (counted
   * malformed). A row with fewer columns than the message's is always RAW.
   */
  private emitRow(b: Buffer, start: number, end: number, truncated: boolean, how: EmitAs, from: number, to: number): void {
    const n = this.reader.count;
    let rec: LogRecord;
    if (n <= C_MESSAGE || how === RAW) {
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
      if (how === UNTERMINATED) this.stats.malformed++;
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
    const s = r.fs[k]!,
      e = r.fe[k]!;
    if (e <= s) return null;
    if (r.fx[k] === 1) return unescape(b, s, e);
    if (k === C_USER || k === C_DB || k === C_APP) return this.cache[k]!.buffer(b, s, e);
    return b.subarray(s, e);
  }

  private str(b: Buffer, k: number): string | null {
    const r = this.reader;
    if (k >= r.count) return null;
    const s = r.fs[k]!,
      e = r.fe[k]!;
    if (e <= s) return null;
    if (r.fx[k] === 1) return unescape(b, s, e).toString('latin1');
    return CACHED[k] === 1 ? this.cache[k]!.string(b, s, e) : latin1(b, s, e);
  }

  private int(b: Buffer, k: number): number | null {
    const r = this.reader;
    if (k >= r.count) return null;
    const s = r.fs[k]!,
      e = r.fe[k]!;
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

  release(chunk: ArrayBufferLike): void {
    if (this.inEntry && worthCopying(this.kept, chunk)) this.pieces.copyViewsOf(chunk);
  }
}
