/**
 * The SQL snapshots of one PostgreSQL instance, on their schedules (docs/snapshots.md;
 * docs/snapshots.md): every `collect.intervalSeconds` an activity snapshot (sessions and
 * blocking chains), every `collect.statisticsIntervalSeconds` a statistics sample whose
 * difference to the previous one (pg_stat_statements, pg_stat_database) is stored.
 *
 * - The first run of each kind starts at a random point of its interval, so a fleet's
 *   snapshots do not all hit the store in the same second.
 * - One run at a time per instance; a run that takes longer than the interval delays the
 *   next one instead of piling up.
 * - A failure is a snapshot too: counted (pglog_snapshot_failures_total by code), written to
 *   pglog.snapshot_runs, and logged once per streak (again when the cause changes, and when
 *   it works again), so a server that is down does not write a warning every 15 s. Log
 *   streaming of the server is not touched by any of it.
 * - A SQL role more powerful than monitoring needs (a superuser, or one that can write) is
 *   reported as found at each session start: pglog_sql_role_privileged, and the target's
 *   status (its SqlRole condition in cluster mode). A superuser's session is refused unless
 *   the instance allows it (SQL_ROLE_SUPERUSER, a failed run like any other).
 */
import type { TargetCollect } from '@pglog/common/api/postgres-target.ts';
import type { ErrorLabel } from '@pglog/common/errors.ts';
import { isLastingSshFailure, isPglogError } from '@pglog/common/errors.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';
import { pause } from '@pglog/common/time/clock.ts';

import type { SnapshotMetrics } from '../observability/snapshot-metrics.ts';
import type { ActivityResult } from '../snapshot/activity-query.ts';
import { statisticsDeltas } from '../snapshot/deltas.ts';
import type { SqlRolePrivilege } from '../snapshot/server-info.ts';
import type { StatisticsSample } from '../snapshot/statistics-query.ts';
import type { Snapshot, SnapshotFailure, SnapshotKind } from '../snapshot/types.ts';

/** What a run reads; SqlSnapshotSource reads it from the server, tests script it. */
export interface SnapshotSource {
  activity(): Promise<ActivityResult>;
  statistics(): Promise<StatisticsSample>;
  /**
   * What the SQL role was found to be at the start of the newest session: a privilege
   * monitoring does not need, null when it has none, undefined before a session opened.
   */
  readonly rolePrivilege?: SqlRolePrivilege | null;
}

export interface InstanceSnapshotsOptions {
  target: string;
  instance: string;
  collect: TargetCollect;
  source: SnapshotSource;
  /** Stores a snapshot or a failed run; rejects with a PglogError (STORE_*). */
  write(snapshot: Snapshot | SnapshotFailure): Promise<void>;
  metrics: SnapshotMetrics;
  log: Logger;
  /** Each run's outcome: null when it succeeded, else its error code (for the target's status). */
  outcome?(kind: SnapshotKind, code: string | null): void;
  /** The SQL role's privilege when a new session found it changed (for the target's status). */
  rolePrivilege?(privilege: SqlRolePrivilege | null): void;
  random?: () => number;
}

/**
 * The baseline kept until the next sample: counters only. Deltas take the query text from the
 * current sample, and texts are most of a sample's size (pg_stat_statements keeps up to 5,000
 * entries of up to track_activity_query_size bytes each), kept per instance for a whole fleet.
 */
function withoutQueryTexts(sample: StatisticsSample): StatisticsSample {
  return sample.statements === null ? sample : { ...sample, statements: sample.statements.map((s) => ({ ...s, query: '' })) };
}

/** Which kinds of snapshot a target's `collect` asks for. */
export function snapshotKinds(collect: TargetCollect): SnapshotKind[] {
  const kinds: SnapshotKind[] = [];
  if (collect.activity || collect.locks) kinds.push('activity');
  if (collect.statements || collect.databases) kinds.push('statistics');
  return kinds;
}

export class InstanceSnapshots {
  private readonly o: InstanceSnapshotsOptions;
  private baseline: StatisticsSample | null = null;
  /** The code of the failure streak under way, per kind; null while snapshots work. */
  private readonly failing = new Map<SnapshotKind, { code: string; count: number }>();
  /** The role privilege last reported; undefined until a session has found it. */
  private reportedPrivilege: SqlRolePrivilege | null | undefined;

  constructor(options: InstanceSnapshotsOptions) {
    this.o = options;
  }

