// Tenants stay apart (security review F3, F4, F11, R3): the real `pglog operator` against a
// real kube-apiserver with kube-controller-manager (garbage collection), watching every
// namespace, with `--collector-namespaces team-a`, `--allowed-store-secrets store` and the
// default image allow-list (the repository of its --image):
//   - a pool naming an image outside the allow-list gets no StatefulSet, Ready False with
//     reason ImageNotAllowed and a Warning Event; a pool already running keeps its StatefulSet
//     unchanged when its image is changed to a refused one;
//   - a pool naming a store Secret outside the allow-list gets no StatefulSet, Ready False
//     with reason StoreSecretNotAllowed and a Warning Event; a running pool changed to one keeps
//     its StatefulSet (and the Secret it had) unchanged;
//   - an application's own PDB `postgres` and Service `postgres-metrics`, created first, are
//     left untouched by a pool named `postgres` (selector, no owner reference), which reports
//     OwnedObjectConflict naming both; deleting the pool leaves them;
//   - a pool in a namespace that is not a collector namespace gets nothing written but its
//     status: Ready False, NamespaceNotAllowed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';
import { CORE_EVENTS, type CoreEvent } from '@pglog/common/kube/events.ts';
import { COLLECTOR_POOLS, COLLECTOR_SHARDS, POD_DISRUPTION_BUDGETS, SERVICES, STATEFUL_SETS } from '@pglog/common/kube/resources.ts';
import { type ControlPlane, startControlPlane } from '@pglog/test-support/control-plane.ts';
import { eventually, poolObject } from '@pglog/test-support/fleet.ts';

import { installCrds } from '../helpers/crds.ts';
import { type OperatorProcess, startOperator } from '../helpers/operator-process.ts';

const SYSTEM = 'pglog-system';
const TEAM = 'team-a';
const OUTSIDE = 'team-b';
/** What startOperator gives as --image: its repository is the whole default allow-list. */
const ALLOWED_IMAGE = 'registry.invalid/pglog:other-tag';
const FOREIGN_IMAGE = 'ghcr.io/attacker/anything:latest';

type Condition = { type: string; status: string; reason: string; message: string };
type Pool = KubeObject & { status?: { conditions?: Condition[] } };
type Container = { name: string; image: string; env?: Array<{ name: string; valueFrom?: { secretKeyRef?: unknown } }> };
type Workload = KubeObject & {
  spec: { selector?: unknown; template?: { spec: { containers: Container[]; initContainers?: Container[] } } };
};

