// The chart's ValidatingAdmissionPolicy on a real kube-apiserver (security review R3, R10):
// rendered by the real helm from charts/pglog with this file's namespace as the only
// collector namespace, applied, and then a CollectorPool naming a store Secret or an image
// outside the installation's lists is refused by the API server with the policy's message,
// on create and on an update that changes them; allowed ones are stored. The binding selects
// this file's namespace only, so the other files sharing the control plane are not affected.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { kubeBin } from '@pglog/test-support/control-plane.ts';
import { eventually } from '@pglog/test-support/fleet.ts';
import { privateHelmEnv } from '@pglog/test-support/helm.ts';
import { runCommand } from '@pglog/test-support/run-command.ts';
import { parseAllDocuments } from 'yaml';

import { installCrds } from '../helpers/crds.ts';
import { type SharedControlPlane, useSharedControlPlane } from '../helpers/shared-control-plane.ts';

/** This file's namespace on the shared control plane (shared-control-plane.ts). */
const NS = 'admission-policy';
/** The release, whose name prefixes the cluster-wide policy and binding. */
const RELEASE = 'pglog-admission-test';
const CHART = join(import.meta.dirname, '../../../charts/pglog');
const DIGEST = `sha256:${'ab'.repeat(32)}`;
const ALLOWED_IMAGES = ['ghcr.io/pglog/pglog:1.4.*', `ghcr.io/pglog/pinned@${DIGEST}`];

interface Obj {
  kind: string;
  metadata: { name: string };
}

const pool = (name: string, secret: string, images: { collector?: string; sidecar?: string } = {}): string =>
  JSON.stringify({
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'CollectorPool',
    metadata: { name },
    spec: {
      store: { secretRef: { name: secret, key: 'url' } },
      ...(images.collector === undefined ? {} : { collector: { image: images.collector } }),
      ...(images.sidecar === undefined ? {} : { sidecar: { image: images.sidecar } }),
    },
  });

describe("the chart's admission policy on a real kube-apiserver", { timeout: 180_000 }, () => {
  let cp: SharedControlPlane;
  let policy: Obj[] = [];
  const helmHome = mkdtempSync(join(tmpdir(), 'pglog-admission-helm-'));
  const create = (object: string): Promise<string> => cp.kubectl(['create', '-f', '-'], object);

  before(async () => {
    cp = await useSharedControlPlane(NS);
    await installCrds(cp);
    const rendered = await runCommand(
      join(kubeBin(), 'helm'),
      [
        'template',
        RELEASE,
        CHART,
        '--namespace',
        NS,
        '--set',
        `collectorNamespaces={${NS}},operator.allowedStoreSecrets={pglog-store,${NS}/team-store},operator.allowedImages={${ALLOWED_IMAGES.join(',')}},pool.enabled=false`,
      ],
      { env: privateHelmEnv(helmHome) },
    );
    assert.equal(rendered.code, 0, rendered.stderr);
    policy = parseAllDocuments(rendered.stdout)
      .map((d) => d.toJS() as Obj | null)
      .filter((o): o is Obj => o !== null && o.kind.startsWith('ValidatingAdmissionPolicy'));
    assert.deepEqual(
      policy.map((o) => o.kind),
      ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'],
    );
    await cp.kubectl(['apply', '-f', '-'], policy.map((o) => JSON.stringify(o)).join('\n---\n'));
    // The API server loads a new policy within a second or so: until a dry run of a refused pool is refused.
    await eventually('the policy in force', 30_000, async () =>
      (await create(pool('probe', 'not-allowed')).then(
        () => cp.kubectl(['delete', 'cpool', 'probe']).then(() => false),
        () => true,
      ))
        ? true
        : undefined,
    );
  });
  after(async () => {
    // Cluster-wide objects: gone before the next file uses the control plane.
    for (const o of policy.reverse()) await cp?.kubectl(['delete', '--ignore-not-found', o.kind.toLowerCase(), o.metadata.name]);
    rmSync(helmHome, { recursive: true, force: true });
    await cp?.stop();
  });

  test("a pool naming another Secret as its store is refused with the policy's message; allowed ones are stored", async () => {
    await assert.rejects(
      create(pool('borrower', 'billing-db')),
      new RegExp(
        `ValidatingAdmissionPolicy '${RELEASE}-collectorpools' with binding '${RELEASE}-collectorpools' denied request: ` +
          `spec\\.store\\.secretRef\\.name billing-db is not a store Secret this installation allows \\(pglog-store, ${NS}/team-store\\)`,
      ),
    );
    assert.match(await create(pool('main', 'pglog-store')), /collectorpool\.pglog\.io\/main created/);
    assert.match(await create(pool('team', 'team-store')), /collectorpool\.pglog\.io\/team created/, 'NAMESPACE/NAME allows it here');
    await assert.rejects(cp.kubectl(['get', 'cpool', 'borrower']), /NotFound/, 'nothing stored');
  });

  test('an update that changes the Secret to a refused one is refused too; other edits pass', async () => {
    await assert.rejects(
      cp.kubectl(['patch', 'cpool', 'main', '--type=merge', '-p', JSON.stringify({ spec: { store: { secretRef: { name: 'billing-db' } } } })]),
      /spec\.store\.secretRef\.name billing-db is not a store Secret this installation allows/,
    );
    assert.match(await cp.kubectl(['label', 'cpool', 'main', 'team=a']), /labeled/);
  });

  test('images: outside the list, not a reference, or a tag pattern with a digest are refused; allowed ones are stored', async () => {
    for (const [images, field, image] of [
      [{ collector: 'ghcr.io/attacker/anything:latest' }, 'spec.collector.image', 'ghcr.io/attacker/anything:latest'],
      [{ collector: 'ghcr.io/pglog/pglog@evil.com/x' }, 'spec.collector.image', 'ghcr.io/pglog/pglog@evil.com/x'],
      [{ collector: 'ghcr.io/pglog/pglog:1.3.9' }, 'spec.collector.image', 'ghcr.io/pglog/pglog:1.3.9'],
      [{ collector: `ghcr.io/pglog/pglog:1.4.7@sha256:${'cd'.repeat(32)}` }, 'spec.collector.image', `ghcr.io/pglog/pglog:1.4.7@sha256:${'cd'.repeat(32)}`],
      [{ collector: 'ghcr.io/pglog/pglog:1.4.7', sidecar: 'ghcr.io/pglog/pinned:1.4.7' }, 'spec.sidecar.image', 'ghcr.io/pglog/pinned:1.4.7'],
    ] as const) {
      await assert.rejects(
        create(pool('imaged', 'pglog-store', images)),
        (e: Error) => e.message.includes(`${field} ${image} is not an image this installation allows (${ALLOWED_IMAGES.join(', ')})`),
        image,
      );
    }
    assert.match(await create(pool('imaged', 'pglog-store', { collector: 'ghcr.io/pglog/pglog:1.4.7', sidecar: `ghcr.io/pglog/pinned@${DIGEST}` })), /created/);
  });

  test('a namespace outside the collector namespaces is not bound: the operator alone answers there', async () => {
    await cp.kubectl(['create', 'namespace', `${NS}-outside`]);
    try {
      assert.match(await cp.kubectl(['-n', `${NS}-outside`, 'create', '-f', '-'], pool('elsewhere', 'billing-db')), /created/);
    } finally {
      await cp.kubectl(['delete', 'namespace', `${NS}-outside`, '--wait=false']);
    }
  });
});
