/**
 * Realistic PostgreSQL stderr log entries for the benchmarks and the fleet simulator
 * (fleet-sim/): what a server running a pgbench-like load with `log_min_duration_statement = 0`
 * writes, with `log_line_prefix = '%m [%p] %q%u@%d '`.
 *
 * Mix (by entry): the pgbench TPC-B transaction in the simple protocol (BEGIN, three UPDATEs,
 * a SELECT, an INSERT, END), about 10 % extended-protocol executes with their
 * `DETAIL:  parameters:` line, and about 8 % longer ORM-style SELECTs with IN lists of varied
 * length and quoted string literals, so normalization (literal stripping, list collapsing) and
 * fingerprinting cost what they cost on real logs. Every literal varies; pids and users vary per
 * simulated backend. Everything is ASCII, so a chunk is written as latin1 bytes (one byte per
 * character, no UTF-8 encoding pass).
 */
import { PGBENCH_TEMPLATES, pgbenchValues } from './pgbench-statements.ts';

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

/** Escaped for a quoted SQL string, as latin1 bytes. */
const WORD_BYTES = WORDS.map((w) => Buffer.from(w.replace("'", "''"), 'latin1'));

// The constant text of the entries, as bytes (latin1: everything here is ASCII).
const bytes = (s: string): Buffer => Buffer.from(s, 'latin1');
const LOG_DURATION = bytes('LOG:  duration: ');
const MS_EXECUTE = bytes(' ms  execute P0_');
const EXECUTE_SQL = bytes(': SELECT abalance FROM pgbench_accounts WHERE aid = $1\n');
const DETAIL_PARAMETERS = bytes("DETAIL:  parameters: $1 = '");
const QUOTE_NL = bytes("'\n");
const MS_STATEMENT = bytes(' ms  statement: ');
const NL = bytes('\n');
const COMMA = bytes(', ');
/** The pgbench statements' templates (PGBENCH_TEMPLATES) with their text as bytes. */
const PGBENCH_BYTES = PGBENCH_TEMPLATES.map(({ pieces, values }) => ({ pieces: pieces.map(bytes), values }));
const JOIN_IN = bytes('SELECT a.aid, a.bid, a.abalance, b.bbalance FROM pgbench_accounts a JOIN pgbench_branches b ON b.bid = a.bid WHERE a.aid IN (');
const JOIN_ORDER = bytes(') ORDER BY a.aid LIMIT ');
const SEMI = bytes(';');
const ORDERS_STATUS = bytes("SELECT o.id, o.created_at, o.total, c.email FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status = '");
const ORDERS_SINCE = bytes("' AND o.created_at >= '2026-11-");
const ORDERS_TOTAL = bytes("' AND o.total > ");
const ORDERS_OFFSET = bytes(' ORDER BY o.created_at DESC LIMIT 50 OFFSET ');
const EVENTS_INSERT = bytes('INSERT INTO order_events (order_id, status, attempt, created_at) VALUES ');
const EVENTS_CONFLICT = bytes(' ON CONFLICT (order_id, status) DO UPDATE SET attempt = EXCLUDED.attempt;');
const ROW_OPEN = bytes('(');
const ROW_WORD = bytes(", '");
const ROW_ATTEMPT = bytes("', ");
const ROW_CLOSE = bytes(', now())');

/**
 * Entries of one simulated server. `entries(ts, minBytes)` returns whole entries (each one or
 * two lines, newline-terminated) of at least `minBytes` characters in total, all stamped `ts`;
 * `entriesBytes` the same as latin1 bytes.
 *
 * Written as bytes into one reused Buffer, not built as strings: the log writer shares a core
 * with the store, and with each entry's strings built and joined it took a quarter of that
 * core at 20 MB/s, with bytes a sixth (docs/benchmarks.md, the CPU target's notes: "What
 * shares the store's core").
 */
export class StatementLog {
  private readonly rng: Rng;
  private readonly int: (n: number) => number;
  /** Simulated backends: each has a pid, a user and a database (`tail`), and walks the pgbench script. */
  private readonly backends: Array<{ step: number; tail: Buffer }>;
  /** Statement entries produced (one per `duration: ... ms` entry). */
  statements = 0;
  /** Lines produced. */
  lines = 0;
  private buf = Buffer.allocUnsafe(1 << 16);
  private at = 0;
  /** The entries' `%m`, set per call. */
  private ts: Buffer = Buffer.alloc(0);
  private readonly values: number[] = [0, 0, 0, 0];

  constructor(seed: number, backends = 16) {
    const rng = new Rng(seed);
    this.rng = rng;
    this.int = (n) => rng.int(n);
    this.backends = Array.from({ length: backends }, () => {
      const pid = 1000 + rng.int(4_000_000);
      const who = `${USERS[rng.int(USERS.length)]!}@${DATABASES[rng.int(DATABASES.length)]!}`;
      // The prefix after `%m`, as bytes once.
      return { step: rng.int(7), tail: bytes(` [${pid}] ${who} `) };
    });
  }

  entries(ts: string, minBytes: number): string {
    return this.entriesBytes(ts, minBytes).toString('latin1');
  }

  /** As entries(), as bytes: a view of this log's memory, valid until its next call. */
  entriesBytes(ts: string, minBytes: number): Buffer {
    this.ts = bytes(ts);
    this.at = 0;
    while (this.at < minBytes) this.entry();
    return this.buf.subarray(0, this.at);
  }

