/**
 * log_line_prefix compiled into a byte matcher (PostgreSQL 13-17 escapes).
 *
 * The compiled form is a list of operations (literal bytes, fixed-shape fields such as %m or
 * %p, and variable fields such as %u that end where the following literal starts), run over
 * the line's bytes without decoding. Variable fields back-track over later occurrences of
 * their delimiter, so an application name containing the delimiter still parses.
 *
 * Semantics follow elog.c log_line_prefix():
 * - `%q`: processes without a client connection stop the prefix there, so both the full
 *   prefix and the prefix cut at `%q` are accepted (the cut form is tried first when a
 *   severity follows the cut point).
 * - Session-only escapes (%u %d %a %i %r %h) print nothing for background processes, %v and
 *   %P may be empty: variable and optional fields match empty text (their field is null).
 * - Padding `%N?` / `%-N?`: values are right- (N > 0) or left-justified (N < 0) with spaces to
 *   at least |N| bytes and never cut; the spaces are not part of the value.
 * - `[unknown]` (what a session prints for a not-yet-known user, database or application)
 *   becomes null, as csvlog and jsonlog leave those fields empty.
 *
 * The matcher also requires `SEVERITY:` right after the prefix (see severity.ts): a prefix
 * alone says too little to tell a prefixed line from message text.
 */
import { PglogError } from '../errors.ts';
import type { LogRecord } from './record.ts';
import { parseSeverity, severityEnd } from './severity.ts';

/** The LogRecord fields a prefix can carry. */
export type PrefixFields = Pick<LogRecord, 'time' | 'pid' | 'user' | 'database' | 'application' | 'remoteHost' |
  'remotePort' | 'sessionId' | 'sessionLine' | 'commandTag' | 'sessionStart' | 'vxid' | 'txid' | 'backendType' |
  'leaderPid' | 'queryId' | 'sqlstate'>;

// Field slots.
const F_TIME = 0, F_PID = 1, F_USER = 2, F_DB = 3, F_APP = 4, F_HOST = 5, F_REMOTE = 6,
  F_SESSION = 7, F_LINE = 8, F_TAG = 9, F_START = 10, F_VXID = 11, F_TXID = 12, F_BTYPE = 13,
  F_LEADER = 14, F_QUERYID = 15, F_SQLSTATE = 16;
const NFIELDS = 17;

// Operation kinds.
const K_LIT = 0, K_VAR = 1, K_TIME = 2, K_TIME_MS = 3, K_EPOCH = 4, K_INT = 5, K_OPT_INT = 6,
  K_SIGNED = 7, K_SESSION = 8, K_VXID = 9, K_SQLSTATE = 10, K_Q = 11;

interface Op {
  kind: number;
  field: number;
  pad: number;
  lit: Buffer | null;
  /** For K_VAR: the literal that ends it (null: the severity ends it). */
  delim: Buffer | null;
  /** Position of the escape in the prefix string (for messages). */
  pos: number;
}

const ESCAPES: Record<string, [kind: number, field: number]> = {
  a: [K_VAR, F_APP], u: [K_VAR, F_USER], d: [K_VAR, F_DB], r: [K_VAR, F_REMOTE], h: [K_VAR, F_HOST],
  b: [K_VAR, F_BTYPE], i: [K_VAR, F_TAG], p: [K_INT, F_PID], P: [K_OPT_INT, F_LEADER],
  t: [K_TIME, F_TIME], m: [K_TIME_MS, F_TIME], n: [K_EPOCH, F_TIME], s: [K_TIME, F_START],
  c: [K_SESSION, F_SESSION], l: [K_INT, F_LINE], v: [K_VXID, F_VXID], x: [K_INT, F_TXID],
  e: [K_SQLSTATE, F_SQLSTATE], Q: [K_SIGNED, F_QUERYID],
};

const SP = 0x20;
const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;
const isHex = (c: number | undefined): boolean => c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66));
const isAlpha = (c: number | undefined): boolean => c !== undefined && ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a));
const isUpperOrDigit = (c: number | undefined): boolean => c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a));

