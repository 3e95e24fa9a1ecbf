/**
 * The Kubernetes API as pglog uses it: a small client over HTTPS (client.ts) with typed
 * errors. Operator and collector (cluster mode) code depends on this interface only, so pure
 * parts test with a fake and integration tests run against a real kube-apiserver.
 */
import type { ObjectMeta } from '../api/common.ts';

/** Any object the API serves. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
}

/** Where a resource lives in the API. */
export interface ResourceType {
  /** API group, '' for the core group. */
  readonly group: string;
  readonly version: string;
  /** Plural resource name in the URL (`collectorshards`). */
  readonly plural: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

export interface ListOptions {
  labelSelector?: string;
  fieldSelector?: string;
  /** Page size; the client follows `continue` tokens and returns all items. */
  limit?: number;
}

export interface ListResult<T> {
  items: T[];
  /** The list's resourceVersion: where a watch continues. */
  resourceVersion: string;
}

export interface WatchOptions {
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion: string;
  /** Server-side timeout of one watch request; the informer watches again after it. */
  timeoutSeconds?: number;
}

export type WatchEvent<T> = { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T } | { type: 'BOOKMARK'; resourceVersion: string };

export interface ApplyOptions {
  fieldManager: string;
  /** Take over fields another manager owns (an operator's own objects: true). */
  force?: boolean;
  /** `All` for a server-side dry run. */
  dryRun?: 'All';
}

export interface DeleteOptions {
  /** Delete only this incarnation / version. */
  preconditions?: { uid?: string; resourceVersion?: string };
  propagationPolicy?: 'Foreground' | 'Background' | 'Orphan';
}

export interface KubeClient {
  /** The object, or null when it does not exist (404). */
  get<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string): Promise<T | null>;
  list<T extends KubeObject>(type: ResourceType, namespace: string | undefined, options?: ListOptions): Promise<ListResult<T>>;
  /**
   * Watch events from `resourceVersion` until the server ends the request, `signal` aborts,
   * or an error: a 410 Gone (as an ERROR event or HTTP status) rejects with KubeError reason
   * `Expired`/`Gone` so the caller lists again.
   */
  watch<T extends KubeObject>(type: ResourceType, namespace: string | undefined, options: WatchOptions, signal: AbortSignal): AsyncIterable<WatchEvent<T>>;
  create<T extends KubeObject>(type: ResourceType, object: T): Promise<T>;
  /** PUT with `metadata.resourceVersion`: a concurrent change rejects with reason `Conflict` (409). */
  replace<T extends KubeObject>(type: ResourceType, object: T): Promise<T>;
  /** PUT of the status subresource, optimistic like `replace`. */
  replaceStatus<T extends KubeObject>(type: ResourceType, object: T): Promise<T>;
  /** Server-side apply (`application/apply-patch+yaml`, JSON body). */
  apply<T extends KubeObject>(type: ResourceType, object: T, options: ApplyOptions): Promise<T>;
  /** JSON merge patch of the object or of a subresource (`status`, `scale`). */
  mergePatch<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string, patch: unknown, subresource?: string): Promise<T>;
  /** Deletes; resolves false when it was already gone. */
  delete(type: ResourceType, namespace: string | undefined, name: string, options?: DeleteOptions): Promise<boolean>;
}
