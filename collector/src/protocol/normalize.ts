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
 *
 * Speed (this runs on every statement of a log): the text is encoded once into a reused
 * byte buffer as UTF-8 (one native call; typed-array reads cost far less than `charCodeAt`),
 * which the scanner walks with character-class tables, writing the output as UTF-8 into a
 * second reused buffer (lower-casing ASCII on the way) that is decoded into a string once at
 * the end. Every byte from 0x80 up belongs to a word, as every non-ASCII character does; a
 * word with such bytes is lower-cased by `toLowerCase` (Unicode rules). Keywords are
 * recognized in the output buffer, without making strings of words; a list collapses by
 * cutting the output back to its opening bracket. `TemplateCache` hashes the output bytes
 * and, when the template is known, returns it without making the normalized string at all.
 * (A lone surrogate, which no decoder produces, becomes U+FFFD, as it does in fingerprints.)
 */
import { hash } from 'node:crypto';

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

/** Token types after which the next token gets no space: T_NONE, T_OPEN, T_DOT. */
function glued(t: number): boolean {
  return ((0x121 >> t) & 1) !== 0;
}

// List kinds of an open bracket.
const G_NONE = 0;
const G_IN = 1;
const G_VALUES = 2;
const G_VALUES_MORE = 3; // a further row after a collapsed `values (...)`
const G_ARRAY = 4;

// Byte classes.
const C_IDENT = 1; // a-z A-Z 0-9 _ $ and every byte from 0x80 up (non-ASCII characters)
const C_OP = 2; // + - * / < > = ~ ! @ # % ^ & | ` ?
const C_OPSPECIAL = 4; // operator characters that let a multi-character operator end in + or -
const CLASS = new Uint8Array(256);
/** A byte of a word, ASCII lower-cased; 0 for a byte that is no part of a word. */
const WORD_BYTE = new Uint8Array(256);
for (let c = 0; c < 256; c++) {
  const ch = String.fromCharCode(c);
  if (c >= 128 || /[A-Za-z0-9_$]/.test(ch)) WORD_BYTE[c] = c >= 65 && c <= 90 ? c + 32 : c;
  if (c >= 128 || /[A-Za-z0-9_$]/.test(ch)) CLASS[c]! |= C_IDENT;
  if (c < 128 && '+-*/<>=~!@#%^&|`?'.includes(ch)) CLASS[c]! |= C_OP;
  if (c < 128 && '~!@#%^&|`?'.includes(ch)) CLASS[c]! |= C_OPSPECIAL;
}

// What the scanner does at a byte.
const K_SPACE = 0; // skipped before the dispatch
const K_WORD = 1;
const K_DIGIT = 2;
const K_QUOTE = 3;
const K_DQUOTE = 4;
const K_DOLLAR = 5;
const K_OPEN = 6;
const K_CLOSE = 7;
const K_COMMA = 8;
const K_SEMI = 9;
const K_DOT = 10;
const K_COLON = 11;
const K_OP = 12;
const K_OTHER = 13;
const KIND = new Uint8Array(256).fill(K_OTHER);
for (let c = 0; c < 256; c++) {
  if (c <= 32) KIND[c] = K_SPACE;
  else if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c >= 128) KIND[c] = K_WORD;
  else if (c >= 48 && c <= 57) KIND[c] = K_DIGIT;
  else if ((CLASS[c]! & C_OP) !== 0) KIND[c] = K_OP;
}
KIND[39] = K_QUOTE;
KIND[34] = K_DQUOTE;
KIND[36] = K_DOLLAR;
KIND[40] = K_OPEN;
KIND[91] = K_OPEN;
KIND[41] = K_CLOSE;
KIND[93] = K_CLOSE;
KIND[44] = K_COMMA;
KIND[59] = K_SEMI;
KIND[46] = K_DOT;
KIND[58] = K_COLON;

