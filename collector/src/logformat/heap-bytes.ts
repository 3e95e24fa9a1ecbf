/**
 * What a value costs in the heap, for structures that bound their memory in bytes (the
 * template cache, the `pglog parse` summary, the batcher's budget). Estimates, but never
 * below the real cost of the text: V8 keeps a string with only Latin-1 characters at one
 * byte per character and any other at two, so a string's bytes depend on what it holds, not
 * only on its length.
 */

/** V8's header of a string (map, hash, length), rounded up. */
export const STRING_HEADER_BYTES = 16;

/**
 * Any UTF-16 code unit beyond Latin-1 (the string is then stored two bytes per character).
 * Without the `u` flag on purpose: surrogates (halves of astral characters) match as code
 * units. V8 answers it for a one-byte string without looking at its characters.
 */
const WIDE = /[\u0100-\uffff]/;

/** Bytes of `s` in the heap: its header and one or two bytes per UTF-16 code unit. */
export function stringHeapBytes(s: string): number {
  return STRING_HEADER_BYTES + (WIDE.test(s) ? 2 * s.length : s.length);
}

/** stringHeapBytes of a string that may be null (null costs nothing of its own). */
export function optionalStringHeapBytes(s: string | null): number {
  return s === null ? 0 : stringHeapBytes(s);
}
