// A fixed workload for a logging PostgreSQL of any major (log-server.ts), the same at every
// version: what it does is known in advance, so a test counts the events parsed from the log
// against it (the version matrix, the csvlog fixtures of old majors). Only the parts whose log
// lines are certain are counted exactly; timings (a lock wait's length) are not part of it.
import type { PglogEvent } from '@pglog/collector/logformat/events.ts';
import pg from 'pg';

import type { PgMajor } from './pg-binaries.ts';

/** postgresql.conf lines the workload needs (every major 10 to 18). */
export function workloadSettings(): string[] {
  return [
    "shared_preload_libraries = 'auto_explain,pg_stat_statements'",
    // Plans only where the workload asks for one (SET in its session).
    'auto_explain.log_min_duration = -1',
    'auto_explain.log_analyze = off',
    'log_checkpoints = on',
    'log_connections = on',
    'log_disconnections = on',
    'log_lock_waits = on',
    "deadlock_timeout = '100ms'",
    'log_temp_files = 0',
    'log_autovacuum_min_duration = 0',
    "autovacuum_naptime = '1s'",
    // No checkpoint of its own during the workload: only the one it asks for.
    "checkpoint_timeout = '1h'",
  ];
}

export interface WorkloadParts {
  /** A lock wait (waiting, then acquired) and a deadlock between two sessions: 0.5 s. */
  locks?: boolean;
  /** Waits (up to 20 s) for autovacuum to vacuum the workload's table. */
  autovacuum?: boolean;
}

/** What the workload did: the counts a parser must find in the log. */
export interface WorkloadCounts {
  /** Sessions opened (one connection event each; each also ends: one disconnection). */
  sessions: number;
  /** Statements sent with the simple query protocol (one `duration: ... statement:` line each), errors included. */
  simpleStatements: number;
  /** Statements sent with the extended protocol (parse, bind and execute lines: one statement event each phase). */
  extendedStatements: number;
  /** ERROR entries (the deadlock's included). */
  errors: number;
  /** auto_explain plans. */
  plans: number;
  /** Temporary files written by the sort (at least one). */
  tempFilesAtLeast: number;
  /** Checkpoints asked for (one `checkpoint complete`). */
  checkpoints: number;
  /** A lock wait: `still waiting` then `acquired`, with `locks`. */
  lockWaits: number;
  /** Deadlocks detected, with `locks`. */
  deadlocks: number;
  /** Whether autovacuum logged a vacuum of the table (with `autovacuum`). */
  autovacuumed: boolean;
  /** The SQLSTATEs of the errors, in order. */
  errorCodes: string[];
}

export const WORKLOAD_TABLE = 'pglog_matrix';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs the workload on the server at `url` (a superuser). Sessions set application_name
 * `pglog-workload`. Resolves once every session has ended (its disconnection is logged).
 */
export async function runWorkload(url: string, major: PgMajor, parts: WorkloadParts = {}): Promise<WorkloadCounts> {
  const counts: WorkloadCounts = {
    sessions: 0,
    simpleStatements: 0,
    extendedStatements: 0,
    errors: 0,
    plans: 0,
    tempFilesAtLeast: 0,
    checkpoints: 0,
    lockWaits: 0,
    deadlocks: 0,
    autovacuumed: false,
    errorCodes: [],
  };
  const open = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString: url, application_name: 'pglog-workload' });
    await client.connect();
    counts.sessions++;
    return client;
  };
  const simple = async (client: pg.Client, sql: string): Promise<void> => {
    counts.simpleStatements++;
    await client.query(sql);
  };
  const failing = async (client: pg.Client, sql: string): Promise<string> => {
    counts.simpleStatements++;
    const code = await client.query(sql).then(
      () => {
        throw new Error(`runWorkload: ${JSON.stringify(sql)} was expected to fail on PostgreSQL ${major}`);
      },
      (e: unknown) => String((e as { code?: unknown }).code),
    );
    counts.errors++;
    counts.errorCodes.push(code);
    return code;
  };

  const a = await open();
  try {
    await simple(a, `CREATE TABLE ${WORKLOAD_TABLE} (id int PRIMARY KEY, v text)`);
    await simple(a, `INSERT INTO ${WORKLOAD_TABLE} SELECT g, md5(g::text) FROM generate_series(1, 3000) g`);
    // A statement over several lines with quotes in it: csvlog doubles them, stderr continues with tabs.
    await simple(a, `SELECT 'it''s "quoted"' AS q,\n       count(*) AS n\n  FROM ${WORKLOAD_TABLE}`);
    // The extended protocol: parse, bind and execute are logged apart.
    counts.extendedStatements++;
    await a.query(`SELECT v FROM ${WORKLOAD_TABLE} WHERE id = $1`, [42]);
    await simple(a, 'SET auto_explain.log_min_duration = 0');
    await simple(a, `SELECT count(*) FROM ${WORKLOAD_TABLE} WHERE id < 100`);
    counts.plans++;
    await simple(a, 'SET auto_explain.log_min_duration = -1');
    await failing(a, 'SELECT 1 / 0');
    // A sort larger than work_mem spills to a temporary file.
    await simple(a, "SET work_mem = '64kB'");
    await simple(a, `SELECT v FROM ${WORKLOAD_TABLE} ORDER BY v DESC`);
    counts.tempFilesAtLeast++;
    await simple(a, 'RESET work_mem');
    await simple(a, 'CHECKPOINT');
    counts.checkpoints++;
  } finally {
    await a.end();
  }

  if (parts.locks === true) await lockWaitAndDeadlock(open, simple, failing, counts);
  if (parts.autovacuum === true) await autovacuum(open, simple, counts);
  return counts;
}