describe('tenants stay apart: allowed images and store Secrets, owned objects, collector namespaces', { timeout: 300_000 }, () => {
  let cp: ControlPlane;
  let client: KubeClient & { close(): void };
  let operator: OperatorProcess;
  const output = (): string => operator.output().slice(-6000);

  before(async () => {
    cp = await startControlPlane({ controllerManager: true });
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    await installCrds(cp);
    for (const ns of [SYSTEM, TEAM, OUTSIDE]) await cp.kubectl(['create', 'namespace', ns]);
    operator = await startOperator({
      kubeconfig: cp.kubeconfig,
      namespace: SYSTEM,
      identity: 'operator',
      allNamespaces: true,
      extraArgs: ['--collector-namespaces', TEAM],
    });
  });
  after(async () => {
    await operator?.kill();
    client?.close();
    await cp?.stop();
  });

  const condition = async (namespace: string, name: string, type: string): Promise<Condition | undefined> =>
    (await client.get<Pool>(COLLECTOR_POOLS, namespace, name))?.status?.conditions?.find((c) => c.type === type);
  const readyFalse = (namespace: string, name: string, reason: string): Promise<Condition> =>
    eventually(
      `pool ${namespace}/${name} Ready False ${reason}`,
      30_000,
      async () => {
        const c = await condition(namespace, name, 'Ready');
        return c?.status === 'False' && c.reason === reason ? c : undefined;
      },
      output,
    );
  const warnings = async (namespace: string, name: string, reason: string): Promise<CoreEvent[]> =>
    (await client.list<CoreEvent>(CORE_EVENTS, namespace, { fieldSelector: `involvedObject.name=${name}` })).items.filter(
      (e) => e.type === 'Warning' && e.reason === reason,
    );
  const storeRef = (sts: Workload): unknown =>
    sts.spec.template!.spec.containers.find((c) => c.name === 'collector')?.env?.find((e) => e.name === 'PGLOG_STORE_URL')?.valueFrom?.secretKeyRef;
  const images = (sts: Workload): string[] => [...(sts.spec.template!.spec.initContainers ?? []), ...sts.spec.template!.spec.containers].map((c) => c.image);

  test('a pool naming an image outside the allow-list: no StatefulSet, Ready False ImageNotAllowed, a Warning Event', async () => {
    await client.create(COLLECTOR_POOLS, poolObject(TEAM, 'foreign', 1, { collector: { image: FOREIGN_IMAGE } }));
    const ready = await readyFalse(TEAM, 'foreign', 'ImageNotAllowed');
    assert.match(
      ready.message,
      /spec\.collector\.image ghcr\.io\/attacker\/anything:latest and spec\.sidecar\.image ghcr\.io\/attacker\/anything:latest not in the operator's allowed images \(registry\.invalid\/pglog\)/,
    );
    assert.equal((await condition(TEAM, 'foreign', 'Degraded'))?.reason, 'ImageNotAllowed');
    await eventually(
      'a Warning Event ImageNotAllowed',
      20_000,
      async () => ((await warnings(TEAM, 'foreign', 'ImageNotAllowed')).length > 0 ? true : undefined),
      output,
    );
    // Give the operator a few resyncs (5 s) to do the wrong thing.
    await new Promise((r) => setTimeout(r, 6_000));
    assert.equal(await client.get(STATEFUL_SETS, TEAM, 'foreign'), null, 'no StatefulSet runs the foreign image');
    const events = await warnings(TEAM, 'foreign', 'ImageNotAllowed');
    assert.deepEqual(
      events.map((e) => e.count),
      [1],
      'announced once, not at every reconcile',
    );
  });

  test('a pool naming a store Secret outside the allow-list: no StatefulSet, Ready False StoreSecretNotAllowed, a Warning Event', async () => {
    await client.create(COLLECTOR_POOLS, poolObject(TEAM, 'borrower', 1, { store: { secretRef: { name: 'billing-db', key: 'url' } } }));
    const ready = await readyFalse(TEAM, 'borrower', 'StoreSecretNotAllowed');
    assert.match(ready.message, /^spec\.store\.secretRef\.name billing-db is not a store Secret this operator allows \(store\)/);
    await eventually(
      'a Warning Event StoreSecretNotAllowed',
      20_000,
      async () => ((await warnings(TEAM, 'borrower', 'StoreSecretNotAllowed')).length > 0 ? true : undefined),
      output,
    );
    // Give the operator a few resyncs (5 s) to do the wrong thing.
    await new Promise((r) => setTimeout(r, 6_000));
    assert.equal(await client.get(STATEFUL_SETS, TEAM, 'borrower'), null, "no pod gets that Secret's URL");
  });

  test('a running pool changed to a refused store Secret: its StatefulSet stays as it was', async () => {
    await client.create(COLLECTOR_POOLS, poolObject(TEAM, 'moving', 1));
    const before = await eventually('StatefulSet moving', 30_000, async () => (await client.get<Workload>(STATEFUL_SETS, TEAM, 'moving')) ?? undefined, output);
    await client.mergePatch(COLLECTOR_POOLS, TEAM, 'moving', { spec: { store: { secretRef: { name: 'billing-db' } } } });
    await readyFalse(TEAM, 'moving', 'StoreSecretNotAllowed');
    await new Promise((r) => setTimeout(r, 6_000));
    const kept = (await client.get<Workload>(STATEFUL_SETS, TEAM, 'moving'))!;
    // The generation moves with every change of the spec, and only then.
    assert.equal(kept.metadata.generation, before.metadata.generation, 'its spec not written');
    assert.deepEqual(storeRef(kept), { name: 'store', key: 'url' });
  });

  test('a running pool changed to a refused sidecar image: its StatefulSet stays as it was; back to an allowed one, it follows', async () => {
    await client.create(COLLECTOR_POOLS, poolObject(TEAM, 'main', 1, { collector: { image: ALLOWED_IMAGE } }));
    const before = await eventually('StatefulSet main', 30_000, async () => (await client.get<Workload>(STATEFUL_SETS, TEAM, 'main')) ?? undefined, output);
    assert.deepEqual(images(before), [ALLOWED_IMAGE, ALLOWED_IMAGE]);
    await client.mergePatch(COLLECTOR_POOLS, TEAM, 'main', { spec: { sidecar: { image: FOREIGN_IMAGE } } });
    const ready = await readyFalse(TEAM, 'main', 'ImageNotAllowed');
    assert.match(ready.message, /^spec\.sidecar\.image ghcr\.io\/attacker\/anything:latest not in/);
    await new Promise((r) => setTimeout(r, 6_000));
    const kept = (await client.get<Workload>(STATEFUL_SETS, TEAM, 'main'))!;
    assert.deepEqual(images(kept), [ALLOWED_IMAGE, ALLOWED_IMAGE]);
    // The generation, not the resourceVersion: a new StatefulSet is created, then adopted by an
    // apply that drops the create's managedFields (ADR 0031), so `before` may predate that write.
    assert.equal(kept.metadata.generation, before.metadata.generation, 'its spec not written');
    await client.mergePatch(COLLECTOR_POOLS, TEAM, 'main', { spec: { sidecar: { image: 'registry.invalid/pglog:sidecar' } } });
    await eventually(
      'the StatefulSet takes the allowed sidecar image',
      30_000,
      async () => {
        const s = await client.get<Workload>(STATEFUL_SETS, TEAM, 'main');
        return s !== null && images(s)[0] === 'registry.invalid/pglog:sidecar' ? true : undefined;
      },
      output,
    );
    await eventually('Degraded False again', 30_000, async () => ((await condition(TEAM, 'main', 'Degraded'))?.status === 'False' ? true : undefined), output);
  });

  test("someone else's PDB postgres and Service postgres-metrics: untouched by a pool named postgres, reported, and kept when the pool goes", async () => {
    const appSelector = { matchLabels: { app: 'postgres' } };
    await client.create(POD_DISRUPTION_BUDGETS, {
      apiVersion: 'policy/v1',
      kind: 'PodDisruptionBudget',
      metadata: { name: 'postgres', namespace: TEAM },
      spec: { minAvailable: 1, selector: appSelector },
    } as KubeObject);
    await client.create(SERVICES, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'postgres-metrics', namespace: TEAM },
      spec: { selector: { app: 'postgres' }, ports: [{ name: 'metrics', port: 9187 }] },
    } as KubeObject);
    await client.create(COLLECTOR_POOLS, poolObject(TEAM, 'postgres', 1));
    const ready = await readyFalse(TEAM, 'postgres', 'OwnedObjectConflict');
    assert.match(
      ready.message,
      /Service postgres-metrics and PodDisruptionBudget postgres in namespace team-a already exist and are not controlled by this pool/,
    );
    await eventually(
      'a Warning Event OwnedObjectConflict',
      20_000,
      async () => ((await warnings(TEAM, 'postgres', 'OwnedObjectConflict')).length > 0 ? true : undefined),
      output,
    );
    // What the pool does own is written: its StatefulSet and shard.
    await eventually('StatefulSet postgres', 30_000, async () => (await client.get(STATEFUL_SETS, TEAM, 'postgres')) ?? undefined, output);
    await new Promise((r) => setTimeout(r, 6_000));
    const untouched = async (): Promise<void> => {
      const pdb = (await client.get<Workload>(POD_DISRUPTION_BUDGETS, TEAM, 'postgres'))!;
      const service = (await client.get<KubeObject & { spec: { selector: unknown } }>(SERVICES, TEAM, 'postgres-metrics'))!;
      assert.deepEqual(pdb.spec.selector, appSelector, 'the PDB still protects the database pods');
      assert.deepEqual(service.spec.selector, { app: 'postgres' });
      for (const o of [pdb, service]) {
        assert.equal(o.metadata.ownerReferences, undefined, `${o.kind} ${o.metadata.name} has no owner`);
        assert.equal(o.metadata.labels?.['pglog.io/pool'], undefined);
      }
    };
    await untouched();
    await client.delete(COLLECTOR_POOLS, TEAM, 'postgres');
    // The garbage collector removes what the pool owned (its StatefulSet), and only that.
    await eventually(
      "the pool's StatefulSet collected",
      60_000,
      async () => ((await client.get(STATEFUL_SETS, TEAM, 'postgres')) === null ? true : undefined),
      () => cp.logs().slice(-4000),
    );
    await eventually("the pool's shard collected", 60_000, async () => ((await client.get(COLLECTOR_SHARDS, TEAM, 'postgres-0')) === null ? true : undefined));
    await untouched();
  });

  test('a pool outside the collector namespaces: nothing written but its status, Ready False NamespaceNotAllowed', async () => {
    await client.create(COLLECTOR_POOLS, poolObject(OUTSIDE, 'main', 2));
    const ready = await readyFalse(OUTSIDE, 'main', 'NamespaceNotAllowed');
    assert.match(ready.message, /namespace team-b is not a collector namespace of this operator \(team-a\)/);
    await new Promise((r) => setTimeout(r, 6_000));
    for (const type of [STATEFUL_SETS, SERVICES, POD_DISRUPTION_BUDGETS, COLLECTOR_SHARDS]) {
      assert.deepEqual(
        (await client.list(type, OUTSIDE)).items.map((o) => o.metadata.name),
        [],
        `no ${type.plural} in ${OUTSIDE}`,
      );
    }
  });
});
