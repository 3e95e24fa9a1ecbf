// An object a pool would own, created by someone else between the read that found none and
// the write (security review R8, ADR 0031): the pool creates its objects with POST, so the API
// server's 409 says the name is taken, and the object is reported (Ready False,
// OwnedObjectConflict) and never applied over; server-side apply would have created or taken
// over whatever had the name by then. A created object ends owned by the operator's apply
// alone; an existing one is applied with the uid it was read with, so a replaced one is not
// taken over. In-memory caches and a fake client that records every call.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { CollectorPool, CollectorPoolStatus } from '@pglog/common/api/collector-pool.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import type { KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { isKubeError, KubeError } from '@pglog/common/kube/errors.ts';
import { SERVICES } from '@pglog/common/kube/resources.ts';

import { OperatorMetrics } from '../../../src/controller/operator-metrics.ts';
import { applyOwned, createOwned } from '../../../src/controller/owned-objects.ts';
import { PoolReconciler } from '../../../src/controller/pool-reconciler.ts';
import { Cache, samplePool, sampleTarget } from '../../helpers/pool-fixtures.ts';

type Entry = { manager: string; operation: string; subresource?: string };
type Managed = KubeObject & { metadata: { managedFields?: Entry[] } };

interface Calls {
  /** `VERB Kind name`, in order. */
  log: string[];
  applied: KubeObject[];
  patches: Array<{ kind: string; patch: unknown }>;
}

/**
 * A client whose GET finds nothing and whose create answers 409 for the kinds in `taken` (they
 * were created by someone else after the read). A create records the creator's Update entry,
 * an apply adds the Apply entry, as the API server does.
 */
function racingClient(taken: ReadonlySet<string>): KubeClient & { calls: Calls } {
  const calls: Calls = { log: [], applied: [], patches: [] };
  let rv = 10;
  const stored = (o: KubeObject, managedFields: Entry[]): Managed => ({
    ...o,
    metadata: { ...o.metadata, uid: o.metadata.uid ?? `uid-${o.kind}-${o.metadata.name}`, resourceVersion: String(rv++), managedFields },
  });
  const client = {
    calls,
    get: () => Promise.resolve(null),
    create: (type: ResourceType, o: KubeObject) => {
      calls.log.push(`POST ${type.kind} ${o.metadata.name}`);
      if (taken.has(type.kind)) {
        return Promise.reject(
          new KubeError('KUBE_CONFLICT', `POST ${type.plural}: HTTP 409 AlreadyExists: "${o.metadata.name}" already exists`, 409, 'AlreadyExists'),
        );
      }
      return Promise.resolve(stored(o, [{ manager: 'pglog-operator', operation: 'Update' }]));
    },
    apply: (type: ResourceType, o: KubeObject) => {
      calls.log.push(`APPLY ${type.kind} ${o.metadata.name}`);
      calls.applied.push(o);
      return Promise.resolve(
        stored(o, [
          { manager: 'test', operation: 'Apply' },
          { manager: 'pglog-operator', operation: 'Update' },
          { manager: 'kube-controller-manager', operation: 'Update', subresource: 'status' },
        ]),
      );
    },
    mergePatch: (type: ResourceType, _ns: string, name: string, patch: unknown) => {
      calls.log.push(`PATCH ${type.kind} ${name}`);
      calls.patches.push({ kind: type.kind, patch });
      return Promise.resolve(stored({ apiVersion: 'v1', kind: type.kind, metadata: { name } }, []));
    },
    replace: (_type: ResourceType, o: KubeObject) => Promise.resolve(stored(o, [])),
    delete: () => Promise.resolve(true),
  };
  return client as unknown as KubeClient & { calls: Calls };
}

