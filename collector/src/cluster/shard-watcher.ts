/**
 * Cluster mode: follows the one CollectorShard this pod owns, through the operator's
 * Informer restricted to it by a field selector on its name (list, watch from the list's
 * resourceVersion, list again on 410 Gone, back off on other failures, never throw). This adds
 * what the collector needs on top: the shard itself on every change (null once it is deleted)
 * and a health that also says when the shard does not exist.
 */
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { Informer } from '@pglog/common/kube/informer.ts';
import { COLLECTOR_SHARDS } from '@pglog/common/kube/resources.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';

export interface ShardWatcherOptions {
  kube: KubeClient;
  namespace: string;
  name: string;
  /** Called with the shard on every change of it, null when it is deleted. */
  onShard(shard: CollectorShard | null): void;
  log: Logger;
  /** First retry delay after a failed list or watch (default 500 ms). */
  backoffBaseMs?: number;
}

export class ShardWatcher {
  private readonly o: ShardWatcherOptions;
  private readonly informer: Informer<CollectorShard>;

  constructor(options: ShardWatcherOptions) {
    this.o = options;
    const log = options.log.child({ shard: options.name });
    this.informer = new Informer<CollectorShard>(options.kube, COLLECTOR_SHARDS, {
      namespace: options.namespace,
      fieldSelector: `metadata.name=${options.name}`,
      log: (level, msg, fields) => {
        log[level](fields, `CollectorShard ${options.namespace}/${options.name}: ${msg}`);
      },
      ...(options.backoffBaseMs === undefined ? {} : { backoffBaseMs: options.backoffBaseMs }),
    });
    this.informer.onChange((event) => {
      if (event.object.metadata.name !== options.name) return;
      options.onShard(event.type === 'delete' ? null : event.object);
    });
  }

  /** The newest shard seen (null before the first list or when it does not exist). */
  get shard(): CollectorShard | null {
    return this.informer.get(this.o.namespace, this.o.name) ?? null;
  }

  /** Not ok before the first list, while listing or watching fails, and while the shard does not exist. */
  health(): { ok: boolean; reason: string | null } {
    const h = this.informer.health();
    if (!h.ok) return { ok: false, reason: h.reason };
    if (this.shard === null) return { ok: false, reason: `CollectorShard ${this.o.namespace}/${this.o.name} does not exist` };
    return { ok: true, reason: null };
  }

  /** Lists and watches until `signal` aborts. */
  run(signal: AbortSignal): Promise<void> {
    return this.informer.run(signal);
  }
}
