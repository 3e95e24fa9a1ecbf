/**
 * Query templates: SQL text → normalized text → fingerprint.
 *
 * `normalizeQuery` is a hand-written lexical scanner (one pass, no regular expressions) that
 * turns statements differing only in constants into the same text:
 *
 * - literals become `?`: strings ('...' with '' escapes, E'...' with backslash escapes,
 *   U&'...', B'...', X'...', N'...', dollar-quoted $tag$...$tag$, string continuation across
 *   a newline), numbers (integers, decimals, exponents, 0x/0o/0b, `_` separators) including
 *   a sign that is unary (`= -5`, `(-5`, `, +5`), and `$1`-style parameters (so prepared and
 *   simple forms of a statement share a template);
 * - TRUE, FALSE and NULL stay keywords: they usually encode a code path (`WHERE active =
 *   true`), not a value a user typed, and they keep templates readable;
 * - comments (`-- ...`, nested `/* ... *\/`) are removed; unterminated quotes and comments
 *   swallow the rest of the text (never an error);
 * - unquoted identifiers and keywords are lower-cased (Unicode too); quoted identifiers
 *   ("Foo") are kept exactly;
 * - tokens are re-spaced canonically, so whitespace in the input never matters: one space
 *   between tokens, none after `(` `[` `.` `::`, none before `)` `]` `,` `;` `.` `::`, none
 *   between a function name and its `(` (but `in (`, `values (`, `and (` ... keep one);
 * - lists of only constants collapse: `in (?, ?, ?)` → `in (...)`, `values (?, ?), (?, ?)`
 *   → `values (...)`, `array[?, ?]` (also nested) → `array[...]`;
 * - trailing `;` removed.
 *
 * Normalizing normalized text gives the same text (the output is a fixed point).
 */
import { hash } from 'node:crypto';

/** One-character strings of ASCII, to avoid allocating them per token. */
const ASCII: readonly string[] = Array.from({ length: 128 }, (_, k) => String.fromCharCode(k));

// Token types (of the output), used for spacing and list collapsing.
const T_NONE = 0;
const T_WORD = 1;
const T_QIDENT = 2;
const T_PH = 3;
const T_OP = 4;
const T_OPEN = 5;
const T_CLOSE = 6;
const T_COMMA = 7;
const T_DOT = 8; // `.`, `::`, `:`
const T_SEMI = 9;
const T_OTHER = 10;

// List kinds of an open bracket.
const G_NONE = 0;
const G_IN = 1;
const G_VALUES = 2;
const G_VALUES_MORE = 3; // a further row after a collapsed `values (...)`
const G_ARRAY = 4;

/** Keywords after which `(` keeps a space (otherwise a word followed by `(` is a call). */
const SPACE_BEFORE_PAREN = new Set([
  'in', 'values', 'as', 'and', 'or', 'not', 'exists', 'any', 'all', 'some', 'from', 'join',
  'on', 'using', 'where', 'select', 'into', 'returning', 'then', 'else', 'when', 'over',
  'filter', 'within', 'group', 'is', 'like', 'ilike', 'between', 'case', 'set', 'with',
  'union', 'intersect', 'except', 'by', 'having', 'limit', 'offset', 'lateral', 'to', 'do',
  'returns', 'default', 'check', 'unique', 'key', 'conflict', 'partition', 'distinct',
]);

/** Keywords after which `-`/`+` before a number is a sign, not subtraction. */
const OPERAND_EXPECTED_AFTER = new Set([
  'select', 'where', 'and', 'or', 'not', 'then', 'else', 'when', 'by', 'limit', 'offset',
  'between', 'like', 'ilike', 'case', 'distinct', 'having', 'on', 'return', 'returning',
  'any', 'all', 'some', 'is', 'in', 'values', 'set', 'interval',
]);

function isIdentStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c >= 128;
}

