/**
 * The shape of a statement: its text with each constant whose value cannot change the
 * template replaced by a mark, so statements that differ only in such constants (nearly every
 * statement a log repeats: `WHERE aid = 4711`, `status = 'shipped'`) have the same shape and
 * TemplateCache finds their template without scanning them (sql-template-cache.ts). Pure: no
 * I/O, one reused buffer.
 *
 * The invariant, on which fingerprints (a stored interface) depend: two texts with the same
 * shape normalize to the same template. So a shape marks only what the scanner
 * (sql-scanner.ts) turns into a placeholder whatever its value, and keeps every other byte:
 *
 * - a whole number token of digits, or digits, a `.` and digits (`12`, `12.50`, `12.`): not
 *   after a byte of a name or a `.` (`t1`, `$1`, `.5` are kept), not before one (`0x1F`,
 *   `1e5`, `1_000`, `1.2.3` are kept: their token's extent or kind depends on the digits);
 * - the content of a quoted string, one mark for any non-empty content (the quotes are kept,
 *   so `''` doubling and continuation across a newline keep their places);
 * - the items of an `in (...)` list of only unsigned numbers and plain strings, one mark for
 *   the list whatever its length: the scanner collapses such a list to `(...)`, so `in (1)`
 *   and `in (1, 2, 3)` share a template, and an application's IN lists of every length need
 *   one shape, not one each (the cache holds them, see TemplateCache.shapes).
 *
 * The builder follows the scanner's lexical state (outside, in a string, in a quoted name)
 * only where that state is decided by quote characters alone, so a text with anything that
 * would take more is not shaped (-1) and is scanned as before: a backslash (E'' escapes), a
 * comment (`--`, `/*`), a `$` that is not a `$n` parameter (dollar quoting, `$` in names), a
 * NUL or a byte from 0x80 up (TemplateCache.templateOfPlain takes ASCII only).
 */

/** A number token whose digits do not matter (never a byte of ASCII text). */
const NUMBER_MARK = 0x80;
/** The content of a quoted string (never a byte of ASCII text). */
const STRING_MARK = 0x81;
/** The items of an `in (...)` list of constants (never a byte of ASCII text). */
const LIST_MARK = 0x82;

// What the builder does at a byte; 0 (the rest of ASCII): kept, and a digit after it starts a token.
const S_NAME = 1; // kept; a digit after it is part of a name or a decimal (letters, `_`, `.`)
const S_DIGIT = 2;
const S_QUOTE = 3;
const S_DQUOTE = 4;
const S_DOLLAR = 5;
const S_DASH = 6;
const S_SLASH = 7;
const S_REFUSE = 8; // NUL, `\`, 0x80 and up
const S_OPEN = 9; // `(`
const KIND = new Uint8Array(256);
for (let c = 0; c < 256; c++) {
  if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 46) KIND[c] = S_NAME;
  else if (c >= 48 && c <= 57) KIND[c] = S_DIGIT;
  else if (c === 0 || c === 92 || c >= 128) KIND[c] = S_REFUSE;
}
KIND[39] = S_QUOTE;
KIND[34] = S_DQUOTE;
KIND[36] = S_DOLLAR;
KIND[45] = S_DASH;
KIND[47] = S_SLASH;
KIND[40] = S_OPEN;

