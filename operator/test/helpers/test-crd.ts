/**
 * Small CustomResourceDefinitions of the tests' own (not pglog's, see crds.ts), for exercising
 * the client and the control plane on custom resources.
 */
import type { KubeObject } from '@pglog/common/kube/client-types.ts';

type Properties = Record<string, unknown>;

/**
 * A namespaced CRD with one served and stored version `v1`: kind `kind` in `group` (singular
 * and plural its lower case, the plural with an `s`), whose spec and status objects have
 * `properties`; `subresources` default to the status subresource alone.
 */
export function testCrd(
  group: string,
  kind: string,
  properties: { spec: Properties; status: Properties },
  subresources: object = { status: {} },
): KubeObject & { spec: object } {
  const singular = kind.toLowerCase();
  const plural = `${singular}s`;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      names: { plural, singular, kind },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: { spec: { type: 'object', properties: properties.spec }, status: { type: 'object', properties: properties.status } },
            },
          },
          subresources,
        },
      ],
    },
  };
}
