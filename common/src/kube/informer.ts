/**
 * A cache of one resource type kept current by list + watch, like client-go's reflector and
 * informer: list, watch from the list's resourceVersion (bookmarks move it), watch again when
 * the server ends a watch, list again on 410 Gone and emit the differences so no delete is
 * missed, back off with jitter on other errors. run() never rejects: it resolves when aborted.
 */
import { setTimeout as sleep } from 'node:timers/promises';

import type { KubeClient, KubeObject, ResourceType } from './client-types.ts';
import { isKubeError } from './errors.ts';
import { applyWatchEvent, diffRelist, type InformerEvent, objectKey } from './informer-cache.ts';

export type { InformerEvent } from './informer-cache.ts';

export type InformerLog = (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown>) => void;

export interface InformerOptions<T extends KubeObject = KubeObject> {
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  log?: InformerLog | undefined;
  /** First retry delay after a failed list or watch; doubles per failure. Default 500 ms. */
  backoffBaseMs?: number;
  /** Largest retry delay. Default 30 s. */
  backoffCapMs?: number;
  /** Server-side timeout of one watch request. Default 300 s. */
  watchTimeoutSeconds?: number;
  /**
   * Objects per page of a list (as client-go's reflector: 500). A list of 10,000 objects in one
   * answer is encoded whole before its first byte is sent: on a busy API server that took more
   * than the client's 30 s idle timeout, again at every retry.
   */
  pageSize?: number;
  /**
   * Applied to every object before it is cached and handed to handlers, as client-go's
   * SetTransform: e.g. dropping `metadata.managedFields`, which nothing here reads and which
   * is about half of a small object (stripManagedFields).
   */
  transform?: ((object: T) => T) | undefined;
}

/** An informer transform: the object without `metadata.managedFields` (a write with the object keeps the server's). */
export function stripManagedFields<T extends KubeObject>(object: T): T {
  if (!Object.hasOwn(object.metadata, 'managedFields')) return object;
  const metadata: Record<string, unknown> = { ...object.metadata };
  delete metadata['managedFields'];
  return { ...object, metadata: metadata as unknown as T['metadata'] };
}

export class Informer<T extends KubeObject> {
  private readonly client: KubeClient;
  private readonly type: ResourceType;
  private readonly options: InformerOptions<T>;
  private readonly log: InformerLog;
  private readonly handlers: Array<(event: InformerEvent<T>) => void> = [];
  private cache = new Map<string, T>();
  private synced = false;
  private failure: string | undefined;

  constructor(client: KubeClient, type: ResourceType, options: InformerOptions<T> = {}) {
    this.client = client;
    this.type = type;
    this.options = options;
    this.log = options.log ?? (() => undefined);
  }

  onChange(handler: (event: InformerEvent<T>) => void): void {
    this.handlers.push(handler);
  }

  /** Whether the first list has filled the cache. */
  hasSynced(): boolean {
    return this.synced;
  }

  /** Not ok before the first list and while the last list or watch failed (readiness). */
  health(): { ok: boolean; reason: string } {
    if (this.failure !== undefined) return { ok: false, reason: this.failure };
    if (!this.synced) return { ok: false, reason: `${this.type.plural}: not synced yet` };
    return { ok: true, reason: `${this.type.plural}: synced and watching` };
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.cache.get(objectKey(namespace, name));
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  /** Lists and watches until `signal` aborts; resolves then, never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    const { namespace, labelSelector, fieldSelector } = this.options;
    const selectors = { ...(labelSelector !== undefined ? { labelSelector } : {}), ...(fieldSelector !== undefined ? { fieldSelector } : {}) };
    const fields = { resource: this.type.plural, ...(namespace !== undefined ? { namespace } : {}), ...selectors };
    let resourceVersion: string | undefined;
    let failures = 0;
    while (!signal.aborted) {
      try {
        if (resourceVersion === undefined) {
          const listed = await this.client.list<T>(this.type, namespace, { ...selectors, limit: this.options.pageSize ?? 500 });
          const transform = this.options.transform;
          const { next, events } = diffRelist(this.cache, transform === undefined ? listed.items : listed.items.map(transform));
          this.cache = next;
          resourceVersion = listed.resourceVersion;
          this.synced = true;
          this.failure = undefined;
          this.log('debug', 'listed', { ...fields, items: listed.items.length, changes: events.length, resourceVersion });
          for (const e of events) this.emit(e);
        }
        const watch = this.client.watch<T>(
          this.type,
          namespace,
          { ...selectors, resourceVersion, timeoutSeconds: this.options.watchTimeoutSeconds ?? 300 },
          signal,
        );
        for await (const event of watch) {
          // Events flow: the next failure starts from the first backoff step again.
          failures = 0;
          if (event.type === 'BOOKMARK') {
            if (event.resourceVersion !== '') resourceVersion = event.resourceVersion;
            continue;
          }
          resourceVersion = event.object.metadata.resourceVersion ?? resourceVersion;
          const object = this.options.transform === undefined ? event.object : this.options.transform(event.object);
          const change = applyWatchEvent(this.cache, event.type, object);
          if (change !== undefined) this.emit(change);
        }
        // The server ended the watch (its timeout): watch again from where it stopped.
        failures = 0;
      } catch (e) {
        if (signal.aborted) break;
        // Relist after any failure: the cache may have missed events; the diff catches them up.
        resourceVersion = undefined;
        if (isKubeError(e, 'KUBE_GONE') && failures === 0) {
          this.log('info', 'resourceVersion too old, listing again', { ...fields, error: e.message });
          failures++;
          continue;
        }
        this.failure = `${this.type.plural}: ${e instanceof Error ? e.message : String(e)}`;
        const delay = this.backoffMs(failures++);
        this.log('warn', 'list/watch failed, retrying', { ...fields, error: e instanceof Error ? e.message : String(e), retryInMs: delay });
        try {
          await sleep(delay, undefined, { signal });
        } catch {
          break;
        }
      }
    }
  }

  private backoffMs(failures: number): number {
    const base = this.options.backoffBaseMs ?? 500;
    const cap = this.options.backoffCapMs ?? 30_000;
    const ceiling = Math.min(cap, base * 2 ** Math.min(failures, 30));
    // Full jitter in the upper half: many informers that failed together retry apart.
    return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
  }

  private emit(event: InformerEvent<T>): void {
    for (const handler of this.handlers) {
      try {
        handler(event);
      } catch (e) {
        this.log('error', 'an informer event handler threw', {
          resource: this.type.plural,
          event: event.type,
          object: objectKey(event.object.metadata.namespace, event.object.metadata.name),
          error: e instanceof Error ? e.message : String(e),
        });
      }
    }
  }
}
