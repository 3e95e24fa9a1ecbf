/**
 * PostgreSQL logging through syslog, as a syslog daemon writes it to a file:
 *
 *   Jan  2 03:04:05 host postgres[123]: [5-1] <log_line_prefix>LOG:  message
 *   2024-01-02T03:04:05.123456+00:00 host postgres[123]: [5-2] #011continued line
 *
 * PostgreSQL sends every line of an entry as its own syslog message. With
 * syslog_sequence_numbers (`[N-M]`), lines of the same pid and N with M > 1 continue entry N:
 * a text starting with `#011` (rsyslog's escape of the tab) or a tab continues the message (or
 * the section) after a newline, a prefixed DETAIL/HINT/... line opens that section, and any
 * other text is the next piece of a line syslog_split_messages cut: appended directly.
 * Without sequence numbers, `#011` / tab lines and prefixed auxiliary lines of the same pid
 * continue the entry before them.
 *
 * An entry's lines must be adjacent: a continuation whose pid is not the pid of the entry
 * being assembled (another process's line came in between) becomes a record of its own,
 * counted in stats.malformed, like a line without syslog header or without prefix
 * (severity `UNKNOWN`, the whole line as message).
 *
 * `#011` inside the text (a tab of the message, escaped by rsyslog) is turned back into a
 * tab; other `#NNN` escapes are left as written (they stand for control characters that
 * PostgreSQL messages rarely hold, and a literal `#012` would be changed wrongly).
 */
import { DEFAULT_MAX_ENTRY_BYTES } from './line-splitter.ts';
import type { CompiledPrefix } from './prefix.ts';
import type { AssemblerStats, EntryAssembler, LogRecord, RecordSink } from './record.ts';
import { FIRST_AUX, parseVerboseSqlstate, SEVERITY_WORDS } from './severity.ts';
import { auxSection, EntryBuilder, UNKNOWN_SEVERITY } from './stderr-assembler.ts';

const EMPTY = Buffer.alloc(0);
const SP = 0x20;

const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;

/** What parseSyslogHeader found; fields valid after it returned >= 0. */
export interface SyslogHeader {
  timeFrom: number;
  timeTo: number;
  pid: number;
  /** Sequence numbers `[N-M]`, -1 when absent. */
  seq: number;
  part: number;
}

const MONTHS = 'JanFebMarAprMayJunJulAugSepOctNovDec';

/**
 * Parses the syslog header of `b[from, to)`: an optional `<PRI>`, a BSD (`Mmm dd hh:mm:ss`) or
 * RFC 3339 time, host, `ident[pid]: ` and an optional `[N-M] `. Returns the index of the text
 * after it, or -1.
 */