/** Max delimiter occurrences tried per variable field before giving up on a line. */
const MAX_TRIES = 16;

const UNKNOWN = Buffer.from('[unknown]', 'latin1');

/** Buffer's latin1Slice (what toString('latin1', s, e) ends in, without its argument checks). */
interface Latin1Slicer { latin1Slice(start: number, end: number): string }
export function latin1(b: Buffer, s: number, e: number): string {
  return (b as unknown as Latin1Slicer).latin1Slice(s, e);
}

/**
 * The value made from a field's bytes last time, reused while the bytes stay the same (user,
 * database, session id, backend type ... repeat from line to line): saves an allocation.
 */
export class FieldCache {
  private readonly bytes = Buffer.alloc(64);
  private len = -1;
  str: string | null = null;
  buf: Buffer | null = null;

  /** True when b[s, e) is what the cache holds. */
  hit(b: Buffer, s: number, e: number): boolean {
    const n = e - s;
    if (n !== this.len) return false;
    const c = this.bytes;
    for (let i = n - 1; i >= 0; i--) if (c[i] !== b[s + i]) return false;
    return true;
  }

  string(b: Buffer, s: number, e: number): string {
    if (this.hit(b, s, e)) return this.str!;
    const v = latin1(b, s, e);
    this.store(b, s, e);
    this.str = v;
    return v;
  }

  buffer(b: Buffer, s: number, e: number): Buffer {
    if (this.hit(b, s, e)) return this.buf!;
    // A copy: the cached value must not keep the whole chunk alive.
    const v = Buffer.from(b.subarray(s, e));
    this.store(b, s, e);
    this.buf = v;
    return v;
  }

  private store(b: Buffer, s: number, e: number): void {
    const n = e - s;
    const c = this.bytes;
    if (n > c.length) { this.len = -1; return; }
    // A loop: for a few bytes, much cheaper than the native copy.
    for (let i = 0; i < n; i++) c[i] = b[s + i]!;
    this.len = n;
  }
}

