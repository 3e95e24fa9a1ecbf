// Which work-queue keys the operator's watch events queue (controller.ts, enqueueOnChange): the
// operator's own status writes (a pool's status at the end of each pass, 10,000 target
// statuses) queue no pass; a change of spec, labels or deletion does, a pool's at once, a
// target's coalesced per namespace. Fake informers and a work queue on a fake clock.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import type { InformerEvent } from '@pglog/common/kube/informer.ts';
import { WorkQueue } from '@pglog/common/kube/workqueue.ts';
import { FakeClock } from '@pglog/test-support/fake-clock.ts';

import { type Caches, enqueueOnChange } from '../../../src/controller/controller.ts';

/** An informer that only records its handlers and lists what it is given. */
function fakeInformer(items: KubeObject[] = []): { emit(e: InformerEvent<KubeObject>): void; informer: unknown } {
  const handlers: Array<(e: InformerEvent<KubeObject>) => void> = [];
  return {
    emit: (e) => handlers.forEach((h) => h(e)),
    informer: { onChange: (h: (e: InformerEvent<KubeObject>) => void) => handlers.push(h), list: () => items },
  };
}

const object = (kind: string, name: string, over: Partial<KubeObject['metadata']> = {}, extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: 'pglog.io/v1alpha1',
  kind,
  metadata: { name, namespace: 'ns', generation: 1, resourceVersion: '1', ...over },
  ...extra,
});

describe('watch events to work-queue keys', () => {
  const setUp = () => {
    const clock = new FakeClock();
    const queue = new WorkQueue({ clock });
    const pool = object('CollectorPool', 'main');
    const f = {
      pools: fakeInformer([pool]),
      targets: fakeInformer(),
      shards: fakeInformer(),
      statefulSets: fakeInformer(),
      services: fakeInformer(),
      pdbs: fakeInformer(),
    };
    const caches = Object.fromEntries(Object.entries(f).map(([k, v]) => [k, v.informer])) as unknown as Caches;
    enqueueOnChange(caches, queue);
    /** Every key ready now, each taken and done. */
    const drain = async (): Promise<string[]> => {
      const keys: string[] = [];
      while (queue.length > 0) {
        const key = (await queue.get())!;
        queue.done(key);
        keys.push(key);
      }
      return keys;
    };
    return { clock, queue, f, pool, drain };
  };

  test("a pool's own status update queues nothing; a spec change (generation) or a deletion queues the pool at once", async () => {
    const { f, pool, queue, drain } = setUp();
    const written = { ...pool, metadata: { ...pool.metadata, resourceVersion: '2' }, status: { targets: 3 } } as KubeObject;
    f.pools.emit({ type: 'update', object: written, old: pool });
    assert.equal(queue.length, 0, 'status only');
    f.pools.emit({ type: 'update', object: { ...written, metadata: { ...written.metadata, generation: 2, resourceVersion: '3' } }, old: written });
    assert.deepEqual(await drain(), ['pool/ns/main']);
    f.pools.emit({ type: 'update', object: { ...written, metadata: { ...written.metadata, labels: { team: 'a' }, resourceVersion: '4' } }, old: written });
    assert.deepEqual(await drain(), ['pool/ns/main'], 'labels');
    f.pools.emit({ type: 'delete', object: written, old: written });
    assert.deepEqual((await drain()).sort(), ['pool/ns/main', 'unassigned/ns']);
  });

  test("a target's status write queues nothing; its spec change queues the namespace's pools and unassigned targets after a second", async () => {
    const { f, clock, queue, drain } = setUp();
    const t = object('PostgresTarget', 'db1');
    f.targets.emit({ type: 'update', object: { ...t, metadata: { ...t.metadata, resourceVersion: '2' }, status: { shard: 1 } } as KubeObject, old: t });
    clock.advance(2000);
    assert.equal(queue.length, 0);
    f.targets.emit({ type: 'update', object: { ...t, metadata: { ...t.metadata, generation: 2, resourceVersion: '3' } }, old: t });
    assert.equal(queue.length, 0, 'coalesced');
    clock.advance(1000);
    assert.deepEqual((await drain()).sort(), ['pool/ns/main', 'unassigned/ns']);
  });
});
