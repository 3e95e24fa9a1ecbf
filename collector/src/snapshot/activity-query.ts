/**
 * readActivity: one activity snapshot (sessions and blocking chains) on a session the caller
 * has put into a READ ONLY transaction. The SQL is activity-sql.ts; this maps its rows.
 */
import type pg from 'pg';

import type { ActivitySqlOptions } from './activity-sql.ts';
import { activitySql } from './activity-sql.ts';
import type { Row } from './pg-values.ts';
import { dateOf, dateOrNull, intArrayOf, intOf, intOrNull, textOf, textOrNull } from './pg-values.ts';
import { queryFingerprint } from './query-fingerprint.ts';
import type { ServerInfo } from './server-info.ts';
import { serverTextOf } from './server-text.ts';
import type { ActivitySession, BlockingEdge } from './types.ts';

export interface ActivityResult {
  /** The server's statement_timestamp() of the snapshot statement. */
  ts: Date;
  /** With `sessions`, every session; with only `locks`, the sessions of blocking chains. */
  sessions: ActivitySession[];
  /** With `locks`; else empty. */
  blocking: BlockingEdge[];
}

function sessionOf(row: Row): ActivitySession {
  // In the encoding of the session's own database (server-text.ts), not ours.
  const query = serverTextOf(row, 'query');
  return {
    pid: intOf(row, 'pid'),
    leaderPid: intOrNull(row, 'leader_pid'),
    database: textOrNull(row, 'database'),
    username: textOrNull(row, 'username'),
    application: textOrNull(row, 'application'),
    client: textOrNull(row, 'client'),
    backendType: textOrNull(row, 'backend_type'),
    state: textOrNull(row, 'state'),
    waitEventType: textOrNull(row, 'wait_event_type'),
    waitEvent: textOrNull(row, 'wait_event'),
    backendStart: dateOrNull(row, 'backend_start'),
    xactStart: dateOrNull(row, 'xact_start'),
    queryStart: dateOrNull(row, 'query_start'),
    stateChange: dateOrNull(row, 'state_change'),
    query,
    fingerprint: queryFingerprint(query),
    blockedBy: intArrayOf(row, 'blocked_by'),
  };
}

function edgeOf(row: Row, session: ActivitySession, ts: Date): BlockingEdge {
  const waitStart = dateOrNull(row, 'wait_start');
  return {
    pid: session.pid,
    blockingPid: intOf(row, 'blocking_pid'),
    database: session.database,
    lockType: textOf(row, 'locktype'),
    waitMode: textOf(row, 'wait_mode'),
    heldMode: textOrNull(row, 'held_mode'),
    blockerWaitMode: textOrNull(row, 'blocker_wait_mode'),
    relation: textOrNull(row, 'relation'),
    waitStart,
    // Both times are the server's clock; a wait that began in the same millisecond is 0, never negative.
    waitMs: waitStart === null ? null : Math.max(0, ts.getTime() - waitStart.getTime()),
  };
}

/** Maps the rows of activitySql (one per session and blocker, ordered by pid). Pure. */
export function activityFromRows(rows: readonly Row[]): ActivityResult {
  const first = rows[0];
  if (first === undefined) throw new Error('activity snapshot: the statement returned no row (it always returns one)');
  const ts = dateOf(first, 'ts');
  const sessions: ActivitySession[] = [];
  const blocking: BlockingEdge[] = [];
  for (const row of rows) {
    if (row.pid === null || row.pid === undefined) continue; // the time-only row: no other session
    const pid = intOf(row, 'pid');
    let session = sessions.at(-1);
    if (session?.pid !== pid) {
      session = sessionOf(row);
      sessions.push(session);
    }
    // A waiter that stopped waiting between pg_blocking_pids() and pg_locks has no edge row.
    if (row.blocking_pid !== null && row.blocking_pid !== undefined && row.locktype !== null && row.locktype !== undefined) {
      blocking.push(edgeOf(row, session, ts));
    }
  }
  return { ts, sessions, blocking };
}

/**
 * Reads pg_stat_activity (and, with `locks`, the blocking chains) in one statement. Errors
 * are pg's, for the caller's session to classify (sql/sql-errors.ts).
 */
export async function readActivity(client: pg.ClientBase, info: ServerInfo, options: ActivitySqlOptions): Promise<ActivityResult> {
  const result = await client.query<Row>(activitySql(info.versionNum, options));
  return activityFromRows(result.rows);
}
