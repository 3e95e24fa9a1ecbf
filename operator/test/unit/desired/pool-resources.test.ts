// The workload objects rendered for a CollectorPool (sample pools, no API server): labels,
// selector, owner reference; the StatefulSet's collector and native sshproxy sidecar (args,
// probes, shared in-memory directory, the API token and store URL only in the collector,
// restricted security), that it ignores assignment and tuning settings; Service and PDB.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import {
  COLLECTOR_STOP_TIMEOUT_MS,
  DEFAULT_COLLECTOR_RESOURCES,
  desiredHeadlessService,
  desiredPodDisruptionBudget,
  desiredStatefulSet,
  ownerReference,
  poolLabels,
  poolSelector,
  SERVICE_ACCOUNT_DIR,
  SERVICE_ACCOUNT_VOLUME,
  SSHPROXY_DIR,
  TERMINATION_GRACE_SECONDS,
} from '../../../src/desired/pool-resources.ts';
import type { Container } from '../../../src/desired/workload-types.ts';
import { samplePool } from '../../helpers/pool-fixtures.ts';

const OPTIONS = { defaultImage: 'ghcr.io/pglog/pglog:0.1.0', serviceAccountName: 'pglog-collector' };

function containers(pool = samplePool()): { collector: Container; sidecar: Container } {
  const spec = desiredStatefulSet(pool, OPTIONS).spec.template.spec;
  const collector = spec.containers.find((c) => c.name === 'collector');
  const sidecar = spec.initContainers?.find((c) => c.name === 'sshproxy');
  assert.ok(collector !== undefined && sidecar !== undefined);
  return { collector, sidecar };
}

describe('pool labels, selector and owner reference', () => {
  it('labels name the app, the component and the pool', () => {
    assert.deepEqual(poolLabels(samplePool()), {
      'app.kubernetes.io/name': 'pglog',
      'app.kubernetes.io/component': 'collector',
      'app.kubernetes.io/instance': 'main',
      'pglog.io/pool': 'main',
    });
  });
  it('the selector string is the sorted labels, as the scale subresource reads it', () => {
    assert.equal(
      poolSelector(samplePool()),
      'app.kubernetes.io/component=collector,app.kubernetes.io/instance=main,app.kubernetes.io/name=pglog,pglog.io/pool=main',
    );
  });
  it('owner references make the pool the controller', () => {
    const pool = samplePool();
    assert.deepEqual(ownerReference({ ...pool, metadata: { ...pool.metadata, uid: 'u-1' } }), {
      apiVersion: 'pglog.io/v1alpha1',
      kind: 'CollectorPool',
      name: 'main',
      uid: 'u-1',
      controller: true,
      blockOwnerDeletion: true,
    });
    delete pool.metadata.uid;
    assert.throws(() => ownerReference(pool), { code: 'KUBE_INVALID' });
  });
});

