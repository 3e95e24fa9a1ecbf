// `pglog crds apply` applies pglog's CRDs exactly as this version generates them and nothing
// else (security review R9): the chart's hook reads them from a ConfigMap in the release
// namespace, which someone who may edit ConfigMaps there could change before the pod mounts
// it. A CRD carrying a conversion webhook, or differing in any other way from the digests built
// into the image, is refused before anything is applied.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { readCrds } from '@pglog/cli/crds-command.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import { parse, stringify } from 'yaml';

const CHART_CRDS = join(import.meta.dirname, '../../../charts/pglog/crds');
const TARGETS_FILE = 'pglog.io_postgrestargets.yaml';

type Crd = { metadata: { name: string }; spec: Record<string, unknown> & { versions: Array<Record<string, unknown>> } };

describe('pglog crds apply: only the CRDs built into this version', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  /** A directory with the chart's CRD files, the targets' CRD changed by `change` (a ConfigMap as edited). */
  const edited = (change: (crd: Crd) => void, write: (crd: Crd) => string = (crd) => stringify(crd)): string => {
    const dir = mkdtempSync(join(tmpdir(), 'pglog-crds-'));
    dirs.push(dir);
    for (const file of readdirSync(CHART_CRDS)) {
      const text = readFileSync(join(CHART_CRDS, file), 'utf8');
      if (file !== TARGETS_FILE) {
        writeFileSync(join(dir, file), text);
        continue;
      }
      const crd = parse(text) as Crd;
      change(crd);
      writeFileSync(join(dir, file), write(crd));
    }
    return dir;
  };
  const refused = (dir: string, message: RegExp): void => {
    assert.throws(
      () => readCrds(dir),
      (e: unknown) => isPglogError(e) && e.code === 'USAGE' && message.test(e.message),
    );
  };

  test("the chart's CRDs are accepted, also written in another key order and style", () => {
    assert.deepEqual(
      readCrds(CHART_CRDS).map((c) => c.metadata.name),
      ['collectorpools.pglog.io', 'collectorshards.pglog.io', 'postgrestargets.pglog.io'],
    );
    const reordered = edited(
      () => undefined,
      (crd) => JSON.stringify(Object.fromEntries(Object.entries(crd).reverse())),
    );
    assert.equal(readCrds(reordered).length, 3);
  });

  test('a pglog CRD carrying spec.conversion with a webhook is refused', () => {
    const dir = edited((crd) => {
      crd.spec['conversion'] = {
        strategy: 'Webhook',
        webhook: { conversionReviewVersions: ['v1'], clientConfig: { url: 'https://attacker.example/convert' } },
      };
    });
    refused(dir, /^crds apply: pglog\.io_postgrestargets\.yaml: postgrestargets\.pglog\.io has spec\.conversion \(strategy Webhook, a webhook\)/);
  });

  test('a pglog CRD differing from the built-in one in any other way is refused: a default, a second version', () => {
    const withDefault = edited((crd) => {
      const schema = crd.spec.versions[0]!['schema'] as { openAPIV3Schema: { properties: { spec: { properties: Record<string, unknown> } } } };
      schema.openAPIV3Schema.properties.spec.properties['port'] = { type: 'integer', default: 2222 };
    });
    refused(withDefault, /postgrestargets\.pglog\.io differs from the CustomResourceDefinition this version of pglog generates; refused/);
    const secondVersion = edited((crd) => {
      crd.spec.versions.push({ ...crd.spec.versions[0], name: 'v1beta1', storage: false });
    });
    refused(secondVersion, /postgrestargets\.pglog\.io differs from/);
  });

  test("a pglog.io CRD that is not one of pglog's is refused", () => {
    const dir = edited((crd) => {
      crd.metadata.name = 'widgets.pglog.io';
    });
    refused(dir, /widgets\.pglog\.io is not one of pglog's CustomResourceDefinitions; refused/);
  });
});