export function parseSyslogHeader(b: Buffer, from: number, to: number, h: SyslogHeader): number {
  let i = from;
  if (i < to && b[i] === 0x3c) {
    let j = i + 1;
    while (j < to && isDigit(b[j])) j++;
    if (j === i + 1 || j >= to || b[j] !== 0x3e) return -1;
    i = j + 1;
  }
  const ts = i;
  if (i + 16 > to) return -1;
  if (isDigit(b[i])) {
    // RFC 3339: 2024-01-02T03:04:05[.ffffff](Z|+hh:mm)
    if (!(isDigit(b[i + 3]) && b[i + 4] === 0x2d && b[i + 7] === 0x2d && b[i + 10] === 0x54 && b[i + 13] === 0x3a && b[i + 16] === 0x3a)) return -1;
    i += 19;
    if (i < to && b[i] === 0x2e) {
      i++;
      while (i < to && isDigit(b[i])) i++;
    }
    if (i < to && b[i] === 0x5a) i++;
    else if (i + 6 <= to && (b[i] === 0x2b || b[i] === 0x2d) && b[i + 3] === 0x3a) i += 6;
    else return -1;
  } else {
    // BSD: Jan  2 03:04:05
    const mon = b.toString('latin1', i, i + 3);
    if (MONTHS.indexOf(mon) % 3 !== 0 || b[i + 3] !== SP || b[i + 6] !== SP || b[i + 9] !== 0x3a || b[i + 12] !== 0x3a) return -1;
    if (!isDigit(b[i + 5]) || !isDigit(b[i + 7]) || !isDigit(b[i + 14])) return -1;
    i += 15;
  }
  h.timeFrom = ts;
  h.timeTo = i;
  if (i >= to || b[i] !== SP) return -1;
  i++;
  // host (some daemons leave it out), then ident[pid]:
  let t = parseIdent(b, i, to, h);
  if (t < 0) {
    while (i < to && b[i] !== SP) i++;
    if (i >= to) return -1;
    t = parseIdent(b, i + 1, to, h);
    if (t < 0) return -1;
  }
  i = t;
  h.seq = -1;
  h.part = -1;
  // [N-M]
  if (i < to && b[i] === 0x5b) {
    let j = i + 1;
    let n = 0;
    while (j < to && isDigit(b[j])) n = n * 10 + (b[j++]! - 0x30);
    if (j > i + 1 && j < to && b[j] === 0x2d) {
      const ms = ++j;
      let m = 0;
      while (j < to && isDigit(b[j])) m = m * 10 + (b[j++]! - 0x30);
      if (j > ms && j < to && b[j] === 0x5d) {
        h.seq = n;
        h.part = m;
        i = j + 1;
        if (i < to && b[i] === SP) i++;
      }
    }
  }
  return i;
}

/** `ident[pid]: ` at i: sets h.pid, returns the index after it or -1. */
function parseIdent(b: Buffer, i: number, to: number, h: SyslogHeader): number {
  const is = i;
  while (i < to && b[i] !== 0x5b && b[i] !== SP && b[i] !== 0x3a) i++;
  if (i === is || i >= to || b[i] !== 0x5b) return -1;
  i++;
  let pid = 0;
  const ps = i;
  while (i < to && isDigit(b[i])) pid = pid * 10 + (b[i++]! - 0x30);
  if (i === ps || i + 2 > to || b[i] !== 0x5d || b[i + 1] !== 0x3a) return -1;
  i += 2;
  if (i < to && b[i] === SP) i++;
  h.pid = pid;
  return i;
}

/** Length of the tab escape at b[i]: 4 for `#011`, 1 for a tab, 0 otherwise. */
function tabAt(b: Buffer, i: number, to: number): number {
  const c = b[i];
  if (c === 0x09) return 1;
  if (c === 0x23 && i + 4 <= to && b[i + 1] === 0x30 && b[i + 2] === 0x31 && b[i + 3] === 0x31) return 4;
  return 0;
}

/** `b[s, e)` with every `#011` turned into a tab: a view when there is none. */
export function unescapeTabs(b: Buffer, s: number, e: number): Buffer {
  let i = s;
  for (; i + 4 <= e; i++) if (b[i] === 0x23 && b[i + 1] === 0x30 && b[i + 2] === 0x31 && b[i + 3] === 0x31) break;
  if (i + 4 > e) return b.subarray(s, e);
  const out = Buffer.allocUnsafe(e - s);
  let o = 0;
  for (let j = s; j < e; j++) {
    if (b[j] === 0x23 && j + 4 <= e && b[j + 1] === 0x30 && b[j + 2] === 0x31 && b[j + 3] === 0x31) {
      out[o++] = 0x09;
      j += 3;
    } else out[o++] = b[j]!;
  }
  return out.subarray(0, o);
}

export class SyslogAssembler implements EntryAssembler {
  readonly stats: AssemblerStats = { entries: 0, truncated: 0, malformed: 0 };
  private readonly prefix: CompiledPrefix;
  private readonly b: EntryBuilder;
  private readonly h: SyslogHeader = { timeFrom: 0, timeTo: 0, pid: 0, seq: -1, part: -1 };
  /** pid and sequence number of the entry being assembled. */
  private curPid = -1;
  private curSeq = -1;

