/**
 * The log_line_prefix matcher: runs the operations of a compiled prefix (prefix-compile.ts)
 * over a line's bytes without decoding them. The semantics are described in prefix.ts.
 *
 * Variable fields back-track over later occurrences of their delimiter, so an application
 * name containing the delimiter still parses.
 *
 * The field slots, operation kinds and character tests are declared here, unexported, next to
 * the code that runs them for every line: V8 reads an imported or exported binding through a
 * module cell at every use, which made the matcher 4-8% slower.
 */
import { FieldCache, latin1 } from './prefix-field-cache.ts';
import { LastMatch, SEVERITY_READ } from './prefix-replay.ts';
import type { LogRecord } from './record.ts';
import { parseSeverity, severityEnd, startsSeverity } from './severity.ts';

/** The LogRecord fields a prefix can carry. */
export type PrefixFields = Pick<
  LogRecord,
  | 'time'
  | 'pid'
  | 'user'
  | 'database'
  | 'application'
  | 'remoteHost'
  | 'remotePort'
  | 'sessionId'
  | 'sessionLine'
  | 'commandTag'
  | 'sessionStart'
  | 'vxid'
  | 'txid'
  | 'backendType'
  | 'leaderPid'
  | 'queryId'
  | 'sqlstate'
>;

// Field slots.
const F_TIME = 0,
  F_PID = 1,
  F_USER = 2,
  F_DB = 3,
  F_APP = 4,
  F_HOST = 5,
  F_REMOTE = 6,
  F_SESSION = 7,
  F_LINE = 8,
  F_TAG = 9,
  F_START = 10,
  F_VXID = 11,
  F_TXID = 12,
  F_BTYPE = 13,
  F_LEADER = 14,
  F_QUERYID = 15,
  F_SQLSTATE = 16;
const NFIELDS = 17;

// Operation kinds.
const K_LIT = 0,
  K_VAR = 1,
  K_TIME = 2,
  K_TIME_MS = 3,
  K_EPOCH = 4,
  K_INT = 5,
  K_OPT_INT = 6,
  K_SIGNED = 7,
  K_SESSION = 8,
  K_VXID = 9,
  K_SQLSTATE = 10,
  K_Q = 11;

/**
 * The operation kinds and field slots, for the compiler (prefix-compile.ts). An object, not
 * exported constants: V8 keeps an exported binding in a module cell and reads it through the
 * cell even inside its own module, and the constants above are matched on for every line.
 */
export const OPERATIONS = {
  K_LIT,
  K_VAR,
  K_TIME,
  K_TIME_MS,
  K_EPOCH,
  K_INT,
  K_OPT_INT,
  K_SIGNED,
  K_SESSION,
  K_VXID,
  K_SQLSTATE,
  K_Q,
  F_TIME,
  F_PID,
  F_USER,
  F_DB,
  F_APP,
  F_HOST,
  F_REMOTE,
  F_SESSION,
  F_LINE,
  F_TAG,
  F_START,
  F_VXID,
  F_TXID,
  F_BTYPE,
  F_LEADER,
  F_QUERYID,
  F_SQLSTATE,
} as const;

/** One operation of a compiled prefix (see prefix-compile.ts). */
export interface Op {
  kind: number;
  field: number;
  pad: number;
  lit: Buffer | null;
  /** For K_VAR: the literal that ends it (null: the severity ends it). */
  delim: Buffer | null;
  /** Position of the escape in the prefix string (for messages). */
  pos: number;
}

const SP = 0x20;
const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;
const isHex = (c: number | undefined): boolean => c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66));
const isAlpha = (c: number | undefined): boolean => c !== undefined && ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a));
const isUpperOrDigit = (c: number | undefined): boolean => c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a));

