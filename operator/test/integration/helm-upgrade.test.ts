// `helm upgrade` from the previous release's chart (git commit 60210b1: its charts/pglog with
// the CRDs of then) to this chart, with the real helm on a real kube-apiserver and
// kube-controller-manager, the pods run by the test node agent (ADR 0013, docs/install.md
// "Upgrading"). Before the upgrade the old CRDs prune a new field (spec.startAt); the
// upgrade's pre-upgrade hook Job (`pglog crds apply`, run through the node agent) brings the
// new CRDs, after which the field is kept; the hook leaves nothing behind; the operator keeps
// the pool's StatefulSet and shards, and the target stays on its shard; `helm uninstall`
// leaves the CRDs and the PostgresTargets in place; a new `helm install` runs the pre-install
// hook over the existing CRDs and picks the kept targets up. `pglog crds apply` refuses
// anything but pglog's CRDs.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { readCrds } from '../../../collector/src/cli/crds-command.ts';
import { isPglogError } from '../../../collector/src/errors.ts';
import { createKubeClient } from '../../src/kube/client.ts';
import type { KubeClient, KubeObject, ResourceType } from '../../src/kube/client-types.ts';
import { loadKubeconfigFile } from '../../src/kube/config.ts';
import { COLLECTOR_SHARDS, POSTGRES_TARGETS, STATEFUL_SETS } from '../../src/kube/resources.ts';
import { kubeBin, startControlPlane, type ControlPlane } from '../helpers/control-plane.ts';
import { assignmentOf, eventually, targetObject } from '../helpers/fleet.ts';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent.ts';

