/** The API resources pglog reads and writes. */
import type { ResourceType } from './client-types.ts';

const pglog = (plural: string, kind: string): ResourceType => ({ group: 'pglog.io', version: 'v1alpha1', plural, kind, namespaced: true });

export const POSTGRES_TARGETS = pglog('postgrestargets', 'PostgresTarget');
export const COLLECTOR_POOLS = pglog('collectorpools', 'CollectorPool');
export const COLLECTOR_SHARDS = pglog('collectorshards', 'CollectorShard');

/** A resource of a stable (`v1`) API group; `''` is the core group. */
const v1 = (group: string, plural: string, kind: string, namespaced = true): ResourceType => ({ group, version: 'v1', plural, kind, namespaced });

export const SECRETS = v1('', 'secrets', 'Secret');
export const SERVICES = v1('', 'services', 'Service');
export const PODS = v1('', 'pods', 'Pod');
export const EVENTS = v1('events.k8s.io', 'events', 'Event');
export const DEPLOYMENTS = v1('apps', 'deployments', 'Deployment');
export const STATEFUL_SETS = v1('apps', 'statefulsets', 'StatefulSet');
export const POD_DISRUPTION_BUDGETS = v1('policy', 'poddisruptionbudgets', 'PodDisruptionBudget');
export const LEASES = v1('coordination.k8s.io', 'leases', 'Lease');
export const CUSTOM_RESOURCE_DEFINITIONS = v1('apiextensions.k8s.io', 'customresourcedefinitions', 'CustomResourceDefinition', false);

/** `apiVersion` of a resource type (`v1`, `apps/v1`). */
export function apiVersionOf(type: ResourceType): string {
  return type.group === '' ? type.version : `${type.group}/${type.version}`;
}
