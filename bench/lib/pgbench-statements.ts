// The pgbench TPC-B script, one statement a step, with random literals: the statement text
// the benchmarks feed the parser and the writer, from one place. Each statement is a template
// (text pieces and the values between them), so the ingest benchmark's log writer can write
// it as bytes without building strings (bench/ingest/statements.ts).

/** The values a statement draws (pgbenchValues), by their index in the array it fills. */
export const AID = 0;
export const TID = 1;
export const BID = 2;
export const DELTA = 3;

/** Statement `step % 7`: text pieces, and between them the index of a value (AID, TID, ...). */
export const PGBENCH_TEMPLATES: ReadonlyArray<ReadonlyArray<string | number>> = [
  ['BEGIN;'],
  ['UPDATE pgbench_accounts SET abalance = abalance + ', DELTA, ' WHERE aid = ', AID, ';'],
  ['SELECT abalance FROM pgbench_accounts WHERE aid = ', AID, ';'],
  ['UPDATE pgbench_tellers SET tbalance = tbalance + ', DELTA, ' WHERE tid = ', TID, ';'],
  ['UPDATE pgbench_branches SET bbalance = bbalance + ', DELTA, ' WHERE bid = ', BID, ';'],
  ['INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (', TID, ', ', BID, ', ', AID, ', ', DELTA, ', CURRENT_TIMESTAMP);'],
  ['END;'],
];

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
  let text = '';
  for (const piece of PGBENCH_TEMPLATES[step % 7]!) text += typeof piece === 'string' ? piece : String(values[piece]);
  return text;
}