  private entry(): void {
    const rng = this.rng;
    const b = this.backends[rng.int(this.backends.length)]!;
    this.statements++;
    const pick = rng.int(100);
    if (pick < 10) {
      // pgbench -M extended: one execute entry, its parameters on a DETAIL line.
      this.lines += 2;
      const aid = 1 + rng.int(10_000_000);
      this.prefix(b.tail);
      this.put(LOG_DURATION);
      this.duration(false);
      this.put(MS_EXECUTE);
      this.number(1 + rng.int(7));
      this.put(EXECUTE_SQL);
      this.prefix(b.tail);
      this.put(DETAIL_PARAMETERS);
      this.number(aid);
      this.put(QUOTE_NL);
      return;
    }
    this.lines += 1;
    this.prefix(b.tail);
    this.put(LOG_DURATION);
    if (pick < 18) {
      this.duration(true);
      this.put(MS_STATEMENT);
      this.ormSelect();
    } else {
      const step = b.step;
      b.step = (step + 1) % 7;
      this.duration(step === 1);
      this.put(MS_STATEMENT);
      this.pgbench(step);
    }
    this.put(NL);
  }

  /** The pgbench TPC-B script, one statement per step. */
  private pgbench(step: number): void {
    const values = this.values;
    pgbenchValues(this.int, values);
    const { pieces, values: at } = PGBENCH_BYTES[step % 7]!;
    this.put(pieces[0]!);
    for (let k = 0; k < at.length; k++) {
      this.number(values[at[k]!]!);
      this.put(pieces[k + 1]!);
    }
  }

  /** Longer application queries: joins, IN lists of 1-40 items, string and numeric literals. */
  private ormSelect(): void {
    const rng = this.rng;
    const kind = rng.int(3);
    if (kind === 0) {
      this.put(JOIN_IN);
      const ids = 1 + rng.int(40);
      for (let k = 0; k < ids; k++) {
        if (k > 0) this.put(COMMA);
        this.number(1 + rng.int(10_000_000));
      }
      this.put(JOIN_ORDER);
      this.number(10 * (1 + rng.int(10)));
      this.put(SEMI);
      return;
    }
    if (kind === 1) {
      this.put(ORDERS_STATUS);
      this.put(WORD_BYTES[rng.int(WORDS.length)]!);
      this.put(ORDERS_SINCE);
      this.fixed(1 + rng.int(22), 0, 2);
      this.put(ORDERS_TOTAL);
      this.fixed(rng.int(100_000), 2, 1);
      this.put(ORDERS_OFFSET);
      this.number(rng.int(20) * 50);
      this.put(SEMI);
      return;
    }
    this.put(EVENTS_INSERT);
    const n = 1 + rng.int(5);
    for (let k = 0; k < n; k++) {
      if (k > 0) this.put(COMMA);
      this.put(ROW_OPEN);
      this.number(1 + rng.int(1_000_000));
      this.put(ROW_WORD);
      this.put(WORD_BYTES[rng.int(WORDS.length)]!);
      this.put(ROW_ATTEMPT);
      this.number(rng.int(1000));
      this.put(ROW_CLOSE);
    }
    this.put(EVENTS_CONFLICT);
  }

  /** Mostly sub-millisecond, a long tail for the heavier statements: microseconds as milliseconds with 3 decimals. */
  private duration(slow: boolean): void {
    const rng = this.rng;
    this.fixed(slow ? 200 + rng.int(40_000) : 8 + rng.int(900), 3, 1);
  }

  private prefix(tail: Buffer): void {
    this.put(this.ts);
    this.put(tail);
  }

  private put(piece: Buffer): void {
    const n = piece.length;
    this.room(n);
    const buf = this.buf;
    const at = this.at;
    // Most pieces are short: a loop costs less than a native copy's call.
    if (n <= 32) for (let k = 0; k < n; k++) buf[at + k] = piece[k]!;
    else piece.copy(buf, at);
    this.at = at + n;
  }

  /** A non-negative or negative integer in decimal. */
  private number(v: number): void {
    this.room(12);
    if (v < 0) {
      this.buf[this.at++] = 0x2d;
      v = -v;
    }
    this.digits(v, 1);
  }

  /**
   * The non-negative integer `v` divided by 10^decimals, with exactly `decimals` decimals
   * (what `(v / 10 ** decimals).toFixed(decimals)` writes), its whole part at least `width` digits.
   */
  private fixed(v: number, decimals: number, width: number): void {
    this.room(24);
    const scale = 10 ** decimals;
    const frac = v % scale;
    this.digits((v - frac) / scale, width);
    if (decimals === 0) return;
    this.buf[this.at++] = 0x2e;
    this.digits(frac, decimals);
  }

  /** The non-negative integer `v`, zero-padded to at least `width` digits (room ensured by the caller). */
  private digits(v: number, width: number): void {
    let n = 1;
    for (let p = 10; p <= v; p *= 10) n++;
    if (n < width) n = width;
    const buf = this.buf;
    let at = this.at + n;
    this.at = at;
    for (let k = 0; k < n; k++) {
      buf[--at] = 0x30 + (v % 10);
      v = Math.floor(v / 10);
    }
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(grown, 0, 0, this.at);
    this.buf = grown;
  }
}
