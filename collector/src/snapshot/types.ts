/**
 * What one SQL snapshot of a PostgreSQL instance holds (issue 7, docs/snapshots.md),
 * between the queries that read it (snapshot/queries.ts), the store that writes it
 * (store/snapshot-tables.ts, migrations/0003_snapshots.sql) and the reports that read it back
 * (report/). Times are the monitored server's clock (`now()` / `statement_timestamp()` of the
 * snapshot transaction), so durations never mix two machines' clocks.
 */

/** The two schedules of an instance: activity and locks, and the cumulative statistics. */
export type SnapshotKind = 'activity' | 'statistics';

/** One backend of `pg_stat_activity` (client backends and parallel workers; not the server's own processes). */
export interface ActivitySession {
  pid: number;
  /** Parallel group leader (`leader_pid`, PostgreSQL 13+), else null. */
  leaderPid: number | null;
  database: string | null;
  username: string | null;
  application: string | null;
  /** `client_addr` as text, or `local` for a Unix socket connection; null for a background worker. */
  client: string | null;
  backendType: string | null;
  /** `active`, `idle`, `idle in transaction`, `idle in transaction (aborted)`, `fastpath function call`, `disabled`. */
  state: string | null;
  waitEventType: string | null;
  waitEvent: string | null;
  backendStart: Date | null;
  xactStart: Date | null;
  queryStart: Date | null;
  stateChange: Date | null;
  /** Text of the current (or, when idle, the last) statement; at most `track_activity_query_size` bytes. */
  query: string | null;
  /** Template fingerprint of `query` (the log parser's normalizer), '' when there is no query. */
  fingerprint: string;
  /** `pg_blocking_pids(pid)`: the sessions this one waits for (empty when it does not wait on a lock). */
  blockedBy: number[];
}

/**
 * One edge of a blocking chain: `pid` waits for a lock that `blockingPid` holds or is queued
 * for ahead of it (pg_blocking_pids counts both).
 */
export interface BlockingEdge {
  /** The waiting session. */
  pid: number;
  /** The session it waits for. */
  blockingPid: number;
  /** Database of the waiting session. */
  database: string | null;
  /** `pg_locks.locktype` of the lock waited for: `relation`, `transactionid`, `tuple`, `advisory`, ... */
  lockType: string;
  /** Mode the waiter asked for, e.g. `ShareLock`. */
  waitMode: string;
  /**
   * Strongest mode the blocker holds on the same lockable object, or null when it holds none
   * and blocks only by being queued ahead with a conflicting request (then `blockerWaitMode`).
   */
  heldMode: string | null;
  /** Mode the blocker itself waits for on the same object, when it is queued ahead; else null. */
  blockerWaitMode: string | null;
  /** `schema.relation` of the locked relation (relation, tuple and page locks), else null. */
  relation: string | null;
  /** When the wait began: `pg_locks.waitstart` (PostgreSQL 14+), else the waiter's `state_change`. */
  waitStart: Date | null;
  /** Milliseconds the waiter has waited at the snapshot's time (from waitStart), null if unknown. */
  waitMs: number | null;
}

/** The counters of a pg_stat_statements entry: cumulative in a sample, differences in a delta. */
export interface StatementCounterValues {
  calls: bigint;
  /** `total_exec_time` (`total_time` before extension 1.8 / PostgreSQL 13), ms. */
  totalExecMs: number;
  rows: bigint;
  sharedBlksHit: bigint;
  sharedBlksRead: bigint;
  tempBlksWritten: bigint;
}

/** What changed in one `pg_stat_statements` entry since the previous sample. */
export interface StatementDelta extends StatementCounterValues {
  database: string | null;
  username: string | null;
  /** `queryid` (int8), as a bigint. */
  queryId: bigint;
  /** `toplevel` (PostgreSQL 14+); true on older servers. */
  toplevel: boolean;
  /** The normalized text pg_stat_statements keeps. */
  query: string;
  /** Template fingerprint of `query` (the log parser's normalizer), so it joins statements from the log. */
  fingerprint: string;
}

/** The counters of one database's `pg_stat_database` row: cumulative in a sample, differences in a delta. */
export interface DatabaseCounterValues {
  database: string;
  /** Sessions connected now (`numbackends`): never a difference. */
  backends: number;
  xactCommit: bigint;
  xactRollback: bigint;
  blksRead: bigint;
  blksHit: bigint;
  tupReturned: bigint;
  tupFetched: bigint;
  tupInserted: bigint;
  tupUpdated: bigint;
  tupDeleted: bigint;
  conflicts: bigint;
  tempFiles: bigint;
  tempBytes: bigint;
  deadlocks: bigint;
}

/** What changed in one database's `pg_stat_database` row since the previous sample. */
export type DatabaseDelta = DatabaseCounterValues;

/** One snapshot of one instance: what its queries returned, at one server time. */
export interface Snapshot {
  target: string;
  instance: string;
  kind: SnapshotKind;
  /** The server's `statement_timestamp()` of the snapshot transaction. */
  ts: Date;
  /** How long the snapshot took from the collector's side (queries, not connecting), ms. */
  durationMs: number;
  /** Activity snapshot with `collect.activity` or `collect.locks`; else empty. */
  sessions: ActivitySession[];
  /** Activity snapshot with `collect.locks`; else empty. */
  blocking: BlockingEdge[];
  /** Statistics snapshot with `collect.statements`; empty on the first sample (no baseline yet). */
  statements: StatementDelta[];
  /** Statistics snapshot with `collect.databases`; empty on the first sample. */
  databases: DatabaseDelta[];
  /** Seconds since the previous statistics sample the deltas are relative to; null for activity or a first sample. */
  intervalSeconds: number | null;
}

/** A snapshot that failed: recorded too, so reports show when a server could not be read. */
export interface SnapshotFailure {
  target: string;
  instance: string;
  kind: SnapshotKind;
  /** The collector's clock (the server's is not known). */
  ts: Date;
  durationMs: number;
  /** The PglogError code (SQL_CONNECT_FAILED, SQL_TIMEOUT, ...). */
  code: string;
  message: string;
}
