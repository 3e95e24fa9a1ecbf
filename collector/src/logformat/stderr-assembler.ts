/**
 * stderr log format: `<log_line_prefix>SEVERITY:  message`, continuation lines of a multi-line
 * message start with the tab PostgreSQL inserts after every newline, and DETAIL / HINT /
 * CONTEXT / STATEMENT / QUERY / LOCATION come as prefixed lines of their own, right after the
 * line that started the entry (same pid). All of them make one record.
 *
 * Lines that fit nothing (no prefix, no leading tab, or an auxiliary line with no entry of
 * that pid before it) are not dropped: each becomes a record of its own, counted in
 * stats.malformed. A line without prefix gets severity `UNKNOWN` and the whole line as message;
 * an orphan auxiliary line keeps its prefix fields and its word (e.g. `DETAIL`) as severity.
 */
import { DEFAULT_MAX_ENTRY_BYTES } from './line-splitter.ts';
import { bytesAt } from './messages/text.ts';
import { ownCopy, PieceList, worthCopying } from './piece-list.ts';
import type { CompiledPrefix } from './prefix.ts';
import type { AssemblerStats, EntryAssembler, LogRecord, RecordSink } from './record.ts';
import { emptyRecord, resetRecord } from './record.ts';
import { FIRST_AUX, parseVerboseSqlstate, SEV_CONTEXT, SEV_DETAIL, SEV_HINT, SEV_LOCATION, SEV_QUERY, SEV_STATEMENT, SEVERITY_WORDS } from './severity.ts';

/** Severity of records made from lines that are not (part of) a PostgreSQL entry. */
export const UNKNOWN_SEVERITY = 'UNKNOWN';

const NL = Buffer.from('\n');
const EMPTY = Buffer.alloc(0);

// Sections of an entry (where continuation lines go).
export const S_MESSAGE = 0,
  S_DETAIL = 1,
  S_HINT = 2,
  S_CONTEXT = 3,
  S_STATEMENT = 4,
  S_QUERY = 5,
  S_LOCATION = 6;
const NSECTIONS = 7;
/**
 * The longest message start EntryBuilder.beginCopy copies (longer ones are views of their
 * chunk): most statements' messages, with at most 513 views of 100 bytes or so per stream.
 */
const SCRATCH_BYTES = 512;
/** Copies up to this long are a loop here; longer ones Buffer#copy's native call. */
const COPY_LOOP_MAX = 32;

/** Section of an auxiliary severity code. */
export function auxSection(sev: number): number {
  switch (sev) {
    case SEV_DETAIL:
      return S_DETAIL;
    case SEV_HINT:
      return S_HINT;
    case SEV_CONTEXT:
      return S_CONTEXT;
    case SEV_STATEMENT:
      return S_STATEMENT;
    case SEV_QUERY:
      return S_QUERY;
    case SEV_LOCATION:
      return S_LOCATION;
    default:
      return S_MESSAGE;
  }
}

/**
 * Collects the lines of one entry into a record: text pieces per section, joined once when
 * the entry is emitted, with the entry cap applied to the entry's total line bytes.
 */
const AT_CHARACTER = Buffer.from(' at character ');

/**
 * stderr and syslog append ` at character N` to the message when the error has a position
 * (elog.c: the cursor position, else the internal query's); csvlog and jsonlog carry it as a
 * field. Moving it into the record makes messages the same in every format.
 */
function takePosition(rec: LogRecord): void {
  const m = rec.message;
  let i = m.length;
  while (i > 0 && m[i - 1]! >= 0x30 && m[i - 1]! <= 0x39) i--;
  if (i === m.length || m.length - i > 9) return;
  const at = i - AT_CHARACTER.length;
  if (!bytesAt(m, at, AT_CHARACTER)) return;
  const position = Number(m.toString('latin1', i, m.length));
  if (rec.internalQuery !== null && rec.statement === null) rec.internalPosition = position;
  else rec.cursorPosition = position;
  rec.message = m.subarray(0, at);
}

export class EntryBuilder {
  rec: LogRecord | null = null;
  /** Per section: nothing, one piece, or pieces to join (bounded overhead: piece-list.ts). */
  private readonly secs: (Buffer | PieceList | null)[] = [];
  private used = 0;
  /** Sections (bits) held as a PieceList: cheaper to test than `instanceof` on every take(). */
  private lists = 0;
  private sec = S_MESSAGE;
  private size = 0;
  private readonly max: number;
  private readonly sink: RecordSink;
  readonly stats: AssemblerStats;

  /** beginCopy's memory (with reused records), and its views by length. */
  private readonly scratch: Buffer;
  private readonly scratchViews: (Buffer | undefined)[] = [];

  /** The record handed to the sink each time, when records are reused (null: a new one each entry). */
  private readonly reused: LogRecord | null;

