// `helm upgrade` from the previous release's chart (git commit 60210b1: its charts/pglog with
// the CRDs of then) to this chart, with the real helm on the real node of helpers/real-node.ts
// (the kubelet runs the built image, PGLOG_TEST_IMAGE, in a namespace that enforces Pod Security
// `restricted`; ADR 0013, docs/install.md "Upgrading"). Before the upgrade the old CRDs prune a
// new field (spec.startAt); the upgrade's pre-upgrade hook Job (`pglog crds apply`) brings the
// new CRDs, after which the field is kept; the hook leaves nothing behind; the operator keeps
// the pool's StatefulSet and shards, and the target stays on its shard; `helm uninstall`
// leaves the CRDs and the PostgresTargets in place; a new `helm install` runs the pre-install
// hook over the existing CRDs and picks the kept targets up. `pglog crds apply` refuses
// anything but pglog's CRDs.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { readCrds } from '@pglog/cli/crds-command.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_SHARDS, CUSTOM_RESOURCE_DEFINITIONS as CRDS, POSTGRES_TARGETS, STATEFUL_SETS } from '@pglog/common/kube/resources.ts';
import { type E2eCluster, POD_SECURITY_WARNING, startE2eCluster } from '@pglog/test-support/e2e-cluster.ts';
import { assignmentOf, eventually, targetObject } from '@pglog/test-support/fleet.ts';

const ROOT = join(import.meta.dirname, '../../..');
const CHART = join(ROOT, 'charts/pglog');
/** The chart of the previous release. */
const PREVIOUS = '60210b1';
const NS = 'pglog-up';
const RELEASE = 'pglog';
const POOL = 'main';

type Target = KubeObject & { spec: Record<string, unknown> };
type Crd = KubeObject & {
  metadata: { managedFields?: Array<{ manager: string }> };
  spec: { versions: Array<{ schema: { openAPIV3Schema: { properties: { spec: { properties: Record<string, unknown> } } } } }> };
};

