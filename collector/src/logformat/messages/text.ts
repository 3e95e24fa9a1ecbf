/** Small defensive helpers shared by the message parsers: malformed input gives null, never NaN or a throw. */

/** A finite number from captured text, or null. */
export function num(text: string | undefined): number | null {
  if (text === undefined || text === '') return null;
  const v = Number(text);
  return Number.isFinite(v) ? v : null;
}

/** A non-negative safe integer from captured text, or null. */
export function int(text: string | undefined): number | null {
  const v = num(text);
  return v !== null && Number.isSafeInteger(v) && v >= 0 ? v : null;
}

/** The number in the first capture group of `re` over `text`, or null. */
export function numAfter(text: string, re: RegExp): number | null {
  const m = re.exec(text);
  return m === null ? null : num(m[1]);
}

/** Reads one capture's text as a number (`int` or `num`). */
export type NumberReader = (text: string | undefined) => number | null;

/**
 * The numbers in the capture groups of `re` over `text`, one field a group in the order
 * `readers` names them (its first key reads group 1). Every field is null when `re` does not
 * match, so a message that lacks a part gives nulls for that part only.
 */
export function groupNumbers<K extends string>(text: string, re: RegExp, readers: Readonly<Record<K, NumberReader>>): Record<K, number | null> {
  const m = re.exec(text);
  const out = {} as Record<K, number | null>;
  let group = 1;
  for (const name of Object.keys(readers) as K[]) out[name] = m === null ? null : readers[name](m[group++]);
  return out;
}

/** Comma-separated integers (`1, 2, 3`); non-numbers skipped. */
export function intList(text: string): number[] {
  const out: number[] = [];
  for (const part of text.split(',')) {
    const v = int(part.trim());
    if (v !== null) out.push(v);
  }
  return out;
}

/**
 * True when `m` holds the bytes of `w` at `i`. A loop rather than Buffer#compare with ranges,
 * whose argument checks allocate on every call (the parser asks this of most entries).
 */
export function bytesAt(m: Buffer, i: number, w: Buffer): boolean {
  const n = w.length;
  if (i < 0 || i + n > m.length) return false;
  for (let j = 0; j < n; j++) if (m[i + j] !== w[j]) return false;
  return true;
}

/** True when `bytes` starts with the ASCII bytes of `prefix` (precomputed as a Buffer). */
export function startsWithBytes(bytes: Buffer, prefix: Buffer): boolean {
  return bytesAt(bytes, 0, prefix);
}
