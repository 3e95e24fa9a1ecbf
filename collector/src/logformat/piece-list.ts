/**
 * The pieces of something that spans lines or chunks (a line cut across chunks, an entry of
 * many lines, a csvlog row with newlines in a field), joined once when it ends.
 *
 * Pieces are views into the chunks they came from (no copy). A view costs about 100 bytes of
 * heap whatever its length, so an entry of millions of one-byte lines, still within the
 * entry cap in bytes, would cost a hundred times its size (measured: 8 MB of `\t` lines in
 * one stderr entry held 500 MB). So every RUN pieces are joined into one Buffer: the heap
 * stays within a few percent of the bytes kept, every byte is copied at most twice, and the
 * joined copy no longer keeps the chunks it came from alive. When the chunk a run of pieces
 * views has been parsed, the parser may have those pieces copied (copyViewsOf, ADR 0022):
 * a byte is then copied at most three times.
 */

/**
 * Whether a parser that keeps `kept` bytes of `chunk` past its push should copy them: when
 * they are less than half of the memory the chunk is a view of. A chunk is a socket read (or
 * a slice of a larger one) and, kept by the entry still open at its end, it lived until its
 * stream's next chunk; at tens of reads a second per stream that outlived a scavenge often
 * enough to be promoted, and V8 counts every external byte promoted towards its next
 * mark-compact (issue 15, docs/benchmarks.md: the collector's mark-compacts followed the
 * chunks and slabs it promoted, not its heap). A copy of an entry's start costs less than
 * that; an entry that is most of the chunk is not worth copying.
 */
export function worthCopying(kept: number, chunk: ArrayBufferLike): boolean {
  return kept * 2 < chunk.byteLength;
}

/** `view`'s bytes in memory of their own (not from Buffer's shared pool, which other Buffers keep alive). */
export function ownCopy(view: Buffer): Buffer {
  const own = Buffer.allocUnsafeSlow(view.length);
  view.copy(own);
  return own;
}

/** `pieces[from, to)` joined into memory of their own. */
function ownJoin(pieces: readonly Buffer[], from: number, to: number): Buffer {
  if (to === from + 1) return ownCopy(pieces[from]!);
  let n = 0;
  for (let i = from; i < to; i++) n += pieces[i]!.length;
  const own = Buffer.allocUnsafeSlow(n);
  for (let i = from, at = 0; i < to; i++) at += pieces[i]!.copy(own, at);
  return own;
}

/** Pieces joined into one Buffer at a time (each joined Buffer then holds at least RUN bytes). */
const RUN = 1024;
/** Pieces this short between views of a chunk (the newlines an entry's lines are joined with) go into the views' copy. */
const SHORT_PIECE = 16;

export class PieceList {
  private joined: Buffer[] = [];
  private run: Buffer[] = [];
  private runBytes = 0;
  /** Pieces of `run` before this index were looked at by copyViewsOf already. */
  private checked = 0;
  /** Bytes held. */
  bytes = 0;

  static of(...pieces: Buffer[]): PieceList {
    const list = new PieceList();
    for (const p of pieces) list.push(p);
    return list;
  }

  push(piece: Buffer): void {
    const n = piece.length;
    if (n === 0) return;
    this.run.push(piece);
    this.runBytes += n;
    this.bytes += n;
    if (this.run.length >= RUN) {
      this.joined.push(Buffer.concat(this.run, this.runBytes));
      this.run = [];
      this.runBytes = 0;
      this.checked = 0;
    }
  }

  /**
   * Pieces pushed since the last call that are views of `chunk` are replaced by copies, one
   * copy for each run of them (with the short pieces between them): each byte is copied at
   * most once, since a copy is not a view of any later chunk, and each piece looked at once.
   */
  copyViewsOf(chunk: ArrayBufferLike): void {
    const run = this.run;
    // Compacted in place: `w` is where the next piece kept goes (never after the one read).
    let w = this.checked;
    for (let i = w; i < run.length;) {
      const p = run[i]!;
      if (p.buffer !== chunk) {
        run[w++] = p;
        i++;
        continue;
      }
      let j = i + 1;
      while (j < run.length && (run[j]!.buffer === chunk || run[j]!.length <= SHORT_PIECE)) j++;
      run[w++] = ownJoin(run, i, j);
      i = j;
    }
    run.length = w;
    this.checked = w;
  }

  /** Every piece as one Buffer (the piece itself when there is only one); the list is empty afterwards. */
  take(): Buffer {
    const { joined, run } = this;
    let out: Buffer;
    if (joined.length === 0 && run.length === 1) out = run[0]!;
    else if (joined.length === 1 && run.length === 0) out = joined[0]!;
    else out = Buffer.concat(joined.length === 0 ? run : [...joined, ...run], this.bytes);
    this.joined = [];
    this.run = [];
    this.runBytes = 0;
    this.checked = 0;
    this.bytes = 0;
    return out;
  }
}
