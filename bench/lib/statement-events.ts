// Statement events from the real parser (LogParser) reading generated stderr log text of a
// pgbench-like load (the TPC-B script in the simple protocol, about 10 % extended-protocol
// executes with parameters): the rows the store benchmarks write, the same every run.
import type { PglogEvent, StatementEvent } from '@pglog/collector/logformat/events.ts';
import { LogParser } from '@pglog/collector/logformat/log-parser.ts';
import { pgbenchStatement } from '@pglog/test-support/pgbench-statements.ts';

const PREFIX = '%m [%p] %q%u@%d ';

/** xorshift32, seeded: the same events every run. */
function rng(seed: number): (n: number) => number {
  let s = seed >>> 0;
  return (n) => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s % n;
  };
}

export function generateLog(statements: number): string {
  const r = rng(20261123);
  const base = Date.now() - 3_600_000; // an hour ago: today's partition
  const pids = Array.from({ length: 32 }, () => 10_000 + r(4_000_000));
  const lines: string[] = [];
  for (let i = 0; i < statements; i++) {
    const ts = `${new Date(base + Math.floor(i / 20)).toISOString().replace('T', ' ').slice(0, 23)} UTC`;
    const pid = pids[i % pids.length] as number;
    const aid = 1 + r(10_000_000);
    const delta = r(10_000) - 5000;
    const ms = ((8 + r(900)) / 1000).toFixed(3);
    const head = `${ts} [${pid}] app@bench LOG:  duration: ${ms} ms  `;
    if (r(10) === 0) {
      lines.push(`${head}execute <unnamed>: UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2`);
      lines.push(`${ts} [${pid}] app@bench DETAIL:  parameters: $1 = '${delta}', $2 = '${aid}'`);
      continue;
    }
    lines.push(`${head}statement: ${pgbenchStatement(i, r)}`);
  }
  return lines.join('\n') + '\n';
}

export function parseEvents(text: string): StatementEvent[] {
  const events: PglogEvent[] = [];
  const parser = new LogParser({ format: 'stderr', prefix: PREFIX, encodings: { defaultEncoding: 'UTF8', databases: {} } }, (e) => events.push(e));
  parser.push(Buffer.from(text, 'latin1'));
  parser.end();
  const statements = events.filter((e): e is StatementEvent => e.kind === 'statement');
  if (statements.length !== events.length) throw new Error(`expected only statements, got ${events.length - statements.length} other events`);
  return statements;
}
