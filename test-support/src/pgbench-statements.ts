// The pgbench TPC-B script, one statement a step, with random literals: the statement text
// the benchmarks feed the parser and the writer, from one place. Each statement is a template
// (text pieces and the values between them), so the ingest benchmark's log writer can write
// it as bytes without building strings (bench/ingest/statements.ts).

/** The values a statement draws (pgbenchValues), by their index in the array it fills. */
export const AID = 0;
export const TID = 1;
export const BID = 2;
export const DELTA = 3;

/** Statement `step % 7`: text, the index of a value (AID, TID, ...), text, and so on. */
const TEMPLATES: ReadonlyArray<ReadonlyArray<string | number>> = [
  ['BEGIN;'],
  ['UPDATE pgbench_accounts SET abalance = abalance + ', DELTA, ' WHERE aid = ', AID, ';'],
  ['SELECT abalance FROM pgbench_accounts WHERE aid = ', AID, ';'],
  ['UPDATE pgbench_tellers SET tbalance = tbalance + ', DELTA, ' WHERE tid = ', TID, ';'],
  ['UPDATE pgbench_branches SET bbalance = bbalance + ', DELTA, ' WHERE bid = ', BID, ';'],
  ['INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (', TID, ', ', BID, ', ', AID, ', ', DELTA, ', CURRENT_TIMESTAMP);'],
  ['END;'],
];

/** Each statement as its text pieces and, after each piece but the last, the index of the value written there. */
export const PGBENCH_TEMPLATES: ReadonlyArray<{ readonly pieces: readonly string[]; readonly values: readonly number[] }> = TEMPLATES.map((t) => {
  if (t.length % 2 === 0 || t.some((p, k) => typeof p !== (k % 2 === 0 ? 'string' : 'number'))) {
    throw new Error(`a pgbench template is not text, value, text, ...: ${JSON.stringify(t)}`);
  }
  return { pieces: t.filter((p) => typeof p === 'string'), values: t.filter((p) => typeof p === 'number') };
});

/** Draws a statement's values into `out` (every step draws all four, in this order); `int(n)` draws an integer in [0, n). */
export function pgbenchValues(int: (n: number) => number, out: number[]): void {
  out[AID] = 1 + int(10_000_000);
  out[TID] = 1 + int(1000);
  out[BID] = 1 + int(100);
  out[DELTA] = int(10_001) - 5000;
}

/** Statement `step % 7` of the TPC-B transaction; `int(n)` draws an integer in [0, n). */
export function pgbenchStatement(step: number, int: (n: number) => number): string {
  const values: number[] = [];
  pgbenchValues(int, values);
  const { pieces, values: at } = PGBENCH_TEMPLATES[step % 7]!;
  let text = pieces[0]!;
  for (let k = 0; k < at.length; k++) text += String(values[at[k]!]) + pieces[k + 1]!;
  return text;
}
