/**
 * Bytes to lines, without decoding. Finds `\n` with `Buffer.indexOf` (memchr); a line that
 * lies inside one chunk is handed over as indices into that chunk (no copy, no allocation);
 * a line that spans chunks is kept as a list of pieces and joined once when its end arrives.
 *
 * A `\r` just before `\n` is not part of the line. A line longer than `maxEntryBytes` keeps
 * its first `maxEntryBytes` bytes; the rest is dropped as it arrives (never buffered) and the
 * line is delivered with `truncated = true`. Offsets count every byte, dropped ones included.
 *
 * Pushed chunks must not be modified afterwards: lines (and the records built from them)
 * refer to the chunks' memory. The start of a line still open when a chunk ends is copied when
 * it is a small part of the chunk (so the chunk need not outlive its push).
 */
import { ownCopy, PieceList, worthCopying } from './piece-list.ts';

/** `bytes[from, to)` is the line without its terminator; `offset` is the stream offset of its
 * first byte, `next` the stream offset just past its terminator. */
export type LineHandler = (bytes: Buffer, from: number, to: number, offset: number, next: number, truncated: boolean) => void;

export interface LineSplitterOptions {
  /** Longest line kept, in bytes (excluding the terminator). Default DEFAULT_MAX_ENTRY_BYTES. */
  maxEntryBytes?: number | undefined;
}

export const DEFAULT_MAX_ENTRY_BYTES = 10 * 1024 * 1024;

const LF = 10;
const CR = 13;

export class LineSplitter {
  private readonly onLine: LineHandler;
  private readonly max: number;
  /** Stream offset of the next byte to be pushed. */
  private offset: number;
  /** Pieces of the pending line (a line that started in an earlier chunk; however small the chunks, piece-list.ts). */
  private readonly pieces = new PieceList();
  /** Bytes kept in `pieces` (at most max + 1, so that a final `\r` fits). */
  private kept = 0;
  /** Bytes seen of the pending line, dropped ones included. */
  private pending = 0;
  /** Last byte seen of the pending line (to strip a `\r` that ended a dropped tail). */
  private lastByte = -1;
  private lineStart = 0;
  private bytesCount = 0;
  private linesCount = 0;
  private truncatedCount = 0;

  constructor(onLine: LineHandler, options?: LineSplitterOptions, startOffset = 0) {
    this.onLine = onLine;
    const max = options?.maxEntryBytes ?? DEFAULT_MAX_ENTRY_BYTES;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxEntryBytes must be a positive integer, got ${String(max)}`);
    this.max = max;
    this.offset = startOffset;
  }

  get bytes(): number {
    return this.bytesCount;
  }
  get lines(): number {
    return this.linesCount;
  }
  get truncatedLines(): number {
    return this.truncatedCount;
  }
  /** Bytes of a line whose terminator has not arrived yet (0 when the input ends on a line end). */
  get pendingBytes(): number {
    return this.pending;
  }

  push(chunk: Buffer): void {
    const len = chunk.length;
    if (len === 0) return;
    const base = this.offset;
    this.offset = base + len;
    this.bytesCount += len;
    let pos = 0;
    if (this.pending > 0) {
      const nl = chunk.indexOf(LF, 0);
      if (nl === -1) {
        this.keep(chunk, 0, len);
        return;
      }
      this.finishPending(chunk, nl, base + nl + 1);
      pos = nl + 1;
    }
    const max = this.max;
    const onLine = this.onLine;
    let lines = 0;
    while (pos < len) {
      const nl = chunk.indexOf(LF, pos);
      if (nl === -1) break;
      let end = nl;
      if (end > pos && chunk[end - 1] === CR) end--;
      lines++;
      if (end - pos > max) {
        this.truncatedCount++;
        onLine(chunk, pos, pos + max, base + pos, base + nl + 1, true);
      } else {
        onLine(chunk, pos, end, base + pos, base + nl + 1, false);
      }
      pos = nl + 1;
    }
    this.linesCount += lines;
    if (pos < len) {
      this.lineStart = base + pos;
      this.keep(chunk, pos, len);
    }
  }

  /** End of input: a last line without terminator is delivered as it is. */
  end(): void {
    if (this.pending === 0) return;
    const next = this.offset;
    const total = this.pending;
    const truncated = total > this.max;
    const keep = truncated ? this.max : total;
    this.deliver(keep, next, truncated);
  }

  private keep(chunk: Buffer, from: number, to: number): void {
    const n = to - from;
    this.pending += n;
    this.lastByte = chunk[to - 1]!;
    const room = this.max + 1 - this.kept;
    if (room <= 0) return;
    const take = n < room ? n : room;
    // The start of a line whose end is in a later chunk: copied when it is a small part of
    // this one (piece-list.ts worthCopying), so that the chunk need not live until then.
    if (worthCopying(take, chunk.buffer)) this.pieces.push(ownCopy(chunk.subarray(from, from + take)));
    else this.pieces.push(from === 0 && take === chunk.length ? chunk : chunk.subarray(from, from + take));
    this.kept += take;
  }

  /** The pending line ends at `chunk[nl]` (the `\n`). */
  private finishPending(chunk: Buffer, nl: number, next: number): void {
    if (nl > 0) this.keep(chunk, 0, nl);
    const cr = this.lastByte === CR ? 1 : 0;
    const content = this.pending - cr;
    const truncated = content > this.max;
    this.deliver(truncated ? this.max : content, next, truncated);
  }

  private deliver(length: number, next: number, truncated: boolean): void {
    const line = this.pieces.take();
    const offset = this.lineStart;
    this.kept = 0;
    this.pending = 0;
    this.lastByte = -1;
    this.linesCount++;
    if (truncated) this.truncatedCount++;
    this.onLine(line, 0, length, offset, next, truncated);
  }
}
