/**
 * Metrics of the SQL snapshots (issue 7; docs/metrics.md): latency and failures per target,
 * instance and kind, sessions by state, blocked sessions, the longest blocking wait, and
 * whether the SQL role is more powerful than monitoring needs (issue 13), and the
 * pg_stat_statements texts cut or dropped to their bounds (security review R2). Part
 * of the collector's registry (CollectorMetrics.snapshots). Every label set used for a target
 * is remembered, so forgetTarget removes all of that target's series.
 */
import type { ErrorLabel } from '@pglog/common/errors.ts';
import type { Counter, Gauge, Histogram, Registry } from 'prom-client';

import { SQL_ROLE_PRIVILEGES, type SqlRolePrivilege } from '../snapshot/server-info.ts';
import type { TextCounts } from '../snapshot/statement-texts.ts';
import type { SnapshotKind } from '../snapshot/types.ts';
import { MetricFactory } from './metric-factory.ts';

// A snapshot is a few catalog queries over SSH: milliseconds on a quiet server, up to the
// timeout (default 5 s) on one that is struggling.
const SNAPSHOT_SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The states of pg_stat_activity, each always reported (0 when no session is in it). */
export const SESSION_STATES = [
  'active',
  'idle',
  'idle in transaction',
  'idle in transaction (aborted)',
  'fastpath function call',
  'disabled',
  'other',
] as const;
export type SessionState = (typeof SESSION_STATES)[number];

type Labels = Record<string, string>;
/** What forgetTarget needs of a metric: prom-client's remove(labels). */
interface Removable {
  remove(labels: Labels): void;
}

export class SnapshotMetrics {
  private readonly duration: Histogram<'target' | 'instance' | 'kind'>;
  private readonly failures: Counter<'target' | 'instance' | 'kind' | 'code'>;
  private readonly lastSuccess: Gauge<'target' | 'instance' | 'kind'>;
  private readonly sessions: Gauge<'target' | 'instance' | 'state'>;
  private readonly blocked: Gauge<'target' | 'instance'>;
  private readonly longestWait: Gauge<'target' | 'instance'>;
  private readonly rolePrivileged: Gauge<'target' | 'instance' | 'reason'>;
  private readonly textsCut: Counter<'target' | 'instance'>;
  private readonly textsDropped: Counter<'target' | 'instance'>;
  /** Per target, per metric: every label set written (by its values joined), for forgetTarget. */
  private readonly used = new Map<string, Map<Removable, Map<string, Labels>>>();

  constructor(registry: Registry, prefix: string) {
    const m = new MetricFactory([registry], prefix);
    this.duration = m.histogram(
      'snapshot_duration_seconds',
      'Duration of one SQL snapshot (its queries, not opening the session), by kind: activity (sessions and locks) or statistics.',
      SNAPSHOT_SECONDS_BUCKETS,
      ['target', 'instance', 'kind'],
    );
    this.failures = m.counter(
      'snapshot_failures_total',
      'SQL snapshots that failed, by PglogError code (SQL_CONNECT_FAILED, SQL_TIMEOUT, SQL_AUTH_FAILED, SQL_QUERY_FAILED, SQL_ROLE_SUPERUSER: a superuser role refused, SSH_*, STORE_*).',
      ['target', 'instance', 'kind', 'code'],
    );
    this.lastSuccess = m.gauge('snapshot_last_success_timestamp_seconds', 'When the last SQL snapshot of this kind succeeded (Unix time).', [
      'target',
      'instance',
      'kind',
    ]);
    this.sessions = m.gauge('sessions', 'Sessions of the instance by pg_stat_activity state, at the last activity snapshot.', ['target', 'instance', 'state']);
    this.blocked = m.gauge('blocked_sessions', 'Sessions waiting for a lock another session holds or waits for, at the last activity snapshot.', [
      'target',
      'instance',
    ]);
    this.longestWait = m.gauge(
      'longest_blocking_wait_seconds',
      'The longest time a session has been waiting for a lock held by another, at the last activity snapshot (0 when none waits).',
      ['target', 'instance'],
    );
    this.rolePrivileged = m.gauge(
      'sql_role_privileged',
      "1 when the SQL role of the instance is more powerful than monitoring needs, by reason: SQL_ROLE_SUPERUSER (planted SQL would run with every right, up to the server's OS account; refused unless sql.allowSuperuser) or SQL_ROLE_CAN_WRITE; else 0. Checked at each session start. Use a role with only pg_monitor (docs/snapshots.md).",
      ['target', 'instance', 'reason'],
    );
    this.textsCut = m.counter(
      'pgss_texts_cut_total',
      'pg_stat_statements texts longer than the bound on one text, of which only the beginning was read and stored (with a cut marker), at statistics samples.',
      ['target', 'instance'],
    );
    this.textsDropped = m.counter(
      'pgss_texts_dropped_total',
      "pg_stat_statements texts beyond the bound on a sample's texts (the longest go first), not read: the entry's counters are stored with only a cut marker as text.",
      ['target', 'instance'],
    );
  }

