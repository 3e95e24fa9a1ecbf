/**
 * What the collector knows about one running target, for the shard status (cluster mode):
 * line rate, lag, whether every stream reads, the last failure, the newest committed entry
 * and the committed read positions. Fed by the stream and batcher hooks; read by snapshot().
 */
import type { ActiveTransport } from '@pglog/common/api/postgres-target.ts';
import { isPglogError } from '@pglog/common/errors.ts';

import { RateMeter } from '../promotion/rate-meter.ts';
import type { StorePosition } from '../store/store-writer.ts';
import type { StreamHooks } from './instance-stream.ts';

/** One target as its collector sees it now (the shape of a shard status entry). */
export interface TargetSnapshot {
  name: string;
  transport: ActiveTransport;
  bytesPerSecond: number;
  linesPerSecond: number;
  lagBytes: number;
  connected: boolean;
  /** The epoch its streams claimed with; null when not claimed yet or standalone. */
  epoch: number | null;
  /** Log time of the newest committed entry (RFC 3339). */
  lastEntryTime?: string;
  /** Stable code of the failure the target is in now. */
  error?: string;
  /** Stable code of the failing SQL snapshots, when the newest snapshot of an instance failed. */
  snapshotError?: string;
  /** Why an instance's SQL role is more powerful than monitoring needs (SQL_ROLE_SUPERUSER first). */
  sqlRoleWarning?: string;
  offsets: Array<{ instance: string; file: string; offset: number }>;
}

export class TargetObservation {
  readonly name: string;
  readonly epoch: number | null;
  /** Lines read; a RateMeter counts units, here lines (its `bytesPerS` is then lines per second). */
  private readonly lines: RateMeter;
  private readonly instances: readonly string[];
  private readonly lag = new Map<string, number>();
  private readonly reading = new Map<string, boolean>();
  private readonly errors = new Map<string, string>();
  private readonly offsets = new Map<string, { file: string; offset: number }>();
  /** Per instance and snapshot kind: the code of the newest snapshot's failure. */
  private readonly snapshotErrors = new Map<string, string>();
  /** Per instance: the SQL role's privilege code its newest session found. */
  private readonly rolePrivileges = new Map<string, string>();
  private newestMs: number | null = null;

  constructor(name: string, instances: readonly string[], epoch: number | null, rateTimeConstantMs: number, nowMs: number, initialLinesPerSecond = 0) {
    this.name = name;
    this.instances = instances;
    this.epoch = epoch;
    // The meter counts lines as its "bytes": its bit rate is 8 × lines per second.
    this.lines = new RateMeter(nowMs, { timeConstantMs: rateTimeConstantMs, initialBitsPerS: initialLinesPerSecond * 8 });
  }

  linesRead(n: number): void {
    this.lines.add(n);
  }

  lagOf(instance: string, bytes: number): void {
    this.lag.set(instance, bytes);
  }

  /** The stream reads (it named its file or data arrived). */
  readingNow(instance: string): void {
    this.reading.set(instance, true);
    this.errors.delete(instance);
  }

  /** The stream failed (it retries) or ended for good (fenced). */
  failed(instance: string, error: unknown): void {
    this.reading.set(instance, false);
    this.errors.set(instance, isPglogError(error) ? error.code : 'UNKNOWN');
  }

  /** The outcome of an SQL snapshot of `instance`: null when it succeeded, else its error code. */
  snapshotResult(instance: string, kind: string, code: string | null): void {
    const key = `${instance}/${kind}`;
    if (code === null) this.snapshotErrors.delete(key);
    else this.snapshotErrors.set(key, code);
  }

  /** What the newest SQL session of `instance` found its role to be: a privilege code, or null. */
  sqlRole(instance: string, privilege: string | null): void {
    if (privilege === null) this.rolePrivileges.delete(instance);
    else this.rolePrivileges.set(instance, privilege);
  }

  committed(newest: ReadonlyArray<{ instance: string; ms: number }>, positions: readonly StorePosition[]): void {
    for (const n of newest) if (this.newestMs === null || n.ms > this.newestMs) this.newestMs = n.ms;
    for (const p of positions) this.offsets.set(p.instance, { file: p.file, offset: p.offset });
  }

  snapshot(transport: ActiveTransport, bytesPerSecond: number, nowMs: number): TargetSnapshot {
    const linesPerSecond = this.lines.sample(nowMs) / 8;
    let lagBytes = 0;
    for (const b of this.lag.values()) lagBytes += b;
    const error = [...this.errors.values()].sort()[0];
    const snapshotError = [...this.snapshotErrors.values()].sort()[0];
    // The strongest first: SQL_ROLE_SUPERUSER sorts after SQL_ROLE_CAN_WRITE.
    const sqlRoleWarning = [...this.rolePrivileges.values()].sort().at(-1);
    return {
      name: this.name,
      transport,
      bytesPerSecond,
      linesPerSecond,
      lagBytes,
      connected: this.instances.every((i) => this.reading.get(i) === true),
      epoch: this.epoch,
      ...(this.newestMs === null ? {} : { lastEntryTime: new Date(this.newestMs).toISOString() }),
      ...(error === undefined ? {} : { error }),
      ...(snapshotError === undefined ? {} : { snapshotError }),
      ...(sqlRoleWarning === undefined ? {} : { sqlRoleWarning }),
      offsets: [...this.offsets].map(([instance, o]) => ({ instance, ...o })).sort((a, b) => (a.instance < b.instance ? -1 : 1)),
    };
  }
}

/** `hooks` of one stream of the target, with what the observation needs added. */
export function observedHooks(observed: TargetObservation, instance: string, hooks: StreamHooks): StreamHooks {
  return {
    ...hooks,
    progress(delta, tally, where) {
      observed.linesRead(delta.lines);
      hooks.progress?.(delta, tally, where);
    },
    failed(error, delayMs, position) {
      observed.failed(instance, error);
      hooks.failed?.(error, delayMs, position);
    },
    lag(bytes) {
      observed.lagOf(instance, bytes);
      hooks.lag?.(bytes);
    },
    connected(up) {
      if (up) observed.readingNow(instance);
      hooks.connected?.(up);
    },
    // The follower named its file: the stream reads, even while the log is quiet.
    file(file, offset) {
      observed.readingNow(instance);
      hooks.file?.(file, offset);
    },
  };
}
