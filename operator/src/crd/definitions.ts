/**
 * The three pglog CustomResourceDefinitions: where each resource's type lives, its names,
 * subresources and printer columns. The schemas themselves come from the types
 * (schema-from-types.ts).
 */
import type ts from 'typescript';

import { type JsonSchema, orderSchema } from './json-schema.ts';
import { KUBERNETES_SCHEMAS } from './kubernetes-schemas.ts';
import { resourceSchema } from './schema-from-types.ts';

export const GROUP = 'pglog.io';
export const VERSION = 'v1alpha1';

export interface PrinterColumn {
  readonly name: string;
  readonly type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  readonly jsonPath: string;
  readonly description?: string;
  readonly priority?: number;
}

export interface ScaleSubresource {
  readonly specReplicasPath: string;
  readonly statusReplicasPath: string;
  readonly labelSelectorPath: string;
}

/** What the generator needs to know about one resource besides its type. */
export interface ResourceDefinition {
  readonly kind: string;
  readonly plural: string;
  readonly singular: string;
  readonly shortNames: readonly string[];
  /** Source file of the type, relative to the repository root. */
  readonly typeFile: string;
  /** The interface of the whole object. */
  readonly typeName: string;
  readonly printerColumns: readonly PrinterColumn[];
  readonly scale?: ScaleSubresource;
}

const READY: PrinterColumn = {
  name: 'Ready',
  type: 'string',
  jsonPath: '.status.conditions[?(@.type=="Ready")].status',
  description: 'Status of the Ready condition.',
};
const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

/**
 * A pglog resource: its names and the place of its type follow from its kind (PostgresTarget:
 * postgrestargets, postgrestarget, interface PostgresTarget in common/src/api/postgres-target.ts).
 */
function resource(kind: string, shortName: string, printerColumns: readonly PrinterColumn[], scale?: ScaleSubresource): ResourceDefinition {
  const singular = kind.toLowerCase();
  const fileName = kind.replace(/(?<=[a-z])(?=[A-Z])/g, '-').toLowerCase();
  return {
    kind,
    plural: `${singular}s`,
    singular,
    shortNames: [shortName],
    typeFile: `common/src/api/${fileName}.ts`,
    typeName: kind,
    printerColumns,
    ...(scale === undefined ? {} : { scale }),
  };
}

export const RESOURCES: readonly ResourceDefinition[] = [
  resource('PostgresTarget', 'pgt', [
    { name: 'Host', type: 'string', jsonPath: '.spec.host', description: 'SSH server.' },
    { name: 'Pool', type: 'string', jsonPath: '.spec.pool', description: 'CollectorPool that collects the target.' },
    { name: 'Shard', type: 'integer', jsonPath: '.status.shard', description: 'Index of the owning shard.' },
    { name: 'Transport', type: 'string', jsonPath: '.status.transport', description: 'Transport in use.' },
    { name: 'Bytes/s', type: 'number', jsonPath: '.status.rates.bytesPerSecond', description: 'Smoothed log bytes read per second.' },
    READY,
    AGE,
  ]),
  resource(
    'CollectorPool',
    'cpool',
    [
      { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas', description: 'Desired collector pods (shards).' },
      { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas', description: 'Pods that are ready.' },
      { name: 'Targets', type: 'integer', jsonPath: '.status.targets', description: 'Targets assigned to the pool.' },
      AGE,
    ],
    { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' },
  ),
  resource('CollectorShard', 'cshard', [
    { name: 'Pool', type: 'string', jsonPath: '.spec.pool', description: 'The pool the shard belongs to.' },
    { name: 'Index', type: 'integer', jsonPath: '.spec.index', description: 'Shard index (pod ordinal).' },
    { name: 'Targets', type: 'integer', jsonPath: '.spec.targetCount', description: 'Targets assigned.' },
    READY,
    AGE,
  ]),
];

/** A CustomResourceDefinition object (apiextensions.k8s.io/v1). */
export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string };
  spec: {
    group: string;
    names: { kind: string; listKind: string; plural: string; singular: string; shortNames: string[]; categories: string[] };
    scope: 'Namespaced';
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      schema: { openAPIV3Schema: JsonSchema };
      subresources: { status: Record<string, never>; scale?: ScaleSubresource };
      additionalPrinterColumns: PrinterColumn[];
    }[];
  };
}

export function crdName(def: ResourceDefinition): string {
  return `${def.plural}.${GROUP}`;
}

/** The CRD of one resource, its schema read from `program` (which must contain `rootDir/def.typeFile`). */
export function buildCrd(program: ts.Program, rootDir: string, def: ResourceDefinition): CustomResourceDefinition {
  const schema = resourceSchema(program, `${rootDir}/${def.typeFile}`, def.typeName, { knownSchemas: KUBERNETES_SCHEMAS, rootDir });
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: crdName(def) },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.singular,
        shortNames: [...def.shortNames],
        categories: ['pglog'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: orderSchema(schema) },
          subresources: def.scale === undefined ? { status: {} } : { status: {}, scale: { ...def.scale } },
          additionalPrinterColumns: def.printerColumns.map((c) => ({ ...c })),
        },
      ],
    },
  };
}
