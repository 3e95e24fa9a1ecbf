// The CRD generator: the committed crds/*.yaml, charts/pglog/crds/*.yaml and docs/resources.md are what the types
// generate (drift fails naming the file), and the mapping rules on small fixture types.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { parse } from 'yaml';

import { parseDocComment } from '../../../src/crd/doc-comment.ts';
import { buildCrds, crdYaml, generateFiles } from '../../../src/crd/generate.ts';
import type { JsonSchema } from '../../../src/crd/json-schema.ts';
import { createTypeProgram, resourceSchema } from '../../../src/crd/schema-from-types.ts';

const ROOT = join(import.meta.dirname, '../../../..');

describe('committed CRDs and docs/resources.md', () => {
  test('equal what the resource types generate', () => {
    for (const file of generateFiles(ROOT)) {
      let committed: string | undefined;
      try {
        committed = readFileSync(join(ROOT, file.path), 'utf8');
      } catch {
        committed = undefined;
      }
      assert.ok(committed === file.text, `${file.path} ${committed === undefined ? 'is missing' : 'differs from the types'}: run \`make crds\` and commit it`);
    }
  });

  test('the YAML text parses back to the CRD objects', () => {
    for (const crd of buildCrds(ROOT)) assert.deepEqual(parse(crdYaml(crd)), crd);
  });

  test('resource-specific parts: cluster ssh form, scale on pools only, fractional rates, columns', () => {
    const [targets, pools, shards] = buildCrds(ROOT).map((crd) => crd.spec.versions[0]);
    const targetSpec = targets?.schema.openAPIV3Schema.properties?.['spec'];
    assert.deepEqual(Object.keys(targetSpec?.properties?.['ssh']?.properties ?? {}), ['secretRef']);
    assert.deepEqual(targetSpec?.required, ['host', 'user', 'ssh', 'instances']);
    assert.equal(targets?.schema.openAPIV3Schema.properties?.['status']?.properties?.['rates']?.properties?.['bytesPerSecond']?.type, 'number');
    assert.equal(targets?.schema.openAPIV3Schema.properties?.['status']?.properties?.['shard']?.type, 'integer');
    assert.deepEqual(
      targets?.additionalPrinterColumns.map((c) => c.name),
      ['Host', 'Pool', 'Shard', 'Transport', 'Bytes/s', 'Ready', 'Age'],
    );
    assert.equal(pools?.schema.openAPIV3Schema.properties?.['spec']?.properties?.['sharding']?.properties?.['loadFactor']?.type, 'number');
    assert.deepEqual(pools?.subresources.scale, {
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.selector',
    });
    assert.equal(shards?.subresources.scale, undefined);
    assert.deepEqual(shards?.subresources.status, {});
  });
});

describe('doc comments', () => {
  test('paragraphs join their lines; tags keep every word and their continuation lines', () => {
    const doc = parseDocComment('/**\n * First line\n * second line.\n *\n * Next.\n * @enum a b c\n * @validation self.x < 1\n *   :: x too big\n */');
    assert.equal(doc.description, 'First line second line.\n\nNext.');
    assert.deepEqual(doc.tags, [
      { name: 'enum', text: 'a b c' },
      { name: 'validation', text: 'self.x < 1 :: x too big' },
    ]);
  });
});

