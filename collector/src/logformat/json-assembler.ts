/**
 * jsonlog (PostgreSQL 15+): one JSON object per line.
 *
 * PostgreSQL writes non-ASCII bytes raw, in the database's encoding (not necessarily UTF-8),
 * and escapes only `"`, `\` and control characters. So the line is read as latin1 (one
 * character per byte, exact), parsed with JSON.parse, and each text value is turned back into
 * the original bytes with Buffer.from(value, 'latin1'). query_id (int64) is read from the
 * line's text, as a JSON number it would lose precision.
 *
 * A line that is not a JSON object still gives a record (severity `UNKNOWN`, the raw line as
 * message), counted in stats.malformed; so does an object without `error_severity`, which
 * PostgreSQL writes in every entry. Each line stands alone, so damage costs only its lines. A line cut by the line splitter (entry cap) gives a
 * record flagged truncated with what can be read from the start of the line (timestamp, pid,
 * severity, ...) and the raw bytes kept as message.
 */
import type { AssemblerStats, EntryAssembler, LogRecord, RecordSink } from './record.ts';
import { emptyRecord } from './record.ts';
import { UNKNOWN_SEVERITY } from './stderr-assembler.ts';

type Json = Record<string, unknown>;

const EMPTY = Buffer.alloc(0);

function bytesOf(v: unknown): Buffer | null {
  if (typeof v === 'string') return v.length === 0 ? null : Buffer.from(v, 'latin1');
  if (typeof v === 'number') return Buffer.from(String(v), 'latin1');
  return null;
}

function strOf(v: unknown): string | null {
  if (typeof v === 'string') return v.length === 0 ? null : v;
  if (typeof v === 'number') return String(v);
  return null;
}

function intOf(v: unknown): number | null {
  if (typeof v === 'number') return Number.isSafeInteger(v) ? v : null;
  if (typeof v === 'string' && /^\d+$/.test(v)) return Number(v);
  return null;
}

const QUERY_ID_KEY = '"query_id":';

/** query_id as written, read from the line's text (int64 does not survive JSON.parse). */
function queryIdOf(text: string): string | null {
  const k = text.lastIndexOf(QUERY_ID_KEY);
  if (k < 0) return null;
  let i = k + QUERY_ID_KEY.length;
  while (text.charCodeAt(i) === 0x20) i++;
  const s = i;
  if (text.charCodeAt(i) === 0x2d) i++;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) break;
    i++;
  }
  return i > s ? text.slice(s, i) : null;
}

/** Scalar `"key":"value"` or `"key":number` from a cut line (values before the cut only). */
function scalarOf(text: string, key: string): string | null {
  const k = text.indexOf(`"${key}":`);
  if (k < 0) return null;
  let i = k + key.length + 3;
  if (text.charCodeAt(i) === 0x22) {
    const e = text.indexOf('"', i + 1);
    if (e < 0) return null;
    const v = text.slice(i + 1, e);
    return v.includes('\\') ? null : v;
  }
  const s = i;
  while (i < text.length && /[-0-9]/.test(text[i]!)) i++;
  return i > s ? text.slice(s, i) : null;
}

/**
 * The bytes of a name field, reused while the name stays the same from line to line (a copy
 * per line otherwise): the bytes of the last value per field.
 */
export class NameBytes {
  private last: string | null = null;
  private bytes: Buffer | null = null;

  of(v: unknown): Buffer | null {
    if (typeof v !== 'string') return bytesOf(v);
    if (v !== this.last) {
      this.last = v;
      this.bytes = bytesOf(v);
    }
    return this.bytes;
  }
}

export function recordFromJson(
  o: Json,
  text: string,
  start: number,
  end: number,
  names: readonly [NameBytes, NameBytes, NameBytes] = [new NameBytes(), new NameBytes(), new NameBytes()],
): LogRecord {
  const rec = emptyRecord(start, end, strOf(o.error_severity) ?? UNKNOWN_SEVERITY, bytesOf(o.message) ?? EMPTY);
  rec.time = strOf(o.timestamp);
  rec.user = names[0].of(o.user);
  rec.database = names[1].of(o.dbname);
  rec.pid = intOf(o.pid);
  rec.remoteHost = strOf(o.remote_host);
  rec.remotePort = strOf(o.remote_port);
  rec.sessionId = strOf(o.session_id);
  rec.sessionLine = intOf(o.line_num);
  rec.commandTag = strOf(o.ps);
  rec.sessionStart = strOf(o.session_start);
  rec.vxid = strOf(o.vxid);
  rec.txid = strOf(o.txid);
  rec.sqlstate = strOf(o.state_code);
  rec.detail = bytesOf(o.detail);
  rec.hint = bytesOf(o.hint);
  rec.internalQuery = bytesOf(o.internal_query);
  rec.context = bytesOf(o.context);
  rec.statement = bytesOf(o.statement);
  rec.cursorPosition = intOf(o.cursor_position);
  rec.internalPosition = intOf(o.internal_position);
  const func = strOf(o.func_name);
  const file = strOf(o.file_name);
  const line = strOf(o.file_line_num);
  if (file !== null) rec.location = func !== null ? `${func}, ${file}:${line ?? ''}` : `${file}:${line ?? ''}`;
  rec.application = names[2].of(o.application_name);
  rec.backendType = strOf(o.backend_type);
  rec.leaderPid = intOf(o.leader_pid);
  rec.queryId = o.query_id === undefined ? null : queryIdOf(text);
  return rec;
}

export class JsonAssembler implements EntryAssembler {
  readonly stats: AssemblerStats = { entries: 0, truncated: 0, malformed: 0 };
  private readonly sink: RecordSink;
  private readonly names: [NameBytes, NameBytes, NameBytes] = [new NameBytes(), new NameBytes(), new NameBytes()];

  constructor(sink: RecordSink) {
    this.sink = sink;
  }

  pushLine(bytes: Buffer, from: number, to: number, offset: number, next: number, truncated: boolean): void {
    const text = bytes.toString('latin1', from, to);
    let rec: LogRecord | null = null;
    if (!truncated) {
      let o: unknown;
      try {
        o = JSON.parse(text);
      } catch {
        o = undefined;
      }
      if (typeof o === 'object' && o !== null && !Array.isArray(o)) {
        rec = recordFromJson(o as Json, text, offset, next, this.names);
        // PostgreSQL names the severity in every entry: an object without it is no log entry
        // (garbage that happens to be JSON); kept, and counted.
        if (typeof (o as Json).error_severity !== 'string') this.stats.malformed++;
      } else this.stats.malformed++;
    }
    if (rec === null) {
      rec = emptyRecord(offset, next, UNKNOWN_SEVERITY, bytes.subarray(from, to));
      if (truncated) {
        rec.truncated = true;
        this.stats.truncated++;
        rec.severity = scalarOf(text, 'error_severity') ?? UNKNOWN_SEVERITY;
        rec.time = scalarOf(text, 'timestamp');
        const pid = scalarOf(text, 'pid');
        rec.pid = pid !== null && /^\d+$/.test(pid) ? Number(pid) : null;
        rec.sessionId = scalarOf(text, 'session_id');
        rec.sqlstate = scalarOf(text, 'state_code');
      }
    }
    this.stats.entries++;
    this.sink(rec);
  }

  flush(): void {
    // Every line is a whole entry: nothing is pending.
  }

  release(): void {
    // Nothing of a chunk is kept past its lines (a line cut across chunks is the splitter's).
  }
}
