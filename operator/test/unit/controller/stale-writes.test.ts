// Status writes decided from the caches at the start of a pass are not made once what they
// were decided on has changed: a pool created while the unassigned targets' `NoPool` statuses
// are still being written takes over the rest, and a target changed during a pool's pass is
// left to the next pass, which comes a second later. In-memory caches and a fake client.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import type { KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { KubeError } from '@pglog/common/kube/errors.ts';

import { OperatorMetrics } from '../../../src/controller/operator-metrics.ts';
import { PoolReconciler } from '../../../src/controller/pool-reconciler.ts';
import { reconcileUnassignedTargets } from '../../../src/controller/unassigned-targets.ts';
import { Cache, samplePool, sampleTarget } from '../../helpers/pool-fixtures.ts';

let rv = 100;
const nextRv = (): string => String(rv++);

/**
 * A client that writes into the caches as the informers would, and calls `afterWrite` after each
 * status patch. With `lagging` (target names), a write to one of them reaches the API server
 * (`server`) but not the cache, as when its watch event has not arrived yet; a patch carrying a
 * resourceVersion other than the server's is refused with 409, as the API server does.
 */
function fakeClient(
  caches: Record<string, Cache<KubeObject>>,
  afterWrite: (name: string) => void = () => undefined,
  lagging: ReadonlySet<string> = new Set(),
): KubeClient & { statusWrites: string[] } {
  const statusWrites: string[] = [];
  const server = new Map<string, KubeObject>();
  const store = (type: ResourceType, o: KubeObject): KubeObject => {
    const stored = { ...o, metadata: { ...o.metadata, uid: o.metadata.uid ?? `uid-${o.metadata.name}`, resourceVersion: nextRv() } };
    server.set(`${type.plural}/${o.metadata.name}`, stored);
    if (!lagging.has(o.metadata.name)) caches[type.plural]?.put(stored);
    return stored;
  };
  const client = {
    statusWrites,
    mergePatch(type: ResourceType, namespace: string, name: string, patch: { metadata?: { resourceVersion?: string }; status?: unknown }): Promise<KubeObject> {
      const current = server.get(`${type.plural}/${name}`) ?? caches[type.plural]!.get(namespace, name)!;
      const precondition = patch.metadata?.resourceVersion;
      if (precondition !== undefined && precondition !== current.metadata.resourceVersion)
        return Promise.reject(new KubeError('KUBE_CONFLICT', `${name}: the object has been modified`, 409, 'Conflict'));
      const written = store(type, { ...current, status: patch.status } as KubeObject);
      if (type.plural === 'postgrestargets') {
        statusWrites.push(name);
        afterWrite(name);
      }
      return Promise.resolve(written);
    },
    create: (type: ResourceType, o: KubeObject) => Promise.resolve(store(type, o)),
    replace: (type: ResourceType, o: KubeObject) => Promise.resolve(store(type, o)),
    apply: (type: ResourceType, o: KubeObject) => Promise.resolve(store(type, o)),
    get: () => Promise.resolve(null),
    delete: () => Promise.resolve(true),
  };
  return client as unknown as KubeClient & { statusWrites: string[] };
}

const targetsOf = (n: number, pool: string): TargetObject[] =>
  Array.from({ length: n }, (_, i) => {
    const t = sampleTarget({ name: `db${String(i).padStart(3, '0')}`, pool });
    return { ...t, metadata: { ...t.metadata, generation: 1, resourceVersion: nextRv() } };
  });