// Keywords the spacing and list rules look at, recognized in the output buffer.
const KW_SPACE_PAREN = 1; // `(` after it keeps a space (otherwise a word followed by `(` is a call)
const KW_OPERAND = 2; // `-`/`+` before a number after it is a sign, not subtraction
const KW_IN = 4;
const KW_VALUES = 8;
const KW_ARRAY = 16;
const KEYWORDS = new Map<string, number>();
for (const w of [
  'in', 'values', 'as', 'and', 'or', 'not', 'exists', 'any', 'all', 'some', 'from', 'join',
  'on', 'using', 'where', 'select', 'into', 'returning', 'then', 'else', 'when', 'over',
  'filter', 'within', 'group', 'is', 'like', 'ilike', 'between', 'case', 'set', 'with',
  'union', 'intersect', 'except', 'by', 'having', 'limit', 'offset', 'lateral', 'to', 'do',
  'returns', 'default', 'check', 'unique', 'key', 'conflict', 'partition', 'distinct',
]) KEYWORDS.set(w, KW_SPACE_PAREN);
for (const w of [
  'select', 'where', 'and', 'or', 'not', 'then', 'else', 'when', 'by', 'limit', 'offset',
  'between', 'like', 'ilike', 'case', 'distinct', 'having', 'on', 'return', 'returning',
  'any', 'all', 'some', 'is', 'in', 'values', 'set', 'interval',
]) KEYWORDS.set(w, (KEYWORDS.get(w) ?? 0) | KW_OPERAND);
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

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function isIdentStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c >= 128;
}

/** Buffer's utf8Write and slices (what write()/toString() end in, without argument checks). */
interface RawBuffer {
  utf8Write(s: string, offset: number, length: number): number;
  utf8Slice(start: number, end: number): string;
  latin1Slice(start: number, end: number): string;
}

/** A reused byte buffer: element access through the Uint8Array, native calls through `raw`. */
interface Bytes {
  a: Uint8Array;
  raw: RawBuffer;
  /** The same bytes 32 bits at a time (the length is a multiple of 4). */
  words: Int32Array;
}

function bytes(size: number): Bytes {
  const a = new Uint8Array((size + 3) & ~3);
  return { a, raw: Buffer.from(a.buffer) as unknown as RawBuffer, words: new Int32Array(a.buffer) };
}

/** A buffer of at least `size` bytes: `b` or a bigger one with `b`'s first `keep` bytes. */
function grow(b: Bytes, size: number, keep: number): Bytes {
  if (b.a.length >= size) return b;
  const g = bytes(Math.max(size + 64, b.a.length * 2));
  g.a.set(b.a.subarray(0, keep));
  return g;
}

const SMALL = 4096;
/** Texts up to this long are copied into `input` by a loop rather than encoded natively. */
const SHORT = 24;
/**
 * The text being normalized, as UTF-8, followed by 4 zero bytes: looking a few bytes ahead
 * never needs a bounds check (a zero byte matches nothing a look-ahead looks for).
 */
let input = bytes(SMALL);
/**
 * The normalized text of the last scan, as UTF-8 (module-level and reused: the scanner is not
 * re-entrant), followed by zero bytes up to a multiple of 4 for hashing.
 */
let output = bytes(SMALL);
/** Whether the last scanned text was all ASCII (so is its output). */
let ascii = true;
/** Constants (not `$n` parameters) replaced in the last scan. */
let literals = 0;

/** Bracket state of the scan (the rest of its state is in locals of `scan`). */
let depth = 0;
/** Output position right after a collapsed `values (...)`: a `,` there may start a further row. */
let valuesEnd = -1;
/** Per open bracket: output position of its content, list kind, whether only constants so far. */
let gStart = new Int32Array(64);
let gKind = new Uint8Array(64);
let gSimple = new Uint8Array(64);

