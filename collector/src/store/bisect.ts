/**
 * Finding the rows the server refuses, without giving up the rest of the batch (pure: the
 * attempt is a callback, so this is tested without a server).
 *
 * `attempt(rows)` writes the rows (in the writer: a COPY inside a SAVEPOINT, rolled back to
 * the savepoint when it fails) and returns null on success or the rejection when the server
 * refused them for a reason in the data. Any other failure is thrown and ends everything.
 * A refused set is split and each part tried again, until a single row that still fails is
 * known to be bad. When the rejection names the row it stopped at (the server's
 * `COPY x, line N` context), the split is made around that row (the rows before it, the row
 * alone, the rows after it), which finds a poison row in three attempts instead of log2(n);
 * a wrong hint only costs attempts, never a good row, because every row is confirmed alone.
 */

export interface Rejection {
  /** What the server said, for the quarantine reason. */
  reason: string;
  /** 0-based index, within the attempted rows, of the row the server stopped at, when known. */
  rowIndex: number | null;
}

export interface BisectOutcome<R> {
  /** Rows refused on their own, with the reason. */
  rejected: Array<{ row: R; rejection: Rejection }>;
  /** Attempts made (1 when everything went in at once). */
  attempts: number;
}

export async function writeWithBisection<R>(rows: readonly R[], attempt: (rows: readonly R[]) => Promise<Rejection | null>): Promise<BisectOutcome<R>> {
  const rejected: Array<{ row: R; rejection: Rejection }> = [];
  let attempts = 0;
  // An explicit stack, not recursion: parts are tried in row order, the last pushed first.
  const stack: R[][] = [rows.slice()];
  while (stack.length > 0) {
    const part = stack.pop() as R[];
    if (part.length === 0) continue;
    attempts++;
    const rejection = await attempt(part);
    if (rejection === null) continue;
    if (part.length === 1) {
      rejected.push({ row: part[0] as R, rejection });
      continue;
    }
    const at = rejection.rowIndex;
    if (at !== null && at >= 0 && at < part.length) {
      // Tried next: the rows before it (the server accepted them up to the failing row, so
      // they most likely go in at once), then the row alone, then the rows after it.
      stack.push(part.slice(at + 1), [part[at] as R], part.slice(0, at));
    } else {
      const mid = part.length >>> 1;
      stack.push(part.slice(mid), part.slice(0, mid));
    }
  }
  return { rejected, attempts };
}