/** `YYYY-MM-DD HH:MM:SS[.mmm] TZ` at i; returns the end or -1. TZ: letters, or +hh / -hhmm. */
function matchTime(b: Buffer, i: number, to: number, ms: boolean): number {
  const n = ms ? 24 : 20; // up to and including the space before the zone
  if (i + n >= to) return -1;
  if (!(
    isDigit(b[i]) &&
    isDigit(b[i + 1]) &&
    isDigit(b[i + 2]) &&
    isDigit(b[i + 3]) &&
    b[i + 4] === 0x2d &&
    isDigit(b[i + 5]) &&
    isDigit(b[i + 6]) &&
    b[i + 7] === 0x2d &&
    isDigit(b[i + 8]) &&
    isDigit(b[i + 9]) &&
    b[i + 10] === SP &&
    isDigit(b[i + 11]) &&
    isDigit(b[i + 12]) &&
    b[i + 13] === 0x3a &&
    isDigit(b[i + 14]) &&
    isDigit(b[i + 15]) &&
    b[i + 16] === 0x3a &&
    isDigit(b[i + 17]) &&
    isDigit(b[i + 18])
  ))
    return -1;
  if (ms && !(b[i + 19] === 0x2e && isDigit(b[i + 20]) && isDigit(b[i + 21]) && isDigit(b[i + 22]))) return -1;
  let j = i + n;
  if (b[j - 1] !== SP) return -1;
  const c = b[j];
  if (isAlpha(c)) {
    j++;
    while (j < to && isAlpha(b[j])) j++;
    return j;
  }
  if (c === 0x2b || c === 0x2d) {
    j++;
    const s = j;
    while (j < to && isDigit(b[j])) j++;
    return j - s >= 2 ? j : -1;
  }
  return -1;
}

/** The end of the run of digits at i (i when there is none). */
function matchDigits(b: Buffer, i: number, to: number): number {
  let j = i;
  while (j < to && isDigit(b[j])) j++;
  return j;
}

/** The decimal number at b[s, e), null for an empty span. */
function parseIntSpan(b: Buffer, s: number, e: number): number | null {
  if (s < 0 || e <= s) return null;
  let n = 0;
  for (let i = s; i < e; i++) n = n * 10 + (b[i]! - 0x30);
  return n;
}

/** Max delimiter occurrences tried per variable field before giving up on a line. */
const MAX_TRIES = 16;

const UNKNOWN = Buffer.from('[unknown]', 'latin1');

/** A fixed-shape field at i: returns its end (i for an empty optional field) or -1. */
function matchFixed(kind: number, b: Buffer, i: number, to: number): number {
  switch (kind) {
    case K_TIME:
      return matchTime(b, i, to, false);
    case K_TIME_MS:
      return matchTime(b, i, to, true);
    case K_EPOCH: {
      const j = matchDigits(b, i, to);
      if (j === i || j + 4 > to || b[j] !== 0x2e || !isDigit(b[j + 1]) || !isDigit(b[j + 2]) || !isDigit(b[j + 3])) return -1;
      return j + 4;
    }
    case K_INT: {
      const j = matchDigits(b, i, to);
      return j === i ? -1 : j;
    }
    case K_OPT_INT:
      return matchDigits(b, i, to);
    case K_SIGNED: {
      const s = i < to && b[i] === 0x2d ? i + 1 : i;
      const j = matchDigits(b, s, to);
      return j === s ? -1 : j;
    }
    case K_SESSION: {
      let j = i;
      while (j < to && isHex(b[j])) j++;
      if (j === i || j >= to || b[j] !== 0x2e) return -1;
      const s = ++j;
      while (j < to && isHex(b[j])) j++;
      return j === s ? -1 : j;
    }
    case K_VXID: {
      const j = matchDigits(b, i, to);
      if (j === i) return i; // empty: no virtual transaction
      if (j >= to || b[j] !== 0x2f) return -1;
      const k = matchDigits(b, j + 1, to);
      return k === j + 1 ? -1 : k;
    }
    case K_SQLSTATE: {
      if (i + 5 > to) return -1;
      for (let j = i; j < i + 5; j++) if (!isUpperOrDigit(b[j])) return -1;
      return i + 5;
    }
    default:
      return -1;
  }
}

