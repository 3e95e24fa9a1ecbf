/** What `pglog report` asks the store for, and what it gets back. */
import type { DurationSummary } from '../stats/duration-summary.ts';

export interface ReportFilter {
  /** Window [since, until). */
  since: Date;
  until: Date;
  /** Only this target (server) / database, when not null. */
  target: string | null;
  database: string | null;
  /** Rows per section. */
  limit: number;
}

/**
 * Where a row came from, with several stores: set only when the same group (the same key) came
 * from more than one store (a target that moved between pools has rows in both), so each of the
 * rows says which store it is from; otherwise absent (merge.ts).
 */
export interface FromStore {
  store?: string;
}

/** With several stores (`--store` more than once): the stores read, and those that failed. */
export interface StoresRead {
  /** Every store asked, in the order given, by name (`user@host:port/database`, never a password). */
  names: string[];
  /** Stores that could not be read and why (only with --partial; otherwise the command fails). */
  failed: Array<{ store: string; error: string }>;
}

/** One query template on one server and database, over the window (p95: percentile_cont). */
export interface StatementStats extends DurationSummary, FromStore {
  target: string;
  database: string | null;
  fingerprint: string | null;
  /** One representative text of the template, shortened. */
  query: string;
}

/** One error message (by SQLSTATE and text) on one server and database. */
export interface ErrorStats extends FromStore {
  target: string;
  database: string | null;
  severity: string;
  sqlstate: string | null;
  message: string;
  count: number;
  first_seen: Date;
  last_seen: Date;
}

/** Lock waits on one server and database by lock type. */
export interface LockWaitStats extends FromStore {
  target: string;
  database: string | null;
  lock_type: string | null;
  /** Lock wait messages: "still waiting", "acquired", deadlock and failure reports. */
  count: number;
  /** Of those, "acquired ... after N ms": each one closes a wait. */
  acquired: number;
  /** Sum of the waits that ended with the lock acquired (each wait counted once). */
  total_wait_ms: number;
  /** The longest wait reported by any message. */
  max_wait_ms: number | null;
}

/** A section's rows (at most the limit) and how many groups the window had in all. */
export interface ReportSection<T> {
  rows: T[];
  groups: number;
}

export interface Report {
  filter: ReportFilter;
  statements: ReportSection<StatementStats>;
  errors: ReportSection<ErrorStats>;
  lockWaits: ReportSection<LockWaitStats>;
  /** Set when several stores were read. */
  stores?: StoresRead;
}
