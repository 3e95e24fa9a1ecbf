// The Kubernetes client against a real kube-apiserver: CRUD, optimistic concurrency,
// server-side apply, the status subresource of a CRD, watch (and 410 Gone after etcd
// compaction), credentials that fail without showing the token, kubeconfig loading.
// The watch cache is off and etcd compacts every 5 s so that an old resourceVersion is
// really gone within seconds.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeObject, ResourceType, WatchEvent } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';
import { isKubeError, type KubeError } from '@pglog/common/kube/errors.ts';
import { CUSTOM_RESOURCE_DEFINITIONS } from '@pglog/common/kube/resources.ts';
import { freePort, sleep } from '@pglog/test-support/wait.ts';

import { adminConfig, useSharedKube } from '../helpers/shared-control-plane.ts';
import { testCrd } from '../helpers/test-crd.ts';

/** This file's namespace on the shared control plane (shared-control-plane.ts). */
const NS = 'kube-client';

const CONFIG_MAPS: ResourceType = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };
const NAMESPACES: ResourceType = { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', namespaced: false };
const GADGETS: ResourceType = { group: 'client.pglog.io', version: 'v1', plural: 'gadgets', kind: 'Gadget', namespaced: true };

interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}
interface Gadget extends KubeObject {
  spec?: { size?: number; color?: string };
  status?: { seen?: number };
}

const configMap = (name: string, data: Record<string, string>, labels?: Record<string, string>): ConfigMap => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: NS, ...(labels ? { labels } : {}) },
  data,
});

const GADGET_CRD = testCrd('client.pglog.io', 'Gadget', {
  spec: { size: { type: 'integer', minimum: 0 }, color: { type: 'string' } },
  status: { seen: { type: 'integer' } },
});

async function rejectsWith(p: Promise<unknown>, code: KubeError['code'], reason?: string): Promise<KubeError> {
  try {
    await p;
  } catch (e) {
    assert.ok(isKubeError(e, code), `expected ${code}, got ${String(e)}`);
    if (reason !== undefined) assert.equal(e.reason, reason, e.message);
    return e;
  }
  assert.fail(`expected a ${code} rejection`);
}

