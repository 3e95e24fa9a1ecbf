/**
 * Bounds on the pg_stat_statements texts of one statistics sample (security review R2). The
 * extension keeps each entry's whole normalised text, and any role that can run statements can
 * make thousands of them of almost a megabyte each; node-postgres holds a whole result in
 * memory, so unbounded texts let one role of a monitored server run the collector out of heap.
 *
 * Two bounds, applied by the statistics SQL on the server (statistics-sql.ts), so only what is
 * kept crosses the wire, and again here on the rows (statementsFromRows), so the bound holds
 * whatever the rows say:
 * - each text keeps at most `textChars(bounds)` characters: its beginning, flagged as cut;
 * - the texts of a sample take at most `maxSampleTextBytes` together, the shortest kept first
 *   (the most entries keep their text, and a flood of long texts is what loses them); the
 *   others are dropped: the entry keeps its counters, its text is empty and flagged.
 * Pure.
 */
import { cutMarker, DEFAULT_MAX_TEXT_BYTES, MIN_MAX_TEXT_BYTES } from '../store/text-clean.ts';

export interface StatementTextBounds {
  /** UTF-8 bytes of one text as stored, the cut marker included: the store's bound on a value. */
  maxTextBytes: number;
  /** UTF-8 bytes of all the texts of one sample (cut texts, markers not counted). */
  maxSampleTextBytes: number;
}

/** The texts of 5,000 entries (pg_stat_statements.max) of 3 kB each; a 1 GiB collector holds many samples of this at once. */
export const DEFAULT_MAX_SAMPLE_TEXT_BYTES = 16 * 1024 * 1024;

/** The store's bound on a text value (store/text-clean.ts), so a cut text is stored as it is. */
export const DEFAULT_STATEMENT_TEXT_BOUNDS: StatementTextBounds = { maxTextBytes: DEFAULT_MAX_TEXT_BYTES, maxSampleTextBytes: DEFAULT_MAX_SAMPLE_TEXT_BYTES };

/** Room for the marker a cut text ends with in the store (the longest one, a 16-digit byte count). */
const MARKER_BYTES = Buffer.byteLength(cutMarker(Number.MAX_SAFE_INTEGER));

/** How a text was not kept whole. */
export interface TextCut {
  /** UTF-8 bytes of the whole text on the server. */
  bytes: number;
  /** Nothing of it kept (the sample's bound), rather than its beginning (the text's bound). */
  dropped: boolean;
}

/** How many texts of a sample were cut and how many dropped (each text counts once). */
export interface TextCounts {
  cut: number;
  dropped: number;
}

/** Throws a RangeError unless both bounds are integers the SQL can take and a cut text keeps its first 1000 characters. */
export function checkTextBounds(bounds: StatementTextBounds): void {
  const { maxTextBytes, maxSampleTextBytes } = bounds;
  if (!Number.isSafeInteger(maxTextBytes) || maxTextBytes < MIN_MAX_TEXT_BYTES || maxTextBytes > 2 ** 30) {
    throw new RangeError(`pg_stat_statements text bound: maxTextBytes must be an integer from ${MIN_MAX_TEXT_BYTES} to 2^30, got ${maxTextBytes}`);
  }
  if (!Number.isSafeInteger(maxSampleTextBytes) || maxSampleTextBytes < maxTextBytes) {
    throw new RangeError(
      `pg_stat_statements text bound: maxSampleTextBytes must be an integer of at least maxTextBytes (${maxTextBytes}), got ${maxSampleTextBytes}`,
    );
  }
}

/**
 * Characters a text keeps. The server cuts with left(), which counts characters, not bytes
 * (cutting bytes could split a character, and convert_from would then fail the whole
 * statement); a character takes at most 4 bytes of UTF-8, so a quarter of the byte bound, less
 * the marker's room, bounds the bytes whatever the text. ASCII texts keep about 256 kB of 1 MiB.
 */
export function textChars(bounds: StatementTextBounds): number {
  return Math.floor((bounds.maxTextBytes - MARKER_BYTES) / 4);
}

/**
 * The first `chars` UTF-16 code units of `s` (a surrogate pair is not split), as a string of
 * its own: slice() would return a view that keeps all of `s` alive as long as it is held.
 */
function ownPrefix(s: string, chars: number): string {
  const last = s.charCodeAt(chars - 1);
  const end = last >= 0xd800 && last <= 0xdbff ? chars - 1 : chars;
  return Buffer.from(s.slice(0, end), 'utf8').toString('utf8');
}

/** A text as the server sent it, with what the server said about cutting it. */
export interface ServerText {
  text: string;
  /** The whole text's UTF-8 bytes when the server cut or dropped it, else null. */
  cut: TextCut | null;
}

/**
 * Applies both bounds to the texts of a sample, in place (the server has applied them already;
 * this keeps them for rows that are not as the SQL says). Texts beyond the sample's bound
 * become '' with `cut.dropped`. Returns the counts, each text counted once: as dropped when
 * nothing of it is kept, else as cut.
 */
export function boundTexts(texts: ServerText[], bounds: StatementTextBounds): TextCounts {
  const chars = textChars(bounds);
  for (const t of texts) {
    // UTF-16 code units are at least as many as characters: this never keeps more than left() would.
    if (t.text.length <= chars) continue;
    t.cut ??= { bytes: Buffer.byteLength(t.text, 'utf8'), dropped: false };
    t.text = ownPrefix(t.text, chars);
  }
  // The shortest first, as the SQL's running total: the most entries keep their text.
  const sizes = texts.map((t, i) => ({ i, bytes: t.text.length === 0 ? 0 : Buffer.byteLength(t.text, 'utf8') }));
  sizes.sort((a, b) => a.bytes - b.bytes || a.i - b.i);
  let total = 0;
  for (const { i, bytes } of sizes) {
    total += bytes;
    if (total <= bounds.maxSampleTextBytes) continue;
    const t = texts[i]!;
    t.cut = { bytes: t.cut?.bytes ?? bytes, dropped: true };
    t.text = '';
  }
  const counts: TextCounts = { cut: 0, dropped: 0 };
  for (const t of texts) if (t.cut !== null) counts[t.cut.dropped ? 'dropped' : 'cut']++;
  return counts;
}

/** The text a statement delta carries: the kept beginning and the store's cut marker, or the marker alone for a dropped text. */
export function markedText(text: string, cut: TextCut | undefined): string {
  return cut === undefined ? text : `${cut.dropped ? '' : text}${cutMarker(cut.bytes)}`;
}