describe('desiredStatefulSet', () => {
  it('one pod per replica, Parallel, selected by the pool labels, owned by the pool', () => {
    const pool = samplePool({ replicas: 5 });
    const sts = desiredStatefulSet(pool, OPTIONS);
    assert.equal(sts.metadata.name, 'main');
    assert.equal(sts.metadata.namespace, 'pglog');
    assert.equal(sts.spec.replicas, 5);
    assert.equal(sts.spec.podManagementPolicy, 'Parallel');
    assert.equal(sts.spec.serviceName, 'main-metrics');
    assert.deepEqual(sts.spec.selector, { matchLabels: poolLabels(pool) });
    assert.deepEqual(sts.spec.template.metadata.labels, poolLabels(pool));
    assert.deepEqual(sts.metadata.ownerReferences, [
      { apiVersion: 'pglog.io/v1alpha1', kind: 'CollectorPool', name: 'main', uid: pool.metadata.uid, controller: true, blockOwnerDeletion: true },
    ]);
    assert.equal(sts.spec.template.spec.serviceAccountName, 'pglog-collector');
    assert.equal(sts.spec.template.spec.automountServiceAccountToken, false, 'no token in every container: only the collector mounts one');
  });
  it('the collector collects the shard named like its pod, with the store URL from the Secret', () => {
    const { collector } = containers();
    assert.deepEqual(collector.command, ['pglog']);
    const args = collector.args!;
    assert.equal(args[0], 'collect');
    const flag = (name: string): string | undefined => args[args.indexOf(name) + 1];
    assert.equal(flag('--shard'), '$(POD_NAME)');
    assert.equal(flag('--namespace'), '$(POD_NAMESPACE)');
    assert.equal(flag('--sshproxy'), 'external');
    assert.equal(flag('--sshproxy-dir'), SSHPROXY_DIR);
    assert.equal(flag('--listen'), '0.0.0.0:9187');
    assert.equal(flag('--stop-timeout'), String(COLLECTOR_STOP_TIMEOUT_MS));
    assert.ok(!args.includes('--store'), 'the URL never appears in the pod spec');
    const env = new Map(collector.env!.map((e) => [e.name, e]));
    assert.deepEqual(env.get('POD_NAME')!.valueFrom, { fieldRef: { fieldPath: 'metadata.name' } });
    assert.deepEqual(env.get('POD_NAMESPACE')!.valueFrom, { fieldRef: { fieldPath: 'metadata.namespace' } });
    assert.deepEqual(env.get('PGLOG_STORE_URL')!.valueFrom, { secretKeyRef: { name: 'pglog-store', key: 'url' } });
    assert.deepEqual(collector.readinessProbe, {
      httpGet: { path: '/readyz', port: 'http-metrics' },
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 3,
    });
    // Liveness starts once the startup probe passed (up to 2 minutes of start-up), with no guessed delay.
    assert.deepEqual(collector.startupProbe, {
      httpGet: { path: '/healthz', port: 'http-metrics' },
      periodSeconds: 2,
      timeoutSeconds: 5,
      failureThreshold: 60,
    });
    assert.deepEqual(collector.livenessProbe, {
      httpGet: { path: '/healthz', port: 'http-metrics' },
      periodSeconds: 20,
      timeoutSeconds: 5,
      failureThreshold: 6,
    });
    assert.deepEqual(collector.ports, [{ name: 'http-metrics', containerPort: 9187, protocol: 'TCP' }]);
  });
  it('the sidecar is a native sidecar sharing the in-memory directory', () => {
    const { collector, sidecar } = containers();
    assert.equal(sidecar.restartPolicy, 'Always');
    assert.deepEqual(sidecar.args, ['sshproxy', '--dir', SSHPROXY_DIR]);
    // The kubelet starts the collector once the sidecar has written its first status.
    assert.deepEqual(sidecar.startupProbe, {
      exec: { command: ['test', '-s', `${SSHPROXY_DIR}/status.json`] },
      periodSeconds: 1,
      timeoutSeconds: 5,
      failureThreshold: 120,
    });
    for (const c of [collector, sidecar]) assert.ok(c.volumeMounts!.some((m) => m.name === 'sshproxy' && m.mountPath === SSHPROXY_DIR));
    const volumes = desiredStatefulSet(samplePool(), OPTIONS).spec.template.spec.volumes!;
    assert.equal(volumes.find((v) => v.name === 'sshproxy')!.emptyDir!.medium, 'Memory');
    assert.ok(volumes.find((v) => v.name === 'sshproxy')!.emptyDir!.sizeLimit !== undefined);
    assert.ok(volumes.some((v) => v.name === 'tmp'));
  });
  it('each container has a /tmp of its own: the only volume both mount is the sidecar directory', () => {
    // HOME is /tmp in the image: Node's resolver tries $HOME/.node_modules for a bare require
    // that misses, and pglog keeps its compile cache under $HOME/.cache. A /tmp the sidecar
    // could write would let it plant code the collector, which holds the API token, loads.
    const { collector, sidecar } = containers();
    const volumes = desiredStatefulSet(samplePool(), OPTIONS).spec.template.spec.volumes!;
    const tmpOf = (c: Container): string | undefined => c.volumeMounts!.find((m) => m.mountPath === '/tmp')?.name;
    assert.ok(tmpOf(collector) !== undefined && tmpOf(sidecar) !== undefined, 'both have a writable /tmp');
    assert.notEqual(tmpOf(collector), tmpOf(sidecar));
    for (const c of [collector, sidecar]) assert.ok(volumes.find((v) => v.name === tmpOf(c))?.emptyDir?.sizeLimit !== undefined, c.name);
    const shared = collector.volumeMounts!.filter((m) => sidecar.volumeMounts!.some((n) => n.name === m.name));
    assert.deepEqual(
      shared.map((m) => m.name),
      ['sshproxy'],
    );
  });
  it('the API token, CA and namespace only in the collector container; the sidecar has no token and no store URL', () => {
    const spec = desiredStatefulSet(samplePool(), OPTIONS).spec.template.spec;
    const { collector, sidecar } = containers();
    const volume = spec.volumes!.find((v) => v.name === SERVICE_ACCOUNT_VOLUME);
    assert.deepEqual(
      volume?.projected?.sources.map((s) => Object.keys(s)[0]),
      ['serviceAccountToken', 'configMap', 'downwardAPI'],
    );
    assert.equal(volume.projected.sources[0]!.serviceAccountToken?.path, 'token');
    assert.deepEqual(volume.projected.sources[1]!.configMap, { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] });
    assert.equal(volume.projected.sources[2]!.downwardAPI?.items[0]?.fieldRef.fieldPath, 'metadata.namespace');
    assert.deepEqual(
      collector.volumeMounts!.filter((m) => m.name === SERVICE_ACCOUNT_VOLUME),
      [{ name: SERVICE_ACCOUNT_VOLUME, mountPath: SERVICE_ACCOUNT_DIR, readOnly: true }],
    );
    assert.equal(SERVICE_ACCOUNT_DIR, '/var/run/secrets/kubernetes.io/serviceaccount');
    assert.ok(
      !sidecar.volumeMounts!.some((m) => m.name === SERVICE_ACCOUNT_VOLUME || m.mountPath.startsWith('/var/run/secrets')),
      'the sidecar mounts no token',
    );
    assert.ok(
      !(sidecar.env ?? []).some((e) => e.name === 'PGLOG_STORE_URL' || e.valueFrom?.secretKeyRef !== undefined),
      'the sidecar gets no store URL and no Secret',
    );
  });

  it('restricted Pod Security settings on the pod and both containers', () => {
    const pod = desiredStatefulSet(samplePool(), OPTIONS).spec.template.spec;
    assert.equal(pod.securityContext!.runAsNonRoot, true);
    assert.equal(pod.securityContext!.runAsUser, 65532);
    assert.deepEqual(pod.securityContext!.seccompProfile, { type: 'RuntimeDefault' });
    for (const c of Object.values(containers())) {
      assert.equal(c.securityContext!.allowPrivilegeEscalation, false, c.name);
      assert.equal(c.securityContext!.readOnlyRootFilesystem, true, c.name);
      assert.deepEqual(c.securityContext!.capabilities, { drop: ['ALL'] }, c.name);
    }
    assert.ok(pod.terminationGracePeriodSeconds! * 1000 > COLLECTOR_STOP_TIMEOUT_MS);
    assert.equal(pod.terminationGracePeriodSeconds, TERMINATION_GRACE_SECONDS);
  });
  it('images and resources from the pool, defaults otherwise', () => {
    const { collector, sidecar } = containers();
    assert.equal(collector.image, OPTIONS.defaultImage);
    assert.equal(sidecar.image, OPTIONS.defaultImage);
    assert.deepEqual(collector.resources, DEFAULT_COLLECTOR_RESOURCES);
    const custom = containers(
      samplePool({
        collector: { image: 'c:1', imagePullPolicy: 'Always', resources: { limits: { memory: '2Gi' } } },
        sidecar: { image: 's:1', resources: { requests: { cpu: '10m' } } },
      }),
    );
    assert.equal(custom.collector.image, 'c:1');
    assert.equal(custom.collector.imagePullPolicy, 'Always');
    assert.equal(custom.sidecar.image, 's:1');
    assert.deepEqual(custom.collector.resources, { limits: { memory: '2Gi' } });
    assert.deepEqual(custom.sidecar.resources, { requests: { cpu: '10m' } });
    assert.equal(
      containers(samplePool({ collector: { image: 'c:2', imagePullPolicy: 'IfNotPresent' } })).sidecar.image,
      'c:2',
      'the sidecar defaults to the collector image',
    );
  });
  it('does not change with anything but replicas and the pods settings (no roll on rebalance or tuning)', () => {
    const a = desiredStatefulSet(samplePool(), OPTIONS);
    const b = desiredStatefulSet(
      samplePool({
        transport: { promoteAboveBitsPerSecond: 9e6, demoteBelowBitsPerSecond: 1e6, minDwellSeconds: 5, proxyCapacityPerPod: 2 },
        sharding: { loadFactor: 2, minWeightBytesPerSecond: 10 },
        nodeTuning: { mode: 'explicit', uvThreadpoolSize: 16, maxOldSpaceSizeMiB: 900, maxSemiSpaceSizeMiB: 32 },
      }),
      OPTIONS,
    );
    assert.deepEqual(b, a);
    assert.deepEqual(desiredStatefulSet(samplePool(), OPTIONS), a, 'deterministic');
  });
  it('a pool without a uid (rendered offline) gets no owner reference', () => {
    const pool = samplePool();
    delete pool.metadata.uid;
    assert.equal(desiredStatefulSet(pool, { defaultImage: 'x' }).metadata.ownerReferences, undefined);
  });
});

describe('desiredHeadlessService and desiredPodDisruptionBudget', () => {
  it('headless service <pool>-metrics with the metrics port', () => {
    const svc = desiredHeadlessService(samplePool());
    assert.equal(svc.metadata.name, 'main-metrics');
    assert.equal(svc.spec.clusterIP, 'None');
    assert.deepEqual(svc.spec.selector, poolLabels(samplePool()));
    assert.deepEqual(svc.spec.ports, [{ name: 'http-metrics', port: 9187, targetPort: 'http-metrics', protocol: 'TCP' }]);
    assert.equal(svc.metadata.ownerReferences![0]!.controller, true);
  });
  it('PDB: at most one pod down', () => {
    const pdb = desiredPodDisruptionBudget(samplePool());
    assert.equal(pdb.spec.maxUnavailable, 1);
    assert.deepEqual(pdb.spec.selector, { matchLabels: poolLabels(samplePool()) });
  });
});