async function reconcile(client: KubeClient): Promise<{ status: CollectorPoolStatus | undefined; events: string[] }> {
  const pools = new Cache<CollectorPool>();
  const pool = samplePool({ replicas: 1 });
  pools.put({ ...pool, metadata: { ...pool.metadata, resourceVersion: '1' } });
  const targets = new Cache<TargetObject>();
  targets.put({ ...sampleTarget({ name: 'db1', pool: 'main' }), metadata: { name: 'db1', namespace: 'pglog', generation: 1, resourceVersion: '2' } });
  const events: string[] = [];
  const reconciler = new PoolReconciler({
    client,
    pools,
    targets,
    shards: new Cache() as never,
    statefulSets: new Cache(),
    services: new Cache(),
    podDisruptionBudgets: new Cache(),
    events: { record: (_o, type, reason) => (events.push(`${type} ${reason}`), Promise.resolve()) },
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    defaultImage: 'registry.example/pglog:1',
    fieldManager: 'test',
    now: () => Date.parse('2026-12-07T10:00:00Z'),
  });
  await reconciler.reconcile('pglog', 'main');
  const calls = (client as KubeClient & { calls: Calls }).calls;
  const statusPatch = calls.patches.findLast((p) => p.kind === 'CollectorPool')?.patch as { status?: CollectorPoolStatus } | undefined;
  return { status: statusPatch?.status, events };
}

describe('objects a pool owns, created by someone else after the read', () => {
  test('GET finds no Service and no PDB, but creating them answers 409: OwnedObjectConflict, and no apply of either', async () => {
    const client = racingClient(new Set(['Service', 'PodDisruptionBudget']));
    const { status, events } = await reconcile(client);
    const { log } = client.calls;
    assert.ok(log.some((l) => l.startsWith('POST Service ')) && log.some((l) => l.startsWith('POST PodDisruptionBudget ')), log.join('\n'));
    assert.deepEqual(
      log.filter((l) => /^(?:APPLY|PATCH) (?:Service|PodDisruptionBudget) /.test(l)),
      [],
      'neither is written after the 409',
    );
    const ready = status?.conditions?.find((c) => c.type === 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready.reason, 'OwnedObjectConflict');
    assert.match(
      ready.message,
      /^Service \S+ and PodDisruptionBudget \S+ in namespace pglog already exist and are not controlled by this pool: left untouched/,
    );
    assert.ok(events.includes('Warning OwnedObjectConflict'), events.join(', '));
    // What nobody else took is written: the StatefulSet, created and then applied as its own.
    assert.ok(log.includes('POST StatefulSet main') && log.includes('APPLY StatefulSet main'), log.join('\n'));
  });

  test('a created object is applied with its uid, and the create entry of its managed fields dropped', async () => {
    const client = racingClient(new Set());
    assert.equal(
      await createOwned(client, SERVICES, { apiVersion: 'v1', kind: 'Service', metadata: { name: 'm', namespace: 'pglog' } }, { fieldManager: 'test' }),
      'created',
    );
    assert.deepEqual(client.calls.log, ['POST Service m', 'APPLY Service m', 'PATCH Service m']);
    assert.equal(client.calls.applied[0]?.metadata.uid, 'uid-Service-m', 'the apply is for the object just created, no other');
    assert.deepEqual(client.calls.patches[0]?.patch, {
      metadata: {
        managedFields: [
          { manager: 'test', operation: 'Apply' },
          { manager: 'kube-controller-manager', operation: 'Update', subresource: 'status' },
        ],
        resourceVersion: '11', // the apply's: the patch is refused if anything changed since
      },
    });
  });

  test('an existing object replaced since it was read: the apply names the old uid, the refusal is KUBE_CONFLICT (read again)', async () => {
    const client = racingClient(new Set());
    (client as { apply: unknown }).apply = (_t: ResourceType, o: KubeObject) =>
      Promise.reject(
        new KubeError(
          'KUBE_INVALID',
          `PATCH services/${o.metadata.name}: HTTP 422 Invalid: metadata.uid: Invalid value: "${o.metadata.uid}": field is immutable`,
          422,
          'Invalid',
        ),
      );
    const current: KubeObject = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'm', namespace: 'pglog', uid: 'uid-read' } };
    await assert.rejects(
      applyOwned(client, SERVICES, { apiVersion: 'v1', kind: 'Service', metadata: { name: 'm', namespace: 'pglog' } }, current, { fieldManager: 'test' }),
      (e: unknown) => isKubeError(e, 'KUBE_CONFLICT') && /Service m was replaced since it was read/.test(e.message) && e.message.includes('"uid-read"'),
    );
  });
});
