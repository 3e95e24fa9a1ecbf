/**
 * Memory for encoded rows, reused (pure: no I/O). Rows wait for the store encoded
 * (encoded-rows.ts); a Buffer allocated per handover is external memory, and V8 counts every
 * newly allocated external byte towards its next mark-compact: at 20 MB/s offered, handovers
 * allocated anew triggered 4.4 mark-compacts a second against 3.4 for the events they replaced
 * (docs/benchmarks.md). So handovers are copied into slabs of SLAB_BYTES taken from a free
 * list, and a slab goes back to it once every handover in it has committed (give()): in a
 * steady state no external memory is allocated for rows at all.
 *
 * A slab is pinned by the oldest handover in it. Handovers of one batcher lane commit in the
 * order they came, but lanes go at their own pace, so a slab shared by all lanes would be
 * pinned by the slowest one: each lane fills slabs of its own (`take(n, lane)`), and what the
 * budget counts (each handover's own bytes) is exceeded by at most the slab each lane is
 * filling and the free slabs kept. A block larger than a quarter of a slab (a giant entry)
 * gets a Buffer of its own. A slab given back more times than it was taken from is a bug in the
 * caller: it is refused rather than reused while a view of it is still in use.
 */
import { PglogError } from '@pglog/common/errors.ts';

/**
 * Half a MiB: a slab is resident from its first use, and what a collector holds beyond the
 * rows themselves is the slab each lane is filling, the free ones, and the unused rest of
 * slabs a single uncommitted handover pins. A 64 KiB slice of log encodes to about 80 KiB of
 * statement rows, within a quarter (docs/benchmarks.md, ingest: 1 MiB against 512 KiB).
 */
export const SLAB_BYTES = 512 * 1024;
/** Free slabs kept whatever the recent need (a few handovers' worth). */
const MIN_FREE_SLABS = 8;
/**
 * How fast the free list's bound comes down after a burst: by one slab every this many slabs
 * given back. At 10 MB/s, about twenty slabs come back a second, so the memory a store outage
 * made the collector hold is let go over minutes, not at the next commit.
 */
const DECAY_EVERY_GIVEN = 64;

export class Slab {
  readonly buf: Buffer;
  /** Views handed out and not given back yet. */
  refs = 0;
  constructor(bytes: number) {
    this.buf = Buffer.allocUnsafeSlow(bytes);
  }
}

export class SlabPool {
  private readonly slabBytes: number;
  private readonly largest: number;
  /** Per lane, the slab being filled and how much of it is. */
  private readonly filling = new Map<number, { slab: Slab; used: number }>();
  private readonly free: Slab[] = [];
  /** Slabs made since the start: a steady state makes none. */
  made = 0;
  /**
   * Slabs the pool owns (made and not let go): in use, being filled, or free. A slab of a batch
   * whose commit failed is left to the GC, not given back (ADR 0019), and stays counted here:
   * the bound below can then stay up to the most slabs ever in use, which the memory budget
   * bounds, instead of coming down.
   */
  private owned = 0;
  /** The most slabs in use lately: free slabs are kept up to this many (at least MIN_FREE_SLABS). */
  private peakInUse = 0;
  /** Slabs come back since the bound last came down. */
  private givenSinceDecay = 0;

  constructor(slabBytes = SLAB_BYTES) {
    this.slabBytes = slabBytes;
    this.largest = slabBytes >>> 2;
  }

  /** `n` bytes to fill: a view of a slab (given back with give(slab)), or a Buffer of its own (slab null). */
  take(n: number, lane = 0): { buf: Buffer; slab: Slab | null } {
    if (n > this.largest) return { buf: Buffer.allocUnsafeSlow(n), slab: null };
    let at = this.filling.get(lane);
    if (at === undefined || at.used + n > this.slabBytes) {
      const full = at?.slab;
      at = { slab: this.free.pop() ?? this.make(), used: 0 };
      this.filling.set(lane, at);
      // Every owned slab but the free ones is in use (being filled, or pinned by a handover).
      const inUse = this.owned - this.free.length;
      if (inUse > this.peakInUse) this.peakInUse = inUse;
      // A slab whose views were all given back while it was being filled is free now.
      if (full !== undefined && full.refs === 0) this.keep(full);
    }
    const slab = at.slab;
    const buf = slab.buf.subarray(at.used, at.used + n);
    at.used += n;
    slab.refs++;
    return { buf, slab };
  }

  /** A view taken from `slab` is no longer used (the rows in it committed). */
  give(slab: Slab | null): void {
    if (slab === null) return;
    if (slab.refs <= 0) throw new PglogError('STORE_ENCODING', 'a slab of encoded rows was given back more often than it was taken from');
    slab.refs--;
    if (slab.refs === 0 && !this.isFilling(slab)) this.keep(slab);
  }

  /** Slabs waiting to be reused. */
  get freeSlabs(): number {
    return this.free.length;
  }

  private isFilling(slab: Slab): boolean {
    for (const at of this.filling.values()) if (at.slab === slab) return true;
    return false;
  }

  /**
   * A slab with no view in use: kept for reuse while fewer are free than were in use lately.
   * A batch's slabs all come back at its commit and are needed again as the next second's
   * rows are encoded: a slab let go then is garbage promoted into the old generation, and the
   * one made in its place is external memory V8 counts towards its next mark-compact (issue
   * 15: with eight kept, a collector at 10 MB/s made and dropped ten slabs a second, a third
   * of its mark-compacts).
   */
  private keep(slab: Slab): void {
    this.free.push(slab);
    if (++this.givenSinceDecay >= DECAY_EVERY_GIVEN) {
      this.givenSinceDecay = 0;
      if (this.peakInUse > this.owned - this.free.length) this.peakInUse--;
    }
    // Beyond the bound, free slabs are let go (one at a time as it comes down).
    const bound = Math.max(MIN_FREE_SLABS, this.peakInUse);
    while (this.free.length > bound) {
      this.free.pop();
      this.owned--;
    }
  }

  private make(): Slab {
    this.made++;
    this.owned++;
    return new Slab(this.slabBytes);
  }
}
