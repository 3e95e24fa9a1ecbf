/**
 * Statement messages of postgres.c (log_statement, log_min_duration_statement, log_duration):
 *
 *   duration: 1.234 ms  statement: SQL            simple protocol, with duration
 *   duration: 1.234 ms  execute <unnamed>: SQL    extended protocol (also `execute S_1: `,
 *                                                 `execute S_1/C_2: `, `execute fetch from S_1/C_2: `)
 *   duration: 1.234 ms  parse <unnamed>: SQL      extended protocol steps (not executions)
 *   duration: 1.234 ms  bind S_1/C_2: SQL
 *   duration: 1.234 ms  plan:\n...                auto_explain (see plan.ts)
 *   duration: 1.234 ms                            log_duration alone
 *   statement: SQL / execute S_1: SQL             log_statement (no duration)
 */
import { bytesAt, num } from './text.ts';

export type StatementMessage =
  | { type: 'statement'; duration: number | null; protocol: 'simple' | 'extended'; name: string | null; query: string }
  | { type: 'step'; step: 'parse' | 'bind'; duration: number | null; name: string; query: string }
  | { type: 'duration'; duration: number }
  | { type: 'plan'; duration: number; body: string };

const DURATION = 'duration: ';

/** `<name>: SQL` (after `execute `, `parse `, `bind `) → name and SQL, or null. */
function nameAndQuery(rest: string): { name: string; query: string } | null {
  const colon = rest.indexOf(': ');
  if (colon === -1) {
    // An empty statement text leaves "execute <unnamed>:" with nothing after the colon.
    if (rest.endsWith(':')) return { name: rest.slice(0, -1), query: '' };
    return null;
  }
  return { name: rest.slice(0, colon), query: rest.slice(colon + 2) };
}

function afterDuration(rest: string, duration: number | null): StatementMessage | null {
  if (rest.startsWith('statement: ')) {
    return { type: 'statement', duration, protocol: 'simple', name: null, query: rest.slice(11) };
  }
  if (rest.startsWith('execute ')) {
    let tail = rest.slice(8);
    if (tail.startsWith('fetch from ')) tail = tail.slice(11);
    const nq = nameAndQuery(tail);
    return nq === null ? null : { type: 'statement', duration, protocol: 'extended', name: nq.name, query: nq.query };
  }
  if (duration !== null && (rest.startsWith('parse ') || rest.startsWith('bind '))) {
    const step = rest.charCodeAt(0) === 112 ? 'parse' : 'bind';
    const nq = nameAndQuery(rest.slice(step.length + 1));
    return nq === null ? null : { type: 'step', step, duration, name: nq.name, query: nq.query };
  }
  if (duration !== null && rest.startsWith('plan:')) {
    const body = rest.charCodeAt(5) === 10 ? rest.slice(6) : rest.slice(5).trimStart();
    return { type: 'plan', duration, body };
  }
  return null;
}

/** Parses a statement/duration message, or returns null when it is none (or is malformed). */
export function parseStatementMessage(message: string): StatementMessage | null {
  if (message.startsWith(DURATION)) {
    const ms = message.indexOf(' ms', DURATION.length);
    if (ms === -1) return null;
    const duration = num(message.slice(DURATION.length, ms));
    if (duration === null || duration < 0) return null;
    const rest = message.slice(ms + 3);
    if (rest === '') return { type: 'duration', duration };
    if (!rest.startsWith('  ')) return null;
    return afterDuration(rest.slice(2), duration);
  }
  return afterDuration(message, null);
}

/** What scanStatement found. */
export const SCAN_NONE = 0,
  SCAN_STATEMENT = 1,
  SCAN_PARSE = 2,
  SCAN_BIND = 3,
  SCAN_DURATION = 4;

/** Where the parts of a statement message lie in its bytes (see scanStatement). */
export class StatementSpans {
  duration: number | null = null;
  /** Name of the prepared statement or portal (extended protocol); -1 for the simple protocol. */
  nameStart = -1;
  nameEnd = -1;
  queryStart = 0;
  queryEnd = 0;
}

