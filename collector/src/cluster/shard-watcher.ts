/**
 * Cluster mode: follows the one CollectorShard this pod owns. List with a field selector on
 * its name (so the watch continues from the list's resourceVersion), then watch; a watch the
 * server ends is started again from the last version seen, a 410 Gone lists again, any other
 * failure is retried with backoff. It never throws: health() says whether the shard is known
 * and current, and why not.
 */
import type { CollectorShard } from '../../../operator/src/api/collector-shard.ts';
import type { KubeClient } from '../../../operator/src/kube/client-types.ts';
import { COLLECTOR_SHARDS } from '../../../operator/src/kube/resources.ts';
import { isPglogError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { backoffDelay } from '../collect/retry.ts';
import { pause } from '../transport/clock.ts';

export interface ShardWatcherOptions {
  kube: KubeClient;
  namespace: string;
  name: string;
  /** Called with the shard on every change of it, null when it is deleted or absent. */
  onShard(shard: CollectorShard | null): void;
  log: Logger;
  /** Server-side timeout of one watch request (default 300 s). */
  watchTimeoutSeconds?: number;
}

export class ShardWatcher {
  private readonly o: ShardWatcherOptions;
  private problem: string | null = 'the shard has not been read yet';
  private current: CollectorShard | null = null;

  constructor(options: ShardWatcherOptions) {
    this.o = options;
  }

  /** The newest shard seen (null before the first list or when it does not exist). */
  get shard(): CollectorShard | null {
    return this.current;
  }

  health(): { ok: boolean; reason: string | null } {
    return { ok: this.problem === null, reason: this.problem };
  }

  /** Lists and watches until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { kube, namespace, name, log } = this.o;
    const fieldSelector = `metadata.name=${name}`;
    let version: string | null = null;
    for (let attempt = 1; !signal.aborted;) {
      try {
        if (version === null) {
          const listed = await kube.list<CollectorShard>(COLLECTOR_SHARDS, namespace, { fieldSelector });
          version = listed.resourceVersion;
          const shard = listed.items.find((s) => s.metadata.name === name) ?? null;
          this.problem = shard === null ? `CollectorShard ${namespace}/${name} does not exist (yet)` : null;
          this.deliver(shard);
        }
        for await (const event of kube.watch<CollectorShard>(COLLECTOR_SHARDS, namespace, { fieldSelector, resourceVersion: version, timeoutSeconds: this.o.watchTimeoutSeconds ?? 300 }, signal)) {
          if (event.type === 'BOOKMARK') { version = event.resourceVersion; continue; }
          version = event.object.metadata.resourceVersion ?? version;
          if (event.object.metadata.name !== name) continue;
          if (event.type === 'DELETED') {
            this.problem = `CollectorShard ${namespace}/${name} was deleted`;
            this.deliver(null);
          } else {
            this.problem = null;
            this.deliver(event.object);
          }
        }
        attempt = 1;
      } catch (e) {
        if (signal.aborted) return;
        if (isPglogError(e) && e.code === 'KUBE_GONE') {
          // The version is too old to watch from: list again (no wait, it is not a failure).
          log.debug({ shard: name }, `CollectorShard ${name}: watch expired, listing again`);
          version = null;
          continue;
        }
        const delay = backoffDelay(attempt++, 500, 30_000);
        const code = isPglogError(e) ? e.code : 'UNKNOWN';
        this.problem = `${code}: ${(e as Error).message}`;
        log.warn({ shard: name, code, retryInMs: delay }, `CollectorShard ${namespace}/${name}: ${(e as Error).message}; trying again in ${delay} ms`);
        await pause(delay, signal);
      }
    }
  }

  private deliver(shard: CollectorShard | null): void {
    this.current = shard;
    this.o.onShard(shard);
  }
}
