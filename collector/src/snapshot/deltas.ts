/**
 * What changed between two statistics samples (pure). pg_stat_statements and pg_stat_database
 * are cumulative counters; the store keeps what changed per interval, so reports add intervals
 * up without knowing about resets.
 *
 * Rules:
 * - First sample (no previous, or the previous did not read that view): nothing, no baseline.
 * - Only entries that changed: a statement with more calls, a database with any counter up.
 * - An entry not in the previous sample counts from zero: its full counters are the delta. It
 *   was created in the interval, or it was evicted (pg_stat_statements.max) and re-created, or
 *   its database was created; in each case its counters are what happened since then. (A
 *   key seen for the first time that existed unseen before cannot be told apart; counting it
 *   from zero overstates it once, never understates a new one.)
 * - A counter that went down means the entry was reset (pg_stat_statements_reset(), a
 *   pg_stat_reset(), a crash restart that discarded the statistics, a database dropped and
 *   created again under the same name): the current counters are the delta, all of them, for
 *   that entry.
 * - pg_stat_statements_info.stats_reset (1.9+) that changed means every entry was reset.
 * - pg_stat_database.stats_reset that changed, with no counter down, is NOT taken as a reset:
 *   resetting one table's or function's counters (pg_stat_reset_single_table_counters) moves
 *   the database's stats_reset too without zeroing its counters, and counting the database's
 *   lifetime totals as one interval would be a spike in every report. A real pg_stat_reset()
 *   makes the counters fall far below the previous totals (the collector's own transactions
 *   alone keep xact_commit moving), so it shows as a counter that went down.
 * - Deltas are never negative.
 * - A text cut to its bound (statement-texts.ts) is fingerprinted as cut, the part that was
 *   read, and carries the store's cut marker; a dropped one has only the marker and no
 *   fingerprint.
 */
import { queryFingerprint } from './query-fingerprint.ts';
import { markedText } from './statement-texts.ts';
import { DATABASE_COUNTERS, type DatabaseCounters, STATEMENT_COUNTERS, type StatementCounters, type StatisticsSample } from './statistics-sample.ts';
import type { DatabaseDelta, StatementDelta } from './types.ts';

export interface StatisticsDeltas {
  statements: StatementDelta[];
  databases: DatabaseDelta[];
  /** Seconds from the previous sample to this one; null on the first sample. */
  intervalSeconds: number | null;
}

/** The identity of a pg_stat_statements entry. */
export function statementKey(s: StatementCounters): string {
  return `${s.userId}/${s.dbId}/${s.queryId}/${s.toplevel ? 't' : 'f'}`;
}

/** Whether any of `counters` is lower in `cur` than in `prev` (the entry was reset). */
function wentDown<K extends string>(counters: readonly K[], prev: Record<K, bigint>, cur: Record<K, bigint>): boolean {
  return counters.some((c) => cur[c] < prev[c]);
}

/** `cur` minus `prev` for each of `counters`; all of `cur` when there is no `prev` (counted from zero). */
function counterDeltas<K extends string>(counters: readonly K[], prev: Record<K, bigint> | null, cur: Record<K, bigint>): Record<K, bigint> {
  return Object.fromEntries(counters.map((c) => [c, prev === null ? cur[c] : cur[c] - prev[c]])) as Record<K, bigint>;
}

function statementWentDown(prev: StatementCounters, cur: StatementCounters): boolean {
  return cur.totalExecMs < prev.totalExecMs || wentDown(STATEMENT_COUNTERS, prev, cur);
}

function statementDelta(prev: StatementCounters | null, cur: StatementCounters): StatementDelta {
  return {
    database: cur.database,
    username: cur.username,
    queryId: cur.queryId,
    toplevel: cur.toplevel,
    query: markedText(cur.query, cur.textCut),
    fingerprint: '',
    // Not below zero by the "went down" check; the float subtraction itself cannot go negative then.
    totalExecMs: prev === null ? cur.totalExecMs : cur.totalExecMs - prev.totalExecMs,
    ...counterDeltas(STATEMENT_COUNTERS, prev, cur),
  };
}

function statementDeltas(previous: StatisticsSample, current: StatisticsSample): StatementDelta[] {
  if (previous.statements === null || current.statements === null) return [];
  const allReset =
    previous.statementsReset !== null && current.statementsReset !== null && previous.statementsReset.getTime() !== current.statementsReset.getTime();
  const before = new Map<string, StatementCounters>();
  if (!allReset) for (const s of previous.statements) before.set(statementKey(s), s);
  const deltas: StatementDelta[] = [];
  const fingerprints = new Map<string, string>(); // the same text under several roles/databases: normalized once
  for (const cur of current.statements) {
    let prev = before.get(statementKey(cur)) ?? null;
    if (prev !== null && statementWentDown(prev, cur)) prev = null;
    const delta = statementDelta(prev, cur);
    if (delta.calls <= 0n) continue;
    // A dropped text is '' (no fingerprint); a cut one is fingerprinted without its marker.
    let fingerprint = fingerprints.get(cur.query);
    if (fingerprint === undefined) {
      fingerprint = queryFingerprint(cur.query);
      fingerprints.set(cur.query, fingerprint);
    }
    delta.fingerprint = fingerprint;
    deltas.push(delta);
  }
  return deltas;
}

type DatabaseCounter = (typeof DATABASE_COUNTERS)[number];

/** Every counter of DATABASE_COUNTERS at zero. */
export function zeroDatabaseCounters(): Record<DatabaseCounter, bigint> {
  return Object.fromEntries(DATABASE_COUNTERS.map((c) => [c, 0n])) as Record<DatabaseCounter, bigint>;
}

function databaseDelta(prev: DatabaseCounters | null, cur: DatabaseCounters): DatabaseDelta {
  const base = prev !== null && wentDown(DATABASE_COUNTERS, prev, cur) ? null : prev;
  return { database: cur.database, backends: cur.backends, ...counterDeltas(DATABASE_COUNTERS, base, cur) };
}

function databaseDeltas(previous: StatisticsSample, current: StatisticsSample): DatabaseDelta[] {
  if (previous.databases === null || current.databases === null) return [];
  const before = new Map<string, DatabaseCounters>();
  for (const d of previous.databases) before.set(d.database, d);
  const deltas: DatabaseDelta[] = [];
  for (const cur of current.databases) {
    const delta = databaseDelta(before.get(cur.database) ?? null, cur);
    if (DATABASE_COUNTERS.some((c) => delta[c] > 0n)) deltas.push(delta);
  }
  return deltas;
}

/** What changed from `previous` to `current` (see the module comment for the rules). */
export function statisticsDeltas(previous: StatisticsSample | null, current: StatisticsSample): StatisticsDeltas {
  if (previous === null) return { statements: [], databases: [], intervalSeconds: null };
  return {
    statements: statementDeltas(previous, current),
    databases: databaseDeltas(previous, current),
    intervalSeconds: (current.ts.getTime() - previous.ts.getTime()) / 1000,
  };
}