/** Bytes of a word to the scanner (sql-scanner.ts WORD_BYTE): letters, digits, `_`, `$`, 0x80 and up. */
const WORD = new Uint8Array(256);
for (let c = 0; c < 256; c++) {
  if ((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 95 || c === 36 || c >= 128) WORD[c] = 1;
}

/** Bytes after which, or before which, a digit run is no number token of its own: a word's, and `.`. */
const GLUED = WORD.slice();
GLUED[46] = 1;

let bytes = new Uint8Array(1024);
let words = new Int32Array(bytes.buffer);
/** Where the shape being written goes on in `bytes`. */
let out = 0;

/** The last shape, 32 bits at a time, zero-padded after its length to a whole word. Valid until the next shapeOf. */
export function shapeWords(): Int32Array {
  return words;
}

/**
 * Writes the shape of the ASCII text `src[s, e)` (see the module comment) and returns its
 * length in bytes, or -1 when the text is not one this builder shapes.
 */
export function shapeOf(src: Uint8Array, s: number, e: number): number {
  const n = e - s;
  if (bytes.length < n + 4) {
    bytes = new Uint8Array((n + 64) & ~3);
    words = new Int32Array(bytes.buffer);
  }
  out = 0;
  let i = s;
  /** Whether the byte before `i` glues a digit to it (GLUED). */
  let glued = false;
  while (i < e) {
    let c = src[i]!;
    let kind = KIND[c]!;
    if (kind <= S_NAME) {
      // Most bytes (words, spaces, operators) are kept: one tight loop over each run of them.
      const b = bytes;
      let o = out;
      for (;;) {
        b[o++] = c;
        if (++i === e) break;
        c = src[i]!;
        const next = KIND[c]!;
        if (next > S_NAME) break;
        kind = next;
      }
      out = o;
      glued = kind === S_NAME;
      continue;
    }
    switch (kind) {
      case S_DIGIT:
        i = number(src, i, e, glued);
        glued = bytes[out - 1] !== NUMBER_MARK;
        continue;
      case S_QUOTE:
        i = quotedString(src, i, e);
        break;
      case S_DQUOTE:
        i = quotedName(src, i, e);
        break;
      case S_DOLLAR:
        // `$1` (kept, digits and all); a `$` in a name or a dollar quote is not shaped.
        if (glued || i + 1 >= e || KIND[src[i + 1]!] !== S_DIGIT) return -1;
        bytes[out++] = 36;
        i++;
        while (i < e && KIND[src[i]!] === S_DIGIT) bytes[out++] = src[i++]!;
        glued = true;
        continue;
      case S_OPEN:
        i = bracket(src, i, e);
        break;
      case S_DASH:
      case S_SLASH:
        // `--` and `/*` start comments, which take the scanner's lexing out of quotes alone.
        if (i + 1 < e && src[i + 1] === (kind === S_DASH ? 45 : 42)) return -1;
        bytes[out++] = c;
        i++;
        break;
      default:
        return -1;
    }
    if (i < 0) return -1;
    glued = false;
  }
  bytes[out] = 0;
  bytes[out + 1] = 0;
  bytes[out + 2] = 0;
  return out;
}

/**
 * A number token's shape at the digit `src[i]` (`glued`: after a byte of a name or a `.`):
 * its mark, or its bytes when it is part of a name or a number its digits decide; returns
 * the end of what was shaped.
 */
function number(src: Uint8Array, i: number, e: number, glued: boolean): number {
  let j = i + 1;
  while (j < e && KIND[src[j]!] === S_DIGIT) j++;
  if (j < e && src[j] === 46 && (j + 1 === e || src[j + 1] !== 46)) {
    // A decimal (`12.50`, `12.`): one number token whatever its digits.
    j++;
    while (j < e && KIND[src[j]!] === S_DIGIT) j++;
  }
  // The end of the text is a clean end: the scanner's input is zero-padded.
  if (glued || (j < e && GLUED[src[j]!] === 1)) {
    while (i < j) bytes[out++] = src[i++]!;
  } else {
    bytes[out++] = NUMBER_MARK;
  }
  return j;
}

/** A quoted string at the `'` at `src[i]`: its quotes and a mark for its content; the end, or -1 (a byte not shaped). */
function quotedString(src: Uint8Array, i: number, e: number): number {
  bytes[out++] = 39;
  const from = i + 1;
  i = stringEnd(src, from, e);
  if (i < 0) return -1;
  if (i > from) bytes[out++] = STRING_MARK;
  if (i < e) {
    bytes[out++] = 39;
    i++;
  }
  return i;
}

/** Where the string whose content starts at `src[i]` ends (its closing `'`, or `e`); -1 at a byte not shaped. */
function stringEnd(src: Uint8Array, i: number, e: number): number {
  while (i < e && src[i] !== 39) {
    if (KIND[src[i]!] === S_REFUSE) return -1;
    i++;
  }
  return i;
}

/** A quoted name at the `"` at `src[i]`, kept as it is (the scanner copies it), `""` included; the end, or -1. */
function quotedName(src: Uint8Array, i: number, e: number): number {
  bytes[out++] = 34;
  i++;
  while (i < e && src[i] !== 34) {
    const d = src[i++]!;
    if (d === 0 || d >= 128) return -1;
    bytes[out++] = d;
  }
  if (i < e) {
    bytes[out++] = 34;
    i++;
  }
  return i;
}

/** An opening bracket at `src[i]`: `(` and a list mark and `)` for an `in (...)` list of constants, else `(`; the end. */
function bracket(src: Uint8Array, i: number, e: number): number {
  const end = afterIn(bytes, out) ? constantList(src, i, e) : -1;
  bytes[out++] = 40;
  if (end < 0) return i + 1;
  bytes[out++] = LIST_MARK;
  bytes[out++] = 41;
  return end;
}

/**
 * Whether the shape `b[0, o)` ends in the word `in` (any case) and whitespace: the keyword
 * after which the scanner collapses a list of constants. Its bytes were written outside any
 * quote (a quoted name or string would end between it and the bracket).
 */
function afterIn(b: Uint8Array, o: number): boolean {
  let p = o;
  while (p > 0 && b[p - 1]! <= 32) p--;
  return p >= 2 && (b[p - 1]! | 0x20) === 110 && (b[p - 2]! | 0x20) === 105 && (p === 2 || WORD[b[p - 3]!] === 0);
}

/**
 * The end (after its `)`) of a list at the `(` at `src[i]` of one or more unsigned integers
 * and plain strings ('...' without `''`, backslashes or a continuation), separated by commas
 * and whitespace; -1 for anything else (which the builder then shapes byte by byte).
 */
function constantList(src: Uint8Array, i: number, e: number): number {
  let j = i + 1;
  for (;;) {
    while (j < e && src[j]! <= 32 && src[j] !== 0) j++;
    if (j >= e) return -1;
    const c = src[j]!;
    if (KIND[c] === S_DIGIT) {
      j++;
      while (j < e && KIND[src[j]!] === S_DIGIT) j++;
    } else if (c === 39) {
      j = stringEnd(src, j + 1, e);
      if (j < 0) return -1;
      j++;
    } else {
      return -1;
    }
    while (j < e && src[j]! <= 32 && src[j] !== 0) j++;
    if (j >= e) return -1;
    if (src[j] === 41) return j + 1;
    if (src[j] !== 44) return -1;
    j++;
  }
}
