/**
 * Cheap strings and Buffers from line bytes, shared by the prefix matcher and the assemblers:
 * latin1 slices without argument checks, and FieldCache, which hands out the same value
 * while a field's bytes repeat from line to line.
 */

/** Buffer's latin1Slice (what toString('latin1', s, e) ends in, without its argument checks). */
interface Latin1Slicer {
  latin1Slice(start: number, end: number): string;
}
export function latin1(b: Buffer, s: number, e: number): string {
  return (b as unknown as Latin1Slicer).latin1Slice(s, e);
}

/** Longest value a FieldCache slot keeps (bytes). */
const SLOT_BYTES = 64;

/**
 * The values made from a field's bytes lately, reused while the bytes repeat (user, database,
 * session id, backend type ... repeat from line to line): saves an allocation. One slot by
 * default (the last value); fields that alternate among a few values (the users and databases
 * of interleaved sessions) get several, replaced round-robin, the slot of the last hit looked
 * at first. Each slot holds at most 64 bytes and a value of that length: longer values are
 * not kept.
 */
export class FieldCache {
  private readonly slots: number;
  private readonly bytes: Buffer;
  private readonly lens: Int32Array;
  private readonly strs: (string | null)[] = [];
  private readonly bufs: (Buffer | null)[] = [];
  /** The slot of the last hit or store. */
  private last = 0;
  /** The slot the next store replaces (round-robin). */
  private next = 0;

  constructor(slots = 1) {
    this.slots = Math.max(1, Math.floor(slots));
    this.bytes = Buffer.alloc(this.slots * SLOT_BYTES);
    this.lens = new Int32Array(this.slots).fill(-1);
    for (let k = 0; k < this.slots; k++) {
      this.strs.push(null);
      this.bufs.push(null);
    }
  }

  /** The slot holding b[s, e), or -1. */
  private find(b: Buffer, s: number, e: number): number {
    const n = e - s;
    const lens = this.lens;
    const c = this.bytes;
    for (let j = 0, k = this.last; j < this.slots; j++, k = k + 1 === this.slots ? 0 : k + 1) {
      if (lens[k] !== n) continue;
      const at = k * SLOT_BYTES;
      let i = n - 1;
      while (i >= 0 && c[at + i] === b[s + i]) i--;
      if (i < 0) {
        this.last = k;
        return k;
      }
    }
    return -1;
  }

  string(b: Buffer, s: number, e: number): string {
    const k = this.find(b, s, e);
    if (k >= 0) {
      const v = this.strs[k];
      if (v !== null && v !== undefined) return v;
    }
    const v = latin1(b, s, e);
    const at = k >= 0 ? k : this.store(b, s, e);
    if (at >= 0) this.strs[at] = v;
    return v;
  }

  buffer(b: Buffer, s: number, e: number): Buffer {
    const k = this.find(b, s, e);
    if (k >= 0) {
      const v = this.bufs[k];
      if (v !== null && v !== undefined) return v;
    }
    // A copy: the cached value must not keep the whole chunk alive.
    const v = Buffer.from(b.subarray(s, e));
    const at = k >= 0 ? k : this.store(b, s, e);
    if (at >= 0) this.bufs[at] = v;
    return v;
  }

  /**
   * Remembers b[s, e) in the next slot (emptied of its values) and returns that slot; -1 (and
   * nothing kept) when they are longer than a slot: a field of the log can be megabytes long,
   * and one kept per field and stream would add up.
   */
  private store(b: Buffer, s: number, e: number): number {
    const n = e - s;
    if (n > SLOT_BYTES) return -1;
    const k = this.next;
    this.next = k + 1 === this.slots ? 0 : k + 1;
    const c = this.bytes;
    const at = k * SLOT_BYTES;
    // A loop: for a few bytes, much cheaper than the native copy.
    for (let i = 0; i < n; i++) c[at + i] = b[s + i]!;
    this.lens[k] = n;
    this.strs[k] = null;
    this.bufs[k] = null;
    this.last = k;
    return k;
  }
}