  constructor(max: number, sink: RecordSink, stats: AssemblerStats, reuseRecords = false) {
    this.max = max;
    this.sink = sink;
    this.stats = stats;
    this.reused = reuseRecords ? emptyRecord(0, 0, UNKNOWN_SEVERITY, EMPTY) : null;
    this.scratch = reuseRecords ? Buffer.allocUnsafeSlow(SCRATCH_BYTES) : EMPTY;
    for (let i = 0; i < NSECTIONS; i++) this.secs.push(null);
  }

  /**
   * An empty record for the next entry (after emit(): the sink is done with the last one).
   * Reused, it is one object for the assembler's life: a record per entry was the largest part
   * of what the collector allocated (issue 15, docs/benchmarks.md).
   */
  record(start: number, end: number, severity: string): LogRecord {
    return this.reused === null ? emptyRecord(start, end, severity, EMPTY) : resetRecord(this.reused, start, end, severity, EMPTY);
  }

  /**
   * begin() with the message's start `bytes[from, to)`. When records are reused and it is
   * short, it is copied into memory of the builder's, of which a view of each length is made
   * once: a view of the chunk per entry was 40 % of what the row path allocated
   * (docs/benchmarks.md, "Per-row name checks and timestamps"). Such a message is valid until
   * the next entry begins, which is after this one was emitted and its sink returned: a sink
   * of reused records is done with a record, and every Buffer in it, when it returns.
   */
  beginCopy(rec: LogRecord, lineLen: number, bytes: Buffer, from: number, to: number, truncatedLine: boolean): void {
    const n = to - from;
    if (n > SCRATCH_BYTES || this.reused === null) {
      this.begin(rec, lineLen, bytes.subarray(from, to), truncatedLine);
      return;
    }
    const scratch = this.scratch;
    if (n <= COPY_LOOP_MAX) for (let i = 0; i < n; i++) scratch[i] = bytes[from + i]!;
    else bytes.copy(scratch, 0, from, to);
    const view = (this.scratchViews[n] ??= scratch.subarray(0, n));
    this.begin(rec, lineLen, view, truncatedLine);
  }

  /** Starts an entry whose first line is `lineLen` bytes long and whose message begins with `text`. */
  begin(rec: LogRecord, lineLen: number, text: Buffer, truncatedLine: boolean): void {
    this.rec = rec;
    this.size = 0;
    this.sec = S_MESSAGE;
    if (truncatedLine) rec.truncated = true;
    this.add(S_MESSAGE, lineLen, text, false);
  }

  /** An auxiliary line: opens (or continues, after a newline) section `sec`. */
  section(sec: number, lineLen: number, text: Buffer, next: number, truncatedLine: boolean): void {
    const rec = this.rec!;
    rec.end = next;
    if (truncatedLine) rec.truncated = true;
    this.sec = sec;
    this.add(sec, lineLen, text, (this.used & (1 << sec)) !== 0);
  }

  /** A continuation of the current section: after a newline (tab lines) or directly (split lines). */
  append(lineLen: number, text: Buffer, next: number, newline: boolean, truncatedLine: boolean): void {
    const rec = this.rec!;
    rec.end = next;
    if (truncatedLine) rec.truncated = true;
    this.add(this.sec, lineLen, text, newline);
  }

  private add(sec: number, lineLen: number, text: Buffer, newline: boolean): void {
    const rec = this.rec!;
    const size = this.size + lineLen;
    if (size > this.max) {
      if (this.size >= this.max) {
        rec.truncated = true;
        this.size = size;
        return;
      }
      const over = size - this.max;
      text = over >= text.length ? EMPTY : text.subarray(0, text.length - over);
      rec.truncated = true;
    }
    this.size = size;
    const cur = this.secs[sec]!;
    const bit = 1 << sec;
    if ((this.used & bit) === 0) {
      if (newline) {
        this.secs[sec] = PieceList.of(NL, text);
        this.lists |= bit;
      } else this.secs[sec] = text;
      this.used |= bit;
    } else if ((this.lists & bit) !== 0) {
      const list = cur as PieceList;
      if (newline) list.push(NL);
      list.push(text);
    } else {
      this.secs[sec] = newline ? PieceList.of(cur as Buffer, NL, text) : PieceList.of(cur as Buffer, text);
      this.lists |= bit;
    }
  }