/** `YYYY-MM-DD HH:MM:SS[.mmm] TZ` at i; returns the end or -1. TZ: letters, or +hh / -hhmm. */
function matchTime(b: Buffer, i: number, to: number, ms: boolean): number {
  const n = ms ? 24 : 20; // up to and including the space before the zone
  if (i + n >= to) return -1;
  if (!(isDigit(b[i]) && isDigit(b[i + 1]) && isDigit(b[i + 2]) && isDigit(b[i + 3]) && b[i + 4] === 0x2d &&
    isDigit(b[i + 5]) && isDigit(b[i + 6]) && b[i + 7] === 0x2d && isDigit(b[i + 8]) && isDigit(b[i + 9]) &&
    b[i + 10] === SP && isDigit(b[i + 11]) && isDigit(b[i + 12]) && b[i + 13] === 0x3a &&
    isDigit(b[i + 14]) && isDigit(b[i + 15]) && b[i + 16] === 0x3a && isDigit(b[i + 17]) && isDigit(b[i + 18]))) return -1;
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

function matchDigits(b: Buffer, i: number, to: number): number {
  let j = i;
  while (j < to && isDigit(b[j])) j++;
  return j;
}

/** A fixed-shape field at i: returns its end (i for an empty optional field) or -1. */
function matchFixed(kind: number, b: Buffer, i: number, to: number): number {
  switch (kind) {
    case K_TIME: return matchTime(b, i, to, false);
    case K_TIME_MS: return matchTime(b, i, to, true);
    case K_EPOCH: {
      const j = matchDigits(b, i, to);
      if (j === i || j + 4 > to || b[j] !== 0x2e || !isDigit(b[j + 1]) || !isDigit(b[j + 2]) || !isDigit(b[j + 3])) return -1;
      return j + 4;
    }
    case K_INT: {
      const j = matchDigits(b, i, to);
      return j === i ? -1 : j;
    }
    case K_OPT_INT: return matchDigits(b, i, to);
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
    default: return -1;
  }
}

function parseIntSpan(b: Buffer, s: number, e: number): number | null {
  if (s < 0 || e <= s) return null;
  let n = 0;
  for (let i = s; i < e; i++) n = n * 10 + (b[i]! - 0x30);
  return n;
}

function compileOps(prefix: string): Op[] {
  const ops: Op[] = [];
  let lit: number[] = [];
  let seenQ = false;
  const flush = (): void => {
    if (lit.length > 0) ops.push({ kind: K_LIT, field: -1, pad: 0, lit: Buffer.from(lit), delim: null, pos: -1 });
    lit = [];
  };
  const bytes = Buffer.from(prefix, 'utf8');
  // Positions are reported in characters of the prefix string; map byte index -> char index.
  const charAt: number[] = [];
  {
    let ci = 0;
    for (const ch of prefix) {
      const n = Buffer.byteLength(ch, 'utf8');
      for (let k = 0; k < n; k++) charAt.push(ci);
      ci += ch.length;
    }
  }
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c !== 0x25) { lit.push(c); continue; }
    const escPos = charAt[i]!;
    i++;
    if (i >= bytes.length) break; // trailing '%': PostgreSQL prints nothing
    if (bytes[i] === 0x25) { lit.push(0x25); continue; }
    let pad = 0;
    if (bytes[i] === 0x2d || isDigit(bytes[i])) {
      let sign = 1;
      if (bytes[i] === 0x2d) { sign = -1; i++; }
      let n = 0;
      while (i < bytes.length && isDigit(bytes[i])) n = n * 10 + (bytes[i++]! - 0x30);
      if (i >= bytes.length) throw new PglogError('PREFIX_UNSUPPORTED', `log_line_prefix ${JSON.stringify(prefix)}: padding without an escape letter at position ${escPos}`);
      pad = sign * n;
    }
    const letter = String.fromCharCode(bytes[i]!);
    if (letter === 'q') {
      // Only the first %q matters: a session ignores them all, other processes stop at it.
      if (!seenQ) {
        seenQ = true;
        flush();
        ops.push({ kind: K_Q, field: -1, pad: 0, lit: null, delim: null, pos: escPos });
      }
      continue;
    }
    const esc = Object.hasOwn(ESCAPES, letter) ? ESCAPES[letter] : undefined;
    if (esc === undefined) {
      const shown = bytes[i]! < 0x80 ? letter : String.fromCodePoint(prefix.codePointAt(charAt[i]!) ?? 0xfffd);
      throw new PglogError('PREFIX_UNSUPPORTED', `log_line_prefix ${JSON.stringify(prefix)}: unknown escape %${shown} at position ${escPos}`);
    }
    flush();
    ops.push({ kind: esc[0], field: esc[1], pad, lit: null, delim: null, pos: escPos });
  }
  flush();
  for (let k = 0; k < ops.length; k++) {
    const op = ops[k]!;
    if (op.kind !== K_VAR) continue;
    const next = ops[k + 1];
    if (next === undefined) continue; // ends at the severity
    if (next.kind === K_Q) {
      throw new PglogError('PREFIX_UNSUPPORTED', `log_line_prefix ${JSON.stringify(prefix)}: the variable-width escape at position ${op.pos} directly before %q at position ${next.pos} cannot be delimited`);
    }
    if (next.kind !== K_LIT) {
      throw new PglogError('PREFIX_UNSUPPORTED', `log_line_prefix ${JSON.stringify(prefix)}: the variable-width escape at position ${op.pos} is followed directly by the escape at position ${next.pos}; they cannot be told apart`);
    }
    op.delim = next.lit;
  }
  return ops;
}

export class CompiledPrefix {
  readonly source: string;
  /** True when the prefix logs the process id (%p) in its full form. */
  readonly hasPid: boolean;
  /** Operations of the prefix; a K_Q operation marks where %q cuts it. */
  private readonly ops: Op[];
  /** Fields the prefix can fill (either form). */
  private readonly fields: readonly number[];
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

  constructor(source: string) {
    this.source = source;
    this.ops = compileOps(source);
    const set = new Set<number>();
    for (const op of this.ops) if (op.field >= 0) set.add(op.field);
    this.fields = [...set];
    this.hasPid = set.has(F_PID);
    for (let f = 0; f < NFIELDS; f++) this.cache.push(new FieldCache());
  }

