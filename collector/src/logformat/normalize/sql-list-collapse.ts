/**
 * List collapsing for query normalization (see normalize.ts): `in (?, ?)`, `values (?, ?),
 * (?, ?)` and `array[?, [?]]` become `in (...)`, `values (...)`, `array[...]`.
 *
 * The scanner (sql-scanner.ts) reports every bracket here; this module keeps a stack of the
 * open brackets (where its content starts in the output, what list it may be, whether it has
 * held only constants so far) and, at the closing bracket of a list of only constants, cuts
 * the output back to the opening bracket and writes `...` instead. The state is module-level
 * and reused, like the scanner's buffers: normalization is not re-entrant.
 */
import { KW_ARRAY, KW_IN, KW_VALUES } from './sql-lexer.ts';

// List kinds of an open bracket.
const G_NONE = 0;
const G_IN = 1;
const G_VALUES = 2;
const G_VALUES_MORE = 3; // a further row after a collapsed `values (...)`
const G_ARRAY = 4;

/** Open brackets of the current scan. */
let depth = 0;
/** Output position right after a collapsed `values (...)`: a `,` there may start a further row. */
let valuesEnd = -1;
/** Per open bracket: output position of its content, list kind, whether only constants so far. */
let gStart = new Int32Array(64);
let gKind = new Uint8Array(64);
let gSimple = new Uint8Array(64);

/** Starts the bracket state of a new scan. */
export function resetLists(): void {
  depth = 0;
  valuesEnd = -1;
}

/** Lets go of bracket stacks grown by a deeply nested statement. */
export function releaseLists(): void {
  if (gStart.length > 1024) {
    gStart = new Int32Array(64);
    gKind = new Uint8Array(64);
    gSimple = new Uint8Array(64);
  }
}

/**
 * Whether the innermost open bracket is a list that may collapse and holds only constants so
 * far (the scan keeps this in a local, to clear it with one test per token).
 */
export function collapsible(): boolean {
  return depth > 0 && gKind[depth - 1] !== G_NONE && gSimple[depth - 1] === 1;
}

/**
 * The innermost open bracket got something other than a constant: it no longer collapses
 * (called only while collapsible() holds).
 */
export function markNotCollapsible(): void {
  gSimple[depth - 1] = 0;
}

/**
 * Starts the list of a bracket the scanner has just written: `at` is the output position
 * before it (and its space), `contentStart` the position after it; `flags` are the keyword
 * flags of the word before it (0 if none), `afterComma` / `afterOpen` whether the token before
 * it is a `,` / an opening bracket.
 */
export function openList(paren: boolean, flags: number, afterComma: boolean, afterOpen: boolean, at: number, contentStart: number): void {
  let kind = G_NONE;
  const parentArray = depth > 0 && gKind[depth - 1] === G_ARRAY;
  if (paren) {
    if ((flags & KW_IN) !== 0) kind = G_IN;
    else if ((flags & KW_VALUES) !== 0) kind = G_VALUES;
    else if (afterComma && at === valuesEnd + 1) kind = G_VALUES_MORE;
  } else if ((flags & KW_ARRAY) !== 0 || (parentArray && (afterOpen || afterComma))) {
    kind = G_ARRAY;
  }
  if (depth > 0 && !(kind === G_ARRAY && parentArray)) gSimple[depth - 1] = 0;
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
  gStart[depth] = contentStart;
  gKind[depth] = kind;
  gSimple[depth] = 1;
  depth++;
}

/** Writes a closing bracket at `o`, or collapses the list it closes; returns the new position. */
export function closeBracket(b: Uint8Array, o: number, paren: boolean): number {
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