  /** Emits the entry (if any). */
  emit(): void {
    const rec = this.rec;
    if (rec === null) return;
    this.rec = null;
    const used = this.used;
    this.used = 0;
    if (used & 1) rec.message = this.take(S_MESSAGE);
    if (used > 1) {
      if (used & (1 << S_DETAIL)) rec.detail = this.take(S_DETAIL);
      if (used & (1 << S_HINT)) rec.hint = this.take(S_HINT);
      if (used & (1 << S_CONTEXT)) rec.context = this.take(S_CONTEXT);
      if (used & (1 << S_STATEMENT)) rec.statement = this.take(S_STATEMENT);
      if (used & (1 << S_QUERY)) rec.internalQuery = this.take(S_QUERY);
      if (used & (1 << S_LOCATION)) rec.location = this.take(S_LOCATION).toString('latin1');
    }
    if (!rec.truncated) takePosition(rec);
    if (rec.truncated) this.stats.truncated++;
    this.stats.entries++;
    this.sink(rec);
    // A reused record lives on while its stream is quiet: emptied now, it does not keep the
    // entry's Buffers (views of the chunk they came in) alive meanwhile.
    if (rec === this.reused) resetRecord(rec, 0, 0, UNKNOWN_SEVERITY, EMPTY);
  }

  /**
   * The caller is done with `chunk`: what the open entry holds of it is copied when that is a
   * small part of it (piece-list.ts), so that the chunk need not live until the entry ends.
   */
  release(chunk: ArrayBufferLike): void {
    if (this.rec === null || !worthCopying(this.size, chunk)) return;
    for (let sec = 0, used = this.used; used !== 0; sec++, used >>>= 1) {
      if ((used & 1) === 0) continue;
      const v = this.secs[sec]!;
      if ((this.lists & (1 << sec)) !== 0) (v as PieceList).copyViewsOf(chunk);
      else if ((v as Buffer).buffer === chunk) this.secs[sec] = ownCopy(v as Buffer);
    }
  }

  private take(sec: number): Buffer {
    const v = this.secs[sec]!;
    this.secs[sec] = null;
    const bit = 1 << sec;
    if ((this.lists & bit) === 0) return v as Buffer;
    this.lists &= ~bit;
    return (v as PieceList).take();
  }
}

export class StderrAssembler implements EntryAssembler {
  readonly stats: AssemblerStats = { entries: 0, truncated: 0, malformed: 0 };
  private readonly prefix: CompiledPrefix;
  private readonly b: EntryBuilder;

  /** `reuseRecords`: hand the sink one record object again and again (AssemblerOptions.reuseRecords). */
  constructor(prefix: CompiledPrefix, sink: RecordSink, maxEntryBytes: number = DEFAULT_MAX_ENTRY_BYTES, reuseRecords = false) {
    this.prefix = prefix;
    this.b = new EntryBuilder(maxEntryBytes, sink, this.stats, reuseRecords);
  }

  pushLine(bytes: Buffer, from: number, to: number, offset: number, next: number, truncated: boolean): void {
    const b = this.b;
    if (from < to && bytes[from] === 0x09) {
      if (b.rec !== null) {
        b.append(to - from, bytes.subarray(from + 1, to), next, true, truncated);
        return;
      }
      this.malformed(bytes, from, to, offset, next, truncated);
      return;
    }
    const prefix = this.prefix;
    if (prefix.match(bytes, from, to) < 0) {
      this.malformed(bytes, from, to, offset, next, truncated);
      return;
    }
    const sev = prefix.severity;
    let text = prefix.textStart;
    if (sev >= FIRST_AUX) {
      const cur = b.rec;
      if (cur !== null && (!prefix.hasPid || prefix.pid(bytes) === cur.pid)) {
        b.section(auxSection(sev), to - from, bytes.subarray(text, to), next, truncated);
        return;
      }
      b.emit();
      const rec = b.record(offset, next, SEVERITY_WORDS[sev]!);
      prefix.fill(bytes, rec);
      rec.truncated = truncated;
      b.begin(rec, 0, EMPTY, truncated);
      b.section(auxSection(sev), to - from, bytes.subarray(text, to), next, truncated);
      this.stats.malformed++;
      b.emit();
      return;
    }
    b.emit();
    const rec = b.record(offset, next, SEVERITY_WORDS[sev]!);
    prefix.fill(bytes, rec);
    const v = parseVerboseSqlstate(bytes, text, to);
    if (v >= 0) {
      rec.sqlstate ??= bytes.toString('latin1', text, text + 5);
      text = v;
    }
    b.beginCopy(rec, to - from, bytes, text, to, truncated);
  }

  private malformed(bytes: Buffer, from: number, to: number, offset: number, next: number, truncated: boolean): void {
    const b = this.b;
    b.emit();
    this.stats.malformed++;
    const rec = b.record(offset, next, UNKNOWN_SEVERITY);
    b.begin(rec, to - from, bytes.subarray(from, to), truncated);
    b.emit();
  }

  release(chunk: ArrayBufferLike): void {
    this.b.release(chunk);
    this.prefix.release(chunk);
  }

  flush(): void {
    this.b.emit();
    // Idle or ended: the prefix's replay memory must not keep the last chunk alive meanwhile.
    this.prefix.forget();
  }
}
