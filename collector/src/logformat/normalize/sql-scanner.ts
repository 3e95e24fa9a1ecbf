/**
 * The scanner behind query normalization (the rules are in normalize.ts): one pass over the
 * SQL text, no regular expressions, writing the normalized text.
 *
 * Speed (this runs on every statement of a log): the text is encoded once into a reused
 * byte buffer as UTF-8 (one native call; typed-array reads cost far less than `charCodeAt`),
 * which the scanner walks with character-class tables, writing the output as UTF-8 into a
 * second reused buffer (lower-casing ASCII on the way) that is decoded into a string once at
 * the end. Every byte from 0x80 up belongs to a word, as every non-ASCII character does; a
 * word with such bytes is lower-cased by `toLowerCase` (Unicode rules). Keywords are
 * recognized in the output buffer, without making strings of words (sql-lexer.ts); a list
 * collapses by cutting the output back to its opening bracket (sql-list-collapse.ts).
 * `TemplateCache` (sql-template-cache.ts) hashes the output bytes and, when the template is
 * known, returns it without making the normalized string at all. (A lone surrogate, which no
 * decoder produces, becomes U+FFFD, as it does in fingerprints.)
 *
 * The token types, byte classes and dispatch table are declared here, not imported: V8 reads
 * an imported binding through its module cell (with a check that it is initialized) at every
 * use, and the `switch` on imported constants costs the scanner about 10% of its speed.
 */
import { isAscii } from 'node:buffer';

import { isDigit, isIdentStart, KW_OPERAND, KW_SPACE_PAREN, skipBlockComment, skipNumber, skipQuotedIdent, skipString, wordFlags } from './sql-lexer.ts';
import { closeBracket, collapsible, markNotCollapsible, openList, releaseLists, resetLists } from './sql-list-collapse.ts';

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

/** End of a dollar-quoted string whose tag is `s[at..tagEnd)`; the rest when unterminated. */
function skipDollarQuoted(n: number, at: number, tagEnd: number): number {
  const text = (input.raw as unknown as Buffer).subarray(0, n);
  const end = text.indexOf(text.subarray(at, tagEnd), tagEnd);
  return end === -1 ? n : end + tagEnd - at;
}

/**
 * Writes an opening bracket at `o` after a token of type `prevT` (a word with keyword flags
 * `flags`), with a space before it or not, and starts its list (sql-list-collapse.ts);
 * returns the new output position.
 */
function openBracket(b: Uint8Array, o: number, paren: boolean, prevT: number, flags: number): number {
  const at = o;
  let space: boolean;
  if (glued(prevT)) space = false;
  else if (paren) space = prevT === T_WORD ? (flags & KW_SPACE_PAREN) !== 0 : prevT !== T_QIDENT;
  else space = !(prevT === T_WORD || prevT === T_QIDENT || prevT === T_CLOSE || prevT === T_PH);
  if (space) b[o++] = 32;
  b[o++] = paren ? 40 : 91;
  openList(paren, flags, prevT === T_COMMA, prevT === T_OPEN, at, o);
  return o;
}

/** Normalizes `sql` into `output`; returns the length in bytes of the normalized text. */
export function scan(sql: string): number {
  const n = encodeInput(sql);
  return scanInput(n, n === sql.length);
}

/**
 * Writes `sql` into the input buffer as UTF-8 followed by 4 zero bytes; returns its length in
 * bytes. The first half of scan(), for a caller that looks at the bytes (inputWords) before
 * deciding to scan them (scanInput).
 */
