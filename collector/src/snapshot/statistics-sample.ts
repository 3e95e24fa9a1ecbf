/**
 * One sample of the cumulative statistics (pg_stat_statements, pg_stat_database) as read, before
 * deltas (deltas.ts) turn two samples into what changed. Kept in memory between samples only.
 */
import type { TextCounts, TextCut } from './statement-texts.ts';
import type { DatabaseCounterValues, StatementCounterValues } from './types.ts';

/** One pg_stat_statements entry, keyed by (userId, dbId, queryId, toplevel). */
export interface StatementCounters extends StatementCounterValues {
  userId: number;
  dbId: number;
  queryId: bigint;
  /** `toplevel` (extension 1.9, PostgreSQL 14+); true before. */
  toplevel: boolean;
  /** Role and database names; null when they were dropped since the entry was made. */
  username: string | null;
  database: string | null;
  /** The normalized text pg_stat_statements keeps, or its beginning when `textCut` says so ('' when dropped). */
  query: string;
  /** Set when the text was not kept whole (statement-texts.ts); absent when it was. */
  textCut?: TextCut;
}

/** One database's pg_stat_database row. */
export interface DatabaseCounters extends DatabaseCounterValues {
  /** When this database's counters were last reset; a change means they start from zero. */
  statsReset: Date | null;
}

/** The cumulative bigint counters of a pg_stat_statements entry (totalExecMs, a float, apart). */
export const STATEMENT_COUNTERS = [
  'calls',
  'rows',
  'sharedBlksHit',
  'sharedBlksRead',
  'tempBlksWritten',
] as const satisfies readonly (keyof StatementCounterValues)[];

/** The cumulative counters of a database row, the ones a delta subtracts. */
export const DATABASE_COUNTERS = [
  'xactCommit',
  'xactRollback',
  'blksRead',
  'blksHit',
  'tupReturned',
  'tupFetched',
  'tupInserted',
  'tupUpdated',
  'tupDeleted',
  'conflicts',
  'tempFiles',
  'tempBytes',
  'deadlocks',
] as const satisfies readonly (keyof DatabaseCounterValues)[];

export interface StatisticsSample {
  /** The server's statement_timestamp() of the first statistics statement. */
  ts: Date;
  /** pg_stat_statements entries; null when they were not read (collect.statements off). */
  statements: StatementCounters[] | null;
  /**
   * `pg_stat_statements_info.stats_reset` (extension 1.9+, PostgreSQL 14+): when all entries
   * were last reset; null when unknown. A change means every entry starts from zero.
   */
  statementsReset: Date | null;
  /** pg_stat_database rows of the databases (not the shared-objects row); null when not read. */
  databases: DatabaseCounters[] | null;
  /** With statements: how many of their texts were cut, and how many dropped, to the bounds. */
  statementTexts?: TextCounts;
}
