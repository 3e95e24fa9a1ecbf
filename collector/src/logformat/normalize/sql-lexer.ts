/**
 * The lexical pieces of query normalization the scanner (sql-scanner.ts) calls on: keyword
 * lookup (the words the spacing and list rules look at) and where multi-byte tokens end
 * (strings, quoted identifiers, comments, numbers). All work on the UTF-8 bytes of the text.
 */
// Keywords the spacing and list rules look at, recognized in the output buffer.
export const KW_SPACE_PAREN = 1; // `(` after it keeps a space (otherwise a word followed by `(` is a call)
export const KW_OPERAND = 2; // `-`/`+` before a number after it is a sign, not subtraction
export const KW_IN = 4;
export const KW_VALUES = 8;
export const KW_ARRAY = 16;
const KEYWORDS = new Map<string, number>();
for (const w of [
  'in',
  'values',
  'as',
  'and',
  'or',
  'not',
  'exists',
  'any',
  'all',
  'some',
  'from',
  'join',
  'on',
  'using',
  'where',
  'select',
  'into',
  'returning',
  'then',
  'else',
  'when',
  'over',
  'filter',
  'within',
  'group',
  'is',
  'like',
  'ilike',
  'between',
  'case',
  'set',
  'with',
  'union',
  'intersect',
  'except',
  'by',
  'having',
  'limit',
  'offset',
  'lateral',
  'to',
  'do',
  'returns',
  'default',
  'check',
  'unique',
  'key',
  'conflict',
  'partition',
  'distinct',
])
  KEYWORDS.set(w, KW_SPACE_PAREN);
for (const w of [
  'select',
  'where',
  'and',
  'or',
  'not',
  'then',
  'else',
  'when',
  'by',
  'limit',
  'offset',
  'between',
  'like',
  'ilike',
  'case',
  'distinct',
  'having',
  'on',
  'return',
  'returning',
  'any',
  'all',
  'some',
  'is',
  'in',
  'values',
  'set',
  'interval',
])
  KEYWORDS.set(w, (KEYWORDS.get(w) ?? 0) | KW_OPERAND);
KEYWORDS.set('in', KEYWORDS.get('in')! | KW_IN);
KEYWORDS.set('values', KEYWORDS.get('values')! | KW_VALUES);
KEYWORDS.set('array', KW_ARRAY);

/** Open-addressing table of KEYWORDS: slot → keyword index + 1 (0: empty). */
const KW_SLOTS = new Uint8Array(256);
const KW_TEXT: string[] = [];
const KW_FLAGS: number[] = [];
function kwSlot(len: number, first: number, second: number, last: number): number {
  return (len * 41 + first * 7 + second * 3 + last) & 255;
}
for (const [w, flags] of KEYWORDS) {
  let s = kwSlot(w.length, w.charCodeAt(0), w.charCodeAt(1), w.charCodeAt(w.length - 1));
  while (KW_SLOTS[s] !== 0) s = (s + 1) & 255;
  KW_TEXT.push(w);
  KW_FLAGS.push(flags);
  KW_SLOTS[s] = KW_TEXT.length;
}

/** Keyword flags (KW_*) of the word at `b[ws..we)`. */
export function wordFlags(b: Uint8Array, ws: number, we: number): number {
  const len = we - ws;
  if (len < 2 || len > 9) return 0;
  let s = kwSlot(len, b[ws]!, b[ws + 1]!, b[we - 1]!);
  for (;;) {
    const k = KW_SLOTS[s]!;
    if (k === 0) return 0;
    const w = KW_TEXT[k - 1]!;
    if (w.length === len) {
      let j = 0;
      while (j < len && w.charCodeAt(j) === b[ws + j]) j++;
      if (j === len) return KW_FLAGS[k - 1]!;
    }
    s = (s + 1) & 255;
  }
}

export function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

export function isIdentStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c >= 128;
}

/** End (exclusive) of a quoted string starting at the quote `at`; the rest when unterminated. */
export function skipString(s: Uint8Array, n: number, at: number, backslashes: boolean): number {
  let i = at + 1;
  for (;;) {
    if (!backslashes) {
      while (i < n && s[i] !== 39) i++;
    } else {
      while (i < n) {
        const c = s[i]!;
        if (c === 92) i += 2;
        else if (c === 39) break;
        else i++;
      }
    }
    if (i >= n) return n;
    if (s[i + 1] === 39) {
      i += 2;
      continue;
    }
    i++;
    // 'foo'<whitespace with a newline>'bar' is one literal in SQL.
    let j = i;
    let newline = false;
    while (j < n) {
      const c = s[j]!;
      if (c === 10 || c === 13) newline = true;
      else if (c !== 32 && c !== 9 && c !== 12) break;
      j++;
    }
    if (!newline || j >= n || s[j] !== 39) return i;
    i = j + 1;
  }
}

/** End of a quoted identifier starting at the double quote `at`. */
export function skipQuotedIdent(s: Uint8Array, n: number, at: number): number {
  let i = at + 1;
  for (;;) {
    while (i < n && s[i] !== 34) i++;
    if (i >= n) return n;
    if (s[i + 1] !== 34) return i + 1;
    i += 2;
  }
}

/** End of a (nested) block comment starting at `/*` at `at`. */
export function skipBlockComment(s: Uint8Array, n: number, at: number): number {
  let depth = 1;
  let i = at + 2;
  while (i < n) {
    const c = s[i]!;
    if (c === 42 && s[i + 1] === 47) {
      i += 2;
      if (--depth === 0) return i;
    } else if (c === 47 && s[i + 1] === 42) {
      i += 2;
      depth++;
    } else i++;
  }
  return n;
}

/** End of a numeric literal starting at `at` (a digit, or `.` before a digit). */
export function skipNumber(s: Uint8Array, at: number): number {
  let i = at;
  if (s[i] === 48) {
    const p = s[i + 1]! | 0x20;
    if (p === 120 || p === 111 || p === 98) {
      // 0x 0o 0b
      i += 2;
      for (;;) {
        const c = s[i]!;
        if (isDigit(c) || c === 95 || ((c | 0x20) >= 97 && (c | 0x20) <= 102)) i++;
        else return i;
      }
    }
  }
  for (;;) {
    const c = s[i]!;
    if (isDigit(c) || c === 95) i++;
    else break;
  }
  if (s[i] === 46 && s[i + 1] !== 46) {
    i++;
    for (;;) {
      const c = s[i]!;
      if (isDigit(c) || c === 95) i++;
      else break;
    }
  }
  if ((s[i]! | 0x20) === 101) {
    let k = i + 1;
    const sign = s[k];
    if (sign === 43 || sign === 45) k++;
    if (isDigit(s[k]!)) {
      i = k;
      while (isDigit(s[i]!)) i++;
    }
  }
  return i;
}