export class CompiledPrefix {
  readonly source: string;
  /** True when the prefix logs the process id (%p) in its full form. */
  readonly hasPid: boolean;
  /** Operations of the prefix; a K_Q operation marks where %q cuts it. */
  private readonly ops: Op[];
  /** Fields the prefix can fill (either form). */
  private readonly fields: readonly number[];
  /** The fields fill() writes: `fields`, without the time after withoutTime(). */
  private filled: readonly number[];
  /** Value spans [start, end) per field of the last match; -1 when absent. */
  private readonly spans = new Int32Array(NFIELDS * 2).fill(-1);
  private tries = 0;
  private readonly cache: FieldCache[] = [];
  /** Severity code (see severity.ts) of the last successful match. */
  severity = -1;
  /** Index after `SEVERITY:  ` of the last successful match. */
  textStart = 0;
  /** The last successful match stopped at %q (a process without client connection). */
  cutAtQ = false;
  /** Variable fields with a delimiter: a match tried exactly this many candidates when it never back-tracked. */
  private readonly delimitedVars: number;
  /** A variable field ends at the severity (delim null): its failed candidates read past the prefix, never replayed. */
  private readonly replayable: boolean;
  /** Where the last run tried the severity at %q (a failed try reads up to SEVERITY_READ bytes from there), or -1. */
  private qAt = -1;
  /** The last line's match, replayed on the next line that starts with the same bytes (see replay()). */
  private readonly last = new LastMatch();
  /** The last match was a replay, and fill() may copy `snap` when it belongs to the same recorded match. */
  private replayed = false;
  private recorded = 0;
  private snapOf = -1;
  private readonly snap: PrefixFields = emptyPrefixFields();

  /** `ops`: compileOps(source) (see compilePrefix in prefix.ts). */
  constructor(source: string, ops: Op[]) {
    this.source = source;
    this.ops = ops;
    const set = new Set<number>();
    for (const op of this.ops) if (op.field >= 0) set.add(op.field);
    this.fields = [...set];
    this.filled = this.fields;
    this.hasPid = set.has(F_PID);
    this.delimitedVars = ops.filter((op) => op.kind === K_VAR && op.delim !== null).length;
    this.replayable = !ops.some((op) => op.kind === K_VAR && op.delim === null);
    // Interleaved sessions alternate among a few users, databases and applications.
    for (let f = 0; f < NFIELDS; f++) this.cache.push(new FieldCache(f === F_USER || f === F_DB || f === F_APP ? NAME_SLOTS : 1));
  }

  /**
   * Matches the prefix and the severity after it at `bytes[from, to)`. Returns the index where
   * the text after the prefix (the severity word) begins, or -1. On success `severity` and
   * `textStart` are set and the fields can be read with fill() / pid().
   */
  match(bytes: Buffer, from: number, to: number): number {
    const replayed = this.replay(bytes, from, to);
    this.replayed = replayed >= 0;
    if (replayed >= 0) return replayed;
    // Only the prefix's own fields are ever set or read.
    const sp = this.spans;
    const fields = this.fields;
    for (let k = 0; k < fields.length; k++) {
      const f = fields[k]!;
      sp[f * 2] = -1;
      sp[f * 2 + 1] = -1;
    }
    this.tries = 0;
    this.qAt = -1;
    const at = this.run(this.ops, 0, bytes, from, to);
    this.record(bytes, from, to, at);
    return at;
  }

  /** Moves the recorded match's field spans by `delta` bytes. */
  private moveSpans(delta: number): void {
    if (delta === 0) return;
    const sp = this.spans;
    const fields = this.fields;
    for (let k = 0; k < fields.length; k++) {
      const f = fields[k]!;
      if (sp[f * 2]! >= 0) {
        sp[f * 2] = sp[f * 2]! + delta;
        sp[f * 2 + 1] = sp[f * 2 + 1]! + delta;
      }
    }
  }