describe('helm upgrade from the previous chart', { timeout: 600_000 }, () => {
  let cluster: E2eCluster;
  let client: KubeClient & { close(): void };
  let previousChart: string;
  /** helm with the image's values, checked for Pod Security warnings. */
  const helm = async (args: string[]): Promise<string> => {
    const { stdout, stderr } = await cluster.helm([...args, '--set', `${cluster.imageValues()},operator.leaseDurationSeconds=5,operator.resyncSeconds=10`]);
    assert.doesNotMatch(stderr, POD_SECURITY_WARNING);
    return stdout;
  };
  const kubectl = (args: string[], stdin?: string): Promise<string> => cluster.kubectl(args, stdin);

  before(async () => {
    cluster = await startE2eCluster({ namespace: NS, image: process.env['PGLOG_TEST_IMAGE'], docker: process.env['PGLOG_TEST_DOCKER'] ?? 'docker' });
    client = cluster.client;
    // The previous release's chart, CRDs included, as it was committed.
    previousChart = await cluster.chartAt(PREVIOUS);
    // No store: the collectors are not what this test is about (their pods retry; it reads the shards).
    await kubectl(['create', 'secret', 'generic', 'pglog-store', '--from-literal=url=postgresql://pglog@127.0.0.1:1/pglog']);
  });
  after(async () => {
    await cluster?.stop();
  });

  const startAtOf = async (name: string): Promise<unknown> => (await client.get<Target>(POSTGRES_TARGETS, NS, name))?.spec['startAt'];
  // On the node's gateway at a closed port: the collectors' SSH connections fail at once, and
  // stay on this machine.
  const withStartAt = (name: string): Target => ({
    ...targetObject(NS, name, POOL),
    spec: { ...targetObject(NS, name, POOL).spec, host: cluster.node.network.gateway, port: 1, startAt: 'now' },
  });
  const applyTarget = async (name: string): Promise<void> => {
    await kubectl(['apply', '--server-side', '-f', '-'], JSON.stringify(withStartAt(name)));
  };

  test('the old chart installs; its CRDs prune spec.startAt; the operator shards the targets', async () => {
    await helm(['install', RELEASE, previousChart]);
    // Server-side apply (kubectl apply --server-side) refuses the unknown field outright; a
    // plain create, as an older client or a controller sends it, is stored with the field pruned.
    await assert.rejects(applyTarget('db1'), /\.spec\.startAt: field not declared in schema/);
    for (const name of ['db1', 'db2']) await client.create(POSTGRES_TARGETS, withStartAt(name));
    assert.equal(await startAtOf('db1'), undefined, 'the previous CRD has no spec.startAt: the API server prunes it');
    await eventually('both targets on a shard of 2', 120_000, async () => {
      const a = await assignmentOf(client, NS, POOL);
      return a.shards.length === 2 && a.byTarget.size === 2 ? true : undefined;
    });
  });

  test('helm upgrade to this chart: the hook applies the new CRDs first; startAt is kept; pool, shards and assignment stay', async () => {
    const before = await assignmentOf(client, NS, POOL);
    const shardUids = new Map(before.shards.map((s) => [s.metadata.name, s.metadata.uid]));
    const sts = await client.get<KubeObject>(STATEFUL_SETS, NS, POOL);
    assert.ok(sts !== null);
    const out = await helm(['upgrade', RELEASE, CHART]);
    assert.match(out, /has been upgraded/);

    for (const name of ['collectorpools.pglog.io', 'collectorshards.pglog.io', 'postgrestargets.pglog.io']) {
      const crd = await client.get<Crd>(CRDS, undefined, name);
      assert.ok(
        crd?.metadata.managedFields?.some((f) => f.manager === 'pglog-crds'),
        `${name} applied by the hook`,
      );
    }
    const targets = await client.get<Crd>(CRDS, undefined, 'postgrestargets.pglog.io');
    assert.ok('startAt' in targets!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties, 'the new schema has spec.startAt');
    await applyTarget('db1');
    assert.equal(await startAtOf('db1'), 'now', 'the new CRD keeps spec.startAt');

    // The hook leaves nothing: no Job, account, ClusterRole or ConfigMap of it.
    const left = await cluster.cp.kubectl(['get', 'clusterroles,clusterrolebindings', '-l', 'app.kubernetes.io/component=crds', '-o', 'name']);
    assert.equal(left.trim(), '');
    assert.equal((await kubectl(['get', 'jobs,serviceaccounts,configmaps', '-l', 'app.kubernetes.io/component=crds', '-o', 'name'])).trim(), '');

    // The operator carries on: same StatefulSet, same shards, each target where it was.
    await eventually('the upgraded operator leads and keeps the assignment', 120_000, async () => {
      const now = await assignmentOf(client, NS, POOL);
      if (now.shards.length !== 2 || now.byTarget.size !== 2) return undefined;
      for (const [t, i] of before.byTarget) if (now.byTarget.get(t) !== i) return undefined;
      return true;
    });
    assert.equal((await client.get<KubeObject>(STATEFUL_SETS, NS, POOL))?.metadata.uid, sts.metadata.uid);
    const { items } = await client.list<KubeObject>(COLLECTOR_SHARDS, NS);
    assert.deepEqual(new Map(items.map((s) => [s.metadata.name, s.metadata.uid])), shardUids);
  });

  test('helm uninstall leaves the CRDs and the PostgresTargets', async () => {
    await cluster.helm(['uninstall', RELEASE, '--wait', '--timeout', '90s']);
    for (const name of ['collectorpools.pglog.io', 'collectorshards.pglog.io', 'postgrestargets.pglog.io']) {
      assert.ok((await client.get<KubeObject>(CRDS, undefined, name)) !== null, `${name} is still there`);
    }
    assert.equal(await startAtOf('db1'), 'now');
    assert.ok((await client.get<Target>(POSTGRES_TARGETS, NS, 'db2')) !== null);
  });

  test('helm install of this chart over CRDs that exist: the pre-install hook applies them again', async () => {
    await helm(['install', RELEASE, CHART]);
    assert.equal((await kubectl(['get', 'jobs', '-l', 'app.kubernetes.io/component=crds', '-o', 'name'])).trim(), '');
    await eventually('the reinstalled operator shards the kept targets', 120_000, async () => {
      const a = await assignmentOf(client, NS, POOL);
      return a.shards.length === 2 && a.byTarget.size === 2 ? true : undefined;
    });
    await cluster.helm(['uninstall', RELEASE, '--wait', '--timeout', '90s']);
  });

  test('pglog crds apply takes pglog.io CRDs only', () => {
    const dir = join(cluster.work, 'foreign');
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'other.yaml'),
      'apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n',
    );
    assert.throws(
      () => readCrds(dir),
      (e: unknown) => isPglogError(e) && /only pglog\.io CustomResourceDefinitions/.test((e as Error).message),
    );
    assert.deepEqual(
      readCrds(join(CHART, 'crds')).map((c) => c.metadata.name),
      ['collectorpools.pglog.io', 'collectorshards.pglog.io', 'postgrestargets.pglog.io'],
    );
  });
});