const B_DURATION = Buffer.from(DURATION, 'latin1');
const B_STATEMENT = Buffer.from('statement: ', 'latin1');
const B_EXECUTE = Buffer.from('execute ', 'latin1');
const B_FETCH_FROM = Buffer.from('fetch from ', 'latin1');
const B_PARSE = Buffer.from('parse ', 'latin1');
const B_BIND = Buffer.from('bind ', 'latin1');
/** Exact powers of ten (a double holds 10^k exactly up to k = 22). */
const POW10: readonly number[] = Array.from({ length: 23 }, (_, k) => 10 ** k);
/** Most digits of a duration read here: their integer stays below 2^53, so exact. */
const MAX_DIGITS = 15;

/** `NAME: SQL` (or `NAME:` with empty SQL) from `t` to the end into out; false when it is neither. */
function scanNameAndQuery(m: Buffer, t: number, out: StatementSpans): boolean {
  const n = m.length;
  let c = t;
  while (c + 1 < n && !(m[c] === 0x3a && m[c + 1] === 0x20)) c++;
  out.nameStart = t;
  if (c + 1 < n) {
    out.nameEnd = c;
    out.queryStart = c + 2;
  } else if (n > t && m[n - 1] === 0x3a) {
    // "execute <unnamed>:" with an empty statement text.
    out.nameEnd = n - 1;
    out.queryStart = n;
  } else return false;
  out.queryEnd = n;
  return true;
}

/**
 * parseStatementMessage on the message's bytes, without decoding it, for its common shapes:
 * `[duration: D ms  ]statement: SQL`, `[duration: D ms  ]execute [fetch from ]NAME: SQL`,
 * `duration: D ms  parse|bind NAME: SQL` and a bare `duration: D ms`, with a plain decimal
 * duration. Fills `out` and returns what it found; SCAN_NONE for anything else (a plan, an
 * unusual number, no statement at all), which the caller reads from the decoded text with
 * parseStatementMessage.
 *
 * For an accepted message both agree, as long as decoding removed no NUL byte (which could
 * join `:` and ` `): the structure is ASCII, which is whole characters in every supported
 * encoding, and a replaced sequence never decodes to ASCII. So the name and the SQL are the
 * decoded spans.
 *
 * The duration is the digits' integer over a power of ten: both exact, so the quotient is the
 * correctly rounded value, which is what Number() gives for the decimal text.
 */
export function scanStatement(m: Buffer, out: StatementSpans): number {
  const n = m.length;
  let i = 0;
  let duration: number | null = null;
  if (bytesAt(m, 0, B_DURATION)) {
    i = B_DURATION.length;
    let v = 0;
    let digits = 0;
    let frac = -1;
    for (; i < n; i++) {
      const c = m[i]!;
      if (c >= 0x30 && c <= 0x39) {
        v = v * 10 + (c - 0x30);
        digits++;
        if (frac >= 0) frac++;
      } else if (c === 0x2e && frac < 0) frac = 0;
      else break;
    }
    if (digits === 0 || digits > MAX_DIGITS || frac === 0) return SCAN_NONE;
    if (i + 3 > n || m[i] !== 0x20 || m[i + 1] !== 0x6d || m[i + 2] !== 0x73) return SCAN_NONE;
    duration = frac > 0 ? v / POW10[frac]! : v;
    out.duration = duration;
    if (i + 3 === n) return SCAN_DURATION;
    // The two spaces before what was done.
    if (i + 5 > n || m[i + 3] !== 0x20 || m[i + 4] !== 0x20) return SCAN_NONE;
    i += 5;
  }
  out.duration = duration;
  if (bytesAt(m, i, B_STATEMENT)) {
    out.nameStart = -1;
    out.nameEnd = -1;
    out.queryStart = i + B_STATEMENT.length;
    out.queryEnd = n;
    return SCAN_STATEMENT;
  }
  if (bytesAt(m, i, B_EXECUTE)) {
    let t = i + B_EXECUTE.length;
    if (bytesAt(m, t, B_FETCH_FROM)) t += B_FETCH_FROM.length;
    return scanNameAndQuery(m, t, out) ? SCAN_STATEMENT : SCAN_NONE;
  }
  if (duration === null) return SCAN_NONE;
  if (bytesAt(m, i, B_PARSE)) return scanNameAndQuery(m, i + B_PARSE.length, out) ? SCAN_PARSE : SCAN_NONE;
  if (bytesAt(m, i, B_BIND)) return scanNameAndQuery(m, i + B_BIND.length, out) ? SCAN_BIND : SCAN_NONE;
  return SCAN_NONE;
}
