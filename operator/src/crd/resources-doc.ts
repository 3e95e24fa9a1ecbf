/**
 * docs/resources.md, the user reference of the three resources, written from the generated
 * CRDs: the same descriptions, defaults and validations the API server serves, so the page
 * cannot drift from the types either.
 */
import { stringify } from 'yaml';

import type { CustomResourceDefinition } from './definitions.ts';
import { EXAMPLES } from './examples.ts';
import type { JsonSchema } from './json-schema.ts';

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n\n/g, '<br><br>').replace(/\n/g, ' ');
}

function code(text: string): string {
  return text.includes('`') ? `\`\` ${text} \`\`` : `\`${text}\``;
}

function typeText(schema: JsonSchema): string {
  if (schema.enum !== undefined) return schema.enum.map(code).join(' | ');
  if (schema['x-kubernetes-int-or-string'] === true) return 'quantity';
  switch (schema.type) {
    case 'array':
      return `list of ${schema.items === undefined ? '?' : typeText(schema.items)}`;
    case 'object':
      if (schema.additionalProperties !== undefined) return `map of ${typeText(schema.additionalProperties)}`;
      return 'object';
    case 'string':
    case 'integer':
    case 'number':
    case 'boolean':
      return schema.type;
    case undefined:
      return '?';
  }
}

function validationText(schema: JsonSchema, required: boolean): string {
  const parts: string[] = [];
  if (required) parts.push('required');
  if (schema.minimum !== undefined) parts.push(`≥ ${schema.minimum}`);
  if (schema.maximum !== undefined) parts.push(`≤ ${schema.maximum}`);
  if (schema.minLength !== undefined) parts.push(`length ≥ ${schema.minLength}`);
  if (schema.maxLength !== undefined) parts.push(`length ≤ ${schema.maxLength}`);
  if (schema.minItems !== undefined) parts.push(`at least ${schema.minItems} item${schema.minItems === 1 ? '' : 's'}`);
  if (schema.pattern !== undefined) parts.push(`pattern ${code(schema.pattern)}`);
  if (schema['x-kubernetes-list-map-keys'] !== undefined) parts.push(`unique ${schema['x-kubernetes-list-map-keys'].map(code).join(', ')}`);
  for (const v of schema['x-kubernetes-validations'] ?? []) parts.push(`${code(v.rule)} (“${v.message}”)`);
  return parts.join('; ');
}

/** One row per field, depth first, paths like `spec.instances[].name`. */
function fieldRows(schema: JsonSchema, prefix: string, rows: string[]): void {
  const object = schema.type === 'array' ? schema.items : schema;
  const props = object?.properties ?? {};
  const required = new Set(object?.required ?? []);
  for (const [name, field] of Object.entries(props)) {
    const path = `${prefix}${name}`;
    const dflt = field.default === undefined ? '' : code(JSON.stringify(field.default));
    rows.push(`| ${code(path)} | ${cell(typeText(field))} | ${dflt} | ${cell(validationText(field, required.has(name)))} | ${cell(field.description ?? '')} |`);
    const nested = field.type === 'array' ? field.items : field;
    if (nested?.properties !== undefined) fieldRows(field, `${path}${field.type === 'array' ? '[]' : ''}.`, rows);
  }
}

function resourceSection(crd: CustomResourceDefinition): string {
  const version = crd.spec.versions[0];
  if (version === undefined) throw new Error(`${crd.metadata.name}: no version`);
  const root = version.schema.openAPIV3Schema;
  const { kind, plural, shortNames } = crd.spec.names;
  const lines = [
    `## ${kind}`,
    '',
    root.description ?? '',
    '',
    `\`kubectl get ${plural}\` (short name ${shortNames.map(code).join(', ')}, category \`pglog\`). ` +
      `Subresources: ${Object.keys(version.subresources).map(code).join(', ')}.` +
      (version.subresources.scale === undefined
        ? ''
        : ` \`kubectl scale ${kind.toLowerCase()}/NAME --replicas N\` and a HorizontalPodAutoscaler drive \`${version.subresources.scale.specReplicasPath.slice(1)}\`.`),
    '',
    '### Columns',
    '',
    '| column | type | from | meaning |',
    '|---|---|---|---|',
    ...version.additionalPrinterColumns.map((c) => `| ${c.name} | ${c.type} | ${code(c.jsonPath)} | ${c.description ?? 'time since the object was created'} |`),
    '',
    '### Fields',
    '',
    'A field with a default may be left out: the API server fills it in. Validation is enforced by the API server when the object is written.',
    '',
    '| field | type | default | validation | description |',
    '|---|---|---|---|---|',
  ];
  const rows: string[] = [];
  // Rules on the whole object (they check metadata.name) are listed with metadata.
  rows.push(
    `| \`metadata\` | object | | ${cell(validationText({ 'x-kubernetes-validations': root['x-kubernetes-validations'] ?? [] }, true))} | Standard Kubernetes object metadata: name, namespace, labels, annotations. |`,
  );
  for (const part of ['spec', 'status']) {
    const schema = root.properties?.[part];
    if (schema === undefined) continue;
    rows.push(`| ${code(part)} | object | | ${cell(validationText(schema, (root.required ?? []).includes(part)))} | ${cell(schema.description ?? '')} |`);
    fieldRows(schema, `${part}.`, rows);
  }
  lines.push(...rows, '');
  for (const example of EXAMPLES.filter((e) => e.kind === kind)) {
    lines.push('### Example', '', `${example.title}:`, '', '```yaml', stringify(example.object, { lineWidth: 120 }).trimEnd(), '```', '');
  }
  return lines.join('\n');
}

export function resourcesDoc(crds: readonly CustomResourceDefinition[]): string {
  return [
    '<!-- Generated by scripts/gen-crds.ts from the TypeScript types (`make crds`). Do not edit: edit the doc comments in',
    '     common/src/api/postgres-target.ts and common/src/api/*.ts and run `make crds`. -->',
    '# Resources',
    '',
    "pglog's Kubernetes resources, group `pglog.io`, version `v1alpha1`, all namespaced. Install the definitions with",
    '`kubectl apply -f crds/`; `kubectl explain postgrestarget.spec` (and so on) shows the same descriptions.',
    '',
    '- [PostgresTarget](#postgrestarget): one server to collect, written by users.',
    '- [CollectorPool](#collectorpool): collector pods that collect the targets naming the pool, written by users.',
    "- [CollectorShard](#collectorshard): one pod's assignment, written by the operator (spec) and that pod (status).",
    '',
    '`kubectl get pglog` lists all three.',
    '',
    ...crds.map(resourceSection),
  ].join('\n');
}