  /**
   * The last line's match again, when this line starts with the bytes that match read: a
   * session's lines (an entry and its DETAIL, a bind and its execute) mostly share their
   * prefix. Exact: a match that never back-tracked read nothing but those bytes before the
   * severity (record() keeps how far it read), so run() would take the same steps and stop at
   * the same index; only the severity there is read again. Returns that index, or -1 (then
   * run() decides, as without this).
   */
  private replay(b: Buffer, from: number, to: number): number {
    const last = this.last;
    const was = last.from;
    const at = from + last.at;
    if (!last.take(b, from, to)) return -1;
    // The spans are still the recorded match's (nothing else sets them): moved to this line.
    this.moveSpans(from - was);
    const sev = parseSeverity(b, at, to);
    if (sev < 0) {
      // run() decides; it sets the spans afresh.
      last.clear();
      return -1;
    }
    this.severity = sev;
    this.textStart = severityEnd;
    this.cutAtQ = false;
    return at;
  }

  /**
   * Lets go of the last line (the replay memory holds a view of its chunk): the assemblers call
   * this when their stream goes idle or ends, so a quiet stream keeps no chunk alive for it.
   */
  forget(): void {
    this.last.clear();
  }

  /** The caller is done with `chunk`: the replay memory copies what it keeps of it (a line's prefix). */
  release(chunk: ArrayBufferLike): void {
    this.moveSpans(this.last.release(chunk));
  }

  /** After run(): keeps this line's match for replay() when it can be replayed exactly. */
  private record(b: Buffer, from: number, to: number, at: number): void {
    this.recorded++;
    const last = this.last;
    last.clear();
    if (at < 0 || this.cutAtQ || !this.replayable || this.tries !== this.delimitedVars) return;
    // Bytes the match read: up to the severity (also the byte there, unless a literal ended
    // the prefix: a field reads the byte after its end), and a failed severity try at %q.
    const ops = this.ops;
    let reach = ops.length > 0 && ops[ops.length - 1]!.kind === K_LIT ? at : at + 1;
    // A try at %q that found no severity word starting there read one byte (the usual case: a user name).
    if (this.qAt >= 0 && this.qAt < to && startsSeverity(b[this.qAt]!)) reach = Math.max(reach, this.qAt + SEVERITY_READ);
    if (reach > to) return;
    last.save(b, from, reach, at);
  }

  /** match() and fill() in one call. */
  parse(bytes: Buffer, from: number, to: number, target: PrefixFields): number {
    const e = this.match(bytes, from, to);
    if (e >= 0) this.fill(bytes, target);
    return e;
  }

  /**
   * From now on fill() leaves the time alone (null in an empty record): for a reader of the
   * records that never looks at it (the summary), which then does not pay for its string.
   */
  withoutTime(): void {
    this.filled = this.fields.filter((f) => f !== F_TIME);
  }

  /** The pid of the last match (null when the prefix has no %p). */
  pid(bytes: Buffer): number | null {
    return parseIntSpan(bytes, this.spans[F_PID * 2]!, this.spans[F_PID * 2 + 1]!);
  }

  /** Writes the fields of the last match into target (fields the prefix has; others untouched). */
  fill(bytes: Buffer, target: PrefixFields): void {
    if (this.replayed && this.snapOf === this.recorded) {
      copyFields(this.filled, this.snap, target);
      return;
    }
    this.fillFromSpans(bytes, target);
    // The values of a replayed match, for the lines that replay it again (kept only once a
    // line replays: copying them for every line would cost the lines that never do).
    if (this.replayed) {
      copyFields(this.filled, target, this.snap);
      this.snapOf = this.recorded;
    }
  }

