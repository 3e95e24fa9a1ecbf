/**
 * A PostgresTarget's status as the operator writes it: the shard and transport from the
 * assignment, the rates, lag and health its collector reported in the shard's status, and
 * conditions: `Ready`, and for a target that takes snapshots `Snapshots` and `SqlRole`. Pure;
 * the reconciler writes it only when it differs from what is there: exactly for shard,
 * transport, conditions and generation, beyond a band for the numbers that move with every
 * collector report (rates, lag, the newest entry's time), which ride along with any other
 * write (ADR 0030).
 */
import type { ShardTargetStatus } from '@pglog/common/api/collector-shard.ts';
import type { Condition } from '@pglog/common/api/common.ts';
import { type PostgresTargetStatus, takesSnapshots } from '@pglog/common/api/postgres-target.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';

import { semanticEqual, setCondition } from './conditions.ts';

export interface TargetAssignment {
  shard: number;
  transport: 'inproc' | 'proxy';
}

/**
 * The status to write. `reported` is the owning collector's entry for the target (absent
 * until the collector has picked it up). Rates are rounded so a rate that wobbles in its last
 * digits does not cause a write each reconcile.
 */
export function desiredTargetStatus(
  target: TargetObject,
  assignment: TargetAssignment,
  reported: ShardTargetStatus | undefined,
  nowIso: string,
): PostgresTargetStatus {
  const current = target.status ?? {};
  const ready = readyCondition(assignment, reported);
  let conditions: Condition[] = setCondition(current.conditions, ready, nowIso, target.metadata.generation);
  if (takesSnapshots(target.spec.collect)) {
    conditions = setCondition(conditions, snapshotsCondition(assignment, reported), nowIso, target.metadata.generation);
    conditions = setCondition(conditions, sqlRoleCondition(assignment, reported), nowIso, target.metadata.generation);
  }
  const status: PostgresTargetStatus = {
    ...current,
    shard: assignment.shard,
    transport: reported?.transport ?? assignment.transport,
    conditions,
  };
  if (target.metadata.generation !== undefined) status.observedGeneration = target.metadata.generation;
  if (reported !== undefined) {
    status.rates = { bytesPerSecond: roundRate(reported.bytesPerSecond), linesPerSecond: roundRate(reported.linesPerSecond) };
    status.lag = { bytes: reported.lagBytes, seconds: current.lag?.seconds ?? 0 };
    if (reported.lastEntryTime !== undefined) status.lastEntryTime = reported.lastEntryTime;
  }
  return status;
}

/**
 * How far the numbers of a written status may be from the newest report before they are
 * written again on their own (ADR 0030): a rate or lag counts as moved beyond `relative` of
 * the larger value and beyond its absolute floor (small numbers wobble most), the newest
 * entry's time beyond `lastEntryMs`. The collector's own rule for its shard status
 * (collector/src/cluster/shard-status.ts) uses the same floors.
 */
export interface StatusBands {
  relative: number;
  bytesPerSecond: number;
  linesPerSecond: number;
  lagBytes: number;
  lastEntryMs: number;
}

export const STATUS_BANDS: Readonly<StatusBands> = Object.freeze({
  relative: 0.1,
  bytesPerSecond: 1024,
  linesPerSecond: 10,
  lagBytes: 1024 * 1024,
  lastEntryMs: 10 * 60_000,
});

/**
 * Whether a write is needed: anything but the numbers differs, or a number moved beyond its
 * band. A collector report that only moves rates a few per cent and the newest entry's time a
 * few seconds writes nothing; 10,000 targets would otherwise cost 10,000 writes per report.
 */
export function targetStatusChanged(target: TargetObject, next: PostgresTargetStatus, bands: StatusBands = STATUS_BANDS): boolean {
  const { rates: writtenRates, lag: writtenLag, lastEntryTime: writtenEntry, ...written } = target.status ?? {};
  const { rates, lag, lastEntryTime, ...wanted } = next;
  if (!semanticEqual(written, wanted)) return true;
  const beyond = (a: number, b: number, floor: number): boolean => !(Math.abs(a - b) <= Math.max(floor, bands.relative * Math.max(Math.abs(a), Math.abs(b))));
  // A written rate of 0 reads as "nothing arrives": the first bytes after it are always
  // written. The way back to 0 stays within the floor (a quiet server's rate that flickers
  // between 0 and a few bytes would otherwise be written at every report).
  const rateMoved = (a: number, b: number, floor: number): boolean => (a === 0 && b > 0) || beyond(a, b, floor);
  if (writtenRates === undefined || rates === undefined) {
    if (writtenRates !== rates) return true;
  } else if (
    rateMoved(writtenRates.bytesPerSecond, rates.bytesPerSecond, bands.bytesPerSecond) ||
    rateMoved(writtenRates.linesPerSecond, rates.linesPerSecond, bands.linesPerSecond)
  ) {
    return true;
  }
  if (writtenLag === undefined || lag === undefined) {
    if (writtenLag !== lag) return true;
  } else if (writtenLag.seconds !== lag.seconds || beyond(writtenLag.bytes, lag.bytes, bands.lagBytes)) {
    return true;
  }
  if (writtenEntry === undefined || lastEntryTime === undefined) return writtenEntry !== lastEntryTime;
  const moved = Math.abs(Date.parse(lastEntryTime) - Date.parse(writtenEntry));
  // An unreadable time counts as moved when the text differs.
  return Number.isNaN(moved) ? writtenEntry !== lastEntryTime : moved > bands.lastEntryMs;
}

