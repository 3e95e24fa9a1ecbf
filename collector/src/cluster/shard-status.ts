/**
 * Cluster mode, pure: the CollectorShard status this collector reports, and the rule that
 * decides whether it changed enough to be written (the API server and every watcher of the
 * shard pay for each write, so rates that wobble do not count, but a target that connects,
 * fails, moves or leaves does).
 */
import type { CollectorShardStatus, ShardTarget, ShardTargetStatus, ShardTuning } from '@pglog/common/api/collector-shard.ts';
import type { Condition } from '@pglog/common/api/common.ts';

import type { TargetSnapshot } from '../collect/target-observation.ts';

export interface StatusInputs {
  /** metadata.generation of the shard spec the collector applied. */
  generation: number | undefined;
  pod: string | null;
  tuning: ShardTuning | null;
  /** The assigned targets (shard spec). */
  assigned: readonly ShardTarget[];
  /** What the collector runs now. */
  running: readonly TargetSnapshot[];
  /** Assigned targets that could not be resolved, with the error code. */
  unresolved: ReadonlyMap<string, string>;
  /** Why the shard itself is not current (watch failing), or null. */
  shardProblem: string | null;
  /** The Ready condition written last, for its lastTransitionTime. */
  previousReady: Condition | undefined;
  now: Date;
}

export function buildShardStatus(i: StatusInputs): CollectorShardStatus {
  const running = new Map(i.running.map((s) => [s.name, s]));
  const targets: ShardTargetStatus[] = [...i.assigned]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((a) => {
      const code = i.unresolved.get(a.name);
      const r = running.get(a.name);
      if (code !== undefined || r === undefined) {
        return {
          name: a.name,
          transport: a.transport,
          bytesPerSecond: 0,
          linesPerSecond: 0,
          lagBytes: 0,
          connected: false,
          epoch: a.epoch,
          ...(code === undefined ? {} : { error: code }),
        };
      }
      return {
        name: a.name,
        transport: r.transport,
        bytesPerSecond: Math.round(r.bytesPerSecond),
        linesPerSecond: Math.round(r.linesPerSecond * 10) / 10,
        lagBytes: r.lagBytes,
        connected: r.connected,
        epoch: r.epoch ?? a.epoch,
        ...(r.lastEntryTime === undefined ? {} : { lastEntryTime: r.lastEntryTime }),
        ...(r.error === undefined ? {} : { error: r.error }),
        ...(r.snapshotError === undefined ? {} : { snapshotError: r.snapshotError }),
        ...(r.sqlRoleWarning === undefined ? {} : { sqlRoleWarning: r.sqlRoleWarning }),
        ...(r.offsets.length === 0 ? {} : { offsets: r.offsets }),
      };
    });
  return {
    ...(i.generation === undefined ? {} : { observedGeneration: i.generation }),
    ...(i.pod === null ? {} : { pod: i.pod }),
    ...(i.tuning === null ? {} : { tuning: i.tuning }),
    updatedAt: i.now.toISOString(),
    targets,
    conditions: [readyCondition(targets, i)],
  };
}

/** Ready: every assigned target is collecting. The reason of a failure is its error code. */
function readyCondition(targets: readonly ShardTargetStatus[], i: StatusInputs): Condition {
  let status: Condition['status'] = 'True';
  let reason = 'Collecting';
  let message = `collecting ${targets.length} targets`;
  const failing = targets.filter((t) => t.error !== undefined);
  const waiting = targets.filter((t) => t.error === undefined && !t.connected);
  if (i.shardProblem !== null) {
    status = 'Unknown';
    reason = 'ShardUnavailable';
    message = i.shardProblem;
  } else if (failing.length > 0) {
    status = 'False';
    reason = failing[0]!.error!;
    message = `${failing.length} of ${targets.length} targets failing: ${failing
      .slice(0, 5)
      .map((t) => `${t.name} (${t.error})`)
      .join(', ')}`;
  } else if (waiting.length > 0) {
    status = 'False';
    reason = 'Connecting';
    message = `${waiting.length} of ${targets.length} targets not reading yet: ${waiting
      .slice(0, 5)
      .map((t) => t.name)
      .join(', ')}`;
  }
  const prev = i.previousReady;
  const lastTransitionTime = prev !== undefined && prev.status === status ? prev.lastTransitionTime : i.now.toISOString();
  return { type: 'Ready', status, reason, message, lastTransitionTime, ...(i.generation === undefined ? {} : { observedGeneration: i.generation }) };
}

export interface WriteRule {
  /** Written at least this often even when nothing changed (a liveness sign). Default 60 s. */
  forceAfterMs: number;
  /** A rate or lag counts as changed beyond this fraction of the larger value ... */
  relativeChange: number;
  /** ... and beyond these absolute amounts (small numbers wobble most). */
  minBytesPerSecond: number;
  minLinesPerSecond: number;
  minLagBytes: number;
}

export const DEFAULT_WRITE_RULE: Readonly<WriteRule> = Object.freeze({
  forceAfterMs: 60_000,
  relativeChange: 0.2,
  minBytesPerSecond: 1024,
  minLinesPerSecond: 10,
  minLagBytes: 1024 * 1024,
});

/**
 * Whether `next` is worth writing over `written` (written `sinceWriteMs` ago). The caller
 * also keeps the shortest interval between writes; this decides what happens at each one.
 */
export function changedEnough(
  written: CollectorShardStatus | undefined,
  next: CollectorShardStatus,
  sinceWriteMs: number,
  rule: WriteRule = DEFAULT_WRITE_RULE,
): boolean {
  if (written === undefined || sinceWriteMs >= rule.forceAfterMs) return true;
  if (written.observedGeneration !== next.observedGeneration || written.pod !== next.pod) return true;
  if (JSON.stringify(written.tuning) !== JSON.stringify(next.tuning)) return true;
  const ready = (s: CollectorShardStatus): string => {
    const c = s.conditions?.find((x) => x.type === 'Ready');
    return c === undefined ? '' : `${c.status}/${c.reason}/${c.message}`;
  };
  if (ready(written) !== ready(next)) return true;
  const before = written.targets ?? [];
  const after = next.targets ?? [];
  if (before.length !== after.length) return true;
  const beyond = (a: number, b: number, floor: number): boolean => Math.abs(a - b) > Math.max(floor, rule.relativeChange * Math.max(Math.abs(a), Math.abs(b)));
  for (let k = 0; k < after.length; k++) {
    const a = before[k]!;
    const b = after[k]!;
    if (
      a.name !== b.name ||
      a.transport !== b.transport ||
      a.connected !== b.connected ||
      a.epoch !== b.epoch ||
      a.error !== b.error ||
      a.snapshotError !== b.snapshotError ||
      a.sqlRoleWarning !== b.sqlRoleWarning
    )
      return true;
    // The first committed position or entry of a target is news; later ones ride along.
    if ((a.offsets === undefined) !== (b.offsets === undefined) || (a.lastEntryTime === undefined) !== (b.lastEntryTime === undefined)) return true;
    if (beyond(a.bytesPerSecond, b.bytesPerSecond, rule.minBytesPerSecond)) return true;
    if (beyond(a.linesPerSecond, b.linesPerSecond, rule.minLinesPerSecond)) return true;
    if (beyond(a.lagBytes, b.lagBytes, rule.minLagBytes)) return true;
  }
  return false;
}
