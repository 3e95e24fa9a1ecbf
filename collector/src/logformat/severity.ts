/**
 * The `SEVERITY:  ` token that follows log_line_prefix on every line PostgreSQL writes to
 * stderr and syslog. English severity words only (lc_messages = C / en, as pgBadger requires).
 */

/** Severities that start an entry. */
export const MAIN_SEVERITIES = ['DEBUG1', 'DEBUG2', 'DEBUG3', 'DEBUG4', 'DEBUG5', 'LOG', 'INFO', 'NOTICE', 'WARNING', 'ERROR', 'FATAL', 'PANIC'] as const;
/** Lines the server writes with their own prefix that belong to the entry before them. */
export const AUX_SEVERITIES = ['DETAIL', 'HINT', 'CONTEXT', 'STATEMENT', 'QUERY', 'LOCATION'] as const;

export type MainSeverity = (typeof MAIN_SEVERITIES)[number];
export type AuxSeverity = (typeof AUX_SEVERITIES)[number];

/** Codes returned by parseSeverity: 0..11 index MAIN_SEVERITIES, 12..17 AUX_SEVERITIES. */
export const SEVERITY_WORDS: readonly string[] = [...MAIN_SEVERITIES, ...AUX_SEVERITIES];
export const FIRST_AUX = MAIN_SEVERITIES.length;
export const SEV_DETAIL = FIRST_AUX;
export const SEV_HINT = FIRST_AUX + 1;
export const SEV_CONTEXT = FIRST_AUX + 2;
export const SEV_STATEMENT = FIRST_AUX + 3;
export const SEV_QUERY = FIRST_AUX + 4;
export const SEV_LOCATION = FIRST_AUX + 5;

const WORD_BYTES: readonly Buffer[] = SEVERITY_WORDS.map((w) => Buffer.from(w, 'latin1'));
/** Candidate codes per first letter. */
const BY_FIRST: (number[] | undefined)[] = [];
for (let i = 0; i < WORD_BYTES.length; i++) {
  const c = WORD_BYTES[i]![0]!;
  (BY_FIRST[c] ??= []).push(i);
}

/** True when a severity word starts with byte `c` (parseSeverity reads nothing after any other). */
export function startsSeverity(c: number): boolean {
  return BY_FIRST[c] !== undefined;
}

/**
 * Parses `WORD:  ` (colon, two spaces) at `bytes[pos]` (before `to`). Returns the severity
 * code (an index into SEVERITY_WORDS) and sets `severityEnd` to the index after the two
 * spaces, or returns -1.
 */
export function parseSeverity(bytes: Buffer, pos: number, to: number): number {
  if (pos >= to) return -1;
  const cands = BY_FIRST[bytes[pos]!];
  if (cands === undefined) return -1;
  for (let k = 0; k < cands.length; k++) {
    const code = cands[k]!;
    const w = WORD_BYTES[code]!;
    const wl = w.length;
    if (pos + wl + 3 > to || bytes[pos + wl] !== 0x3a) continue;
    let ok = true;
    for (let j = 1; j < wl; j++) {
      if (bytes[pos + j] !== w[j]) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    const e = pos + wl + 3;
    if (e > to || bytes[e - 2] !== 0x20 || bytes[e - 1] !== 0x20) continue;
    severityEnd = e;
    return code;
  }
  return -1;
}

/** Index after `WORD:  ` of the last successful parseSeverity call. */
export let severityEnd = 0;

/** True for DETAIL, HINT, CONTEXT, STATEMENT, QUERY, LOCATION. */
export function isAuxSeverity(code: number): boolean {
  return code >= FIRST_AUX;
}

const isSqlstateChar = (c: number): boolean => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a);

/**
 * With log_error_verbosity = verbose the message starts with `SQLSTATE: `. Returns the index
 * after it when `bytes[pos]` holds five SQLSTATE characters (at least one digit, as every
 * SQLSTATE has) followed by `: `, else -1.
 */
export function parseVerboseSqlstate(bytes: Buffer, pos: number, to: number): number {
  if (pos + 7 > to || bytes[pos + 5] !== 0x3a || bytes[pos + 6] !== 0x20) return -1;
  let digit = false;
  for (let i = pos; i < pos + 5; i++) {
    const c = bytes[i]!;
    if (!isSqlstateChar(c)) return -1;
    if (c <= 0x39) digit = true;
  }
  return digit ? pos + 7 : -1;
}