  /**
   * Matches the prefix and the severity after it at `bytes[from, to)`. Returns the index where
   * the text after the prefix (the severity word) begins, or -1. On success `severity` and
   * `textStart` are set and the fields can be read with fill() / pid().
   */
  match(bytes: Buffer, from: number, to: number): number {
    // Only the prefix's own fields are ever set or read.
    const sp = this.spans;
    const fields = this.fields;
    for (let k = 0; k < fields.length; k++) {
      const f = fields[k]!;
      sp[f * 2] = -1;
      sp[f * 2 + 1] = -1;
    }
    this.tries = 0;
    return this.run(this.ops, 0, bytes, from, to);
  }

  /** match() and fill() in one call. */
  parse(bytes: Buffer, from: number, to: number, target: PrefixFields): number {
    const e = this.match(bytes, from, to);
    if (e >= 0) this.fill(bytes, target);
    return e;
  }

  /** The pid of the last match (null when the prefix has no %p). */
  pid(bytes: Buffer): number | null {
    return parseIntSpan(bytes, this.spans[F_PID * 2]!, this.spans[F_PID * 2 + 1]!);
  }

  /** Writes the fields of the last match into target (fields the prefix has; others untouched). */
  fill(bytes: Buffer, target: PrefixFields): void {
    const sp = this.spans;
    const fields = this.fields;
    const cache = this.cache;
    for (let k = 0; k < fields.length; k++) {
      const f = fields[k]!;
      const s = sp[f * 2]!;
      const e = sp[f * 2 + 1]!;
      const empty = s < 0 || e <= s;
      switch (f) {
        // Many lines share a timestamp (a busy server logs dozens per millisecond).
        case F_TIME: target.time = empty ? null : cache[f]!.string(bytes, s, e); break;
        case F_PID: target.pid = parseIntSpan(bytes, s, e); break;
        case F_USER: target.user = empty ? null : textField(cache[f]!, bytes, s, e); break;
        case F_DB: target.database = empty ? null : textField(cache[f]!, bytes, s, e); break;
        case F_APP: target.application = empty ? null : textField(cache[f]!, bytes, s, e); break;
        case F_HOST: target.remoteHost = empty ? null : cache[f]!.string(bytes, s, e); break;
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
        case F_SESSION: target.sessionId = empty ? null : cache[f]!.string(bytes, s, e); break;
        case F_LINE: target.sessionLine = parseIntSpan(bytes, s, e); break;
        case F_TAG: target.commandTag = empty ? null : cache[f]!.string(bytes, s, e); break;
        case F_START: target.sessionStart = empty ? null : cache[f]!.string(bytes, s, e); break;
        case F_VXID: target.vxid = empty ? null : latin1(bytes, s, e); break;
        case F_TXID: target.txid = empty ? null : cache[f]!.string(bytes, s, e); break;
        case F_BTYPE: target.backendType = empty ? null : cache[f]!.string(bytes, s, e); break;
        case F_LEADER: target.leaderPid = parseIntSpan(bytes, s, e); break;
        case F_QUERYID: target.queryId = empty ? null : cache[f]!.string(bytes, s, e); break;
        case F_SQLSTATE: target.sqlstate = empty ? null : cache[f]!.string(bytes, s, e); break;
        default: break;
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
      for (let j = 1; j < dn; j++) if (b[p + j] !== delim[j]) { ok = false; break; }
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

/** A user, database or application name (`[unknown]` as null); repeated names share one Buffer. */
function textField(cache: FieldCache, b: Buffer, s: number, e: number): Buffer | null {
  if (e - s === 9 && b[s] === 0x5b && b.compare(UNKNOWN, 0, 9, s, e) === 0) return null;
  return cache.buffer(b, s, e);
}

/** Compiles a log_line_prefix; throws PglogError('PREFIX_UNSUPPORTED') for what cannot be parsed. */
export function compilePrefix(prefix: string): CompiledPrefix {
  return new CompiledPrefix(prefix);
}
