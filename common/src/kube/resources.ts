/** The API resources pglog reads and writes. */
import type { ResourceType } from './client-types.ts';

const pglog = (plural: string, kind: string): ResourceType => ({ group: 'pglog.io', version: 'v1alpha1', plural, kind, namespaced: true });

export const POSTGRES_TARGETS = pglog('postgrestargets', 'PostgresTarget');
export const COLLECTOR_POOLS = pglog('collectorpools', 'CollectorPool');
export const COLLECTOR_SHARDS = pglog('collectorshards', 'CollectorShard');

export const SECRETS: ResourceType = { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true };
export const SERVICES: ResourceType = { group: '', version: 'v1', plural: 'services', kind: 'Service', namespaced: true };
export const PODS: ResourceType = { group: '', version: 'v1', plural: 'pods', kind: 'Pod', namespaced: true };
export const EVENTS: ResourceType = { group: 'events.k8s.io', version: 'v1', plural: 'events', kind: 'Event', namespaced: true };
export const DEPLOYMENTS: ResourceType = { group: 'apps', version: 'v1', plural: 'deployments', kind: 'Deployment', namespaced: true };
export const STATEFUL_SETS: ResourceType = { group: 'apps', version: 'v1', plural: 'statefulsets', kind: 'StatefulSet', namespaced: true };
export const POD_DISRUPTION_BUDGETS: ResourceType = {
  group: 'policy',
  version: 'v1',
  plural: 'poddisruptionbudgets',
  kind: 'PodDisruptionBudget',
  namespaced: true,
};
export const LEASES: ResourceType = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease', namespaced: true };
export const CUSTOM_RESOURCE_DEFINITIONS: ResourceType = {
  group: 'apiextensions.k8s.io',
  version: 'v1',
  plural: 'customresourcedefinitions',
  kind: 'CustomResourceDefinition',
  namespaced: false,
};

/** `apiVersion` of a resource type (`v1`, `apps/v1`). */
export function apiVersionOf(type: ResourceType): string {
  return type.group === '' ? type.version : `${type.group}/${type.version}`;
}