  /** `reuseRecords`: hand the sink one record object again and again (AssemblerOptions.reuseRecords). */
  constructor(prefix: CompiledPrefix, sink: RecordSink, maxEntryBytes: number = DEFAULT_MAX_ENTRY_BYTES, reuseRecords = false) {
    this.prefix = prefix;
    this.b = new EntryBuilder(maxEntryBytes, sink, this.stats, reuseRecords);
  }

  pushLine(bytes: Buffer, from: number, to: number, offset: number, next: number, truncated: boolean): void {
    const h = this.h;
    const body = parseSyslogHeader(bytes, from, to, h);
    if (body < 0) {
      this.malformed(bytes, from, to, offset, next, truncated);
      return;
    }
    const b = this.b;
    const len = to - from;
    const same = b.rec !== null && h.pid === this.curPid && (h.seq < 0 || h.seq === this.curSeq);
    const continuation = h.seq >= 0 ? h.part > 1 : false;
    const tab = tabAt(bytes, body, to);
    if (continuation || (h.seq < 0 && tab > 0)) {
      if (!same) {
        this.malformed(bytes, from, to, offset, next, truncated);
        return;
      }
      if (tab > 0) {
        b.append(len, unescapeTabs(bytes, body + tab, to), next, true, truncated);
        return;
      }
      const prefix = this.prefix;
      if (prefix.match(bytes, body, to) >= 0 && prefix.severity >= FIRST_AUX) {
        b.section(auxSection(prefix.severity), len, unescapeTabs(bytes, prefix.textStart, to), next, truncated);
        return;
      }
      if (h.seq < 0) {
        this.malformed(bytes, from, to, offset, next, truncated);
        return;
      }
      b.append(len, unescapeTabs(bytes, body, to), next, false, truncated);
      return;
    }
    const prefix = this.prefix;
    if (prefix.match(bytes, body, to) < 0) {
      this.malformed(bytes, from, to, offset, next, truncated);
      return;
    }
    const sev = prefix.severity;
    let text = prefix.textStart;
    if (sev >= FIRST_AUX) {
      if (same && h.seq < 0) {
        b.section(auxSection(sev), len, unescapeTabs(bytes, text, to), next, truncated);
        return;
      }
      b.emit();
      const rec = b.record(offset, next, SEVERITY_WORDS[sev]!);
      this.fill(bytes, rec);
      b.begin(rec, 0, EMPTY, truncated);
      b.section(auxSection(sev), len, unescapeTabs(bytes, text, to), next, truncated);
      this.stats.malformed++;
      b.emit();
      this.curPid = -1;
      return;
    }
    b.emit();
    const rec = b.record(offset, next, SEVERITY_WORDS[sev]!);
    this.fill(bytes, rec);
    const v = parseVerboseSqlstate(bytes, text, to);
    if (v >= 0) {
      rec.sqlstate ??= bytes.toString('latin1', text, text + 5);
      text = v;
    }
    this.curPid = h.pid;
    this.curSeq = h.seq;
    b.begin(rec, len, unescapeTabs(bytes, text, to), truncated);
  }

  private fill(bytes: Buffer, rec: LogRecord): void {
    this.prefix.fill(bytes, rec);
    rec.time ??= bytes.toString('latin1', this.h.timeFrom, this.h.timeTo);
    rec.pid ??= this.h.pid;
  }

  private malformed(bytes: Buffer, from: number, to: number, offset: number, next: number, truncated: boolean): void {
    const b = this.b;
    b.emit();
    this.curPid = -1;
    this.stats.malformed++;
    b.begin(b.record(offset, next, UNKNOWN_SEVERITY), to - from, bytes.subarray(from, to), truncated);
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
