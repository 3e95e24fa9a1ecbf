// A pool naming a store Secret outside the operator's allow-list (security review R3): no
// StatefulSet is written (its pods would get that Secret's URL as PGLOG_STORE_URL), and the
// pool says why, Ready False with reason StoreSecretNotAllowed. In-memory caches and a fake
// client that records what the pass writes.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { CollectorPool, CollectorPoolStatus } from '@pglog/common/api/collector-pool.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import type { KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';

import { OperatorMetrics } from '../../../src/controller/operator-metrics.ts';
import { PoolReconciler } from '../../../src/controller/pool-reconciler.ts';
import type { PoolPolicy } from '../../../src/desired/pool-policy.ts';
import { Cache, samplePool, sampleTarget } from '../../helpers/pool-fixtures.ts';

interface Recorded {
  writes: string[];
  poolStatus: CollectorPoolStatus | undefined;
  events: string[];
}

/** A pass over `pool` with `policy`, against empty caches; what it wrote. */
async function reconcileWith(pool: CollectorPool, policy: PoolPolicy): Promise<Recorded> {
  const recorded: Recorded = { writes: [], poolStatus: undefined, events: [] };
  const pools = new Cache<CollectorPool>();
  pools.put({ ...pool, metadata: { ...pool.metadata, resourceVersion: '1' } });
  const targets = new Cache<TargetObject>();
  targets.put({
    ...sampleTarget({ name: 'db1', pool: pool.metadata.name }),
    metadata: { name: 'db1', namespace: 'pglog', generation: 1, resourceVersion: '2' },
  });
  const stored = (o: KubeObject): KubeObject => ({ ...o, metadata: { ...o.metadata, uid: `uid-${o.metadata.name}`, resourceVersion: '3' } });
  const client = {
    apply: (type: ResourceType, o: KubeObject) => (recorded.writes.push(`${type.kind} ${o.metadata.name}`), Promise.resolve(stored(o))),
    create: (type: ResourceType, o: KubeObject) => (recorded.writes.push(`${type.kind} ${o.metadata.name}`), Promise.resolve(stored(o))),
    replace: (type: ResourceType, o: KubeObject) => (recorded.writes.push(`${type.kind} ${o.metadata.name}`), Promise.resolve(stored(o))),
    mergePatch: (type: ResourceType, _ns: string, name: string, patch: { status?: unknown }) => {
      if (type.plural === 'collectorpools') recorded.poolStatus = patch.status as CollectorPoolStatus;
      return Promise.resolve(stored({ apiVersion: 'v1', kind: type.kind, metadata: { name } }));
    },
    get: () => Promise.resolve(null),
    delete: () => Promise.resolve(true),
  } as unknown as KubeClient;
  const reconciler = new PoolReconciler({
    client,
    pools,
    targets,
    shards: new Cache() as never,
    statefulSets: new Cache(),
    services: new Cache(),
    podDisruptionBudgets: new Cache(),
    events: { record: (_o, type, reason) => (recorded.events.push(`${type} ${reason}`), Promise.resolve()) },
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    defaultImage: 'registry.example/pglog:1',
    policy,
    fieldManager: 'test',
    now: () => Date.parse('2026-12-07T10:00:00Z'),
  });
  await reconciler.reconcile('pglog', pool.metadata.name);
  return recorded;
}

const POLICY: PoolPolicy = { allowedImages: ['registry.example/pglog'], allowedStoreSecrets: ['pglog-store', 'team-b/store-b'] };

describe('store Secret allow-list in a pool reconcile', () => {
  test('a pool naming an allowed Secret gets its StatefulSet', async () => {
    const r = await reconcileWith(samplePool({ replicas: 1 }), POLICY);
    assert.ok(r.writes.includes('StatefulSet main'), r.writes.join(', '));
  });

  test('a pool naming another Secret of its namespace: no StatefulSet, Ready False StoreSecretNotAllowed, a Warning Event', async () => {
    const r = await reconcileWith(samplePool({ replicas: 1, store: { secretRef: { name: 'billing-db', key: 'url' } } }), POLICY);
    assert.ok(!r.writes.some((w) => w.startsWith('StatefulSet')), `no StatefulSet written: ${r.writes.join(', ')}`);
    const ready = r.poolStatus?.conditions?.find((c) => c.type === 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready.reason, 'StoreSecretNotAllowed');
    assert.match(ready.message, /^spec\.store\.secretRef\.name billing-db is not a store Secret this operator allows \(pglog-store, team-b\/store-b\)/);
    assert.ok(r.events.includes('Warning StoreSecretNotAllowed'), r.events.join(', '));
  });

  test('a NAMESPACE/NAME entry allows the name in that namespace only', async () => {
    const r = await reconcileWith(samplePool({ replicas: 1, store: { secretRef: { name: 'store-b', key: 'url' } } }), POLICY);
    assert.ok(!r.writes.some((w) => w.startsWith('StatefulSet')), 'store-b is allowed in team-b, not in pglog');
  });
});