function isIdentChar(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 36 || c >= 128;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** PostgreSQL operator characters: + - * / < > = ~ ! @ # % ^ & | ` ? */
function isOpChar(c: number): boolean {
  switch (c) {
    case 43: case 45: case 42: case 47: case 60: case 62: case 61: case 126: case 33:
    case 64: case 35: case 37: case 94: case 38: case 124: case 96: case 63:
      return true;
    default:
      return false;
  }
}

/** Operator characters that allow a multi-character operator to end in `+` or `-`. */
function isOpSpecial(c: number): boolean {
  switch (c) {
    case 126: case 33: case 64: case 35: case 37: case 94: case 38: case 124: case 96: case 63:
      return true;
    default:
      return false;
  }
}

/** End (exclusive) of a quoted string starting at the quote `at`; the rest when unterminated. */
function skipString(sql: string, at: number, backslashes: boolean): number {
  const n = sql.length;
  let i = at + 1;
  for (;;) {
    if (!backslashes) {
      const q = sql.indexOf("'", i);
      if (q === -1) return n;
      if (sql.charCodeAt(q + 1) === 39) {
        i = q + 2;
        continue;
      }
      i = q + 1;
    } else {
      while (i < n) {
        const c = sql.charCodeAt(i);
        if (c === 92) i += 2;
        else if (c === 39) break;
        else i++;
      }
      if (i >= n) return n;
      if (sql.charCodeAt(i + 1) === 39) {
        i += 2;
        continue;
      }
      i++;
    }
    // 'foo'<whitespace with a newline>'bar' is one literal in SQL.
    let j = i;
    let newline = false;
    while (j < n) {
      const c = sql.charCodeAt(j);
      if (c === 10 || c === 13) newline = true;
      else if (c !== 32 && c !== 9 && c !== 12) break;
      j++;
    }
    if (!newline || sql.charCodeAt(j) !== 39) return i;
    i = j + 1;
  }
}

/** End of a quoted identifier starting at the double quote `at`. */
function skipQuotedIdent(sql: string, at: number): number {
  let i = at + 1;
  for (;;) {
    const q = sql.indexOf('"', i);
    if (q === -1) return sql.length;
    if (sql.charCodeAt(q + 1) !== 34) return q + 1;
    i = q + 2;
  }
}

/** End of a (nested) block comment starting at `/*` at `at`. */
function skipBlockComment(sql: string, at: number): number {
  const n = sql.length;
  let depth = 1;
  let i = at + 2;
  while (i < n) {
    const c = sql.charCodeAt(i);
    if (c === 42 && sql.charCodeAt(i + 1) === 47) {
      i += 2;
      if (--depth === 0) return i;
    } else if (c === 47 && sql.charCodeAt(i + 1) === 42) {
      i += 2;
      depth++;
    } else i++;
  }
  return n;
}

/** End of a numeric literal starting at `at` (a digit, or `.` before a digit). */
function skipNumber(sql: string, at: number): number {
  const n = sql.length;
  let i = at;
  if (sql.charCodeAt(i) === 48) {
    const p = sql.charCodeAt(i + 1) | 0x20;
    if (p === 120 || p === 111 || p === 98) { // 0x 0o 0b
      i += 2;
      while (i < n) {
        const c = sql.charCodeAt(i);
        if (isDigit(c) || c === 95 || ((c | 0x20) >= 97 && (c | 0x20) <= 102)) i++;
        else break;
      }
      return i;
    }
  }
  while (i < n && (isDigit(sql.charCodeAt(i)) || sql.charCodeAt(i) === 95)) i++;
  if (sql.charCodeAt(i) === 46 && sql.charCodeAt(i + 1) !== 46) {
    i++;
    while (i < n && (isDigit(sql.charCodeAt(i)) || sql.charCodeAt(i) === 95)) i++;
  }
  if ((sql.charCodeAt(i) | 0x20) === 101) {
    let k = i + 1;
    const s = sql.charCodeAt(k);
    if (s === 43 || s === 45) k++;
    if (isDigit(sql.charCodeAt(k))) {
      i = k;
      while (i < n && isDigit(sql.charCodeAt(i))) i++;
    }
  }
  return i;
}

/** Output state of one normalization (module-level and reused: normalizeQuery is not re-entrant). */
let out = '';
let prevT = T_NONE;
let prevWord = '';
let depth = 0;
/**
 * Output before the current segment. A segment starts after the opening bracket of every list
 * that may collapse, so collapsing drops whole segments instead of slicing (and so copying)
 * the text before it: normalization stays linear however many lists a statement has.
 */
const segs: string[] = [];
let nseg = 0;
/** `nseg` right after a collapsed `values (...)`: a `,` then may start a further row. */
let valuesSeg = -1;
let valuesComma = false;
/** Constants (not `$n` parameters) replaced in the last normalization. */
let literals = 0;
/** `nseg` at the start of a list's content. */
const gSeg: number[] = [];
const gKind: number[] = [];
const gSimple: boolean[] = [];

function spaceBefore(t: number, text: string): boolean {
  if (prevT === T_NONE || prevT === T_OPEN || prevT === T_DOT) return false;
  switch (t) {
    case T_CLOSE: case T_COMMA: case T_SEMI: case T_DOT:
      return false;
    case T_OPEN:
      if (text === '(') {
        if (prevT === T_WORD) return SPACE_BEFORE_PAREN.has(prevWord);
        return prevT !== T_QIDENT;
      }
      return !(prevT === T_WORD || prevT === T_QIDENT || prevT === T_CLOSE || prevT === T_PH);
    default:
      return true;
  }
}

function emit(t: number, text: string): void {
  if (depth > 0 && t !== T_PH && t !== T_COMMA) gSimple[depth - 1] = false;
  valuesComma = t === T_COMMA && out.length === 0 && nseg === valuesSeg;
  if (spaceBefore(t, text)) out += t === T_PH ? ' ?' : ' ' + text;
  else out += text;
  prevT = t;
  prevWord = '';
}

function open(text: string): void {
  let kind = G_NONE;
  const wasValuesComma = valuesComma;
  const parentArray = depth > 0 && gKind[depth - 1] === G_ARRAY;
  if (text === '(') {
    if (prevT === T_WORD && prevWord === 'in') kind = G_IN;
    else if (prevT === T_WORD && prevWord === 'values') kind = G_VALUES;
    else if (wasValuesComma) kind = G_VALUES_MORE;
  } else if ((prevT === T_WORD && prevWord === 'array') || (parentArray && (prevT === T_OPEN || prevT === T_COMMA))) {
    kind = G_ARRAY;
  }
  const parentSimple = depth > 0 ? gSimple[depth - 1]! : false;
  emit(T_OPEN, text);
  if (kind === G_ARRAY && parentArray) gSimple[depth - 1] = parentSimple;
  if (kind !== G_NONE) {
    segs[nseg++] = out;
    out = '';
  }
  gSeg[depth] = nseg;
  gKind[depth] = kind;
  gSimple[depth] = true;
  depth++;
}

function close(text: string): void {
  if (depth === 0) {
    emit(T_CLOSE, text);
    return;
  }
  const g = depth - 1;
  const kind = gKind[g]!;
  const collapse = kind !== G_NONE && gSimple[g]! && (nseg > gSeg[g]! || out.length > 0) && (text === ']') === (kind === G_ARRAY);
  depth--;
  if (!collapse) {
    emit(T_CLOSE, text);
    if (depth > 0) gSimple[depth - 1] = false;
    return;
  }
  // Drop the list's content; for a further VALUES row also the `, (` segment before it.
  nseg = gSeg[g]! - 1;
  if (kind === G_VALUES_MORE) {
    out = '';
  } else {
    out = segs[nseg]! + '...' + text;
    if (kind === G_VALUES) {
      segs[nseg++] = out;
      out = '';
      valuesSeg = nseg;
    }
  }
  prevT = T_CLOSE;
  prevWord = '';
  valuesComma = false;
  if (depth > 0 && !(kind === G_ARRAY && gKind[depth - 1] === G_ARRAY)) gSimple[depth - 1] = false;
}

function operandExpected(): boolean {
  switch (prevT) {
    case T_NONE: case T_OP: case T_OPEN: case T_COMMA: case T_SEMI:
      return true;
    case T_WORD:
      return OPERAND_EXPECTED_AFTER.has(prevWord);
    default:
      return false;
  }
}

/** Normalizes SQL text into its template (see the module comment). Never throws. */
export function normalizeQuery(sql: string): string {
  out = '';
  prevT = T_NONE;
  prevWord = '';
  depth = 0;
  nseg = 0;
  valuesSeg = -1;
  valuesComma = false;
  literals = 0;
  const n = sql.length;
  let i = 0;
  while (i < n) {
    const c = sql.charCodeAt(i);
    if (c <= 32) {
      i++;
      continue;
    }
    if (isIdentStart(c)) {
      const s = i;
      let upper = c < 97 || c >= 128;
      i++;
      while (i < n) {
        const d = sql.charCodeAt(i);
        if ((d >= 97 && d <= 122) || d === 95 || (d >= 48 && d <= 57) || d === 36) i++;
        else if ((d >= 65 && d <= 90) || d >= 128) {
          upper = true;
          i++;
        } else break;
      }
      const next = sql.charCodeAt(i);
      if (i - s === 1) {
        const l = c | 0x20;
        if (next === 39 && (l === 101 || l === 98 || l === 120 || l === 110)) { // E' B' X' N'
          i = skipString(sql, i, l === 101);
          literals++;
          emit(T_PH, '?');
          continue;
        }
        if (l === 117 && next === 38) { // U&'...' or U&"..."
          const q = sql.charCodeAt(i + 1);
          if (q === 39) {
            i = skipString(sql, i + 1, false);
            literals++;
            emit(T_PH, '?');
            continue;
          }
          if (q === 34) {
            i = skipQuotedIdent(sql, i + 1);
            emit(T_QIDENT, sql.slice(s, i));
            continue;
          }
        }
      }
      const word = upper ? sql.slice(s, i).toLowerCase() : sql.slice(s, i);
      emit(T_WORD, word);
      prevWord = word;
      continue;
    }
    if (isDigit(c) || (c === 46 && isDigit(sql.charCodeAt(i + 1)))) {
      i = skipNumber(sql, i);
      literals++;
      emit(T_PH, '?');
      continue;
    }
    switch (c) {
      case 39: // '
        i = skipString(sql, i, false);
        literals++;
        emit(T_PH, '?');
        continue;
      case 34: { // "
        const s = i;
        i = skipQuotedIdent(sql, i);
        emit(T_QIDENT, sql.slice(s, i));
        continue;
      }
      case 36: { // $
        const d = sql.charCodeAt(i + 1);
        if (isDigit(d)) {
          i += 2;
          while (i < n && isDigit(sql.charCodeAt(i))) i++;
          emit(T_PH, '?');
          continue;
        }
        let j = i + 1;
        if (d === 36 || isIdentStart(d)) {
          while (j < n && sql.charCodeAt(j) !== 36 && isIdentChar(sql.charCodeAt(j))) j++;
          if (sql.charCodeAt(j) === 36) {
            const tag = sql.slice(i, j + 1);
            const end = sql.indexOf(tag, j + 1);
            i = end === -1 ? n : end + tag.length;
            literals++;
            emit(T_PH, '?');
            continue;
          }
        }
        i++;
        emit(T_OTHER, '$');
        continue;
      }
      case 40: case 91: // ( [
        i++;
        open(c === 40 ? '(' : '[');
        continue;
      case 41: case 93: // ) ]
        i++;
        close(c === 41 ? ')' : ']');
        continue;
      case 44: // ,
        i++;
        emit(T_COMMA, ',');
        continue;
      case 59: // ;
        i++;
        emit(T_SEMI, ';');
        continue;
      case 46: // .
        i++;
        emit(T_DOT, '.');
        continue;
      case 58: // : or ::
        if (sql.charCodeAt(i + 1) === 58) {
          i += 2;
          emit(T_DOT, '::');
        } else {
          i++;
          emit(T_DOT, ':');
        }
        continue;
      default:
        break;
    }
    if (c === 45 && sql.charCodeAt(i + 1) === 45) { // -- comment
      const nl = sql.indexOf('\n', i + 2);
      i = nl === -1 ? n : nl + 1;
      continue;
    }
    if (c === 47 && sql.charCodeAt(i + 1) === 42) { // /* comment */
      i = skipBlockComment(sql, i);
      continue;
    }
    if (isOpChar(c)) {
      const s = i;
      let special = false;
      let j = i;
      while (j < n) {
        const d = sql.charCodeAt(j);
        if (!isOpChar(d)) break;
        if (j > s && ((d === 45 && sql.charCodeAt(j + 1) === 45) || (d === 47 && sql.charCodeAt(j + 1) === 42))) break;
        if (isOpSpecial(d)) special = true;
        j++;
      }
      if (!special) {
        while (j - s > 1) {
          const last = sql.charCodeAt(j - 1);
          if (last !== 43 && last !== 45) break;
          j--;
        }
      }
      i = j;
      if (j - s === 1 && (c === 45 || c === 43)) {
        const d = sql.charCodeAt(j);
        if ((isDigit(d) || (d === 46 && isDigit(sql.charCodeAt(j + 1)))) && operandExpected()) continue; // a sign
      }
      const op = j - s === 1 ? (ASCII[c] ?? '') : sql.slice(s, j);
      emit(op === '?' ? T_PH : T_OP, op);
      continue;
    }
    // Anything else (`{`, `}`, `\`, a stray control character above space): kept as is.
    i++;
    emit(T_OTHER, String.fromCharCode(c));
  }
  let result = nseg === 0 ? out : segs.slice(0, nseg).join('') + out;
  if (segs.length > 0) segs.length = 0;
  while (result.endsWith(';')) result = result.slice(0, -1);
  out = '';
  return result;
}

/**
 * The fingerprint of a normalized template: the first 8 bytes of SHA-256 over the UTF-8
 * bytes of the normalized text, as 16 lowercase hex digits.
 *
 * This is part of pglog's stored interface (the store keys aggregates by it): the algorithm
 * never changes. Changing the normalization changes fingerprints too, so that is a
 * versioned, announced change as well; the pinned vectors in normalize.test.ts guard both.
 */
export function fingerprintOf(normalized: string): string {
  return hash('sha256', normalized, 'hex').slice(0, 16);
}

/** Longest SQL text kept verbatim by TemplateCache (bounds its memory). */
const MAX_VERBATIM_CHARS = 2048;

export interface QueryTemplate {
  normalized: string;
  fingerprint: string;
}

/**
 * Normalizes statements and fingerprints their templates, hashing each distinct template
 * once. Bounded: at `maxEntries` distinct templates, the oldest entry is evicted.
 */
export class TemplateCache {
  private readonly maxEntries: number;
  private readonly fingerprints = new Map<string, string>();
  /**
   * SQL text → template, for texts without constants (only `$n` parameters, or none): the
   * extended protocol repeats those verbatim, so they skip normalization. Texts with
   * literals rarely repeat exactly and are not kept.
   */
  private readonly verbatim = new Map<string, QueryTemplate>();

  constructor(maxEntries = 10_000) {
    this.maxEntries = Math.max(1, Math.floor(maxEntries));
  }

  template(sql: string): QueryTemplate {
    const known = this.verbatim.get(sql);
    if (known !== undefined) return known;
    const normalized = normalizeQuery(sql);
    const cacheable = literals === 0 && sql.length <= MAX_VERBATIM_CHARS;
    let fingerprint = this.fingerprints.get(normalized);
    if (fingerprint === undefined) {
      fingerprint = fingerprintOf(normalized);
      if (this.fingerprints.size >= this.maxEntries) {
        const oldest = this.fingerprints.keys().next();
        if (oldest.done !== true) this.fingerprints.delete(oldest.value);
      }
      this.fingerprints.set(normalized, fingerprint);
    }
    const t = { normalized, fingerprint };
    if (cacheable) {
      if (this.verbatim.size >= this.maxEntries) {
        const oldest = this.verbatim.keys().next();
        if (oldest.done !== true) this.verbatim.delete(oldest.value);
      }
      this.verbatim.set(sql, t);
    }
    return t;
  }

  /** Distinct templates held. */
  get size(): number {
    return this.fingerprints.size;
  }
}