type Open = () => Promise<pg.Client>;
type Run = (client: pg.Client, sql: string) => Promise<void>;
type Fail = (client: pg.Client, sql: string) => Promise<string>;

/** B holds a row; C waits for it past deadlock_timeout (a logged wait), then both deadlock. */
async function lockWaitAndDeadlock(open: Open, simple: Run, failing: Fail, counts: WorkloadCounts): Promise<void> {
  const b = await open();
  const c = await open();
  try {
    await simple(b, 'BEGIN');
    await simple(b, `UPDATE ${WORKLOAD_TABLE} SET v = 'b' WHERE id = 1`);
    await simple(c, 'BEGIN');
    const waiting = simple(c, `UPDATE ${WORKLOAD_TABLE} SET v = 'c' WHERE id = 1`);
    await sleep(300); // past deadlock_timeout: `still waiting` is logged
    await simple(b, 'COMMIT');
    await waiting; // `acquired`
    counts.lockWaits++;
    await simple(c, 'COMMIT');

    // The deadlock: B holds 10 and waits for 20, which C holds; C then asks for 10.
    await simple(b, 'BEGIN');
    await simple(c, 'BEGIN');
    await simple(b, `UPDATE ${WORKLOAD_TABLE} SET v = 'b' WHERE id = 10`);
    await simple(c, `UPDATE ${WORKLOAD_TABLE} SET v = 'c' WHERE id = 20`);
    const bWaits = simple(b, `UPDATE ${WORKLOAD_TABLE} SET v = 'b' WHERE id = 20`);
    await sleep(300); // B's own deadlock check has run and found none
    const code = await failing(c, `UPDATE ${WORKLOAD_TABLE} SET v = 'c' WHERE id = 10`);
    if (code !== '40P01') throw new Error(`runWorkload: the deadlock ended with SQLSTATE ${code}, not 40P01`);
    counts.deadlocks++;
    await simple(c, 'ROLLBACK');
    await bWaits;
    await simple(b, 'COMMIT');
  } finally {
    await Promise.allSettled([b.end(), c.end()]);
  }
}

/** Deletes most rows with autovacuum's thresholds at zero, then waits for its vacuum of the table. */
async function autovacuum(open: Open, simple: Run, counts: WorkloadCounts): Promise<void> {
  const d = await open();
  try {
    await simple(
      d,
      `ALTER TABLE ${WORKLOAD_TABLE} SET (autovacuum_vacuum_threshold = 0, autovacuum_vacuum_scale_factor = 0, autovacuum_analyze_threshold = 0, autovacuum_analyze_scale_factor = 0)`,
    );
    await simple(d, `DELETE FROM ${WORKLOAD_TABLE} WHERE id > 1000`);
    // The polling below is not logged as statements (nor this SET: the setting is read after it ran).
    await d.query('SET log_min_duration_statement = -1');
    for (let waited = 0; waited < 20_000; waited += 200) {
      const r = await d.query<{ n: string }>(`SELECT autovacuum_count::text AS n FROM pg_stat_user_tables WHERE relname = '${WORKLOAD_TABLE}'`);
      if (Number(r.rows[0]?.n ?? 0) > 0) {
        counts.autovacuumed = true;
        break;
      }
      await sleep(200);
    }
  } finally {
    await d.end();
  }
}

/** An event's kind as the workload's expectations name it: lock waits by state, parse and bind steps apart. */
export function eventKey(e: PglogEvent): string {
  if (e.kind === 'lock_wait') return `lock_wait:${e.state}`;
  if (e.kind === 'other' && (e.subtype === 'parse' || e.subtype === 'bind')) return e.subtype;
  return e.kind;
}

export function countEvents(events: readonly PglogEvent[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of events) out[eventKey(e)] = (out[eventKey(e)] ?? 0) + 1;
  return out;
}

export interface ExpectedEvents {
  /** Kinds (eventKey) whose count is certain. */
  exact: Record<string, number>;
  /** Kinds that may come more often (a sort's temporary files, autovacuum of other tables). */
  atLeast: Record<string, number>;
}

/**
 * The events a log of the workload holds, by kind, from what it did (not from any log), for a
 * server stopped after it (the shutdown checkpoint is logged too).
 */
export function expectedEvents(counts: WorkloadCounts, major: PgMajor): ExpectedEvents {
  const waits = counts.lockWaits + counts.deadlocks;
  return {
    exact: {
      // received and authorized; 17+ also logs `connection authenticated`.
      connection: counts.sessions * (major >= 17 ? 3 : 2),
      disconnection: counts.sessions,
      // A failed statement logs no duration; an extended one logs parse, bind and execute.
      statement: counts.simpleStatements - counts.errors + counts.extendedStatements,
      parse: counts.extendedStatements,
      bind: counts.extendedStatements,
      plan: counts.plans,
      error: counts.errors - counts.deadlocks,
      deadlock: counts.deadlocks,
      // starting and complete, for each one asked for and for the shutdown checkpoint.
      checkpoint: 2 * (counts.checkpoints + 1),
      'lock_wait:waiting': waits,
      'lock_wait:acquired': waits,
      'lock_wait:deadlock_detected': counts.deadlocks,
    },
    atLeast: { temp_file: counts.tempFilesAtLeast, ...(counts.autovacuumed ? { autovacuum: 1 } : {}) },
  };
}
