// The pool's pods pass Pod Security `restricted` on a real kube-apiserver: a Pod built from
// the StatefulSet's template is admitted by a server-side dry run in a namespace that enforces
// `restricted`, and the StatefulSet itself is accepted without a PodSecurity warning (for
// workload resources PodSecurity only warns; it enforces on Pods). As admitted, only the
// collector container holds the service account token (the sidecar none). The check has teeth: the
// same template without runAsNonRoot, or with allowPrivilegeEscalation, is refused.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { type ControlPlane, kubeBin } from '@pglog/test-support/control-plane.ts';
import { type CommandResult, runCommand } from '@pglog/test-support/run-command.ts';

import { desiredStatefulSet } from '../../src/desired/pool-resources.ts';
import type { StatefulSet } from '../../src/desired/workload-types.ts';
import { samplePool } from '../helpers/pool-fixtures.ts';
import { type SharedControlPlane, useSharedControlPlane } from '../helpers/shared-control-plane.ts';

const NAMESPACE = 'pglog-restricted';
const SERVICE_ACCOUNT = 'pglog-collector';

/** kubectl with stdin, resolving with both streams and the exit code (PodSecurity warnings go to stderr). */
function kubectl(cp: ControlPlane, args: readonly string[], stdin: string): Promise<CommandResult> {
  return runCommand(join(kubeBin(), 'kubectl'), ['--kubeconfig', cp.kubeconfig, ...args], { stdin });
}

const dryRun = (cp: ControlPlane, object: object): Promise<CommandResult> =>
  kubectl(cp, ['apply', '--dry-run=server', '-o', 'name', '-f', '-'], JSON.stringify(object));

function renderStatefulSet(): StatefulSet {
  const pool = samplePool();
  pool.metadata.namespace = NAMESPACE;
  // Rendered offline: no CollectorPool (and no CRD) exists here to own it.
  delete pool.metadata.uid;
  return desiredStatefulSet(pool, { defaultImage: 'registry.invalid/pglog:0.1.0', serviceAccountName: SERVICE_ACCOUNT });
}

/** The Pod the StatefulSet controller would create for ordinal 0. */
function podOf(sts: StatefulSet): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...sts.spec.template.metadata, name: `${sts.metadata.name}-0`, namespace: sts.metadata.namespace },
    spec: sts.spec.template.spec,
  };
}

describe("Pod Security restricted admits the pool's pods", { timeout: 180_000 }, () => {
  let cp: SharedControlPlane;
  before(async () => {
    cp = await useSharedControlPlane(NAMESPACE);
    await cp.kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: NAMESPACE, labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' } },
      }),
    );
    // The service account the pods name must exist for admission.
    await cp.kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: SERVICE_ACCOUNT, namespace: NAMESPACE } }),
    );
  });
  after(async () => {
    await cp?.stop();
  });

  test('a Pod from the StatefulSet template is admitted', async () => {
    const result = await dryRun(cp, podOf(renderStatefulSet()));
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /pod\/main-0/);
    assert.doesNotMatch(result.stderr, /PodSecurity/);
  });

  test('as admitted, only the collector container has the service account token; the sshproxy sidecar has none and no store URL', async () => {
    const result = await kubectl(cp, ['apply', '--dry-run=server', '-o', 'json', '-f', '-'], JSON.stringify(podOf(renderStatefulSet())));
    assert.equal(result.code, 0, result.stderr);
    type Mount = { name: string; mountPath: string };
    type AdmittedContainer = { name: string; volumeMounts?: Mount[]; env?: Array<{ name: string }> };
    const pod = JSON.parse(result.stdout) as {
      spec: { volumes: Array<{ name: string; projected?: unknown }>; containers: AdmittedContainer[]; initContainers: AdmittedContainer[] };
    };
    const tokenDir = '/var/run/secrets/kubernetes.io/serviceaccount';
    const tokenMounts = (c: AdmittedContainer): string[] =>
      (c.volumeMounts ?? []).filter((m) => m.mountPath.startsWith('/var/run/secrets')).map((m) => m.mountPath);
    const sidecar = pod.spec.initContainers.find((c) => c.name === 'sshproxy')!;
    const collector = pod.spec.containers.find((c) => c.name === 'collector')!;
    // The API server's ServiceAccount admission would add a token volume to every container
    // of a pod that automounts; this one does not, so the only token is the collector's.
    assert.deepEqual(tokenMounts(sidecar), [], 'the sidecar mounts no token');
    assert.deepEqual(tokenMounts(collector), [tokenDir]);
    assert.equal(pod.spec.volumes.filter((v) => v.projected !== undefined).length, 1, 'one projected volume: ours');
    assert.ok(!(sidecar.env ?? []).some((e) => e.name === 'PGLOG_STORE_URL'), 'the sidecar has no store URL');
  });

  test('the StatefulSet is accepted without a PodSecurity warning', async () => {
    const result = await dryRun(cp, renderStatefulSet());
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /statefulset\.apps\/main/);
    assert.doesNotMatch(result.stderr, /PodSecurity|[Ww]arning/);
  });

  test('without runAsNonRoot the Pod is refused, and the StatefulSet warned about', async () => {
    const sts = renderStatefulSet();
    const spec = sts.spec.template.spec;
    delete spec.securityContext!.runAsNonRoot;
    for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
      delete c.securityContext!.runAsNonRoot;
      assert.equal(c.securityContext!.readOnlyRootFilesystem, true);
    }
    const pod = await dryRun(cp, podOf(sts));
    assert.notEqual(pod.code, 0);
    assert.match(pod.stderr, /violates PodSecurity "restricted:latest"/);
    assert.match(pod.stderr, /runAsNonRoot/);
    const warned = await dryRun(cp, sts);
    assert.equal(warned.code, 0, warned.stderr);
    assert.match(warned.stderr, /would violate PodSecurity "restricted:latest"/, 'the warning check above can see warnings');
  });

  test('with allowPrivilegeEscalation the Pod is refused', async () => {
    const sts = renderStatefulSet();
    sts.spec.template.spec.containers[0]!.securityContext!.allowPrivilegeEscalation = true;
    const pod = await dryRun(cp, podOf(sts));
    assert.notEqual(pod.code, 0);
    assert.match(pod.stderr, /violates PodSecurity "restricted:latest"/);
    assert.match(pod.stderr, /allowPrivilegeEscalation/);
  });
});
