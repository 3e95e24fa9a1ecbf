/**
 * Typed events: what pglog makes of each log entry. These shapes are the `--events` NDJSON
 * output and the rows the store keeps, so field names are snake_case and stable.
 * Text is decoded to UTF-8 (per database encoding) by the time an event exists.
 */

export const EVENT_KINDS = [
  'statement',
  'plan',
  'error',
  'lock_wait',
  'deadlock',
  'checkpoint',
  'autovacuum',
  'autoanalyze',
  'temp_file',
  'connection',
  'disconnection',
  'other',
] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/** Fields every event carries (null where the format or prefix did not log them). */
export interface EventCommon {
  /** Stream offset of the entry's first byte and just past its end (resume point). */
  offset: number;
  end: number;
  /** ISO 8601 with offset when the logged zone is known (UTC, GMT, numeric, common abbreviations); otherwise the text as logged. */
  ts: string | null;
  pid: number | null;
  database: string | null;
  user: string | null;
  application: string | null;
  remote_host: string | null;
  session_id: string | null;
  session_line: number | null;
  backend_type: string | null;
  query_id: string | null;
  severity: string;
  sqlstate: string | null;
  /** The entry was cut at the entry cap. */
  truncated: boolean;
}

/** One statement execution: simple protocol `statement:` or extended protocol `execute`. */
export interface StatementEvent extends EventCommon {
  kind: 'statement';
  /** null when the server logged the statement without a duration (log_statement). */
  duration_ms: number | null;
  protocol: 'simple' | 'extended';
  /** Prepared statement / portal name for the extended protocol, as logged (`<unnamed>`, `S_1`, `S_1/C_2`; without `fetch from`). */
  statement_name: string | null;
  query: string;
  /** The extended protocol's `parameters:` detail, as logged after `parameters: ` (`$1 = '5', $2 = 'x'`). */
  parameters: string | null;
  normalized: string;
  fingerprint: string;
}

/** An auto_explain plan, tied to its query text and execution duration. */
export interface PlanEvent extends EventCommon {
  kind: 'plan';
  duration_ms: number;
  /** auto_explain.log_format. */
  format: 'text' | 'json' | 'yaml' | 'xml';
  query: string;
  normalized: string;
  fingerprint: string;
  /** The plan as logged (text), or the JSON document's text. */
  plan: string;
}

export interface ErrorEvent extends EventCommon {
  kind: 'error';
  message: string;
  detail: string | null;
  hint: string | null;
  context: string | null;
  statement: string | null;
  internal_query: string | null;
  /** 1-based character position of the error in `statement` (csv `query_pos`; the ` at character N` of stderr). */
  cursor_position: number | null;
  /** 1-based character position of the error in `internal_query`. */
  internal_position: number | null;
  /** Fingerprint of `statement`, when there is one, so errors group with their templates. */
  fingerprint: string | null;
}

/**
 * `waiting`: "still waiting for"; `acquired`: granted after waiting; `deadlock_avoided`: "avoided
 * deadlock for ... by rearranging queue order" (still waiting); `deadlock_detected`: "detected
 * deadlock while waiting for" (the wait ends with the deadlock ERROR); `failed`: "failed to
 * acquire" (the wait ended otherwise, e.g. lock_timeout or cancel).
 */
export type LockWaitState = 'waiting' | 'acquired' | 'deadlock_avoided' | 'deadlock_detected' | 'failed';

export interface LockWaitEvent extends EventCommon {
  kind: 'lock_wait';
  state: LockWaitState;
  waiting_pid: number;
  lock_mode: string;
  /** What is locked: transaction, virtual transaction, relation, tuple, advisory lock, ... */
  lock_type: string;
  /** The locked object as logged, e.g. `transaction 1234` or `relation 16384 of database 5`. */
  lock_object: string;
  wait_ms: number;
  holder_pids: number[];
  waiter_pids: number[];
  statement: string | null;
}

export interface DeadlockProcess {
  pid: number;
  lock_mode: string | null;
  lock_object: string | null;
  blocked_by: number | null;
  query: string | null;
}