  /** Runs the schedules until `signal` aborts; never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    const { collect } = this.o;
    const random = this.o.random ?? Math.random;
    const intervalMs: Record<SnapshotKind, number> = { activity: collect.intervalSeconds * 1000, statistics: collect.statisticsIntervalSeconds * 1000 };
    const start = performance.now();
    const nextAt = new Map(snapshotKinds(collect).map((k) => [k, start + random() * intervalMs[k]]));
    while (!signal.aborted && nextAt.size > 0) {
      const [kind, at] = [...nextAt].reduce((a, b) => (b[1] < a[1] ? b : a));
      const wait = at - performance.now();
      if (wait > 0) {
        await pause(wait, signal);
        continue;
      }
      await this.runOnce(kind);
      // Behind schedule (a slow run): the next one at least half an interval from now, not a burst.
      nextAt.set(kind, Math.max(at + intervalMs[kind], performance.now() + intervalMs[kind] / 2));
    }
  }

  /** One snapshot of `kind`: read, count, store; failures are recorded, never thrown. */
  async runOnce(kind: SnapshotKind): Promise<void> {
    const { target, instance, metrics } = this.o;
    const started = performance.now();
    let snapshot: Snapshot;
    try {
      snapshot = kind === 'activity' ? await this.readActivity(started) : await this.readStatistics(started);
    } catch (e) {
      this.reportPrivilege(); // a session may have opened before the query failed
      await this.failed(kind, e, started);
      return;
    }
    this.reportPrivilege();
    metrics.succeeded(target, instance, kind, snapshot.durationMs / 1000, Date.now());
    if (kind === 'activity') {
      const waiting = new Set(snapshot.blocking.map((b) => b.pid));
      const longestMs = snapshot.blocking.reduce((m, b) => Math.max(m, b.waitMs ?? 0), 0);
      metrics.activity(
        target,
        instance,
        snapshot.sessions.map((s) => s.state),
        waiting.size,
        longestMs / 1000,
      );
    }
    this.recovered(kind);
    this.o.outcome?.(kind, null);
    try {
      await this.o.write(snapshot);
    } catch (e) {
      await this.failed(kind, e, started, false);
    }
  }

  /** Reports the role privilege the source found, when it is new: the metric and the status hook. */
  private reportPrivilege(): void {
    const privilege = this.o.source.rolePrivilege;
    if (privilege === undefined || privilege === this.reportedPrivilege) return;
    this.reportedPrivilege = privilege;
    this.o.metrics.sqlRole(this.o.target, this.o.instance, privilege);
    this.o.rolePrivilege?.(privilege);
  }

  private async readActivity(started: number): Promise<Snapshot> {
    const { collect } = this.o;
    const read = await this.o.source.activity();
    // With locks but not activity, keep the sessions of the blocking chains (the tree's nodes).
    const inChains = new Set(read.blocking.flatMap((b) => [b.pid, b.blockingPid]));
    const sessions = collect.activity ? read.sessions : read.sessions.filter((s) => inChains.has(s.pid));
    return {
      ...this.empty('activity', read.ts, performance.now() - started),
      sessions,
      blocking: collect.locks ? read.blocking : [],
    };
  }

  private async readStatistics(started: number): Promise<Snapshot> {
    const sample = await this.o.source.statistics();
    if (sample.statementTexts !== undefined) this.o.metrics.statementTexts(this.o.target, this.o.instance, sample.statementTexts);
    const deltas = statisticsDeltas(this.baseline, sample);
    this.baseline = withoutQueryTexts(sample);
    return {
      ...this.empty('statistics', sample.ts, performance.now() - started),
      statements: this.o.collect.statements ? deltas.statements : [],
      databases: this.o.collect.databases ? deltas.databases : [],
      intervalSeconds: deltas.intervalSeconds,
    };
  }

  private empty(kind: SnapshotKind, ts: Date, durationMs: number): Snapshot {
    const { target, instance } = this.o;
    return { target, instance, kind, ts, durationMs, sessions: [], blocking: [], statements: [], databases: [], intervalSeconds: null };
  }

  /** Counts, logs (once per streak) and records a failed run; `record` false when storing it is what failed. */
  private async failed(kind: SnapshotKind, e: unknown, started: number, record = true): Promise<void> {
    const { target, instance, metrics, log } = this.o;
    const code: ErrorLabel = isPglogError(e) ? e.code : 'UNKNOWN';
    const message = e instanceof Error ? e.message : String(e);
    metrics.failed(target, instance, kind, code);
    this.o.outcome?.(kind, code);
    const streak = this.failing.get(kind);
    if (streak === undefined || streak.code !== code) {
      // A refused role, host key or key will not heal by itself: an error, not a blip.
      const lasting = code === 'SQL_AUTH_FAILED' || code === 'SQL_ROLE_SUPERUSER' || (code !== 'UNKNOWN' && isLastingSshFailure(code));
      log[lasting ? 'error' : 'warn']({ target, instance, kind, code, err: e }, `${target}/${instance}: ${kind} snapshot failed: ${message}`);
      this.failing.set(kind, { code, count: 1 });
    } else {
      streak.count++;
      log.debug({ target, instance, kind, code, failures: streak.count }, `${target}/${instance}: ${kind} snapshot failed again (${code})`);
    }
    if (!record) return;
    const failure: SnapshotFailure = { target, instance, kind, ts: new Date(), durationMs: performance.now() - started, code, message };
    await this.o.write(failure).catch((w: unknown) => {
      log.debug({ target, instance, err: w }, `${target}/${instance}: the failed ${kind} snapshot could not be recorded in the store`);
    });
  }

  private recovered(kind: SnapshotKind): void {
    const streak = this.failing.get(kind);
    if (streak === undefined) return;
    this.failing.delete(kind);
    const { target, instance, log } = this.o;
    log.info({ target, instance, kind, failures: streak.count }, `${target}/${instance}: ${kind} snapshots work again after ${streak.count} failed`);
  }
}