export function encodeInput(sql: string): number {
  // UTF-8 takes at most 3 bytes per UTF-16 code unit.
  if (input.a.length < 3 * sql.length + 4) input = grow(input, 3 * sql.length + 4, 0);
  const s = input.a;
  let n = sql.length;
  if (n <= SHORT) {
    // cheaper than a native call: copy ASCII; anything else is encoded below
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
  return endInput(n);
}

/** Writes the 4 zero bytes after the input's `n` bytes of text; returns `n`. */
function endInput(n: number): number {
  const a = input.a;
  a[n] = 0;
  a[n + 1] = 0;
  a[n + 2] = 0;
  a[n + 3] = 0;
  return n;
}

/**
 * encodeInput for a text whose UTF-8 bytes the caller has: `source[s, e)`, which must be
 * exactly what encodeInput would write (the bytes the text was decoded from, when they decoded
 * without a replacement). A copy instead of encoding the string again.
 */
export function copyInput(source: Buffer, s: number, e: number): number {
  const n = e - s;
  if (input.a.length < n + 4) input = grow(input, n + 4, 0);
  const a = input.a;
  if (n <= SHORT) for (let k = 0; k < n; k++) a[k] = source[s + k]!;
  else source.copy(input.raw as unknown as Buffer, 0, s, e);
  return endInput(n);
}

/** Longest text copyPlainInput checks in its copy loop; longer ones are checked and copied natively. */
const PLAIN_LOOP = 256;

/**
 * copyInput for bytes that must be ASCII without NUL (TemplateCache.templateOfPlain),
 * checked as they are copied; -1 when they are not (the input is then scratch).
 */
export function copyPlainInput(source: Buffer, s: number, e: number): number {
  const n = e - s;
  if (input.a.length < n + 4) input = grow(input, n + 4, 0);
  const a = input.a;
  if (n <= PLAIN_LOOP) {
    // Bit 7 of (c - 1) | c is set for 0 (-1 has every bit) and for 0x80..0xff.
    let bad = 0;
    for (let k = 0; k < n; k++) {
      const c = source[s + k]!;
      a[k] = c;
      bad |= (c - 1) | c;
    }
    if ((bad & 0x80) !== 0) return -1;
  } else {
    const text = source.subarray(s, e);
    if (!isAscii(text) || text.indexOf(0) !== -1) return -1;
    text.copy(input.raw as unknown as Buffer, 0);
  }
  return endInput(n);
}

/**
 * The input buffer's text as 32-bit words, zero-padded after its length to a whole word:
 * valid from encodeInput until the next scan or encodeInput.
 */
export function inputWords(): Int32Array {
  return input.words;
}

/**
 * Normalizes the `n` bytes encodeInput wrote (`isAscii`: all of them below 0x80) into
 * `output`; returns the length in bytes of the normalized text.
 */
export function scanInput(n: number, isAscii: boolean): number {
  const s = input.a;
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
  resetLists();
  let i = 0;
  while (i < n) {
    const c = s[i]!;
    if (c <= 32) {
      // whitespace (most often one space between tokens): no dispatch
      i++;
      continue;
    }
    switch (KIND[c]!) {
      case K_WORD: {
        const next = s[i + 1];
        if (next === 39 || next === 38) {
          // E' B' X' N' U&' U&"
          const l = c | 0x20;
          if (next === 39 && (l === 101 || l === 98 || l === 120 || l === 110)) {
            i = skipString(s, n, i + 1, l === 101);
            break; // a constant: a placeholder, below the switch
          }
          if (l === 117 && next === 38) {
            const q = s[i + 2];
            if (q === 39) {
              i = skipString(s, n, i + 2, false);
              break; // a constant: a placeholder, below the switch
            }
            if (q === 34) {
              const from = i;
              i = skipQuotedIdent(s, n, i + 2);
              if (simple) {
                markNotCollapsible();
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
          markNotCollapsible();
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
          if (k < o) {
            // non-ASCII: Unicode lower-casing (its length may differ)
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
        break; // a constant: a placeholder, below the switch
      case K_QUOTE:
        i = skipString(s, n, i, false);
        break; // a constant: a placeholder, below the switch
      case K_DQUOTE: {
        const from = i;
        i = skipQuotedIdent(s, n, i);
        if (simple) {
          markNotCollapsible();
          simple = false;
        }
        if (!glued(prevT)) b[o++] = 32;
        for (let k = from; k < i; k++) b[o++] = s[k]!;
        prevT = T_QIDENT;
        continue;
      }
      case K_DOLLAR: {
        const d = s[i + 1]!;
        if (isDigit(d)) {
          // $1: a parameter
          i += 2;
          while (isDigit(s[i]!)) i++;
          if (!glued(prevT)) b[o++] = 32;
          b[o++] = 63;
          prevT = T_PH;
          continue;
        }
        if (d === 36 || isIdentStart(d)) {
          // $tag$ ... $tag$
          let j = i + 1;
          while (s[j] !== 36 && (CLASS[s[j]!]! & C_IDENT) !== 0) j++;
          if (s[j] === 36 && j < n) {
            i = skipDollarQuoted(n, i, j + 1);
            break; // a constant: a placeholder, below the switch
          }
        }
        i++;
        if (simple) {
          markNotCollapsible();
          simple = false;
        }
        if (!glued(prevT)) b[o++] = 32;
        b[o++] = 36;
        prevT = T_OTHER;
        continue;
      }
      case K_OPEN:
        i++;
        o = openBracket(b, o, c === 40, prevT, prevT === T_WORD ? wordFlags(b, wordStart, wordEnd) : 0);
        prevT = T_OPEN;
        simple = collapsible();
        continue;
      case K_CLOSE:
        i++;
        o = closeBracket(b, o, c === 41);
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
          markNotCollapsible();
          simple = false;
        }
        b[o++] = 59;
        prevT = T_SEMI;
        continue;
      case K_DOT:
        if (isDigit(s[i + 1]!)) {
          i = skipNumber(s, i);
          break; // a constant: a placeholder, below the switch
        }
        i++;
        if (simple) {
          markNotCollapsible();
          simple = false;
        }
        b[o++] = 46;
        prevT = T_DOT;
        continue;
      case K_COLON:
        if (simple) {
          markNotCollapsible();
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
        if (c === 45 && d === 45) {
          // -- comment
          i += 2;
          while (i < n && s[i] !== 10) i++;
          i++;
          continue;
        }
        if (c === 47 && d === 42) {
          // /* comment */
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
          if (
            prevT === T_WORD
              ? (wordFlags(b, wordStart, wordEnd) & KW_OPERAND) !== 0
              : prevT === T_NONE || prevT === T_OP || prevT === T_OPEN || prevT === T_COMMA || prevT === T_SEMI
          )
            continue;
        }
        if (!glued(prevT)) b[o++] = 32;
        if (j - from === 1 && c === 63) {
          // a lone `?` is a parameter placeholder
          b[o++] = 63;
          prevT = T_PH;
          continue;
        }
        if (simple) {
          markNotCollapsible();
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
          markNotCollapsible();
          simple = false;
        }
        if (!glued(prevT)) b[o++] = 32;
        b[o++] = c;
        prevT = T_OTHER;
        continue;
    }
    // Only a constant (a number, a string, a dollar-quoted body), skipped above, gets here:
    // every other token ends its case with `continue`.
    constants++;
    if (!glued(prevT)) b[o++] = 32;
    b[o++] = 63;
    prevT = T_PH;
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
export function decodeOutput(len: number): string {
  if (len === 0) return '';
  return ascii ? output.raw.latin1Slice(0, len) : output.raw.utf8Slice(0, len);
}

/**
 * The output of the last scan 32 bits at a time, zero-padded after its length to a whole
 * word (so it can be hashed and compared a word at a time). Valid until the next scan.
 */
export function outputWords(): Int32Array {
  return output.words;
}

/** Constants (not `$n` parameters) the last scan replaced. */
export function literalsReplaced(): number {
  return literals;
}

/** Lets go of buffers grown by a huge statement. */
export function releaseBuffers(): void {
  if (input.a.length > 1 << 20) input = bytes(SMALL);
  if (output.a.length > 1 << 20) output = bytes(SMALL);
  releaseLists();
}
