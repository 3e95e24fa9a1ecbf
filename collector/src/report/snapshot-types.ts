/** What `pglog report locks` and `pglog report activity` ask the store for, and get back. */
import type { BlockingForest } from './blocking-tree.ts';
import type { FromStore, StoresRead } from './types.ts';

export interface SnapshotFilter {
  /** Window [since, until): the newest snapshot in it is "current"; episodes are looked for in it. */
  since: Date;
  until: Date;
  target: string | null;
  database: string | null;
  /** Rows of the episode and long-running tables. */
  limit: number;
  /** `report activity`: sessions whose transaction (or, outside one, statement) is at least this old. */
  minDurationMs: number;
}

/** A server instance's activity snapshot runs in the window (pglog.snapshot_runs, kind `activity`). */
export interface ServerRuns extends FromStore {
  target: string;
  instance: string;
  /** The newest successful snapshot in the window: the "current" one; null when every run failed. */
  snapshotAt: Date | null;
  /** Sessions and blocked sessions that snapshot counted. */
  sessions: number | null;
  blocked: number | null;
  /** The newest run, failed or not. */
  lastRunAt: Date;
  lastRunMs: number;
  /** Set when the newest run failed: the PglogError code (SQL_CONNECT_FAILED, SQL_TIMEOUT, ...) and message. */
  lastErrorCode: string | null;
  lastError: string | null;
  runs: number;
  failedRuns: number;
}

/** One root's blocking over consecutive snapshots: the same root pid in the same transaction. */
export interface BlockingEpisode extends FromStore {
  target: string;
  instance: string;
  rootPid: number;
  /** The root's transaction start (null when its session was not in the snapshot). */
  xactStart: Date | null;
  firstSeen: Date;
  lastSeen: Date;
  /** Snapshots in which this root blocked someone. */
  snapshots: number;
  /** Most sessions waiting below the root in one snapshot. */
  peakWaiters: number;
  /** Longest wait of any session below the root. */
  maxWaitMs: number | null;
  /** The root session at its last snapshot. */
  database: string | null;
  user: string | null;
  application: string | null;
  fingerprint: string | null;
  query: string | null;
}

export interface ServerLocks extends ServerRuns {
  forest: BlockingForest;
}

export interface LocksReport {
  filter: SnapshotFilter;
  servers: ServerLocks[];
  episodes: BlockingEpisode[];
  /** Episodes in the window before --limit. */
  episodesTotal: number;
  /** Set when several stores were read. */
  stores?: StoresRead;
}

export interface ServerActivity extends ServerRuns {
  /** Sessions of the current snapshot by `state` ('' for none: background workers). */
  byState: Record<string, number>;
  /** Of those, sessions waiting for a heavyweight lock (wait_event_type `Lock`). */
  lockWaiting: number;
}

/** A session of a current snapshot with an old transaction or statement. */
export interface LongSession extends FromStore {
  target: string;
  instance: string;
  snapshotAt: Date;
  pid: number;
  database: string | null;
  user: string | null;
  application: string | null;
  state: string | null;
  waitEventType: string | null;
  waitEvent: string | null;
  /** Age of the transaction at the snapshot (null outside one). */
  xactMs: number | null;
  /** Age of the current (or last) statement. */
  queryMs: number | null;
  /** What the session is ranked by: xactMs, else queryMs. */
  durationMs: number;
  fingerprint: string | null;
  query: string | null;
}

export interface ActivityReport {
  filter: SnapshotFilter;
  servers: ServerActivity[];
  longRunning: LongSession[];
  /** Long-running sessions before --limit. */
  longRunningTotal: number;
  /** Set when several stores were read. */
  stores?: StoresRead;
}