  private fillFromSpans(bytes: Buffer, target: PrefixFields): void {
    const sp = this.spans;
    const fields = this.filled;
    const cache = this.cache;
    for (let k = 0; k < fields.length; k++) {
      const f = fields[k]!;
      const s = sp[f * 2]!;
      const e = sp[f * 2 + 1]!;
      const empty = s < 0 || e <= s;
      switch (f) {
        // Many lines share a timestamp (a busy server logs dozens per millisecond).
        case F_TIME:
          target.time = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        case F_PID:
          target.pid = parseIntSpan(bytes, s, e);
          break;
        case F_USER:
          target.user = empty ? null : textField(cache[f]!, bytes, s, e);
          break;
        case F_DB:
          target.database = empty ? null : textField(cache[f]!, bytes, s, e);
          break;
        case F_APP:
          target.application = empty ? null : textField(cache[f]!, bytes, s, e);
          break;
        case F_HOST:
          target.remoteHost = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        case F_REMOTE:
          if (empty) {
            if (!this.fields.includes(F_HOST)) target.remoteHost = null;
            target.remotePort = null;
          } else {
            const open = bytes[e - 1] === 0x29 ? bytes.lastIndexOf(0x28, e - 1) : -1;
            if (open >= s) {
              target.remoteHost = cache[f]!.string(bytes, s, open);
              target.remotePort = latin1(bytes, open + 1, e - 1);
            } else {
              target.remoteHost = cache[f]!.string(bytes, s, e);
              target.remotePort = null;
            }
          }
          break;
        case F_SESSION:
          target.sessionId = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        case F_LINE:
          target.sessionLine = parseIntSpan(bytes, s, e);
          break;
        case F_TAG:
          target.commandTag = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        case F_START:
          target.sessionStart = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        case F_VXID:
          target.vxid = empty ? null : latin1(bytes, s, e);
          break;
        case F_TXID:
          target.txid = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        case F_BTYPE:
          target.backendType = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        case F_LEADER:
          target.leaderPid = parseIntSpan(bytes, s, e);
          break;
        case F_QUERYID:
          target.queryId = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        case F_SQLSTATE:
          target.sqlstate = empty ? null : cache[f]!.string(bytes, s, e);
          break;
        default:
          break;
      }
    }
  }

  private setSpan(field: number, s: number, e: number): void {
    this.spans[field * 2] = s;
    this.spans[field * 2 + 1] = e;
  }

  /** Runs ops[k..] at i; returns the severity's index or -1. */
  private run(ops: Op[], k: number, b: Buffer, i: number, to: number): number {
    for (; k < ops.length; k++) {
      const op = ops[k]!;
      const kind = op.kind;
      if (kind === K_LIT) {
        const lit = op.lit!;
        const n = lit.length;
        if (i + n > to) return -1;
        for (let j = 0; j < n; j++) if (b[i + j] !== lit[j]) return -1;
        i += n;
        continue;
      }
      if (kind === K_Q) {
        // A process without a client connection stops the prefix here.
        this.qAt = i;
        const sev = parseSeverity(b, i, to);
        if (sev >= 0) {
          this.severity = sev;
          this.textStart = severityEnd;
          this.cutAtQ = true;
          return i;
        }
        continue;
      }
      const pad = op.pad;
      if (kind === K_VAR) return this.runVar(ops, k, b, i, to);
      if (pad === 0) {
        const e = matchFixed(kind, b, i, to);
        if (e < 0) return -1;
        this.setSpan(op.field, i, e);
        i = e;
      } else if (pad > 0) {
        let s = i;
        while (s < to && b[s] === SP) s++;
        const e = matchFixed(kind, b, s, to);
        if (e > s) {
          this.setSpan(op.field, s, e);
          i = e;
        } else if (e === s && s - i >= pad) {
          this.setSpan(op.field, -1, -1);
          i += pad;
        } else return -1;
      } else {
        const e = matchFixed(kind, b, i, to);
        if (e < 0) return -1;
        this.setSpan(op.field, i, e);
        const w = i - pad; // i + |pad|
        if (e < w) {
          if (w > to) return -1;
          for (let j = e; j < w; j++) if (b[j] !== SP) return -1;
          i = w;
        } else i = e;
      }
    }
    const sev = parseSeverity(b, i, to);
    if (sev < 0) return -1;
    this.severity = sev;
    this.textStart = severityEnd;
    this.cutAtQ = false;
    return i;
  }