export interface DeadlockEvent extends EventCommon {
  kind: 'deadlock';
  message: string;
  processes: DeadlockProcess[];
  statement: string | null;
}

export interface CheckpointEvent extends EventCommon {
  kind: 'checkpoint';
  /** `checkpoint` or `restartpoint` (on a standby). */
  checkpoint_kind: 'checkpoint' | 'restartpoint';
  phase: 'starting' | 'complete';
  /** Flags after "starting:", e.g. `time`, `immediate force wait`. */
  reason: string | null;
  buffers_written: number | null;
  buffers_pct: number | null;
  wal_added: number | null;
  wal_removed: number | null;
  wal_recycled: number | null;
  write_s: number | null;
  sync_s: number | null;
  total_s: number | null;
  sync_files: number | null;
  longest_sync_s: number | null;
  average_sync_s: number | null;
  distance_kb: number | null;
  estimate_kb: number | null;
}

/** Shared by autovacuum and autoanalyze reports. */
export interface MaintenanceStats {
  /** `db.schema.table` as logged. */
  table: string;
  buffer_hits: number | null;
  buffer_misses: number | null;
  buffer_dirtied: number | null;
  read_rate_mbs: number | null;
  write_rate_mbs: number | null;
  cpu_user_s: number | null;
  cpu_system_s: number | null;
  elapsed_s: number | null;
}

export interface AutovacuumEvent extends EventCommon, MaintenanceStats {
  kind: 'autovacuum';
  aggressive: boolean;
  wraparound: boolean;
  index_scans: number | null;
  pages_removed: number | null;
  pages_remain: number | null;
  pages_scanned: number | null;
  tuples_removed: number | null;
  tuples_remain: number | null;
  tuples_dead_not_removable: number | null;
  wal_records: number | null;
  wal_fpi: number | null;
  wal_bytes: number | null;
}

export interface AutoanalyzeEvent extends EventCommon, MaintenanceStats {
  kind: 'autoanalyze';
}

export interface TempFileEvent extends EventCommon {
  kind: 'temp_file';
  path: string;
  size_bytes: number;
  statement: string | null;
  fingerprint: string | null;
}

export interface ConnectionEvent extends EventCommon {
  kind: 'connection';
  /** received (TCP/socket accepted), authenticated (PG14+ identity), authorized (session starts), ready (PG17). */
  phase: 'received' | 'authenticated' | 'authorized' | 'ready';
  host: string | null;
  port: string | null;
  identity: string | null;
  method: string | null;
  /** What the message said about the session: user=, database=, application_name=, SSL ... */
  details: string;
}

export interface DisconnectionEvent extends EventCommon {
  kind: 'disconnection';
  session_ms: number;
  host: string | null;
  port: string | null;
}

/** Anything else the server logged: kept, never dropped. */
export interface OtherEvent extends EventCommon {
  kind: 'other';
  message: string;
  detail: string | null;
  hint: string | null;
  context: string | null;
  statement: string | null;
  /** For a recognised message that is not an event of its own, e.g. extended protocol `parse` / `bind` steps or a bare `duration:`. */
  subtype: string | null;
  duration_ms: number | null;
}

export type PglogEvent =
  | StatementEvent
  | PlanEvent
  | ErrorEvent
  | LockWaitEvent
  | DeadlockEvent
  | CheckpointEvent
  | AutovacuumEvent
  | AutoanalyzeEvent
  | TempFileEvent
  | ConnectionEvent
  | DisconnectionEvent
  | OtherEvent;

/**
 * What the summary of `pglog parse` reads of an event (parse/summary.ts). Every PglogEvent is
 * one; EventParser.summarize makes just this for the common entries, skipping the text the
 * summary never reads.
 */
export type SummaryItem = Pick<EventCommon, 'severity' | 'database'> &
  ({ kind: Exclude<EventKind, 'statement'> } | Pick<StatementEvent, 'kind' | 'duration_ms' | 'normalized' | 'fingerprint'>);
