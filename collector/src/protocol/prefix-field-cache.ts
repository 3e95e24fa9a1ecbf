/**
 * Cheap strings and Buffers from line bytes, shared by the prefix matcher and the assemblers:
 * latin1 slices without argument checks, and FieldCache, which hands out the same value
 * while a field's bytes repeat from line to line.
 */

/** Buffer's latin1Slice (what toString('latin1', s, e) ends in, without its argument checks). */
interface Latin1Slicer { latin1Slice(start: number, end: number): string }
export function latin1(b: Buffer, s: number, e: number): string {
  return (b as unknown as Latin1Slicer).latin1Slice(s, e);
}

/**
 * The value made from a field's bytes last time, reused while the bytes stay the same (user,
 * database, session id, backend type ... repeat from line to line): saves an allocation.
 * Holds at most 64 bytes and a value of that length: longer values are not kept.
 */
export class FieldCache {
  private readonly bytes = Buffer.alloc(64);
  private len = -1;
  str: string | null = null;
  buf: Buffer | null = null;

  /** True when b[s, e) is what the cache holds. */
  hit(b: Buffer, s: number, e: number): boolean {
    const n = e - s;
    if (n !== this.len) return false;
    const c = this.bytes;
    for (let i = n - 1; i >= 0; i--) if (c[i] !== b[s + i]) return false;
    return true;
  }

  string(b: Buffer, s: number, e: number): string {
    if (this.hit(b, s, e)) return this.str!;
    const v = latin1(b, s, e);
    if (this.store(b, s, e)) this.str = v;
    return v;
  }

  buffer(b: Buffer, s: number, e: number): Buffer {
    if (this.hit(b, s, e)) return this.buf!;
    // A copy: the cached value must not keep the whole chunk alive.
    const v = Buffer.from(b.subarray(s, e));
    if (this.store(b, s, e)) this.buf = v;
    return v;
  }

  /**
   * Remembers b[s, e) as the bytes of the value about to be kept; false (and nothing kept,
   * not even the previous value) when they are longer than the cache: a field of the log can
   * be megabytes long, and one kept per field and stream would add up.
   */
  private store(b: Buffer, s: number, e: number): boolean {
    const n = e - s;
    const c = this.bytes;
    if (n > c.length) {
      this.len = -1;
      this.str = null;
      this.buf = null;
      return false;
    }
    // A loop: for a few bytes, much cheaper than the native copy.
    for (let i = 0; i < n; i++) c[i] = b[s + i]!;
    this.len = n;
    return true;
  }
}
