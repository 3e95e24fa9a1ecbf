/**
 * Realistic PostgreSQL stderr log entries for the ingest benchmark: what a server running a
 * pgbench-like load with `log_min_duration_statement = 0` writes, with
 * `log_line_prefix = '%m [%p] %q%u@%d '`.
 *
 * Mix (by entry): the pgbench TPC-B transaction in the simple protocol (BEGIN, three UPDATEs,
 * a SELECT, an INSERT, END), about 10 % extended-protocol executes with their
 * `DETAIL:  parameters:` line, and about 8 % longer ORM-style SELECTs with IN lists of varied
 * length and quoted string literals, so normalization (literal stripping, list collapsing) and
 * fingerprinting cost what they cost on real logs. Every literal varies; pids and users vary per
 * simulated backend. Everything is ASCII, so a chunk is built as one string and written as
 * latin1 (one byte per character, no UTF-8 encoding pass).
 */
import { pgbenchStatement } from '../lib/pgbench-statements.ts';

export const LOG_LINE_PREFIX = '%m [%p] %q%u@%d ';

/** xorshift32: fast, seeded, good enough for picking literals. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 0x9e3779b9;
  }
  next(): number {
    let x = this.s;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.s = x >>> 0;
    return this.s;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return this.next() % n;
  }
}

const USERS = ['app', 'app', 'app', 'reporting', 'batch'] as const;
const DATABASES = ['bench', 'bench', 'shop', 'billing'] as const;
const WORDS = ['pending', 'shipped', 'cancelled', 'returned', 'on hold', "o'brien", 'express', 'standard'] as const;

/** `%m`: `2026-11-23 07:20:56.123 UTC` for a wall-clock time in milliseconds. */
export function formatLogTime(ms: number): string {
  return `${new Date(ms).toISOString().replace('T', ' ').slice(0, 23)} UTC`;
}

function duration(rng: Rng, slow: boolean): string {
  // Mostly sub-millisecond, a long tail for the heavier statements.
  const us = slow ? 200 + rng.int(40_000) : 8 + rng.int(900);
  return (us / 1000).toFixed(3);
}

/**
 * Entries of one simulated server. `entries(ts, minBytes)` returns whole entries (each one or
 * two lines, newline-terminated) of at least `minBytes` characters in total, all stamped `ts`.
 */
export class StatementLog {
  private readonly rng: Rng;
  /** Simulated backends: each has a pid, a user and a database, and walks the pgbench script. */
  private readonly backends: Array<{ pid: number; who: string; step: number }>;
  /** Statement entries produced (one per `duration: ... ms` entry). */
  statements = 0;
  /** Lines produced. */
  lines = 0;

  constructor(seed: number, backends = 16) {
    this.rng = new Rng(seed);
    this.backends = Array.from({ length: backends }, () => ({
      pid: 1000 + this.rng.int(4_000_000),
      who: `${USERS[this.rng.int(USERS.length)]!}@${DATABASES[this.rng.int(DATABASES.length)]!}`,
      step: this.rng.int(7),
    }));
  }

  entries(ts: string, minBytes: number): string {
    const parts: string[] = [];
    let n = 0;
    while (n < minBytes) {
      const e = this.entry(ts);
      parts.push(e);
      n += e.length;
    }
    return parts.join('');
  }

  private entry(ts: string): string {
    const rng = this.rng;
    const b = this.backends[rng.int(this.backends.length)]!;
    const prefix = `${ts} [${b.pid}] ${b.who} `;
    this.statements++;
    const pick = rng.int(100);
    if (pick < 10) {
      // pgbench -M extended: one execute entry, its parameters on a DETAIL line.
      this.lines += 2;
      const aid = 1 + rng.int(10_000_000);
      return (
        `${prefix}LOG:  duration: ${duration(rng, false)} ms  execute P0_${1 + rng.int(7)}: SELECT abalance FROM pgbench_accounts WHERE aid = $1\n` +
        `${prefix}DETAIL:  parameters: $1 = '${aid}'\n`
      );
    }
    this.lines += 1;
    if (pick < 18) return `${prefix}LOG:  duration: ${duration(rng, true)} ms  statement: ${this.ormSelect()}\n`;
    const step = b.step;
    b.step = (step + 1) % 7;
    return `${prefix}LOG:  duration: ${duration(rng, step === 1)} ms  statement: ${this.pgbench(step)}\n`;
  }

  /** The pgbench TPC-B script, one statement per step. */
  private pgbench(step: number): string {
    return pgbenchStatement(step, (n) => this.rng.int(n));
  }

  /** Longer application queries: joins, IN lists of 1-40 items, string and numeric literals. */
  private ormSelect(): string {
    const rng = this.rng;
    const kind = rng.int(3);
    if (kind === 0) {
      const ids = Array.from({ length: 1 + rng.int(40) }, () => 1 + rng.int(10_000_000));
      return `SELECT a.aid, a.bid, a.abalance, b.bbalance FROM pgbench_accounts a JOIN pgbench_branches b ON b.bid = a.bid WHERE a.aid IN (${ids.join(', ')}) ORDER BY a.aid LIMIT ${10 * (1 + rng.int(10))};`;
    }
    if (kind === 1) {
      const word = WORDS[rng.int(WORDS.length)]!.replace("'", "''");
      return `SELECT o.id, o.created_at, o.total, c.email FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status = '${word}' AND o.created_at >= '2026-11-${String(1 + rng.int(22)).padStart(2, '0')}' AND o.total > ${(rng.int(100_000) / 100).toFixed(2)} ORDER BY o.created_at DESC LIMIT 50 OFFSET ${rng.int(20) * 50};`;
    }
    const n = 1 + rng.int(5);
    const rows = Array.from({ length: n }, () => `(${1 + rng.int(1_000_000)}, '${WORDS[rng.int(WORDS.length)]!.replace("'", "''")}', ${rng.int(1000)}, now())`);
    return `INSERT INTO order_events (order_id, status, attempt, created_at) VALUES ${rows.join(', ')} ON CONFLICT (order_id, status) DO UPDATE SET attempt = EXCLUDED.attempt;`;
  }
}
