/**
 * The snapshot tables the store writer fills (issue 7; schema in migrations/0003_snapshots.sql)
 * and the mapping of a Snapshot or a SnapshotFailure to their rows (pure).
 *
 * As for the event tables (event-tables.ts, whose `table` helper makes these definitions), one
 * definition per table serves the row mapping below, the encoder (`types`) and the COPY
 * statement (`copySql`). Every column of a table is sent, in the order listed here, and the
 * value arrays built below follow that order (a unit test checks every row against its types).
 *
 * Text is cleaned like event text (text-clean.ts): NULs removed, unpaired surrogates replaced,
 * at most `maxTextBytes` of UTF-8 per value. The writer refuses a limit below
 * MIN_MAX_TEXT_BYTES, so a query text keeps at least its first 1000 characters (docs/store.md "Stable views").
 */
import { PglogError } from '@pglog/common/errors.ts';

import type { ActivitySession, BlockingEdge, DatabaseDelta, Snapshot, SnapshotFailure, StatementDelta } from '../snapshot/types.ts';
import type { TableDef } from './event-tables.ts';
import { table } from './event-tables.ts';
import type { TextRepairs } from './text-clean.ts';
import { cleanText, noRepairs } from './text-clean.ts';

/** In the order the writer COPYs them: the samples first, the record of the run last. */
export const SNAPSHOT_TABLES = ['activity_samples', 'blocking_samples', 'statement_deltas', 'database_deltas', 'snapshot_runs'] as const;
export type SnapshotTable = (typeof SNAPSHOT_TABLES)[number];

export const ACTIVITY_TABLE = table('activity_samples', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['pid', 'int4'],
  ['leader_pid', 'int4'],
  ['database', 'text'],
  ['username', 'text'],
  ['application', 'text'],
  ['client', 'text'],
  ['backend_type', 'text'],
  ['state', 'text'],
  ['wait_event_type', 'text'],
  ['wait_event', 'text'],
  ['backend_start', 'timestamptz'],
  ['xact_start', 'timestamptz'],
  ['query_start', 'timestamptz'],
  ['state_change', 'timestamptz'],
  ['blocked_by', 'int4[]'],
  ['fingerprint', 'text'],
  ['query', 'text'],
]);

export const BLOCKING_TABLE = table('blocking_samples', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['database', 'text'],
  ['pid', 'int4'],
  ['blocking_pid', 'int4'],
  ['lock_type', 'text'],
  ['wait_mode', 'text'],
  ['held_mode', 'text'],
  ['blocker_wait_mode', 'text'],
  ['relation', 'text'],
  ['wait_start', 'timestamptz'],
  ['wait_ms', 'float8'],
]);

export const STATEMENT_DELTA_TABLE = table('statement_deltas', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['interval_s', 'float8'],
  ['database', 'text'],
  ['username', 'text'],
  ['queryid', 'int8'],
  ['toplevel', 'bool'],
  ['fingerprint', 'text'],
  ['query', 'text'],
  ['calls', 'int8'],
  ['total_exec_ms', 'float8'],
  ['rows', 'int8'],
  ['shared_blks_hit', 'int8'],
  ['shared_blks_read', 'int8'],
  ['temp_blks_written', 'int8'],
]);

export const DATABASE_DELTA_TABLE = table('database_deltas', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['interval_s', 'float8'],
  ['database', 'text'],
  ['backends', 'int4'],
  ['xact_commit', 'int8'],
  ['xact_rollback', 'int8'],
  ['blks_read', 'int8'],
  ['blks_hit', 'int8'],
  ['tup_returned', 'int8'],
  ['tup_fetched', 'int8'],
  ['tup_inserted', 'int8'],
  ['tup_updated', 'int8'],
  ['tup_deleted', 'int8'],
  ['conflicts', 'int8'],
  ['temp_files', 'int8'],
  ['temp_bytes', 'int8'],
  ['deadlocks', 'int8'],
]);

export const SNAPSHOT_RUN_TABLE = table('snapshot_runs', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['kind', 'text'],
  ['duration_ms', 'float8'],
  ['sessions', 'int4'],
  ['blocked', 'int4'],
  ['error_code', 'text'],
  ['error', 'text'],
]);

export const SNAPSHOT_TABLE_DEFS: Readonly<Record<SnapshotTable, TableDef<SnapshotTable>>> = {
  activity_samples: ACTIVITY_TABLE,
  blocking_samples: BLOCKING_TABLE,
  statement_deltas: STATEMENT_DELTA_TABLE,
  database_deltas: DATABASE_DELTA_TABLE,
  snapshot_runs: SNAPSHOT_RUN_TABLE,
};