  private runVar(ops: Op[], k: number, b: Buffer, i: number, to: number): number {
    const op = ops[k]!;
    const pad = op.pad < 0 ? -op.pad : op.pad;
    const delim = op.delim;
    let p = i + pad;
    if (p > to) return -1;
    if (delim === null) {
      // Last operation: the severity ends the field.
      for (; p < to; p++) {
        const c = b[p]!;
        if (c < 0x43 || c > 0x57) continue; // severity words start with C..W
        const sev = parseSeverity(b, p, to);
        if (sev < 0) continue;
        this.setVar(op, b, i, p);
        this.severity = sev;
        this.textStart = severityEnd;
        this.cutAtQ = false;
        return p;
      }
      return -1;
    }
    const d0 = delim[0]!;
    const dn = delim.length;
    for (; p + dn <= to; p++) {
      if (b[p] !== d0) continue;
      let ok = true;
      for (let j = 1; j < dn; j++)
        if (b[p + j] !== delim[j]) {
          ok = false;
          break;
        }
      if (!ok) continue;
      if (++this.tries > MAX_TRIES) return -1;
      this.setVar(op, b, i, p);
      const r = this.run(ops, k + 1, b, p, to);
      if (r >= 0) return r;
    }
    return -1;
  }

  private setVar(op: Op, b: Buffer, s: number, e: number): void {
    if (op.pad > 0) while (s < e && b[s] === SP) s++;
    else if (op.pad < 0) while (e > s && b[e - 1] === SP) e--;
    this.setSpan(op.field, s, e);
  }
}

/** Values remembered per name field (FieldCache slots). */
const NAME_SLOTS = 8;

/** A user, database or application name (`[unknown]` as null); repeated names share one Buffer. */
function textField(cache: FieldCache, b: Buffer, s: number, e: number): Buffer | null {
  if (e - s === 9 && b[s] === 0x5b && b.compare(UNKNOWN, 0, 9, s, e) === 0) return null;
  return cache.buffer(b, s, e);
}

/** A PrefixFields with every field null (the matcher's own start, and tests' and fuzz targets' blank). */
export function emptyPrefixFields(): PrefixFields {
  return {
    time: null,
    pid: null,
    user: null,
    database: null,
    application: null,
    remoteHost: null,
    remotePort: null,
    sessionId: null,
    sessionLine: null,
    commandTag: null,
    sessionStart: null,
    vxid: null,
    txid: null,
    backendType: null,
    leaderPid: null,
    queryId: null,
    sqlstate: null,
  };
}

/** Copies what fill() writes for `fields` from one PrefixFields to another. */
function copyFields(fields: readonly number[], from: PrefixFields, to: PrefixFields): void {
  for (let k = 0; k < fields.length; k++) {
    switch (fields[k]!) {
      case F_TIME:
        to.time = from.time;
        break;
      case F_PID:
        to.pid = from.pid;
        break;
      case F_USER:
        to.user = from.user;
        break;
      case F_DB:
        to.database = from.database;
        break;
      case F_APP:
        to.application = from.application;
        break;
      case F_HOST:
        to.remoteHost = from.remoteHost;
        break;
      case F_REMOTE:
        to.remoteHost = from.remoteHost;
        to.remotePort = from.remotePort;
        break;
      case F_SESSION:
        to.sessionId = from.sessionId;
        break;
      case F_LINE:
        to.sessionLine = from.sessionLine;
        break;
      case F_TAG:
        to.commandTag = from.commandTag;
        break;
      case F_START:
        to.sessionStart = from.sessionStart;
        break;
      case F_VXID:
        to.vxid = from.vxid;
        break;
      case F_TXID:
        to.txid = from.txid;
        break;
      case F_BTYPE:
        to.backendType = from.backendType;
        break;
      case F_LEADER:
        to.leaderPid = from.leaderPid;
        break;
      case F_QUERYID:
        to.queryId = from.queryId;
        break;
      case F_SQLSTATE:
        to.sqlstate = from.sqlstate;
        break;
      default:
        break;
    }
  }
}
