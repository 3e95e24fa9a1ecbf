// Snapshots for the store tests (unit and integration): every field set to a value that can be
// told apart from the others, so a value in the wrong column shows.
import type { ActivitySession, BlockingEdge, DatabaseDelta, Snapshot, SnapshotFailure, SnapshotKind, StatementDelta } from '../../src/snapshot/types.ts';

export const SNAPSHOT_TS = new Date('2026-11-21T13:29:33.123Z');
/** When failure() happened. */
export const FAILURE_TS = new Date('2026-11-21T13:30:00.250Z');

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

/** What every fixture run shares: target db1, instance main (at SNAPSHOT_TS unless `ts` says). */
function run(kind: SnapshotKind, durationMs: number, ts = SNAPSHOT_TS): Pick<Snapshot, 'target' | 'instance' | 'kind' | 'ts' | 'durationMs'> {
  return { target: 'db1', instance: 'main', kind, ts, durationMs };
}

/** A snapshot with nothing in it but what `content` sets. */
function snapshot(kind: SnapshotKind, durationMs: number, content: Partial<Snapshot>): Snapshot {
  return { ...run(kind, durationMs), sessions: [], blocking: [], statements: [], databases: [], intervalSeconds: null, ...content };
}

/** An activity snapshot: three sessions, two waiting on 100 and one of them also on 101 (three edges). */
export function activitySnapshot(over: Partial<Snapshot> = {}): Snapshot {
  return snapshot('activity', 12.5, {
    sessions: [
      session(100, { state: 'idle in transaction' }),
      session(101, { waitEventType: 'Lock', waitEvent: 'transactionid', blockedBy: [100] }),
      session(102, { waitEventType: 'Lock', waitEvent: 'transactionid', blockedBy: [100, 101], leaderPid: null }),
    ],
    blocking: [edge(101, 100), edge(102, 100), edge(102, 101, { heldMode: null, blockerWaitMode: 'ShareLock' })],
    ...over,
  });
}

/** A statistics snapshot: two statement deltas and two database deltas over 60 s. */
export function statisticsSnapshot(over: Partial<Snapshot> = {}): Snapshot {
  return snapshot('statistics', 30.25, {
    statements: [statementDelta(-8_000_000_000_000_000_001n), statementDelta(42n, { toplevel: false, database: null, username: null })],
    databases: [databaseDelta('app'), databaseDelta('postgres', { xactCommit: 9_007_199_254_740_993n, backends: 0 })],
    intervalSeconds: 60.5,
    ...over,
  });
}

/** An activity snapshot that timed out, a little after the others. */
export function failure(over: Partial<SnapshotFailure> = {}): SnapshotFailure {
  return {
    ...run('activity', 5000, FAILURE_TS),
    code: 'SQL_TIMEOUT',
    message: 'the activity query took longer than 5 s',
    ...over,
  };
}

/**
 * The pglog.snapshot_runs row, by column, that the store keeps for a run of these fixtures:
 * a successful one unless `over` sets the error.
 */
export function runRow(kind: SnapshotKind, durationMs: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  return { ts: SNAPSHOT_TS, target: 'db1', instance: 'main', kind, duration_ms: durationMs, sessions: 0, blocked: 0, error_code: null, error: null, ...over };
}
