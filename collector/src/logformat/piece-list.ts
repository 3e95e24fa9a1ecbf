/**
 * The pieces of something that spans lines or chunks (a line cut across chunks, an entry of
 * many lines, a csvlog row with newlines in a field), joined once when it ends.
 *
 * Pieces are views into the chunks they came from (no copy). A view costs about 100 bytes of
 * heap whatever its length, so an entry of millions of one-byte lines, still within the
 * entry cap in bytes, would cost a hundred times its size (measured: 8 MB of `\t` lines in
 * one stderr entry held 500 MB). So every RUN pieces are joined into one Buffer: the heap
 * stays within a few percent of the bytes kept, every byte is copied at most twice, and the
 * joined copy no longer keeps the chunks it came from alive.
 */

/** Pieces joined into one Buffer at a time (each joined Buffer then holds at least RUN bytes). */
const RUN = 1024;

export class PieceList {
  private joined: Buffer[] = [];
  private run: Buffer[] = [];
  private runBytes = 0;
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
    }
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
    this.bytes = 0;
    return out;
  }
}
