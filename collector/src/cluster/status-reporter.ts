/**
 * Cluster mode: writes the CollectorShard status through the status subresource, at most
 * once per interval and only when it changed enough (shard-status.ts) or the forced refresh
 * is due. A 409 (the shard changed since it was read) is answered by reading it again and
 * writing once more; other failures are logged and tried again at the next interval.
 */
import type { CollectorShard, CollectorShardStatus } from '@pglog/common/api/collector-shard.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_SHARDS } from '@pglog/common/kube/resources.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';
import { pause } from '@pglog/common/time/clock.ts';

import { changedEnough, DEFAULT_WRITE_RULE, type WriteRule } from './shard-status.ts';

export interface StatusReporterOptions {
  kube: KubeClient;
  namespace: string;
  name: string;
  /** The newest shard read (its resourceVersion is what the write is conditional on). */
  shard(): CollectorShard | null;
  /** The status as of now; null while there is nothing to report (the shard is unknown). */
  build(previous: CollectorShardStatus | undefined): CollectorShardStatus | null;
  intervalMs: number;
  log: Logger;
  rule?: WriteRule;
  /** Conflicts retried per write. Default 3. */
  maxConflicts?: number;
}

export class StatusReporter {
  private readonly o: StatusReporterOptions;
  private written: CollectorShardStatus | undefined;
  private writtenAt = 0;
  private failing = false;
  /** Set by requestWrite(): the next round writes even inside the interval's rules. */
  private forced = false;
  private wake: (() => void) | null = null;

  constructor(options: StatusReporterOptions) {
    this.o = options;
  }

  /** The status written last. */
  get last(): CollectorShardStatus | undefined {
    return this.written;
  }

  /**
   * Writes at the next round whether or not it changed enough (a new assignment, a final
   * status): at once when the interval since the last write has passed, else at its end.
   */
  requestWrite(): void {
    this.forced = true;
    if (Date.now() - this.writtenAt >= this.o.intervalMs) this.wake?.();
  }

  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await this.round();
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        void pause(this.o.intervalMs, signal).then(resolve);
      });
      this.wake = null;
    }
  }

  /** One decision and, if due, one write (public for the final write at stop). */
  async round(): Promise<void> {
    const next = this.o.build(this.written);
    if (next === null) return;
    const force = this.forced;
    this.forced = false;
    if (!force && !changedEnough(this.written, next, Date.now() - this.writtenAt, this.o.rule ?? DEFAULT_WRITE_RULE)) return;
    try {
      await this.write(next);
      this.written = next;
      this.writtenAt = Date.now();
      if (this.failing) this.o.log.info({ shard: this.o.name }, `CollectorShard ${this.o.name}: status written again`);
      this.failing = false;
    } catch (e) {
      const code = isPglogError(e) ? e.code : 'UNKNOWN';
      this.o.log[this.failing ? 'debug' : 'warn'](
        { shard: this.o.name, code },
        `CollectorShard ${this.o.namespace}/${this.o.name}: writing the status failed: ${(e as Error).message}`,
      );
      this.failing = true;
    }
  }

  private async write(status: CollectorShardStatus): Promise<void> {
    const { kube, namespace, name } = this.o;
    let shard = this.o.shard();
    const attempts = this.o.maxConflicts ?? 3;
    for (let attempt = 0; ; attempt++) {
      shard ??= await kube.get<CollectorShard>(COLLECTOR_SHARDS, namespace, name);
      if (shard === null) return; // deleted: nothing to report on
      try {
        await kube.replaceStatus<CollectorShard>(COLLECTOR_SHARDS, { ...shard, status });
        return;
      } catch (e) {
        if (!(isPglogError(e) && e.code === 'KUBE_CONFLICT') || attempt >= attempts) throw e;
        shard = null; // read it again: another writer (the operator, our own last write) moved it on
      }
    }
  }
}
