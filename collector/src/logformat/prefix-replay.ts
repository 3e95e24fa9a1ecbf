/**
 * The memory of CompiledPrefix's last match (prefix-matcher.ts), for replaying it on a line
 * that starts with the same bytes: where the bytes the match read are and the index of its
 * severity, relative to the line's start (the spans stay in CompiledPrefix).
 */

/**
 * The most bytes a severity try reads from where it starts: the longest word (`STATEMENT`),
 * its colon and two spaces (severity.ts).
 */
export const SEVERITY_READ = 12;

/** Matches that read more than this are not kept (a field can be megabytes long: not compared again). */
const MAX_KEPT = 256;

export class LastMatch {
  /**
   * The line of the match, as a view of its chunk (not a copy: the chunks a parser is given
   * are never changed afterwards, records keep views of them too); null: nothing kept.
   */
  private line: Buffer | null = null;
  /** Where that line starts in `line`. */
  from = 0;
  /** Bytes the match read, from the line's start. */
  private len = 0;
  /** The severity's index, relative to the line's start. */
  at = 0;
  /** Where the last line that did not start with the kept bytes differed, relative to its start: tried first. */
  private differed = 0;

  get valid(): boolean {
    return this.line !== null;
  }

  clear(): void {
    this.line = null;
  }

  /** Memory of its own for the kept bytes, once release() has needed it. */
  private own: Buffer | null = null;

  /**
   * When the kept line is a view of `chunk`, its kept bytes are copied into memory of their
   * own (at most MAX_KEPT), so that the chunk need not live until the next line. Returns how
   * far the line's start moved (what the matcher's spans move by), 0 when nothing moved.
   */
  release(chunk: ArrayBufferLike): number {
    const c = this.line;
    if (c === null || c.buffer !== chunk) return 0;
    const own = (this.own ??= Buffer.allocUnsafeSlow(MAX_KEPT));
    c.copy(own, 0, this.from, this.from + this.len);
    const moved = -this.from;
    this.line = own;
    this.from = 0;
    return moved;
  }

  /** Keeps where the match read b[from, reach) and found the severity at `at`. */
  save(b: Buffer, from: number, reach: number, at: number): void {
    const n = reach - from;
    if (n <= 0 || n > MAX_KEPT) return;
    this.line = b;
    this.from = from;
    this.len = n;
    this.at = at - from;
  }

  /** The line b[from, to) starts with the kept bytes: it becomes the kept line (same bytes, same match). */
  take(b: Buffer, from: number, to: number): boolean {
    const c = this.line;
    const n = this.len;
    if (c === null || to - from < n) return false;
    const d = this.from - from;
    // Lines that differ mostly differ where the last one did (a timestamp's milliseconds): one
    // byte that decides sooner; the loop still compares them all.
    const k = from + this.differed;
    if (k < from + n && b[k] !== c[k + d]) return false;
    // From the end: lines of one second share their start, a session's lines their end (pid, names).
    for (let i = from + n - 1; i >= from; i--) {
      if (b[i] !== c[i + d]) {
        this.differed = i - from;
        return false;
      }
    }
    this.line = b;
    this.from = from;
    return true;
  }
}
