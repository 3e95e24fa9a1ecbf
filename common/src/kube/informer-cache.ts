/**
 * The informer's cache logic, pure: keys, applying a watch event, and the differences
 * between the cache and a fresh list (so a relist after 410 Gone emits the deletes the
 * missed watch events would have carried).
 */
import type { KubeObject } from './client-types.ts';

export interface InformerEvent<T> {
  type: 'add' | 'update' | 'delete';
  object: T;
  /** The cached object before an update (or the last known state of a deleted one). */
  old?: T;
}

/** `namespace/name`, or `name` for cluster-scoped objects. */
export function objectKey(namespace: string | undefined, name: string): string {
  return namespace === undefined || namespace === '' ? name : `${namespace}/${name}`;
}

export function keyOf(object: KubeObject): string {
  return objectKey(object.metadata.namespace, object.metadata.name);
}

/**
 * The cache a list replaces and the events that take the old cache there: adds for new keys,
 * updates for changed resourceVersions (or a new uid: deleted and created again), deletes for
 * keys the list no longer has.
 */
export function diffRelist<T extends KubeObject>(cache: ReadonlyMap<string, T>, items: readonly T[]): { next: Map<string, T>; events: InformerEvent<T>[] } {
  const next = new Map<string, T>();
  const events: InformerEvent<T>[] = [];
  for (const item of items) {
    const key = keyOf(item);
    next.set(key, item);
    const old = cache.get(key);
    if (old === undefined) events.push({ type: 'add', object: item });
    else if (old.metadata.uid !== item.metadata.uid) {
      // Same name, another object: its handlers see the old one go and the new one come.
      events.push({ type: 'delete', object: old, old }, { type: 'add', object: item });
    } else if (old.metadata.resourceVersion !== item.metadata.resourceVersion) events.push({ type: 'update', object: item, old });
  }
  for (const [key, old] of cache) if (!next.has(key)) events.push({ type: 'delete', object: old, old });
  return { next, events };
}

/** Applies one watch event to the cache (in place); the informer event, if anything changed. */
export function applyWatchEvent<T extends KubeObject>(cache: Map<string, T>, type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T): InformerEvent<T> | undefined {
  const key = keyOf(object);
  const old = cache.get(key);
  if (type === 'DELETED') {
    if (old === undefined) return undefined;
    cache.delete(key);
    return { type: 'delete', object, old };
  }
  cache.set(key, object);
  if (old === undefined) return { type: 'add', object };
  if (old.metadata.resourceVersion === object.metadata.resourceVersion) return undefined;
  return { type: 'update', object, old };
}
