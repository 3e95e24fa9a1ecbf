// Events on a real kube-apiserver: core/v1 Events that `kubectl describe` shows, the same
// event counted on one Event within the window and a new Event after it, and a recorder that
// cannot write logs instead of throwing.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { CORE_EVENTS, type CoreEvent, EventRecorder } from '@pglog/common/kube/events.ts';

import { adminConfig, useSharedKube } from '../helpers/shared-control-plane.ts';

/** This file's namespace on the shared control plane (shared-control-plane.ts). */
const NS = 'kube-events';

const CONFIG_MAPS: ResourceType = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };
const NAMESPACES: ResourceType = { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', namespaced: false };

describe('EventRecorder on a real kube-apiserver', { timeout: 120_000 }, () => {
  const kube = useSharedKube(NS);

  const eventsAbout = async (uid: string): Promise<CoreEvent[]> =>
    (await kube.client.list<CoreEvent>(CORE_EVENTS, undefined, { fieldSelector: `involvedObject.uid=${uid}` })).items;

  test('the same event within the window bumps count and lastTimestamp; kubectl describe shows it; after the window a new Event', async () => {
    const cm = await kube.client.create<KubeObject>(CONFIG_MAPS, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'described', namespace: NS } });
    let now = Date.UTC(2026, 10, 23, 12, 0, 0);
    const recorder = new EventRecorder(kube.client, { component: 'pglog-operator', instance: 'operator-0', clock: { now: () => now } });
    // Concurrent records of one event still make one Event.
    await Promise.all([
      recorder.record(cm, 'Warning', 'StoreUnavailable', 'cannot reach the store'),
      recorder.record(cm, 'Warning', 'StoreUnavailable', 'cannot reach the store'),
    ]);
    now += 60_000;
    await recorder.record(cm, 'Warning', 'StoreUnavailable', 'cannot reach the store');
    await recorder.record(cm, 'Normal', 'Rebalanced', '2 targets moved to another shard');
    let events = await eventsAbout(cm.metadata.uid!);
    assert.equal(events.length, 2);
    const warning = events.find((e) => e.reason === 'StoreUnavailable')!;
    assert.equal(warning.count, 3);
    assert.equal(warning.type, 'Warning');
    assert.equal(warning.firstTimestamp, '2026-11-23T12:00:00Z');
    assert.equal(warning.lastTimestamp, '2026-11-23T12:01:00Z');
    assert.deepEqual(warning.source, { component: 'pglog-operator', host: 'operator-0' });
    assert.equal(warning.reportingComponent, 'pglog-operator');
    assert.equal(warning.involvedObject.name, 'described');
    assert.equal(warning.metadata.namespace, NS);

    const described = await kube.cp.kubectl(['describe', 'configmap', 'described']);
    assert.match(described, /Warning\s+StoreUnavailable\s.*pglog-operator\s+cannot reach the store/);
    assert.match(described, /Normal\s+Rebalanced\s.*2 targets moved to another shard/);

    now += 11 * 60_000;
    await recorder.record(cm, 'Warning', 'StoreUnavailable', 'cannot reach the store');
    events = await eventsAbout(cm.metadata.uid!);
    assert.deepEqual(
      events
        .filter((e) => e.reason === 'StoreUnavailable')
        .map((e) => e.count)
        .sort(),
      [1, 3],
    );
  });

  test('an Event that disappeared (expired) is written again; a cluster-scoped object gets its Events in default', async () => {
    const ns = (await kube.client.get<KubeObject>(NAMESPACES, undefined, 'kube-system'))!;
    const recorder = new EventRecorder(kube.client, { component: 'pglog-operator', instance: 'operator-0' });
    await recorder.record(ns, 'Normal', 'Seen', 'looked at it');
    const [first] = await eventsAbout(ns.metadata.uid!);
    assert.equal(first?.metadata.namespace, 'default');
    await kube.client.delete(CORE_EVENTS, 'default', first.metadata.name);
    await recorder.record(ns, 'Normal', 'Seen', 'looked at it');
    const again = await eventsAbout(ns.metadata.uid!);
    assert.equal(again.length, 1);
    assert.equal(again[0]?.count, 1);
    assert.notEqual(again[0]?.metadata.name, first.metadata.name);
  });

  test('a recorder that cannot write logs and resolves: never throws', async () => {
    const denied = createKubeClient({ ...adminConfig(kube.cp), token: 'wrong-token-abcdef' });
    const logs: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = [];
    const recorder = new EventRecorder(denied, { component: 'pglog-operator', instance: 'x', log: (level, msg, fields) => logs.push({ level, msg, fields }) });
    try {
      await recorder.record({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'n', namespace: NS, uid: 'u' } }, 'Normal', 'R', 'note');
    } finally {
      denied.close();
    }
    assert.equal(logs.length, 1);
    assert.equal(logs[0]?.level, 'warn');
    assert.match(String(logs[0]?.fields['error']), /POST \/api\/v1\/namespaces\/kube-events\/events: HTTP 401 Unauthorized/);
    assert.ok(!JSON.stringify(logs).includes('wrong-token-abcdef'));
  });
});
