/**
 * Groups the snapshots of every instance of the process into one store transaction per short
 * interval: with thousands of instances snapshotting every 15 s, one transaction per snapshot
 * would take the store connection (shared with the log batches) a hundred times a second.
 * Each write() resolves or rejects with its own snapshot's outcome, so InstanceSnapshots
 * counts a store failure against the snapshot it lost.
 */
import type { PglogError } from '@pglog/common/errors.ts';

import type { Snapshot, SnapshotFailure } from '../snapshot/types.ts';

export interface SnapshotSinkOptions {
  /** Stores a group; resolves with each one's outcome in order (null: stored). */
  writeGroup(list: ReadonlyArray<Snapshot | SnapshotFailure>): Promise<Array<PglogError | null>>;
  /** How long the first snapshot of a group waits for others, ms. Default 500. */
  delayMs?: number;
  /** A group is written at once when it has this many. Default 500. */
  maxGroup?: number;
}

interface Pending {
  snapshot: Snapshot | SnapshotFailure;
  resolve(): void;
  reject(e: Error): void;
}

export class SnapshotSink {
  private readonly o: Required<SnapshotSinkOptions>;
  private queue: Pending[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** The group being written; the next waits for it (one transaction at a time). */
  private writing: Promise<void> = Promise.resolve();

  constructor(options: SnapshotSinkOptions) {
    this.o = { delayMs: 500, maxGroup: 500, ...options };
  }

  /** Resolves once `snapshot` is stored; rejects with why it was not. */
  write(snapshot: Snapshot | SnapshotFailure): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ snapshot, resolve, reject });
      // A full group goes now (its writes settle through their own promises).
      if (this.queue.length >= this.o.maxGroup) void this.flush();
      else this.flushSoon();
    });
  }

  /** Writes everything queued now; resolves once it is written (or failed). */
  flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const group = this.queue.splice(0, this.queue.length);
    if (group.length === 0) return this.writing;
    this.writing = this.writing.then(() => this.writeGroup(group));
    return this.writing;
  }

  private flushSoon(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      void this.flush();
    }, this.o.delayMs);
    this.timer.unref();
  }

  private async writeGroup(group: readonly Pending[]): Promise<void> {
    let outcomes: Array<PglogError | null>;
    try {
      outcomes = await this.o.writeGroup(group.map((p) => p.snapshot));
    } catch (e) {
      const error = e instanceof Error ? e : new Error(String(e));
      for (const p of group) p.reject(error);
      return;
    }
    group.forEach((p, i) => {
      const error = outcomes[i];
      if (error === null || error === undefined) p.resolve();
      else p.reject(error);
    });
  }
}
