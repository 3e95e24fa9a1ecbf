// The informer against a real kube-apiserver: sync, add/update/delete events, a relist after
// a real 410 Gone (the watch is held back while an object is deleted and etcd compacts; the
// watch cache is off so the old resourceVersion reaches etcd) that emits the missed delete,
// and recovery after the API server becomes unreachable: the client goes through a TCP proxy
// in this test that is closed and opened again (the harness cannot restart the apiserver).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient, KubeObject, ResourceType, WatchEvent, WatchOptions } from '@pglog/common/kube/client-types.ts';
import { isKubeError } from '@pglog/common/kube/errors.ts';
import { Informer, type InformerEvent, stripManagedFields } from '@pglog/common/kube/informer.ts';
import { sleep } from '@pglog/test-support/wait.ts';

import { adminConfig, useSharedKube } from '../helpers/shared-control-plane.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';

/** This file's namespace on the shared control plane (shared-control-plane.ts). */
const NS = 'kube-informer';

const CONFIG_MAPS: ResourceType = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };
interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}
const configMap = (name: string, suite: string, v: string): ConfigMap => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: NS, labels: { suite } },
  data: { v },
});

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for: ${what}`);
    await sleep(25);
  }
}

const summary = (events: InformerEvent<ConfigMap>[]): string[] =>
  events.map((e) => `${e.type} ${e.object.metadata.name} ${e.object.data?.['v']}${e.old ? ` (was ${e.old.data?.['v']})` : ''}`);

/** The names of the objects in an informer's cache, sorted. */
const cachedNames = (informer: Informer<ConfigMap>): string[] =>
  informer
    .list()
    .map((c) => c.metadata.name)
    .sort();

/** An informer of this file's ConfigMaps labelled suite=SUITE, with the lines it logs. */
function loggingInformer(client: KubeClient, suite: string): { informer: Informer<ConfigMap>; logs: string[] } {
  const logs: string[] = [];
  const informer = new Informer<ConfigMap>(client, CONFIG_MAPS, {
    namespace: NS,
    labelSelector: `suite=${suite}`,
    log: (level, msg) => logs.push(`${level} ${msg}`),
  });
  return { informer, logs };
}

/** A client whose watches can be held: while held, a new watch waits, then starts from the resourceVersion it was asked for. */
function holdableWatches(client: KubeClient): { client: KubeClient; hold(): void; release(): void; lastWatchFrom(): string | undefined } {
  let held: { promise: Promise<void>; release: () => void } | undefined;
  const current = new Set<AbortController>();
  let lastFrom: string | undefined;
  const wrapped: KubeClient = Object.create(client) as KubeClient;
  wrapped.watch = async function* <T extends KubeObject>(
    type: ResourceType,
    ns: string | undefined,
    options: WatchOptions,
    signal: AbortSignal,
  ): AsyncGenerator<WatchEvent<T>> {
    while (held !== undefined && !signal.aborted) await Promise.race([held.promise, new Promise((r) => signal.addEventListener('abort', r, { once: true }))]);
    lastFrom = options.resourceVersion;
    const inner = new AbortController();
    const onAbort = (): void => inner.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    current.add(inner);
    try {
      yield* client.watch<T>(type, ns, options, inner.signal);
    } finally {
      current.delete(inner);
      signal.removeEventListener('abort', onAbort);
    }
  };
  return {
    client: wrapped,
    hold() {
      let release!: () => void;
      held = {
        promise: new Promise<void>((r) => {
          release = r;
        }),
        release,
      };
      // End the running watch as if the server closed it: the informer watches again and waits.
      for (const c of current) c.abort();
    },
    release() {
      const h = held;
      held = undefined;
      h?.release();
    },
    lastWatchFrom: () => lastFrom,
  };
}

describe('Informer on a real kube-apiserver', { timeout: 240_000 }, () => {
  const kube = useSharedKube(NS);

  test('syncs, then emits add, update (with the old object) and delete; a throwing handler is logged and harmless', async () => {
    await kube.client.create(CONFIG_MAPS, configMap('pre-1', 'events', '1'));
    await kube.client.create(CONFIG_MAPS, configMap('pre-2', 'events', '1'));
    await kube.client.create(CONFIG_MAPS, configMap('other', 'not-selected', '1'));
    const { informer, logs } = loggingInformer(kube.client, 'events');
    const events: InformerEvent<ConfigMap>[] = [];
    informer.onChange(() => {
      throw new Error('handler bug');
    });
    informer.onChange((e) => events.push(e));
    assert.deepEqual(informer.health().ok, false, 'not ready before the first list');
    const abort = new AbortController();
    const running = informer.run(abort.signal);
    await until('synced', () => informer.hasSynced());
    assert.deepEqual(cachedNames(informer), ['pre-1', 'pre-2']);
    assert.equal(informer.get(NS, 'pre-1')?.data?.['v'], '1');
    assert.equal(informer.get(NS, 'other'), undefined);
    assert.deepEqual(informer.health().ok, true);

    const created = await kube.client.create(CONFIG_MAPS, configMap('live', 'events', '1'));
    await kube.client.replace(CONFIG_MAPS, { ...created, data: { v: '2' } });
    await kube.client.delete(CONFIG_MAPS, NS, 'pre-1');
    await until('three watch events', () => events.length >= 5);
    assert.deepEqual(summary(events).slice(0, 2).sort(), ['add pre-1 1', 'add pre-2 1']);
    assert.deepEqual(summary(events).slice(2), ['add live 1', 'update live 2 (was 1)', 'delete pre-1 1 (was 1)']);
    assert.equal(informer.get(NS, 'pre-1'), undefined);
    assert.equal(informer.get(NS, 'live')?.data?.['v'], '2');
    assert.ok(logs.filter((l) => l === 'error an informer event handler threw').length >= 5, logs.join('\n'));
    abort.abort();
    await running;
  });

  test("a transform (stripManagedFields) applies to listed and watched objects; a replace from the cache keeps the server's managedFields", async () => {
    await kube.client.create(CONFIG_MAPS, configMap('strip-1', 'strip', '1'));
    const informer = new Informer<ConfigMap>(kube.client, CONFIG_MAPS, { namespace: NS, labelSelector: 'suite=strip', transform: stripManagedFields });
    const seen: ConfigMap[] = [];
    informer.onChange((e) => seen.push(e.object));
    const abort = new AbortController();
    const running = informer.run(abort.signal);
    await until('synced', () => informer.hasSynced());
    const managed = (o: KubeObject | null | undefined): unknown => (o?.metadata as { managedFields?: unknown } | undefined)?.managedFields;
    assert.ok(managed(await kube.client.get<ConfigMap>(CONFIG_MAPS, NS, 'strip-1')) !== undefined, 'the server keeps managedFields');
    assert.equal(managed(informer.get(NS, 'strip-1')), undefined, 'listed: stripped');
    await kube.client.create(CONFIG_MAPS, configMap('strip-2', 'strip', '1'));
    await until('the watched add', () => informer.get(NS, 'strip-2') !== undefined);
    assert.equal(managed(informer.get(NS, 'strip-2')), undefined, 'watched: stripped');
    assert.ok(
      seen.every((o) => managed(o) === undefined),
      'handlers see the transformed objects',
    );
    // The operator replaces objects it read from the cache (CollectorShards): the server keeps their managedFields.
    await kube.client.replace(CONFIG_MAPS, { ...informer.get(NS, 'strip-1')!, data: { v: '2' } });
    const after = await kube.client.get<ConfigMap>(CONFIG_MAPS, NS, 'strip-1');
    assert.equal(after?.data?.['v'], '2');
    assert.ok(Array.isArray(managed(after)) && (managed(after) as unknown[]).length > 0, 'managedFields kept');
    abort.abort();
    await running;
  });

  test('a list in pages (pageSize 3 over 7 objects) syncs every object, then watches from where the list ended', async () => {
    for (let i = 0; i < 7; i++) await kube.client.create(CONFIG_MAPS, configMap(`page-${i}`, 'pages', '1'));
    const informer = new Informer<ConfigMap>(kube.client, CONFIG_MAPS, { namespace: NS, labelSelector: 'suite=pages', pageSize: 3 });
    const abort = new AbortController();
    const running = informer.run(abort.signal);
    await until('synced', () => informer.hasSynced());
    assert.deepEqual(cachedNames(informer), ['page-0', 'page-1', 'page-2', 'page-3', 'page-4', 'page-5', 'page-6']);
    await kube.client.create(CONFIG_MAPS, configMap('page-7', 'pages', '1'));
    await until('the watched add', () => informer.get(NS, 'page-7') !== undefined);
    abort.abort();
    await running;
  });

  test('a watch resumed from a compacted resourceVersion gets 410: the relist emits the delete it missed', async () => {
    await kube.client.create(CONFIG_MAPS, configMap('kept', 'gone', '1'));
    await kube.client.create(CONFIG_MAPS, configMap('deleted-meanwhile', 'gone', '1'));
    const holdable = holdableWatches(kube.client);
    const { informer, logs } = loggingInformer(holdable.client, 'gone');
    const events: InformerEvent<ConfigMap>[] = [];
    informer.onChange((e) => events.push(e));
    const abort = new AbortController();
    const running = informer.run(abort.signal);
    await until('synced', () => informer.hasSynced());
    await until('watching', () => holdable.lastWatchFrom() !== undefined);
    holdable.hold();
    await sleep(100);
    const from = holdable.lastWatchFrom()!;
    await kube.client.delete(CONFIG_MAPS, NS, 'deleted-meanwhile');
    await kube.client.create(CONFIG_MAPS, configMap('created-meanwhile', 'gone', '1'));
    // Wait until etcd has compacted past the informer's resourceVersion (every 5 s).
    const deadline = Date.now() + 60_000;
    for (;;) {
      await kube.client.mergePatch(CONFIG_MAPS, NS, 'kept', { metadata: { annotations: { tick: String(Date.now()) } } });
      try {
        const probe = new AbortController();
        setTimeout(() => probe.abort(), 500).unref();
        for await (const _ of kube.client.watch(CONFIG_MAPS, NS, { resourceVersion: from, labelSelector: 'suite=gone' }, probe.signal)) void _;
      } catch (e) {
        if (isKubeError(e, 'KUBE_GONE')) break;
        throw e;
      }
      assert.ok(Date.now() < deadline, 'etcd compacted within 60 s');
      await sleep(1000);
    }
    assert.equal(informer.get(NS, 'deleted-meanwhile')?.metadata.name, 'deleted-meanwhile', 'the cache still has it while the watch is held');
    const before = events.length;
    holdable.release();
    await until('the relist emitted the missed delete', () =>
      events.slice(before).some((e) => e.type === 'delete' && e.object.metadata.name === 'deleted-meanwhile'),
    );
    await until('and the missed add', () => events.slice(before).some((e) => e.type === 'add' && e.object.metadata.name === 'created-meanwhile'));
    assert.ok(logs.includes('info resourceVersion too old, listing again'), logs.join('\n'));
    assert.deepEqual(cachedNames(informer), ['created-meanwhile', 'kept']);
    assert.equal(informer.health().ok, true);
    abort.abort();
    await running;
  });

  test('the API server unreachable: health false with the reason, then recovery and the changes made meanwhile', async () => {
    const proxy = await startTcpProxy(new URL(kube.cp.server));
    const viaProxy = createKubeClient({ ...adminConfig(kube.cp), server: `https://127.0.0.1:${proxy.port}` }, { timeoutMs: 2000 });
    const informer = new Informer<ConfigMap>(viaProxy, CONFIG_MAPS, { namespace: NS, labelSelector: 'suite=outage', backoffBaseMs: 50, backoffCapMs: 400 });
    const events: InformerEvent<ConfigMap>[] = [];
    informer.onChange((e) => events.push(e));
    const abort = new AbortController();
    const running = informer.run(abort.signal);
    try {
      await until('synced', () => informer.hasSynced() && informer.health().ok);
      await proxy.close();
      await until('unhealthy', () => !informer.health().ok);
      assert.match(informer.health().reason, /configmaps: .*(ECONNREFUSED|ECONNRESET|socket hang up|failed)/);
      await kube.client.create(CONFIG_MAPS, configMap('during-outage', 'outage', '1'));
      await sleep(500);
      assert.equal(informer.health().ok, false, 'still unhealthy while unreachable');
      await proxy.open();
      await until('healthy again', () => informer.health().ok);
      await until('the add made during the outage', () => events.some((e) => e.type === 'add' && e.object.metadata.name === 'during-outage'));
      await kube.client.delete(CONFIG_MAPS, NS, 'during-outage');
      await until('and watching again', () => events.some((e) => e.type === 'delete'));
    } finally {
      abort.abort();
      await running;
      viaProxy.close();
      await proxy.close();
    }
  });
});
