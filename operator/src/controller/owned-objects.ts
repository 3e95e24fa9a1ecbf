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
 *
 * No write may take over an object that appeared, or was replaced, after it was read (ADR
 * 0031, security review R8): a server-side apply creates or takes over whatever has the name
 * by then. So a new object is created with POST, which fails with 409 when someone created one
 * in between (createOwned: the caller reports the conflict), and the forced apply of an
 * existing one names the uid it was read with, which the API server refuses for any other
 * object of the name (applyOwned).
 */
import { createHash } from 'node:crypto';

import type { ApplyOptions, KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { isKubeError, KubeError } from '@pglog/common/kube/errors.ts';

export const DESIRED_HASH_ANNOTATION = 'pglog.io/desired-hash';

/** `conflict`: an object of that name appeared after it was read as absent; nothing was written. */
export type WriteResult = 'created' | 'updated' | 'unchanged' | 'conflict';

/** The part of a `metadata.managedFields` entry read here. */
interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  subresource?: string;
}
type Managed = KubeObject & { metadata: { managedFields?: ManagedFieldsEntry[] } };

/** Tries at dropping the create's field manager entry when the object keeps changing under it. */
const ADOPT_ATTEMPTS = 3;

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
 * Server-side applies `desired` over `current` (an object the caller found controlled by the
 * pool) unless `current` already carries its hash. `reapply` applies anyway (periodic drift
 * repair). The apply names `current`'s uid: an object deleted or replaced since it was read is
 * not taken over, the API server refuses (KUBE_CONFLICT: read again).
 */
export async function applyOwned<T extends KubeObject>(
  client: KubeClient,
  type: ResourceType,
  desired: T,
  current: KubeObject,
  options: ApplyOptions & { reapply?: boolean },
): Promise<WriteResult> {
  const hashed = withDesiredHash(desired);
  const wanted = hashed.metadata.annotations?.[DESIRED_HASH_ANNOTATION];
  if (current.metadata.deletionTimestamp === undefined && options.reapply !== true && current.metadata.annotations?.[DESIRED_HASH_ANNOTATION] === wanted) {
    return 'unchanged';
  }
  await guardedApply(client, type, hashed, current.metadata.uid, options);
  return 'updated';
}

/**
 * Creates `desired` with POST: 409 (someone created an object of that name since it was read
 * as absent) is `conflict`, and nothing is written. Then it is server-side applied, and the
 * create's field manager entry dropped: a POST's manager owns every field it set, defaults
 * included, so a field a later version stops applying would otherwise stay. The object is then
 * as a server-side apply would have created it.
 */
export async function createOwned<T extends KubeObject>(client: KubeClient, type: ResourceType, desired: T, options: ApplyOptions): Promise<WriteResult> {
  const hashed = withDesiredHash(desired);
  let created: Managed;
  try {
    created = await client.create<Managed>(type, hashed);
  } catch (e) {
    if (isKubeError(e, 'KUBE_CONFLICT')) return 'conflict';
    throw e;
  }
  const creators = new Set((created.metadata.managedFields ?? []).filter((m) => m.operation === 'Update').map((m) => m.manager));
  let applied = await guardedApply<Managed>(client, type, hashed, created.metadata.uid, options);
  for (let attempt = 1; creators.size > 0; attempt++) {
    const entries = applied.metadata.managedFields ?? [];
    const kept = entries.filter((m) => !(m.operation === 'Update' && m.subresource === undefined && creators.has(m.manager)));
    if (kept.length === entries.length) break;
    try {
      await client.mergePatch(type, hashed.metadata.namespace, hashed.metadata.name, {
        metadata: { managedFields: kept, resourceVersion: applied.metadata.resourceVersion },
      });
      break;
    } catch (e) {
      // Changed in between (a controller's status write): read it again. After the last try
      // the entry stays; the object is ours and correct, only a field dropped later would stay.
      if (!isKubeError(e, 'KUBE_CONFLICT') || attempt >= ADOPT_ATTEMPTS) break;
      const now = await client.get<Managed>(type, hashed.metadata.namespace, hashed.metadata.name);
      if (now === null || now.metadata.uid !== created.metadata.uid) break;
      applied = now;
    }
  }
  return 'created';
}

/** A forced apply that names the uid of the object it is meant for (a precondition the API server checks). */
async function guardedApply<T extends KubeObject>(
  client: KubeClient,
  type: ResourceType,
  hashed: KubeObject,
  uid: string | undefined,
  options: ApplyOptions,
): Promise<T> {
  const body = uid === undefined ? hashed : { ...hashed, metadata: { ...hashed.metadata, uid } };
  try {
    return await client.apply<T>(type, body as T, { fieldManager: options.fieldManager, force: options.force ?? true });
  } catch (e) {
    // Another object of the name now: 422 "metadata.uid: field is immutable"; none: 409 "uid mismatch".
    if (uid !== undefined && isKubeError(e, 'KUBE_INVALID') && e.message.includes('metadata.uid')) {
      throw new KubeError('KUBE_CONFLICT', `${type.kind} ${hashed.metadata.name} was replaced since it was read: ${e.message}`, 409, 'Conflict', { cause: e });
    }
    throw e;
  }
}
