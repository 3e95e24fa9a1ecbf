/**
 * Text on its way into the store (pure). PostgreSQL text cannot hold NUL characters, the
 * store is UTF8 and refuses broken UTF-8 (and jsonb refuses unpaired surrogate escapes), and a
 * single log entry may carry megabytes of query text. Every text value is therefore cleaned
 * here before it is encoded: NULs removed, unpaired UTF-16 surrogates replaced by U+FFFD, and
 * text longer than `maxBytes` of UTF-8 cut at a character boundary with a visible marker.
 * Each repair is counted, so the collector can report it (a silent repair hides a problem).
 */

/** What cleaning did, summed over many values. */
export interface TextRepairs {
  /** NUL characters removed. */
  nulRemoved: number;
  /** Values that held unpaired surrogates (replaced by U+FFFD). */
  invalidReplaced: number;
  /** Values cut to the byte limit. */
  cut: number;
}

export function noRepairs(): TextRepairs {
  return { nulRemoved: 0, invalidReplaced: 0, cut: 0 };
}

export function addRepairs(into: TextRepairs, more: TextRepairs): void {
  into.nulRemoved += more.nulRemoved;
  into.invalidReplaced += more.invalidReplaced;
  into.cut += more.cut;
}

export const DEFAULT_MAX_TEXT_BYTES = 1024 * 1024;
/**
 * Design §6: stored text is never shortened below its first 1000 characters. 1000 characters
 * take at most 4000 bytes of UTF-8; the rest leaves room for the marker.
 */
export const MIN_MAX_TEXT_BYTES = 4096;

/** Appended to a value that was cut; says how long it was. */
export function cutMarker(originalBytes: number): string {
  return ` [... cut by pglog: ${originalBytes} bytes in all]`;
}
/** The longest marker (a 16-digit byte count, beyond any string's length): space reserved for it within the limit. */
const MARKER_RESERVE = Buffer.byteLength(cutMarker(Number.MAX_SAFE_INTEGER));

/**
 * `s` without NULs, with unpaired surrogates replaced, and at most `maxBytes` bytes of UTF-8
 * long (then ending in the cut marker). Returns `s` itself when nothing needed doing, which is
 * the common case and costs three linear scans without allocation.
 */
export function cleanText(s: string, maxBytes: number, repairs: TextRepairs): string {
  let out = s;
  if (out.includes('\0')) {
    const before = out.length;
    out = out.replaceAll('\0', '');
    repairs.nulRemoved += before - out.length;
  }
  if (!out.isWellFormed()) {
    out = out.toWellFormed();
    repairs.invalidReplaced++;
  }
  // A UTF-16 code unit takes at most 3 bytes of UTF-8: short strings need no byte count.
  if (out.length * 3 <= maxBytes) return out;
  const bytes = Buffer.byteLength(out, 'utf8');
  if (bytes <= maxBytes) return out;
  repairs.cut++;
  return cutUtf8(out, Math.max(0, maxBytes - MARKER_RESERVE)) + cutMarker(bytes);
}

/** The longest prefix of `s` (well formed) whose UTF-8 takes at most `budget` bytes. */
export function cutUtf8(s: string, budget: number): string {
  // `budget` code units take at least `budget` bytes, so the prefix lies within them: only
  // that much is encoded, however long `s` is (a 50 MB statement costs one small Buffer).
  let head = s.slice(0, budget);
  const last = head.charCodeAt(head.length - 1);
  if (last >= 0xd800 && last <= 0xdbff) head = head.slice(0, -1); // do not split a surrogate pair
  const buf = Buffer.from(head, 'utf8');
  if (buf.length <= budget) return head;
  let end = budget;
  // Step back over continuation bytes (10xxxxxx) to the first byte of the character cut in two.
  while (end > 0 && ((buf[end] ?? 0) & 0xc0) === 0x80) end--;
  return buf.toString('utf8', 0, end);
}
