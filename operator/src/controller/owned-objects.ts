/**
 * Writes the objects a pool owns (StatefulSet, Service, PodDisruptionBudget) only when what
 * the operator wants changed, and never one it does not own: an object of the same name
 * without the pool as its controller (an application's own PDB `postgres`, Service
 * `postgres-metrics`) is someone else's, and a forced apply would take over its fields and
 * make the garbage collector delete it with the pool. The desired object's hash is kept in an annotation: comparing
 * it is exact and cheap, where comparing the live object would trip over every default the
 * API server fills in. A user's edit to a field we own is not seen by the hash, so
 * `resyncAfterMs` re-applies unconditionally now and then (server-side apply, forced: our
 * field manager owns those fields and takes them back).
 */
import { createHash } from 'node:crypto';

import type { ApplyOptions, KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';

export const DESIRED_HASH_ANNOTATION = 'pglog.io/desired-hash';

export type WriteResult = 'created' | 'updated' | 'unchanged';

export function desiredHash(object: unknown): string {
  return createHash('sha256').update(JSON.stringify(object)).digest('hex').slice(0, 16);
}

/** `desired` with the hash annotation added (the hash covers the object without it). */
export function withDesiredHash<T extends KubeObject>(desired: T): T {
  const hash = desiredHash(desired);
  return { ...desired, metadata: { ...desired.metadata, annotations: { ...desired.metadata.annotations, [DESIRED_HASH_ANNOTATION]: hash } } };
}

/** Whether the object's controller owner reference is the pool of uid `uid`. */
export function controlledBy(object: KubeObject, uid: string): boolean {
  return (object.metadata.ownerReferences ?? []).some((r) => r.controller === true && r.uid === uid);
}

/**
 * The object of that name as it is now: the informer's copy, or, on a miss (the informers see
 * only pglog-labelled objects, so someone else's object looks absent), a GET. Null: none.
 */
export async function currentObject(
  client: KubeClient,
  type: ResourceType,
  namespace: string,
  name: string,
  cached: KubeObject | undefined,
): Promise<KubeObject | null> {
  return cached ?? (await client.get(type, namespace, name));
}

/**
 * Server-side applies `desired` unless `current` already carries its hash. `force` re-applies
 * anyway (periodic drift repair).
 */
export async function applyOwned<T extends KubeObject>(
  client: KubeClient,
  type: ResourceType,
  desired: T,
  current: KubeObject | undefined,
  options: ApplyOptions & { reapply?: boolean },
): Promise<WriteResult> {
  const hashed = withDesiredHash(desired);
  const wanted = hashed.metadata.annotations?.[DESIRED_HASH_ANNOTATION];
  if (
    current !== undefined &&
    current.metadata.deletionTimestamp === undefined &&
    options.reapply !== true &&
    current.metadata.annotations?.[DESIRED_HASH_ANNOTATION] === wanted
  ) {
    return 'unchanged';
  }
  await client.apply(type, hashed, { fieldManager: options.fieldManager, force: options.force ?? true });
  return current === undefined ? 'created' : 'updated';
}