/** The value rows of one snapshot per table, each in its table's column order (empty: nothing to write). */
export type SnapshotRows = Record<SnapshotTable, unknown[][]>;

/** A failed run carries its error code; a snapshot never does. */
export function isSnapshotFailure(s: Snapshot | SnapshotFailure): s is SnapshotFailure {
  return 'code' in s;
}

/**
 * The rows of a snapshot: its sessions, blocking edges and deltas, and one snapshot_runs row
 * (sessions = number of sessions, blocked = number of distinct waiting pids). A failure is one
 * snapshot_runs row with its error code and message. Text repairs are counted into `repairs`.
 * Throws PglogError STORE_ENCODING for a snapshot the tables cannot hold (deltas without the
 * interval they cover); values of the wrong type are left to the encoder, which names them.
 */
export function snapshotRows(s: Snapshot | SnapshotFailure, maxTextBytes: number, repairs: TextRepairs = noRepairs()): SnapshotRows {
  const text = (v: string): string => cleanText(v, maxTextBytes, repairs);
  const orNull = (v: string | null): string | null => (v === null ? null : text(v));
  // Every row of a snapshot starts with the same three values; the two texts are cleaned once.
  const ts = s.ts;
  const target = text(s.target);
  const instance = text(s.instance);
  const out: SnapshotRows = { activity_samples: [], blocking_samples: [], statement_deltas: [], database_deltas: [], snapshot_runs: [] };

  if (isSnapshotFailure(s)) {
    out.snapshot_runs.push([ts, target, instance, s.kind, s.durationMs, 0, 0, text(s.code), text(s.message)]);
    return out;
  }

  if ((s.statements.length > 0 || s.databases.length > 0) && s.intervalSeconds === null) {
    throw new PglogError(
      'STORE_ENCODING',
      `${s.target}/${s.instance}: a ${s.kind} snapshot with statement or database deltas must say the interval they cover (intervalSeconds is null)`,
    );
  }
  const interval = s.intervalSeconds;
  const head = [ts, target, instance] as const;

  for (const a of s.sessions) out.activity_samples.push(activityRow(head, a, text, orNull));
  for (const b of s.blocking) out.blocking_samples.push(blockingRow(head, b, text, orNull));
  for (const d of s.statements) out.statement_deltas.push(statementRow(head, interval, d, text, orNull));
  for (const d of s.databases) out.database_deltas.push(databaseRow(head, interval, d, text));
  const blocked = new Set(s.blocking.map((b) => b.pid)).size;
  out.snapshot_runs.push([ts, target, instance, s.kind, s.durationMs, s.sessions.length, blocked, null, null]);
  return out;
}

type Head = readonly [Date, string, string];
type Clean = (v: string) => string;
type CleanOrNull = (v: string | null) => string | null;

function activityRow(head: Head, a: ActivitySession, text: Clean, orNull: CleanOrNull): unknown[] {
  return [
    ...head,
    a.pid,
    a.leaderPid,
    orNull(a.database),
    orNull(a.username),
    orNull(a.application),
    orNull(a.client),
    orNull(a.backendType),
    orNull(a.state),
    orNull(a.waitEventType),
    orNull(a.waitEvent),
    a.backendStart,
    a.xactStart,
    a.queryStart,
    a.stateChange,
    a.blockedBy,
    text(a.fingerprint),
    orNull(a.query),
  ];
}

function blockingRow(head: Head, b: BlockingEdge, text: Clean, orNull: CleanOrNull): unknown[] {
  return [
    ...head,
    orNull(b.database),
    b.pid,
    b.blockingPid,
    text(b.lockType),
    text(b.waitMode),
    orNull(b.heldMode),
    orNull(b.blockerWaitMode),
    orNull(b.relation),
    b.waitStart,
    b.waitMs,
  ];
}

function statementRow(head: Head, interval: number | null, d: StatementDelta, text: Clean, orNull: CleanOrNull): unknown[] {
  return [
    ...head,
    interval,
    orNull(d.database),
    orNull(d.username),
    d.queryId,
    d.toplevel,
    text(d.fingerprint),
    text(d.query),
    d.calls,
    d.totalExecMs,
    d.rows,
    d.sharedBlksHit,
    d.sharedBlksRead,
    d.tempBlksWritten,
  ];
}

function databaseRow(head: Head, interval: number | null, d: DatabaseDelta, text: Clean): unknown[] {
  return [
    ...head,
    interval,
    text(d.database),
    d.backends,
    d.xactCommit,
    d.xactRollback,
    d.blksRead,
    d.blksHit,
    d.tupReturned,
    d.tupFetched,
    d.tupInserted,
    d.tupUpdated,
    d.tupDeleted,
    d.conflicts,
    d.tempFiles,
    d.tempBytes,
    d.deadlocks,
  ];
}