  /** Remembers that `labels` were written to `metric` for `target`; returns them. */
  private note<L extends Labels>(target: string, metric: Removable, labels: L): L {
    let byMetric = this.used.get(target);
    if (byMetric === undefined) this.used.set(target, (byMetric = new Map<Removable, Map<string, Labels>>()));
    let sets = byMetric.get(metric);
    if (sets === undefined) byMetric.set(metric, (sets = new Map<string, Labels>()));
    const key = Object.values(labels).join('\u0000');
    if (!sets.has(key)) sets.set(key, labels);
    return labels;
  }

  succeeded(target: string, instance: string, kind: SnapshotKind, seconds: number, nowMs: number): void {
    this.duration.observe(this.note(target, this.duration, { target, instance, kind }), seconds);
    this.lastSuccess.set(this.note(target, this.lastSuccess, { target, instance, kind }), nowMs / 1000);
  }

  failed(target: string, instance: string, kind: SnapshotKind, code: ErrorLabel): void {
    this.failures.inc(this.note(target, this.failures, { target, instance, kind, code }));
  }

  /** Sessions by state and the blocking summary of an activity snapshot. */
  activity(target: string, instance: string, states: readonly (string | null)[], blockedSessions: number, longestWaitSeconds: number): void {
    const counts = new Map<SessionState, number>(SESSION_STATES.map((s) => [s, 0]));
    for (const s of states) {
      if (s === null) continue; // background processes have no state
      const state: SessionState = (SESSION_STATES as readonly string[]).includes(s) ? (s as SessionState) : 'other';
      counts.set(state, (counts.get(state) ?? 0) + 1);
    }
    for (const [state, n] of counts) this.sessions.set(this.note(target, this.sessions, { target, instance, state }), n);
    this.blocked.set(this.note(target, this.blocked, { target, instance }), blockedSessions);
    this.longestWait.set(this.note(target, this.longestWait, { target, instance }), longestWaitSeconds);
  }

  /** What the instance's SQL role was found to be at its session's start: each reason 1 or 0. */
  sqlRole(target: string, instance: string, privilege: SqlRolePrivilege | null): void {
    for (const reason of SQL_ROLE_PRIVILEGES)
      this.rolePrivileged.set(this.note(target, this.rolePrivileged, { target, instance, reason }), reason === privilege ? 1 : 0);
  }

  /** The pg_stat_statements texts a statistics sample cut and dropped (counted even when 0, so the series exist). */
  statementTexts(target: string, instance: string, counts: TextCounts): void {
    this.textsCut.inc(this.note(target, this.textsCut, { target, instance }), counts.cut);
    this.textsDropped.inc(this.note(target, this.textsDropped, { target, instance }), counts.dropped);
  }

  /** Removes every series of the target (it left the shard). */
  forgetTarget(target: string): void {
    for (const [metric, sets] of this.used.get(target) ?? []) for (const labels of sets.values()) metric.remove(labels);
    this.used.delete(target);
  }
}
