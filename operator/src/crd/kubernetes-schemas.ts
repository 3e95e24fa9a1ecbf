/**
 * Schemas of the Kubernetes types pglog's resources embed (common/src/api/common.ts). The
 * TypeScript interfaces are reduced to what pglog reads; the CRDs carry Kubernetes' own schema
 * so users can write what they write everywhere else (`cpu: 1` as well as `cpu: "500m"`).
 */
import type { JsonSchema } from './json-schema.ts';

/** Kubernetes' `resource.Quantity` pattern (integer or string, e.g. `1`, `500m`, `2Gi`). */
const QUANTITY: JsonSchema = {
  anyOf: [{ type: 'integer' }, { type: 'string' }],
  pattern: '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$',
  'x-kubernetes-int-or-string': true,
};

const LABEL_SELECTOR: JsonSchema = {
  type: 'object',
  'x-kubernetes-map-type': 'atomic',
  properties: {
    matchLabels: {
      description: 'Labels the object must have, all of them (key: value).',
      type: 'object',
      additionalProperties: { type: 'string' },
    },
    matchExpressions: {
      description: 'Requirements on labels, all of which must hold.',
      type: 'array',
      'x-kubernetes-list-type': 'atomic',
      items: {
        type: 'object',
        properties: {
          key: { description: 'The label key the requirement applies to.', type: 'string' },
          operator: { description: 'How the key relates to the values.', type: 'string', enum: ['In', 'NotIn', 'Exists', 'DoesNotExist'] },
          values: {
            description: 'Values for In and NotIn (non-empty); empty for Exists and DoesNotExist.',
            type: 'array',
            'x-kubernetes-list-type': 'atomic',
            items: { type: 'string' },
          },
        },
        required: ['key', 'operator'],
      },
    },
  },
};

const RESOURCE_REQUIREMENTS: JsonSchema = {
  type: 'object',
  properties: {
    limits: { description: 'Most compute resources allowed (`cpu`, `memory`), as Kubernetes quantities.', type: 'object', additionalProperties: QUANTITY },
    requests: { description: 'Least compute resources required (`cpu`, `memory`), as Kubernetes quantities.', type: 'object', additionalProperties: QUANTITY },
  },
};

/** By interface name as declared in common/src/api/common.ts. */
export const KUBERNETES_SCHEMAS: ReadonlyMap<string, JsonSchema> = new Map([
  ['LabelSelector', LABEL_SELECTOR],
  ['ResourceRequirements', RESOURCE_REQUIREMENTS],
]);
