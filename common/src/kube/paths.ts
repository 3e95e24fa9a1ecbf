/** URL paths of the Kubernetes API (pure): core vs group resources, namespaced vs cluster-scoped. */
import type { ResourceType } from './client-types.ts';
import { KubeError } from './errors.ts';

/**
 * The path of a collection (`name` undefined) or of one object (and its subresource).
 * `namespace` undefined for a namespaced type means all namespaces, which only a collection
 * can be; a cluster-scoped type takes no namespace.
 */
export function resourcePath(type: ResourceType, namespace: string | undefined, name?: string, subresource?: string): string {
  const root = type.group === '' ? `/api/${type.version}` : `/apis/${type.group}/${type.version}`;
  if (!type.namespaced && namespace !== undefined) {
    throw new KubeError('KUBE_INVALID', `${type.plural} are cluster-scoped: no namespace (got ${JSON.stringify(namespace)})`, 0, 'BadRequest');
  }
  if (type.namespaced && namespace === undefined && name !== undefined) {
    throw new KubeError('KUBE_INVALID', `${type.plural}/${name} is namespaced: a namespace is required`, 0, 'BadRequest');
  }
  let path = root;
  if (namespace !== undefined) path += `/namespaces/${segment(namespace, 'namespace')}`;
  path += `/${type.plural}`;
  if (name !== undefined) path += `/${segment(name, 'name')}`;
  if (subresource !== undefined) path += `/${segment(subresource, 'subresource')}`;
  return path;
}

/** A query string of the defined parameters, `?`-prefixed, or '' when there are none. */
export function queryString(params: Record<string, string | number | boolean | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

function segment(value: string, what: string): string {
  if (value === '' || value === '.' || value === '..' || value.includes('/')) {
    throw new KubeError('KUBE_INVALID', `invalid ${what} ${JSON.stringify(value)} in a resource path`, 0, 'BadRequest');
  }
  return encodeURIComponent(value);
}