/** What a reason means where the code alone does not say what to do. */
const ERROR_HINTS: Readonly<Record<string, string>> = {
  // Absent, not opted in and not for this target are one answer on purpose (existence is not
  // revealed), so all are named.
  KUBE_NOT_FOUND:
    ': the Secret of spec.ssh.secretRef does not exist or does not carry the label pglog.io/ssh-credentials: "true" ' +
    'and the annotation pglog.io/allowed-targets listing this target, which a Secret needs to serve it (docs/targets.md)',
};

type ConditionHead = Pick<Condition, 'type' | 'status' | 'reason' | 'message'>;

/** Every condition the collector decides is Unknown until the target's shard has reported it. */
function notReportedYet(type: string, assignment: TargetAssignment): ConditionHead {
  return { type, status: 'Unknown', reason: 'Assigned', message: `assigned to shard ${assignment.shard}; its collector has not reported the target yet` };
}

function readyCondition(assignment: TargetAssignment, reported: ShardTargetStatus | undefined): ConditionHead {
  if (reported === undefined) return notReportedYet('Ready', assignment);
  if (reported.error !== undefined) {
    return {
      type: 'Ready',
      status: 'False',
      reason: reported.error,
      message: `the collector of shard ${assignment.shard} reports ${reported.error}${ERROR_HINTS[reported.error] ?? ''}`,
    };
  }
  if (!reported.connected) {
    return { type: 'Ready', status: 'False', reason: 'NotConnected', message: `the collector of shard ${assignment.shard} is not connected to the server` };
  }
  return { type: 'Ready', status: 'True', reason: 'Collecting', message: `collected by shard ${assignment.shard} over ${reported.transport}` };
}

/** `Snapshots`: whether the target's SQL snapshots succeed (only for targets that take them). */
function snapshotsCondition(assignment: TargetAssignment, reported: ShardTargetStatus | undefined): ConditionHead {
  if (reported === undefined) return notReportedYet('Snapshots', assignment);
  if (reported.snapshotError !== undefined) {
    return {
      type: 'Snapshots',
      status: 'False',
      reason: reported.snapshotError,
      message: `the newest SQL snapshot failed with ${reported.snapshotError} (pglog report activity shows the message)`,
    };
  }
  return { type: 'Snapshots', status: 'True', reason: 'Succeeding', message: 'the newest SQL snapshots succeeded' };
}

/**
 * `SqlRole`: whether the SQL role is no more powerful than monitoring needs (only for targets
 * that take snapshots). False with the collector's stable code as the reason:
 * SQL_ROLE_SUPERUSER (SQL planted on the monitored server would run with every right, up to
 * its OS account) or SQL_ROLE_CAN_WRITE. docs/snapshots.md says how to set up pglog_monitor.
 */
function sqlRoleCondition(assignment: TargetAssignment, reported: ShardTargetStatus | undefined): ConditionHead {
  if (reported === undefined) return notReportedYet('SqlRole', assignment);
  if (reported.sqlRoleWarning !== undefined) {
    // A superuser is refused (no snapshot runs) unless sql.allowSuperuser opts out (ADR 0032).
    const what =
      reported.sqlRoleWarning === 'SQL_ROLE_SUPERUSER' ? 'is a superuser (snapshots are refused unless sql.allowSuperuser is true)' : 'can write data';
    return {
      type: 'SqlRole',
      status: 'False',
      reason: reported.sqlRoleWarning,
      message: `the SQL role (spec.instances[].sql.user) ${what}: use a role with only pg_monitor (docs/snapshots.md)`,
    };
  }
  if (reported.snapshotError !== undefined) {
    return {
      type: 'SqlRole',
      status: 'Unknown',
      reason: 'SnapshotsFailing',
      message: 'the SQL role is checked when a session opens; see the Snapshots condition',
    };
  }
  return { type: 'SqlRole', status: 'True', reason: 'NotPrivileged', message: 'the SQL role is neither a superuser nor able to write' };
}

/** Three significant digits: enough for a column and for sharding, stable against noise. */
export function roundRate(rate: number): number {
  if (!Number.isFinite(rate)) return 0;
  return Number(rate.toPrecision(3));
}