describe('status writes from a pass that has become stale', () => {
  test('a pool created while NoPool statuses are written: the targets it took are not marked NoPool', async () => {
    const pools = new Cache<CollectorPool>();
    const targets = new Cache<TargetObject>();
    for (const t of targetsOf(50, 'main')) targets.put(t);
    const client = fakeClient({ postgrestargets: targets }, () => {
      // The pool arrives after the first NoPool write.
      if (pools.list().length === 0) pools.put({ ...samplePool(), metadata: { ...samplePool().metadata, resourceVersion: nextRv() } });
    });
    const outcome = await reconcileUnassignedTargets('pglog', { client, pools, targets, now: () => Date.parse('2026-12-07T10:00:00Z') });
    // Only the write made before the pool came (the fake answers at once, so none was in flight).
    assert.deepEqual(client.statusWrites, ['db000']);
    assert.deepEqual(outcome, { writes: 1, skipped: 49 });
    const again = await reconcileUnassignedTargets('pglog', { client, pools, targets, now: () => Date.parse('2026-12-07T10:00:01Z') });
    assert.deepEqual(again, { writes: 0, skipped: 0 }, 'the pool owns them all now');
  });

  test("a target changed during a pool's pass is left to the next pass, a second later", async () => {
    const pools = new Cache<CollectorPool>();
    const targets = new Cache<TargetObject>();
    const caches = {
      postgrestargets: targets,
      collectorpools: pools,
      collectorshards: new Cache(),
      statefulsets: new Cache(),
      services: new Cache(),
      poddisruptionbudgets: new Cache(),
    };
    const pool = samplePool({ replicas: 2 });
    pools.put({ ...pool, metadata: { ...pool.metadata, resourceVersion: nextRv() } });
    for (const t of targetsOf(20, 'main')) targets.put(t);
    let touched = false;
    const client = fakeClient(caches, () => {
      if (touched) return;
      touched = true;
      // Someone changes db019 (say its labels) while the pass writes statuses.
      const t = targets.get('pglog', 'db019')!;
      targets.put({ ...t, metadata: { ...t.metadata, labels: { team: 'a' }, resourceVersion: nextRv() } });
    });
    const reconciler = new PoolReconciler({
      client,
      pools,
      targets,
      shards: caches.collectorshards as never,
      statefulSets: caches.statefulsets,
      services: caches.services,
      podDisruptionBudgets: caches.poddisruptionbudgets,
      events: { record: () => Promise.resolve() },
      metrics: new OperatorMetrics({ defaultMetrics: false }),
      defaultImage: 'registry.example/pglog:1',
      fieldManager: 'test',
      now: () => Date.parse('2026-12-07T10:00:00Z'),
      statusConcurrency: 1,
    });
    const first = await reconciler.reconcile('pglog', 'main');
    assert.equal(client.statusWrites.includes('db019'), false, 'not written from the stale read');
    assert.equal(client.statusWrites.length, 19);
    assert.equal(first.requeueAfterMs, 1000);
    const second = await reconciler.reconcile('pglog', 'main');
    assert.deepEqual(client.statusWrites.slice(19), ['db019']);
    assert.equal(second.requeueAfterMs, 10_000, 'auto targets: the usual look again');
    const third = await reconciler.reconcile('pglog', 'main');
    assert.equal(third.writes, 0, 'a pass with nothing new writes nothing');
  });

  test("a cache behind the API server: a second pass's writes decided on the old status are refused, none made twice", async () => {
    const pools = new Cache<CollectorPool>();
    const targets = new Cache<TargetObject>();
    const all = targetsOf(10, 'main');
    for (const t of all) targets.put(t);
    // The events of the first pass's writes have not reached the cache when the second pass runs.
    const client = fakeClient({ postgrestargets: targets }, () => undefined, new Set(all.map((t) => t.metadata.name)));
    const now = (): number => Date.parse('2026-12-07T10:00:00Z');
    const first = await reconcileUnassignedTargets('pglog', { client, pools, targets, now });
    assert.deepEqual(first, { writes: 10, skipped: 0 });
    const second = await reconcileUnassignedTargets('pglog', { client, pools, targets, now });
    assert.deepEqual(second, { writes: 0, skipped: 10 }, 'refused by the API server (409), left to the next pass');
    assert.equal(client.statusWrites.length, 10);
  });
});
