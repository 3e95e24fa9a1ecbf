// The pgbench TPC-B script, one statement a step, with random literals: the statement text
// the benchmarks feed the parser and the writer, from one place.

/** Statement `step % 7` of the TPC-B transaction; `int(n)` draws an integer in [0, n). */
export function pgbenchStatement(step: number, int: (n: number) => number): string {
  const aid = 1 + int(10_000_000);
  const tid = 1 + int(1000);
  const bid = 1 + int(100);
  const delta = int(10_001) - 5000;
  switch (step % 7) {
    case 0:
      return 'BEGIN;';
    case 1:
      return `UPDATE pgbench_accounts SET abalance = abalance + ${delta} WHERE aid = ${aid};`;
    case 2:
      return `SELECT abalance FROM pgbench_accounts WHERE aid = ${aid};`;
    case 3:
      return `UPDATE pgbench_tellers SET tbalance = tbalance + ${delta} WHERE tid = ${tid};`;
    case 4:
      return `UPDATE pgbench_branches SET bbalance = bbalance + ${delta} WHERE bid = ${bid};`;
    case 5:
      return `INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (${tid}, ${bid}, ${aid}, ${delta}, CURRENT_TIMESTAMP);`;
    default:
      return 'END;';
  }
}