describe('Kubernetes client on a real kube-apiserver', { timeout: 240_000 }, () => {
  const kube = useSharedKube(NS, { userAgent: 'pglog-test', maxSockets: 4 });

  test('ConfigMap: create, get, list across pages, replace, conflicts, delete, 404 as null', async () => {
    const created = await kube.client.create(CONFIG_MAPS, configMap('crud-a', { k: '1' }, { suite: 'crud' }));
    assert.equal(created.metadata.namespace, NS);
    assert.ok(created.metadata.resourceVersion);
    await kube.client.create(CONFIG_MAPS, configMap('crud-b', { k: '2' }, { suite: 'crud' }));
    await kube.client.create(CONFIG_MAPS, configMap('crud-c', { k: '3' }, { suite: 'crud' }));
    await rejectsWith(kube.client.create(CONFIG_MAPS, configMap('crud-a', {})), 'KUBE_CONFLICT', 'AlreadyExists');

    const got = await kube.client.get<ConfigMap>(CONFIG_MAPS, NS, 'crud-a');
    assert.deepEqual(got?.data, { k: '1' });
    assert.equal(got?.kind, 'ConfigMap');

    // limit 1: three pages joined by continue tokens.
    const listed = await kube.client.list<ConfigMap>(CONFIG_MAPS, NS, { labelSelector: 'suite=crud', limit: 1 });
    assert.deepEqual(listed.items.map((c) => c.metadata.name).sort(), ['crud-a', 'crud-b', 'crud-c']);
    assert.ok(
      listed.items.every((c) => c.apiVersion === 'v1' && c.kind === 'ConfigMap'),
      'list items carry apiVersion and kind',
    );
    assert.match(listed.resourceVersion, /^\d+$/);
    const all = await kube.client.list<ConfigMap>(CONFIG_MAPS, undefined, { fieldSelector: 'metadata.name=crud-b' });
    assert.deepEqual(
      all.items.map((c) => c.metadata.name),
      ['crud-b'],
    );

    const replaced = await kube.client.replace(CONFIG_MAPS, { ...got, data: { k: 'one' } });
    assert.deepEqual(replaced.data, { k: 'one' });
    // got still carries the old resourceVersion: someone changed it since.
    const stale = await rejectsWith(kube.client.replace(CONFIG_MAPS, { ...got, data: { k: 'stale' } }), 'KUBE_CONFLICT', 'Conflict');
    assert.equal(stale.status, 409);
    assert.match(stale.message, /PUT \/api\/v1\/namespaces\/kube-client\/configmaps\/crud-a: HTTP 409 Conflict/);

    const patched = await kube.client.mergePatch<ConfigMap>(CONFIG_MAPS, NS, 'crud-a', { data: { extra: 'x' } });
    assert.deepEqual(patched.data, { k: 'one', extra: 'x' });

    await rejectsWith(kube.client.delete(CONFIG_MAPS, NS, 'crud-a', { preconditions: { resourceVersion: created.metadata.resourceVersion } }), 'KUBE_CONFLICT');
    assert.equal(await kube.client.delete(CONFIG_MAPS, NS, 'crud-a', { preconditions: { uid: created.metadata.uid! } }), true);
    assert.equal(await kube.client.delete(CONFIG_MAPS, NS, 'crud-a'), false);
    assert.equal(await kube.client.get(CONFIG_MAPS, NS, 'crud-a'), null);
    await rejectsWith(kube.client.mergePatch(CONFIG_MAPS, NS, 'crud-a', { data: {} }), 'KUBE_NOT_FOUND', 'NotFound');
  });

  test('cluster-scoped objects: namespaces by path without a namespace', async () => {
    const ns = await kube.client.get(NAMESPACES, undefined, 'kube-system');
    assert.equal(ns?.metadata.name, 'kube-system');
    const created = await kube.client.create(NAMESPACES, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'client-test' } });
    assert.equal(created.metadata.name, 'client-test');
  });

  test('CRD object: server-side apply twice is idempotent, status subresource apart from spec, invalid → KUBE_INVALID', async () => {
    await kube.client.apply(CUSTOM_RESOURCE_DEFINITIONS, GADGET_CRD, { fieldManager: 'pglog-test' });
    for (let i = 0; ; i++) {
      const crd = await kube.client.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
        CUSTOM_RESOURCE_DEFINITIONS,
        undefined,
        'gadgets.client.pglog.io',
      );
      if (crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      assert.ok(i < 100, 'CRD established');
      await sleep(100);
    }
    const gadget: Gadget = {
      apiVersion: 'client.pglog.io/v1',
      kind: 'Gadget',
      metadata: { name: 'g1', namespace: 'client-test' },
      spec: { size: 3, color: 'red' },
    };
    // A freshly established CRD can answer 404 for a moment while its handler starts.
    let first: Gadget | undefined;
    for (let i = 0; first === undefined; i++) {
      try {
        first = await kube.client.apply(GADGETS, gadget, { fieldManager: 'pglog-test', force: true });
      } catch (e) {
        if (!isKubeError(e, 'KUBE_NOT_FOUND') || i > 50) throw e;
        await sleep(100);
      }
    }
    const second = await kube.client.apply(GADGETS, gadget, { fieldManager: 'pglog-test', force: true });
    assert.equal(second.metadata.resourceVersion, first.metadata.resourceVersion, 'the same apply changes nothing');
    const dry = await kube.client.apply(GADGETS, { ...gadget, spec: { size: 4, color: 'red' } }, { fieldManager: 'pglog-test', force: true, dryRun: 'All' });
    assert.equal(dry.spec?.size, 4);
    assert.equal((await kube.client.get<Gadget>(GADGETS, 'client-test', 'g1'))?.spec?.size, 3, 'dry run stored nothing');
    // Another manager applying the same field conflicts unless it forces.
    await rejectsWith(kube.client.apply(GADGETS, { ...gadget, spec: { color: 'blue' } }, { fieldManager: 'someone-else' }), 'KUBE_CONFLICT', 'Conflict');

    const withStatus = await kube.client.mergePatch<Gadget>(GADGETS, 'client-test', 'g1', { status: { seen: 1 }, spec: { size: 99 } }, 'status');
    assert.equal(withStatus.status?.seen, 1);
    assert.equal(withStatus.spec?.size, 3, 'the status subresource ignores spec');
    const replaced = await kube.client.replaceStatus<Gadget>(GADGETS, { ...withStatus, status: { seen: 2 } });
    assert.equal(replaced.status?.seen, 2);
    await rejectsWith(kube.client.replaceStatus<Gadget>(GADGETS, { ...withStatus, status: { seen: 3 } }), 'KUBE_CONFLICT', 'Conflict');
    const bad = await rejectsWith(
      kube.client.apply(GADGETS, { ...gadget, spec: { size: -1 } }, { fieldManager: 'pglog-test', force: true }),
      'KUBE_INVALID',
      'Invalid',
    );
    assert.equal(bad.status, 422);
    assert.match(bad.message, /spec\.size/);
  });

  test('watch: ADDED, MODIFIED, DELETED from the list resourceVersion', async () => {
    const { resourceVersion } = await kube.client.list(CONFIG_MAPS, NS);
    const abort = new AbortController();
    const seen: WatchEvent<ConfigMap>[] = [];
    const watching = (async () => {
      for await (const e of kube.client.watch<ConfigMap>(
        CONFIG_MAPS,
        NS,
        { resourceVersion, labelSelector: 'suite=watch', timeoutSeconds: 60 },
        abort.signal,
      )) {
        seen.push(e);
        if (e.type === 'DELETED') abort.abort();
      }
    })();
    const cm = await kube.client.create(CONFIG_MAPS, configMap('watched', { v: '1' }, { suite: 'watch' }));
    await kube.client.replace(CONFIG_MAPS, { ...cm, data: { v: '2' } });
    await kube.client.delete(CONFIG_MAPS, NS, 'watched');
    await watching;
    const changes = seen.flatMap((e) => (e.type === 'BOOKMARK' ? [] : [`${e.type} ${e.object.metadata.name} ${e.object.data?.['v']}`]));
    assert.deepEqual(changes, ['ADDED watched 1', 'MODIFIED watched 2', 'DELETED watched 2']);
  });

  test('watch from a compacted resourceVersion rejects with KUBE_GONE', async () => {
    const { resourceVersion } = await kube.client.list(CONFIG_MAPS, NS);
    await kube.client.create(CONFIG_MAPS, configMap('compacted', { v: '1' }));
    const deadline = Date.now() + 40_000;
    for (;;) {
      await kube.client.mergePatch(CONFIG_MAPS, NS, 'compacted', { data: { v: String(Date.now()) } });
      try {
        const abort = new AbortController();
        setTimeout(() => abort.abort(), 2000).unref();
        for await (const _ of kube.client.watch(CONFIG_MAPS, NS, { resourceVersion }, abort.signal)) void _;
      } catch (e) {
        assert.ok(isKubeError(e, 'KUBE_GONE'), String(e));
        assert.equal(e.status, 410);
        assert.match(e.reason, /^(Expired|Gone)$/);
        return;
      }
      assert.ok(Date.now() < deadline, 'etcd compacted the old revision within 40 s');
      await sleep(1000);
    }
  });

  test('a wrong token → KUBE_FORBIDDEN, and the message does not show it', async () => {
    const secret = 'not-the-token-0123456789abcdef';
    const wrong = createKubeClient({ ...adminConfig(kube.cp), token: secret });
    try {
      const e = await rejectsWith(wrong.list(CONFIG_MAPS, NS), 'KUBE_FORBIDDEN', 'Unauthorized');
      assert.equal(e.status, 401);
      assert.ok(!e.message.includes(secret) && !String(e.stack).includes(secret));
    } finally {
      wrong.close();
    }
  });

  test('an untrusted server certificate and a closed port → KUBE_UNAVAILABLE', async () => {
    const untrusted = createKubeClient({ server: kube.cp.server, token: kube.cp.token });
    const closed = createKubeClient({ server: `https://127.0.0.1:${await freePort()}`, token: kube.cp.token }, { timeoutMs: 2000 });
    try {
      const tls = await rejectsWith(untrusted.get(CONFIG_MAPS, NS, 'x'), 'KUBE_UNAVAILABLE', 'NetworkError');
      assert.match(tls.message, /GET \/api\/v1\/namespaces\/kube-client\/configmaps\/x: failed:/);
      const refused = await rejectsWith(closed.get(CONFIG_MAPS, NS, 'x'), 'KUBE_UNAVAILABLE');
      assert.match(refused.message, /ECONNREFUSED/);
    } finally {
      untrusted.close();
      closed.close();
    }
  });

  test("the harness's kubeconfig loads and works; a rotated token file is re-read", async () => {
    const config = await loadKubeconfigFile(kube.cp.kubeconfig);
    assert.equal(config.server, kube.cp.server);
    assert.equal(config.namespace, NS);
    assert.equal(config.tlsServerName, 'kubernetes');
    const fromFile = createKubeClient(config);
    const dir = mkdtempSync(join(tmpdir(), 'pglog-token-'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'expired-token\n');
    const rotating = createKubeClient({ ...config, token: undefined, tokenFile });
    try {
      assert.ok((await fromFile.list(NAMESPACES, undefined)).items.some((n) => n.metadata.name === 'default'));
      await rejectsWith(rotating.get(NAMESPACES, undefined, NS), 'KUBE_FORBIDDEN');
      await sleep(20); // a different mtime even on coarse clocks
      writeFileSync(tokenFile, `${kube.cp.token}\n`);
      assert.equal((await rotating.get(NAMESPACES, undefined, NS))?.metadata.name, NS);
    } finally {
      fromFile.close();
      rotating.close();
    }
  });
});