/** End (exclusive) of a quoted string starting at the quote `at`; the rest when unterminated. */
function skipString(s: Uint8Array, n: number, at: number, backslashes: boolean): number {
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
function skipQuotedIdent(s: Uint8Array, n: number, at: number): number {
  let i = at + 1;
  for (;;) {
    while (i < n && s[i] !== 34) i++;
    if (i >= n) return n;
    if (s[i + 1] !== 34) return i + 1;
    i += 2;
  }
}

/** End of a (nested) block comment starting at `/*` at `at`. */
function skipBlockComment(s: Uint8Array, n: number, at: number): number {
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
function skipNumber(s: Uint8Array, at: number): number {
  let i = at;
  if (s[i] === 48) {
    const p = s[i + 1]! | 0x20;
    if (p === 120 || p === 111 || p === 98) { // 0x 0o 0b
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

/** End of a dollar-quoted string whose tag is `s[at..tagEnd)`; the rest when unterminated. */
function skipDollarQuoted(n: number, at: number, tagEnd: number): number {
  const text = (input.raw as unknown as Buffer).subarray(0, n);
  const end = text.indexOf(text.subarray(at, tagEnd), tagEnd);
  return end === -1 ? n : end + tagEnd - at;
}

/** Keyword flags (KW_*) of the word at `b[ws..we)`. */
function wordFlags(b: Uint8Array, ws: number, we: number): number {
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

/**
 * Whether the innermost open bracket is a list that may collapse and holds only constants so
 * far (the scan keeps this in a local, to clear it with one test per token).
 */
function collapsible(): boolean {
  return depth > 0 && gKind[depth - 1] !== G_NONE && gSimple[depth - 1] === 1;
}

/**
 * Writes an opening bracket at `o` after a token of type `prevT` (a word with keyword flags
 * `flags`); returns the new output position.
 */
function open(b: Uint8Array, o: number, paren: boolean, prevT: number, flags: number): number {
  let kind = G_NONE;
  const parentArray = depth > 0 && gKind[depth - 1] === G_ARRAY;
  if (paren) {
    if ((flags & KW_IN) !== 0) kind = G_IN;
    else if ((flags & KW_VALUES) !== 0) kind = G_VALUES;
    else if (prevT === T_COMMA && o === valuesEnd + 1) kind = G_VALUES_MORE;
  } else if ((flags & KW_ARRAY) !== 0 || (parentArray && (prevT === T_OPEN || prevT === T_COMMA))) {
    kind = G_ARRAY;
  }
  let space: boolean;
  if (glued(prevT)) space = false;
  else if (paren) space = prevT === T_WORD ? (flags & KW_SPACE_PAREN) !== 0 : prevT !== T_QIDENT;
  else space = !(prevT === T_WORD || prevT === T_QIDENT || prevT === T_CLOSE || prevT === T_PH);
  if (depth > 0 && !(kind === G_ARRAY && parentArray)) gSimple[depth - 1] = 0;
  if (space) b[o++] = 32;
  b[o++] = paren ? 40 : 91;
  if (depth === gStart.length) {
    const grown = depth * 2;
    const s = new Int32Array(grown);
    s.set(gStart);
    gStart = s;
    const k = new Uint8Array(grown);
    k.set(gKind);
    gKind = k;
    const m = new Uint8Array(grown);
    m.set(gSimple);
    gSimple = m;
  }
  gStart[depth] = o;
  gKind[depth] = kind;
  gSimple[depth] = 1;
  depth++;
  return o;
}

/** Writes a closing bracket at `o`, or collapses the list it closes; returns the new position. */
function close(b: Uint8Array, o: number, paren: boolean): number {
  const text = paren ? 41 : 93;
  if (depth === 0) {
    b[o++] = text;
    return o;
  }
  const g = --depth;
  const kind = gKind[g]!;
  if (kind === G_NONE || gSimple[g] === 0 || o === gStart[g] || paren === (kind === G_ARRAY)) {
    if (depth > 0) gSimple[depth - 1] = 0;
    b[o++] = text;
    return o;
  }
  if (depth > 0 && !(kind === G_ARRAY && gKind[depth - 1] === G_ARRAY)) gSimple[depth - 1] = 0;
  // A further VALUES row goes, `, (` and all; anything else keeps its bracket and `...`.
  if (kind === G_VALUES_MORE) return valuesEnd;
  o = gStart[g]!;
  b[o++] = 46;
  b[o++] = 46;
  b[o++] = 46;
  b[o++] = text;
  if (kind === G_VALUES) valuesEnd = o;
  return o;
}

/** Normalizes `sql` into `output`; returns the length in bytes of the normalized text. */
function scan(sql: string): number {
  // UTF-8 takes at most 3 bytes per UTF-16 code unit.
  if (input.a.length < 3 * sql.length + 4) input = grow(input, 3 * sql.length + 4, 0);
  const s = input.a;
  let n = sql.length;
  if (n <= SHORT) { // cheaper than a native call: copy ASCII; anything else is encoded below
    let any = 0;
    for (let k = 0; k < n; k++) {
      const c = sql.charCodeAt(k);
      s[k] = c;
      any |= c;
    }
    if (any >= 128) n = input.raw.utf8Write(sql, 0, s.length);
  } else {
    n = input.raw.utf8Write(sql, 0, s.length);
  }
  s[n] = 0;
  s[n + 1] = 0;
  s[n + 2] = 0;
  s[n + 3] = 0;
  const isAscii = n === sql.length;
  // The output takes at most 3 bytes per input byte: a space before every token, a 1-byte
  // token collapsed into ` (...)`, a word lower-cased into a longer one (İ: 2 bytes → 3).
  if (output.a.length < 3 * n + 16) output = grow(output, 3 * n + 16, 0);
  let b = output.a;
  let constants = 0;
  let o = 0;
  let prevT = T_NONE;
  /** Output range of the last word (meaningful while `prevT === T_WORD`). */
  let wordStart = 0;
  let wordEnd = 0;
  let simple = false; // collapsible()
  depth = 0;
  valuesEnd = -1;
  let i = 0;
  while (i < n) {
    const c = s[i]!;
    if (c <= 32) { // whitespace (most often one space between tokens): no dispatch
      i++;
      continue;
    }
    switch (KIND[c]!) {
      case K_WORD: {
        const next = s[i + 1];
        if (next === 39 || next === 38) { // E' B' X' N' U&' U&"
          const l = c | 0x20;
          if (next === 39 && (l === 101 || l === 98 || l === 120 || l === 110)) {
            i = skipString(s, n, i + 1, l === 101);
            constants++;
            if (!glued(prevT)) b[o++] = 32;
            b[o++] = 63;
            prevT = T_PH;
            continue;
          }
          if (l === 117 && next === 38) {
            const q = s[i + 2];
            if (q === 39) {
              i = skipString(s, n, i + 2, false);
              constants++;
              if (!glued(prevT)) b[o++] = 32;
              b[o++] = 63;
              prevT = T_PH;
              continue;
            }
            if (q === 34) {
              const from = i;
              i = skipQuotedIdent(s, n, i + 2);
              if (simple) {
                gSimple[depth - 1] = 0;
                simple = false;
              }
              if (!glued(prevT)) b[o++] = 32;
              for (let k = from; k < i; k++) b[o++] = s[k]!;
              prevT = T_QIDENT;
              continue;
            }
          }
        }
        if (simple) {
          gSimple[depth - 1] = 0;
          simple = false;
        }
        if (!glued(prevT)) b[o++] = 32;
        const from = i;
        const ws = o;
        // Lower-cased (ASCII) while copied; the zero byte after the text ends the loop.
        let w = WORD_BYTE[c]!;
        do {
          b[o++] = w;
          w = WORD_BYTE[s[++i]!]!;
        } while (w !== 0);
        if (!isAscii) {
          let k = ws;
          while (k < o && b[k]! < 128) k++;
          if (k < o) { // non-ASCII: Unicode lower-casing (its length may differ)
            const word = input.raw.utf8Slice(from, i).toLowerCase();
            output = grow(output, ws + 3 * word.length + 3 * (n - i) + 16, ws);
            b = output.a;
            o = ws + output.raw.utf8Write(word, ws, b.length - ws);
          }
        }
        wordStart = ws;
        wordEnd = o;
        prevT = T_WORD;
        continue;
      }
      case K_DIGIT:
        i = skipNumber(s, i);
        constants++;
        if (!glued(prevT)) b[o++] = 32;
        b[o++] = 63;
        prevT = T_PH;
        continue;
      case K_QUOTE:
        i = skipString(s, n, i, false);
        constants++;
        if (!glued(prevT)) b[o++] = 32;
        b[o++] = 63;
        prevT = T_PH;
        continue;
      case K_DQUOTE: {
        const from = i;
        i = skipQuotedIdent(s, n, i);
        if (simple) {
          gSimple[depth - 1] = 0;
          simple = false;
        }
        if (!glued(prevT)) b[o++] = 32;
        for (let k = from; k < i; k++) b[o++] = s[k]!;
        prevT = T_QIDENT;
        continue;
      }
      case K_DOLLAR: {
        const d = s[i + 1]!;
        if (isDigit(d)) { // $1: a parameter
          i += 2;
          while (isDigit(s[i]!)) i++;
          if (!glued(prevT)) b[o++] = 32;
          b[o++] = 63;
          prevT = T_PH;
          continue;
        }
        if (d === 36 || isIdentStart(d)) { // $tag$ ... $tag$
          let j = i + 1;
          while (s[j] !== 36 && (CLASS[s[j]!]! & C_IDENT) !== 0) j++;
          if (s[j] === 36 && j < n) {
            i = skipDollarQuoted(n, i, j + 1);
            constants++;
            if (!glued(prevT)) b[o++] = 32;
            b[o++] = 63;
            prevT = T_PH;
            continue;
          }
        }
        i++;
        if (simple) {
          gSimple[depth - 1] = 0;
          simple = false;
        }
        if (!glued(prevT)) b[o++] = 32;
        b[o++] = 36;
        prevT = T_OTHER;
        continue;
      }
      case K_OPEN:
        i++;
        o = open(b, o, c === 40, prevT, prevT === T_WORD ? wordFlags(b, wordStart, wordEnd) : 0);
        prevT = T_OPEN;
        simple = collapsible();
        continue;
      case K_CLOSE:
        i++;
        o = close(b, o, c === 41);
        prevT = T_CLOSE;
        simple = collapsible();
        continue;
      case K_COMMA:
        i++;
        b[o++] = 44;
        prevT = T_COMMA;
        continue;
      case K_SEMI:
        i++;
        if (simple) {
          gSimple[depth - 1] = 0;
          simple = false;
        }
        b[o++] = 59;
        prevT = T_SEMI;
        continue;
      case K_DOT:
        if (isDigit(s[i + 1]!)) {
          i = skipNumber(s, i);
          constants++;
          if (!glued(prevT)) b[o++] = 32;
          b[o++] = 63;
          prevT = T_PH;
          continue;
        }
        i++;
        if (simple) {
          gSimple[depth - 1] = 0;
          simple = false;
        }
        b[o++] = 46;
        prevT = T_DOT;
        continue;
      case K_COLON:
        if (simple) {
          gSimple[depth - 1] = 0;
          simple = false;
        }
        b[o++] = 58;
        if (s[i + 1] === 58) {
          b[o++] = 58;
          i += 2;
        } else i++;
        prevT = T_DOT;
        continue;
      case K_OP: {
        const d = s[i + 1]!;
        if (c === 45 && d === 45) { // -- comment
          i += 2;
          while (i < n && s[i] !== 10) i++;
          i++;
          continue;
        }
        if (c === 47 && d === 42) { // /* comment */
          i = skipBlockComment(s, n, i);
          continue;
        }
        const from = i;
        let special = false;
        let j = i;
        for (;;) {
          const e = s[j]!;
          if ((CLASS[e]! & C_OP) === 0) break;
          if (j > from && ((e === 45 && s[j + 1] === 45) || (e === 47 && s[j + 1] === 42))) break;
          if ((CLASS[e]! & C_OPSPECIAL) !== 0) special = true;
          j++;
        }
        if (!special) {
          while (j - from > 1) {
            const last = s[j - 1];
            if (last !== 43 && last !== 45) break;
            j--;
          }
        }
        i = j;
        if (j - from === 1 && (c === 45 || c === 43) && (isDigit(d) || (d === 46 && isDigit(s[j + 1]!)))) {
          // A sign where an operand is expected is part of the number.
          if (prevT === T_WORD ? (wordFlags(b, wordStart, wordEnd) & KW_OPERAND) !== 0
            : prevT === T_NONE || prevT === T_OP || prevT === T_OPEN || prevT === T_COMMA || prevT === T_SEMI) continue;
        }
        if (!glued(prevT)) b[o++] = 32;
        if (j - from === 1 && c === 63) { // a lone `?` is a parameter placeholder
          b[o++] = 63;
          prevT = T_PH;
          continue;
        }
        if (simple) {
          gSimple[depth - 1] = 0;
          simple = false;
        }
        for (let k = from; k < j; k++) b[o++] = s[k]!;
        prevT = T_OP;
        continue;
      }
      default:
        // Anything else (`{`, `}`, `\`, DEL): kept as is.
        i++;
        if (simple) {
          gSimple[depth - 1] = 0;
          simple = false;
        }
        if (!glued(prevT)) b[o++] = 32;
        b[o++] = c;
        prevT = T_OTHER;
        continue;
    }
  }
  while (o > 0 && b[o - 1] === 59) o--;
  ascii = isAscii;
  literals = constants;
  b[o] = 0;
  b[o + 1] = 0;
  b[o + 2] = 0;
  return o;
}

/** The normalized text of the last scan, `len` bytes. */
function decode(len: number): string {
  if (len === 0) return '';
  return ascii ? output.raw.latin1Slice(0, len) : output.raw.utf8Slice(0, len);
}

/** Lets go of buffers grown by a huge statement. */
function release(): void {
  if (input.a.length > 1 << 20) input = bytes(SMALL);
  if (output.a.length > 1 << 20) output = bytes(SMALL);
  if (gStart.length > 1024) {
    gStart = new Int32Array(64);
    gKind = new Uint8Array(64);
    gSimple = new Uint8Array(64);
  }
}

/** Normalizes SQL text into its template (see the module comment). Never throws. */
export function normalizeQuery(sql: string): string {
  const normalized = decode(scan(sql));
  release();
  return normalized;
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

/** A 30-bit hash of the last scan's output, `len` bytes (zero-padded to whole words). */
function hashOutput(len: number): number {
  const w = output.words;
  const count = (len + 3) >> 2;
  let h = len ^ 0x2545f491;
  for (let k = 0; k < count; k++) {
    h = Math.imul(h ^ w[k]!, 0x5bd1e995);
    h ^= h >>> 15;
  }
  return h & 0x3fffffff;
}

/** A known template and its normalized text as UTF-8, zero-padded to whole words. */
interface Known {
  template: QueryTemplate;
  len: number;
  words: Int32Array;
}

/** Whether the last scan's output, `len` bytes, is the text of `known`. */
function outputIs(known: Known, len: number): boolean {
  if (known.len !== len) return false;
  const w = output.words;
  const k = known.words;
  for (let j = 0; j < k.length; j++) if (k[j] !== w[j]) return false;
  return true;
}

/** Longest SQL text kept verbatim by TemplateCache (bounds its memory). */
const MAX_VERBATIM_CHARS = 2048;

export interface QueryTemplate {
  normalized: string;
  fingerprint: string;
}

/**
 * Normalizes statements and fingerprints their templates, hashing each distinct template
 * once. Bounded: at `maxEntries` distinct templates, the oldest entry is evicted. Returned
 * templates are shared between calls: read them, do not change them.
 */
export class TemplateCache {
  private readonly maxEntries: number;
  /**
   * Hash of the normalized text (see hashOutput) → template. A known template is found from
   * the scanner's output bytes, without making its string; texts whose hashes collide
   * replace each other (told apart by comparing the bytes), which costs speed, never
   * correctness.
   */
  private readonly known = new Map<number, Known>();
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
    const again = this.verbatim.get(sql);
    if (again !== undefined) return again;
    const len = scan(sql);
    const key = hashOutput(len);
    let k = this.known.get(key);
    if (k === undefined || !outputIs(k, len)) {
      const normalized = decode(len);
      k = { template: { normalized, fingerprint: fingerprintOf(normalized) }, len, words: output.words.slice(0, (len + 3) >> 2) };
      if (!this.known.delete(key)) evictOldest(this.known, this.maxEntries);
      this.known.set(key, k);
    }
    if (literals === 0 && sql.length <= MAX_VERBATIM_CHARS) {
      evictOldest(this.verbatim, this.maxEntries);
      this.verbatim.set(sql, k.template);
    }
    release();
    return k.template;
  }

  /** Distinct templates held. */
  get size(): number {
    return this.known.size;
  }
}

/** Makes room for one more entry in a map bounded to `max` entries (oldest first out). */
function evictOldest<K, V>(map: Map<K, V>, max: number): void {
  if (map.size < max) return;
  const oldest = map.keys().next();
  if (oldest.done !== true) map.delete(oldest.value);
}