describe('type → schema', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-crd-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  let n = 0;
  /** Schema of `Thing` (apiVersion, kind, metadata, spec: Spec) with the given Spec body and extra declarations. */
  const specSchema = (specBody: string, extra = ''): JsonSchema => {
    const file = join(dir, `fixture${n++}.ts`);
    writeFileSync(
      file,
      `/** A thing. */\nexport interface Thing {\n  /** Always v1. */\n  apiVersion: string;\n  /** Always Thing. */\n  kind: string;\n  metadata: { name: string };\n  /** The spec. */\n  spec: Spec;\n}\n/** Spec. */\nexport interface Spec {\n${specBody}\n}\n${extra}`,
    );
    const spec = resourceSchema(createTypeProgram([file]), file, 'Thing', { rootDir: dir }).properties?.['spec'];
    assert.ok(spec !== undefined);
    return spec;
  };

  test('a field without a description fails, naming the field, its interface and file', () => {
    assert.throws(
      () => specSchema('  /** Documented. */\n  a: string;\n  size: number;'),
      /^Error: spec\.size \(Spec\.size in fixture\d+\.ts\): no description/,
    );
    assert.throws(
      () => specSchema('  /** Inner. */\n  inner: Inner;', 'export interface Inner {\n  /** Ok. */\n  ok: string;\n  bare: boolean;\n}'),
      /spec\.inner\.bare \(Inner\.bare in fixture\d+\.ts\): no description/,
    );
  });

  test('a field without its own description takes that of its interface', () => {
    const spec = specSchema('  inner: Inner;', '/** The inner part. */\nexport interface Inner {\n  /** Ok. */\n  ok: string;\n}');
    assert.equal(spec.properties?.['inner']?.description, 'The inner part.');
  });

  test('string/number/boolean, @type number, arrays, maps, required vs optional', () => {
    const spec = specSchema(
      [
        '  /** S. */\n  s: string;',
        '  /** I. */\n  i?: number;',
        '  /** F.\n   * @type number */\n  f: number;',
        '  /** B. */\n  b?: boolean;',
        '  /** L. */\n  l: string[];',
        '  /** M. */\n  m?: Record<string, string>;',
      ].join('\n'),
    );
    const p = spec.properties ?? {};
    assert.deepEqual([p['s']?.type, p['i']?.type, p['f']?.type, p['b']?.type], ['string', 'integer', 'number', 'boolean']);
    assert.deepEqual(p['l'], { description: 'L.', type: 'array', items: { type: 'string' } });
    assert.deepEqual(p['m'], { description: 'M.', type: 'object', additionalProperties: { type: 'string' } });
    assert.deepEqual(spec.required, ['s', 'f', 'l']);
    assert.throws(() => specSchema('  /** X.\n   * @type float */\n  x: number;'), /spec\.x .*@type float: only integer or number/);
  });

  test('enums from string-literal unions and @enum; a tag that contradicts the type fails', () => {
    const spec = specSchema("  /** U. */\n  u: 'a' | 'b';\n  /** E.\n   * @enum x y z */\n  e: string;");
    assert.deepEqual(spec.properties?.['u']?.enum, ['a', 'b']);
    assert.deepEqual(spec.properties?.['e']?.enum, ['x', 'y', 'z']);
    assert.throws(() => specSchema("  /** U.\n   * @enum a c */\n  u: 'a' | 'b';"), /spec\.u .*@enum a c differs from the type's values a b/);
  });

  test('@default makes a required field optional with that default; @optional without one; bad JSON fails', () => {
    const spec = specSchema(
      [
        '  /** P.\n   * @default 22 */\n  port: number;',
        '  /** T.\n   * @default "auto" */\n  t: string;',
        '  /** O.\n   * @default {} */\n  o: {\n  /** X.\n   * @default true */\n  x: boolean };',
        '  /** U.\n   * @optional */\n  user: string;',
        '  /** R. */\n  r: string;',
      ].join('\n'),
    );
    const p = spec.properties ?? {};
    assert.deepEqual([p['port']?.default, p['t']?.default, p['o']?.default, p['o']?.properties?.['x']?.default], [22, 'auto', {}, true]);
    assert.equal(p['user']?.default, undefined);
    assert.deepEqual(spec.required, ['r']);
    assert.throws(() => specSchema('  /** T.\n   * @default auto */\n  t: string;'), /spec\.t .*@default auto is not JSON/);
  });

  test('numeric and pattern tags; unknown tags fail', () => {
    const spec = specSchema('  /** N.\n   * @minimum 1\n   * @maximum 9\n   * @pattern ^[a-z]+$\n   * @minLength 2 */\n  n: string;');
    assert.deepEqual(spec.properties?.['n'], { description: 'N.', type: 'string', minimum: 1, maximum: 9, pattern: '^[a-z]+$', minLength: 2 });
    assert.throws(() => specSchema('  /** N.\n   * @minimum one */\n  n: number;'), /spec\.n .*@minimum one is not a number/);
    assert.throws(() => specSchema('  /** N.\n   * @maximun 3 */\n  n: number;'), /spec\.n .*unknown tag @maximun/);
  });

  test('CEL rules from @validation on interfaces and fields', () => {
    const spec = specSchema(
      "  /** H.\n   * @validation self != '' :: h must not be empty */\n  h: string;\n  /** L. */\n  lo: number;\n  /** H. */\n  hi: number;",
    );
    assert.deepEqual(spec.properties?.['h']?.['x-kubernetes-validations'], [{ rule: "self != ''", message: 'h must not be empty' }]);
    const withRule = specSchema(
      '  /** W. */\n  w: W;',
      '/** W.\n * @validation self.lo < self.hi :: lo must be below hi */\nexport interface W {\n  /** L. */\n  lo: number;\n  /** H. */\n  hi: number;\n}',
    );
    assert.deepEqual(withRule.properties?.['w']?.['x-kubernetes-validations'], [{ rule: 'self.lo < self.hi', message: 'lo must be below hi' }]);
    assert.throws(() => specSchema("  /** H.\n   * @validation self != '' */\n  h: string;"), /spec\.h .*@validation needs "RULE :: MESSAGE"/);
  });

  test('@listMapKey makes a map list; the key must exist and be required', () => {
    const item = 'export interface Item {\n  /** N. */\n  name: string;\n  /** V. */\n  value?: string;\n}';
    const spec = specSchema('  /** Items.\n   * @listMapKey name */\n  items: Item[];', item);
    assert.equal(spec.properties?.['items']?.['x-kubernetes-list-type'], 'map');
    assert.deepEqual(spec.properties?.['items']?.['x-kubernetes-list-map-keys'], ['name']);
    assert.throws(
      () => specSchema('  /** Items.\n   * @listMapKey value */\n  items: Item[];', item),
      /spec\.items .*@listMapKey value: the key must be required/,
    );
    assert.throws(() => specSchema('  /** Items.\n   * @listMapKey nope */\n  items: Item[];', item), /the list's items have no field nope/);
    assert.throws(() => specSchema('  /** One.\n   * @listMapKey name */\n  one: Item;', item), /@listMapKey on a field that is not a list/);
  });

  test('a union of object forms needs @crdType, which picks the cluster form', () => {
    const forms = 'export interface A {\n  /** A. */\n  a: string;\n}\nexport interface B {\n  /** B. */\n  b: string;\n}';
    assert.throws(() => specSchema('  /** Either. */\n  e: A | B;', forms), /spec\.e .*union type A \| B has no schema; tag the field @crdType/);
    const spec = specSchema('  /** Either.\n   * @crdType B */\n  e: A | B;', forms);
    assert.deepEqual(spec.properties?.['e'], {
      description: 'Either.',
      type: 'object',
      properties: { b: { description: 'B.', type: 'string' } },
      required: ['b'],
    });
    assert.throws(() => specSchema('  /** Either.\n   * @crdType C */\n  e: A | B;', forms), /@crdType C: no interface or type C/);
  });

  test('apiVersion and kind are plain strings, metadata an object, none of them required', () => {
    const file = join(dir, 'root.ts');
    writeFileSync(
      file,
      "/** Root.\n * @validation self.metadata.name != 'x' :: not x */\nexport interface R {\n  /** V. */\n  apiVersion: 'x/v1';\n  /** K. */\n  kind: 'R';\n  metadata: { name: string };\n  /** S. */\n  spec: string;\n}",
    );
    const schema = resourceSchema(createTypeProgram([file]), file, 'R');
    assert.deepEqual(schema, {
      description: 'Root.',
      type: 'object',
      required: ['spec'],
      'x-kubernetes-validations': [{ rule: "self.metadata.name != 'x'", message: 'not x' }],
      properties: {
        apiVersion: { description: 'V.', type: 'string' },
        kind: { description: 'K.', type: 'string' },
        metadata: { type: 'object' },
        spec: { description: 'S.', type: 'string' },
      },
    });
  });
});
