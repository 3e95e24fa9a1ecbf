// The operator's tests run against a real control plane: this checks the harness itself.
// etcd + kube-apiserver serve the API with RBAC and a verified TLS connection; a
// CustomResourceDefinition with the scale subresource is served; kube-controller-manager
// turns a StatefulSet into pods (Pending: there is no scheduler or kubelet, on purpose) and
// garbage-collects them through owner references when the StatefulSet is deleted.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { type SharedControlPlane, useSharedControlPlane } from '../helpers/shared-control-plane.ts';
import { testCrd } from '../helpers/test-crd.ts';

/** This file's namespace on the shared control plane (shared-control-plane.ts). */
const NS = 'harness';

const CRD = testCrd(
  'harness.pglog.io',
  'Widget',
  { spec: { replicas: { type: 'integer', minimum: 0 } }, status: { replicas: { type: 'integer' }, selector: { type: 'string' } } },
  { status: {}, scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' } },
);

const statefulSet = (replicas: number): object => ({
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  metadata: { name: 'harness', namespace: NS },
  spec: {
    replicas,
    serviceName: 'harness',
    podManagementPolicy: 'Parallel',
    selector: { matchLabels: { app: 'harness' } },
    template: { metadata: { labels: { app: 'harness' } }, spec: { containers: [{ name: 'c', image: 'registry.invalid/none:1' }] } },
  },
});

describe('the real control plane for operator tests', { timeout: 180_000 }, () => {
  let cp: SharedControlPlane;
  before(async () => {
    cp = await useSharedControlPlane(NS);
  });
  after(async () => {
    await cp?.stop();
  });

  test('kube-apiserver on etcd: namespaces, version, RBAC, TLS verified by the kubeconfig', async () => {
    const ns = await cp.kubectl(['get', 'namespaces', '-o', 'name']);
    assert.match(ns, /namespace\/kube-system/);
    const version = JSON.parse(await cp.kubectl(['version', '-o', 'json'])) as { serverVersion: { gitVersion: string } };
    assert.equal(version.serverVersion.gitVersion, 'v1.37.2');
    assert.equal((await cp.kubectl(['auth', 'can-i', 'create', 'statefulsets'])).trim(), 'yes');
  });

  test('a CRD with the scale subresource is served: kubectl scale works on it', async () => {
    await cp.kubectl(['apply', '-f', '-'], JSON.stringify(CRD));
    await cp.kubectl(['wait', '--for=condition=Established', 'crd/widgets.harness.pglog.io', '--timeout=30s']);
    await cp.kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({ apiVersion: 'harness.pglog.io/v1', kind: 'Widget', metadata: { name: 'w1' }, spec: { replicas: 5 } }),
    );
    await cp.kubectl(['scale', 'widget/w1', '--replicas', '6']);
    assert.equal((await cp.kubectl(['get', 'widget/w1', '-o', 'jsonpath={.spec.replicas}'])).trim(), '6');
  });

  test('kube-controller-manager: a StatefulSet gets its pods, deleting it collects them', async () => {
    await cp.kubectl(['apply', '-f', '-'], JSON.stringify(statefulSet(3)));
    const deadline = Date.now() + 60_000;
    let pods = '';
    while (Date.now() < deadline) {
      pods = await cp.kubectl(['get', 'pods', '-l', 'app=harness', '-o', 'name']);
      if (pods.trim().split('\n').filter(Boolean).length === 3) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    // Parallel pod management: all three at once (OrderedReady would wait for a Ready pod,
    // and without a kubelet none ever is).
    assert.deepEqual(pods.trim().split('\n').sort(), ['pod/harness-0', 'pod/harness-1', 'pod/harness-2'], cp.logs().slice(-3000));
    await cp.kubectl(['delete', 'statefulset/harness', '--cascade=background']);
    const gone = Date.now() + 60_000;
    while (Date.now() < gone && (await cp.kubectl(['get', 'pods', '-l', 'app=harness', '-o', 'name'])).trim() !== '') {
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal((await cp.kubectl(['get', 'pods', '-l', 'app=harness', '-o', 'name'])).trim(), '', 'pods garbage-collected');
  });
});
