/**
 * What the operator benchmark sees of one namespace, through informers (list once, then
 * watch) instead of full lists polled every second: a list of 10,000 PostgresTargets costs the
 * API server about 2 s of CPU, so polling it competed with the very writes being timed. Tracks
 * each target's status.shard, counts the targets' status changes (the operator's status
 * writes), and reads the pool's assignment from its CollectorShards.
 */
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { Informer } from '@pglog/common/kube/informer.ts';
import { COLLECTOR_SHARDS, POSTGRES_TARGETS } from '@pglog/common/kube/resources.ts';

type Target = KubeObject & { status?: { shard?: number; conditions?: Array<{ type: string; reason?: string }> } };

/** The reason of a target's Ready condition, or `-` without one. */
function readyReason(t: Target | undefined): string {
  return t?.status?.conditions?.find((c) => c.type === 'Ready')?.reason ?? '-';
}

export interface Assignment {
  /** The pool's shards by index. */
  shards: CollectorShard[];
  /** Target name → shard index. */
  byTarget: Map<string, number>;
  /** Targets in more than one shard. */
  duplicates: number;
}

export class FleetWatch {
  private readonly targets: Informer<Target>;
  private readonly shards: Informer<CollectorShard>;
  private readonly stop = new AbortController();
  private readonly running: Array<Promise<void>>;
  /** Updates of a target whose status changed. */
  statusChanges = 0;
  /** When the last status change was seen (performance.now()). */
  lastStatusChangeAt = 0;
  /** Status changes by their Ready reason before → after (`NoPool → Assigned`), since resetTransitions(). */
  transitions = new Map<string, number>();

  constructor(client: KubeClient, namespace: string) {
    this.targets = new Informer<Target>(client, POSTGRES_TARGETS, { namespace });
    this.shards = new Informer<CollectorShard>(client, COLLECTOR_SHARDS, { namespace });
    this.targets.onChange((e) => {
      if (e.type === 'update' && JSON.stringify(e.old?.status ?? {}) !== JSON.stringify(e.object.status ?? {})) {
        this.statusChanges++;
        this.lastStatusChangeAt = performance.now();
        const moved = e.old?.status?.shard !== undefined && e.old.status.shard !== e.object.status?.shard;
        const key = `${readyReason(e.old)} → ${readyReason(e.object)}${moved ? ' (other shard)' : ''}`;
        this.transitions.set(key, (this.transitions.get(key) ?? 0) + 1);
      }
    });
    this.running = [this.targets.run(this.stop.signal), this.shards.run(this.stop.signal)];
  }

  async synced(): Promise<void> {
    while (!this.targets.hasSynced() || !this.shards.hasSynced()) await new Promise((r) => setTimeout(r, 50));
  }

  targetCount(): number {
    return this.targets.list().length;
  }

  assignment(pool: string): Assignment {
    const shards = this.shards
      .list()
      .filter((s) => s.spec.pool === pool)
      .sort((a, b) => a.spec.index - b.spec.index);
    const byTarget = new Map<string, number>();
    let duplicates = 0;
    for (const s of shards) {
      for (const t of s.spec.targets) {
        if (byTarget.has(t.name)) duplicates++;
        byTarget.set(t.name, s.spec.index);
      }
    }
    return { shards, byTarget, duplicates };
  }

  /** How many targets have status.shard equal to their shard in `want`. */
  statusesMatching(want: ReadonlyMap<string, number>): number {
    let ok = 0;
    for (const t of this.targets.list()) if (t.status?.shard !== undefined && want.get(t.metadata.name) === t.status.shard) ok++;
    return ok;
  }

  async close(): Promise<void> {
    this.stop.abort();
    await Promise.all(this.running);
  }
}

/** Resolves once `check` returns a value, polling every `everyMs`; rejects after `timeoutMs` naming `what`. */
export async function until<T>(what: string, timeoutMs: number, check: () => T | undefined, everyMs = 50, describe?: () => string): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms${describe === undefined ? '' : `\n${describe()}`}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