const execFileP = promisify(execFile);
const ROOT = join(import.meta.dirname, '../../..');
const CHART = join(ROOT, 'charts/pglog');
/** The chart of the previous release. */
const PREVIOUS = '60210b1';
const NS = 'pglog-up';
const RELEASE = 'pglog';
const POOL = 'main';
const CRDS: ResourceType = { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions', kind: 'CustomResourceDefinition', namespaced: false };

type Target = KubeObject & { spec: Record<string, unknown> };
type Crd = KubeObject & { metadata: { managedFields?: Array<{ manager: string }> }; spec: { versions: Array<{ schema: { openAPIV3Schema: { properties: { spec: { properties: Record<string, unknown> } } } } }> } };

describe('helm upgrade from the previous chart', { timeout: 600_000 }, () => {
  let cp: ControlPlane;
  let agent: NodeAgent;
  let client: KubeClient & { close(): void };
  let work: string;
  let helmEnv: NodeJS.ProcessEnv;
  const helm = async (args: string[]): Promise<string> => {
    try {
      const r = await execFileP(join(kubeBin(), 'helm'), [...args, '--kubeconfig', cp.kubeconfig, '--namespace', NS], { env: helmEnv, maxBuffer: 16 * 1024 * 1024 });
      return r.stdout;
    } catch (e) {
      const err = e as Error & { stdout?: string; stderr?: string };
      throw new Error(`helm ${args.join(' ')}: ${err.message}\n${err.stderr ?? ''}\nhook pod:\n${agent.pods().map((p) => agent.output(p.name)).join('\n')}`, { cause: e });
    }
  };
  const kubectl = (args: string[], stdin?: string): Promise<string> => cp.kubectl(['-n', NS, ...args], stdin);

  before(async () => {
    cp = await startControlPlane({ controllerManager: true });
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    work = mkdtempSync(join(tmpdir(), 'pglog-upgrade-'));
    helmEnv = { ...process.env, HELM_CACHE_HOME: join(work, 'cache'), HELM_CONFIG_HOME: join(work, 'config'), HELM_DATA_HOME: join(work, 'data') };
    // The previous release's chart, CRDs included, as it was committed.
    mkdirSync(join(work, 'previous'));
    const archive = join(work, 'previous.tar');
    await execFileP('git', ['-C', ROOT, 'archive', '--output', archive, PREVIOUS, 'charts', 'crds']);
    await execFileP('tar', ['-xf', archive, '-C', join(work, 'previous')]);
    await cp.kubectl(['create', 'namespace', NS]);
    await kubectl(['create', 'secret', 'generic', 'pglog-store', '--from-literal=url=postgresql://pglog@127.0.0.1:1/pglog']);
    agent = await startNodeAgent({ kubeconfig: cp.kubeconfig, namespaces: [NS] });
  });
  after(async () => {
    await agent?.stop(5);
    client?.close();
    await cp?.stop();
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
  });

  const startAtOf = async (name: string): Promise<unknown> => (await client.get<Target>(POSTGRES_TARGETS, NS, name))?.spec['startAt'];
  const withStartAt = (name: string): Target => ({ ...targetObject(NS, name, POOL), spec: { ...targetObject(NS, name, POOL).spec, startAt: 'now' } });
  const applyTarget = async (name: string): Promise<void> => {
    await kubectl(['apply', '--server-side', '-f', '-'], JSON.stringify(withStartAt(name)));
  };

  test('the old chart installs; its CRDs prune spec.startAt; the operator shards the targets', async () => {
    await helm(['install', RELEASE, join(work, 'previous/charts/pglog'), '--set', 'operator.leaseDurationSeconds=5,operator.resyncSeconds=10']);
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
    const out = await helm(['upgrade', RELEASE, CHART, '--set', 'operator.leaseDurationSeconds=5,operator.resyncSeconds=10']);
    assert.match(out, /has been upgraded/);

    for (const name of ['collectorpools.pglog.io', 'collectorshards.pglog.io', 'postgrestargets.pglog.io']) {
      const crd = await client.get<Crd>(CRDS, undefined, name);
      assert.ok(crd?.metadata.managedFields?.some((f) => f.manager === 'pglog-crds'), `${name} applied by the hook`);
    }
    const targets = await client.get<Crd>(CRDS, undefined, 'postgrestargets.pglog.io');
    assert.ok('startAt' in targets!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties, 'the new schema has spec.startAt');
    await applyTarget('db1');
    assert.equal(await startAtOf('db1'), 'now', 'the new CRD keeps spec.startAt');

    // The hook leaves nothing: no Job, account, ClusterRole or ConfigMap of it.
    const left = await cp.kubectl(['get', 'clusterroles,clusterrolebindings', '-l', 'app.kubernetes.io/component=crds', '-o', 'name']);
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
    await helm(['uninstall', RELEASE, '--wait', '--timeout', '90s']);
    for (const name of ['collectorpools.pglog.io', 'collectorshards.pglog.io', 'postgrestargets.pglog.io']) {
      assert.ok(await client.get<KubeObject>(CRDS, undefined, name) !== null, `${name} is still there`);
    }
    assert.equal(await startAtOf('db1'), 'now');
    assert.ok(await client.get<Target>(POSTGRES_TARGETS, NS, 'db2') !== null);
  });

  test('helm install of this chart over CRDs that exist: the pre-install hook applies them again', async () => {
    await helm(['install', RELEASE, CHART, '--set', 'operator.leaseDurationSeconds=5,operator.resyncSeconds=10']);
    assert.equal((await kubectl(['get', 'jobs', '-l', 'app.kubernetes.io/component=crds', '-o', 'name'])).trim(), '');
    await eventually('the reinstalled operator shards the kept targets', 120_000, async () => {
      const a = await assignmentOf(client, NS, POOL);
      return a.shards.length === 2 && a.byTarget.size === 2 ? true : undefined;
    });
    await helm(['uninstall', RELEASE, '--wait', '--timeout', '90s']);
  });

  test('pglog crds apply takes pglog.io CRDs only', () => {
    const dir = join(work, 'foreign');
    mkdirSync(dir);
    writeFileSync(join(dir, 'other.yaml'), 'apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n');
    assert.throws(() => readCrds(dir), (e: unknown) => isPglogError(e) && /only pglog\.io CustomResourceDefinitions/.test((e as Error).message));
    assert.deepEqual(readCrds(join(CHART, 'crds')).map((c) => c.metadata.name), ['collectorpools.pglog.io', 'collectorshards.pglog.io', 'postgrestargets.pglog.io']);
  });
});
