// Snapshots for the store tests (unit and integration): every field set to a value that can be
// told apart from the others, so a value in the wrong column shows.
import type { ActivitySession, BlockingEdge, DatabaseDelta, Snapshot, SnapshotFailure, StatementDelta } from '../../src/snapshot/types.ts';

export const SNAPSHOT_TS = new Date('2026-11-21T13:29:33.123Z');

export function session(pid: number, over: Partial<ActivitySession> = {}): ActivitySession {
  return {
    pid,
    leaderPid: null,
    database: 'app',
    username: 'alice',
    application: 'psql',
    client: '10.0.0.7',
    backendType: 'client backend',
    state: 'active',
    waitEventType: null,
    waitEvent: null,
    backendStart: new Date('2026-11-21T12:00:00.001Z'),
    xactStart: new Date('2026-11-21T13:29:30.002Z'),
    queryStart: new Date('2026-11-21T13:29:31.003Z'),
    stateChange: new Date('2026-11-21T13:29:31.004Z'),
    query: `UPDATE accounts SET balance = balance - 1 WHERE id = ${pid}`,
    fingerprint: 'fp-update',
    blockedBy: [],
    ...over,
  };
}

export function edge(pid: number, blockingPid: number, over: Partial<BlockingEdge> = {}): BlockingEdge {
  return {
    pid,
    blockingPid,
    database: 'app',
    lockType: 'transactionid',
    waitMode: 'ShareLock',
    heldMode: 'ExclusiveLock',
    blockerWaitMode: null,
    relation: null,
    waitStart: new Date('2026-11-21T13:29:31.500Z'),
    waitMs: 1623.25,
    ...over,
  };
}

export function statementDelta(queryId: bigint, over: Partial<StatementDelta> = {}): StatementDelta {
  return {
    database: 'app',
    username: 'alice',
    queryId,
    toplevel: true,
    query: 'SELECT * FROM accounts WHERE id = $1',
    fingerprint: 'fp-select',
    calls: 12n,
    totalExecMs: 3.75,
    rows: 12n,
    sharedBlksHit: 48n,
    sharedBlksRead: 2n,
    tempBlksWritten: 0n,
    ...over,
  };
}

export function databaseDelta(database: string, over: Partial<DatabaseDelta> = {}): DatabaseDelta {
  return {
    database,
    xactCommit: 101n,
    xactRollback: 2n,
    blksRead: 303n,
    blksHit: 40404n,
    tupReturned: 505n,
    tupFetched: 606n,
    tupInserted: 707n,
    tupUpdated: 808n,
    tupDeleted: 909n,
    conflicts: 0n,
    tempFiles: 1n,
    tempBytes: 8192n,
    deadlocks: 1n,
    backends: 7,
    ...over,
  };
}

/** An activity snapshot: three sessions, two waiting on 100 and one of them also on 101 (three edges). */
export function activitySnapshot(over: Partial<Snapshot> = {}): Snapshot {
  return {
    target: 'db1',
    instance: 'main',
    kind: 'activity',
    ts: SNAPSHOT_TS,
    durationMs: 12.5,
    sessions: [
      session(100, { state: 'idle in transaction' }),
      session(101, { waitEventType: 'Lock', waitEvent: 'transactionid', blockedBy: [100] }),
      session(102, { waitEventType: 'Lock', waitEvent: 'transactionid', blockedBy: [100, 101], leaderPid: null }),
    ],
    blocking: [edge(101, 100), edge(102, 100), edge(102, 101, { heldMode: null, blockerWaitMode: 'ShareLock' })],
    statements: [],
    databases: [],
    intervalSeconds: null,
    ...over,
  };
}

/** A statistics snapshot: two statement deltas and two database deltas over 60 s. */
export function statisticsSnapshot(over: Partial<Snapshot> = {}): Snapshot {
  return {
    target: 'db1',
    instance: 'main',
    kind: 'statistics',
    ts: SNAPSHOT_TS,
    durationMs: 30.25,
    sessions: [],
    blocking: [],
    statements: [statementDelta(-8_000_000_000_000_000_001n), statementDelta(42n, { toplevel: false, database: null, username: null })],
    databases: [databaseDelta('app'), databaseDelta('postgres', { xactCommit: 9_007_199_254_740_993n, backends: 0 })],
    intervalSeconds: 60.5,
    ...over,
  };
}

export function failure(over: Partial<SnapshotFailure> = {}): SnapshotFailure {
  return {
    target: 'db1',
    instance: 'main',
    kind: 'activity',
    ts: new Date('2026-11-21T13:30:00.250Z'),
    durationMs: 5000,
    code: 'SQL_TIMEOUT',
    message: 'the activity query took longer than 5 s',
    ...over,
  };
}
