// Smoke test of the real node of helpers/real-node.ts (part of `make e2e` and `make test`): a kubelet with
// containerd, CNI and kube-proxy on this machine registers Ready, and the built image
// (PGLOG_TEST_IMAGE, copied from Docker into the node's containerd) runs in pods of a
// namespace that enforces Pod Security `restricted`, admitted with 0 warnings:
//   - `pglog help` in a pod with restartPolicy Never completes;
//   - a pod with a native sidecar (an init container with restartPolicy Always), an emptyDir
//     of medium Memory (a real tmpfs) and the projected service account token reaches the API
//     server through the `kubernetes` Service's ClusterIP, which kube-proxy's iptables rules
//     route, and `kubectl logs` (API server → kubelet) shows what it did.
// Nothing is skipped: without Docker, the image or the node's tools the test fails and says why.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { type E2eCluster, startE2eCluster } from '@pglog/test-support/e2e-cluster.ts';
import type { RealNode } from '@pglog/test-support/real-node.ts';
import { sleep } from '@pglog/test-support/wait.ts';

const IMAGE = process.env['PGLOG_TEST_IMAGE'];
const DOCKER = process.env['PGLOG_TEST_DOCKER'] ?? 'docker';
const NS = 'pglog-smoke';

const restricted = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
};

async function podPhase(node: RealNode, name: string, want: string): Promise<void> {
  for (;;) {
    const phase = await node.cp.kubectl(['-n', NS, 'get', 'pod', name, '-o', 'jsonpath={.status.phase}']);
    if (phase === want) return;
    if (phase === 'Failed') assert.fail(`pod ${name} failed:\n${await node.cp.kubectl(['-n', NS, 'describe', 'pod', name])}`);
    await sleep(500);
  }
}

function pod(name: string, spec: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: NS },
    spec: {
      restartPolicy: 'Never',
      securityContext: { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      ...spec,
    },
  });
}

// Run in the pod by Node (the image's own runtime): reads what the sidecar wrote on the shared
// tmpfs, then asks the API server who it is (SelfSubjectReview), through the Service's ClusterIP
// with the projected token and CA.
const probeScript = `
const fs = require('node:fs'); const https = require('node:https');
const sa = '/var/run/secrets/kubernetes.io/serviceaccount';
const mount = fs.readFileSync('/proc/mounts', 'utf8').split('\\n').find((l) => l.split(' ')[1] === '/shared');
console.log('shared: ' + mount.split(' ')[2] + ' ' + fs.readFileSync('/shared/sidecar', 'utf8'));
const req = https.request({ host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT,
  path: '/apis/authentication.k8s.io/v1/selfsubjectreviews', method: 'POST', ca: fs.readFileSync(sa + '/ca.crt'),
  headers: { authorization: 'Bearer ' + fs.readFileSync(sa + '/token', 'utf8'), 'content-type': 'application/json' } }, (res) => {
  let body = ''; res.on('data', (c) => { body += c; });
  res.on('end', () => { console.log('via ' + process.env.KUBERNETES_SERVICE_HOST + ': ' + res.statusCode + ' ' + JSON.parse(body).status.userInfo.username); });
});
req.end(JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }));
`;

describe('a real node (kubelet, containerd, CNI, kube-proxy) running the built image', () => {
  let cluster: E2eCluster | undefined;
  let node: RealNode;

  // The node, the image imported, a namespace that enforces and warns `restricted`, its
  // default ServiceAccount there: the same set-up as the end-to-end suite's.
  before(async () => {
    cluster = await startE2eCluster({ namespace: NS, image: IMAGE, docker: DOCKER });
    node = cluster.node;
  });

  after(async () => {
    await cluster?.stop();
  });

  test('the node registers Ready', async () => {
    for (;;) {
      const ready = await node.cp.kubectl(['get', 'node', node.nodeName, '-o', 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']).catch(() => '');
      if (ready === 'True') return;
      await sleep(500);
    }
  });

  test('`pglog help` completes in a restricted pod, admitted with 0 warnings', async () => {
    const { stderr } = await node.kubectlWithWarnings(
      ['apply', '-f', '-'],
      pod('help', {
        containers: [{ name: 'pglog', image: IMAGE, imagePullPolicy: 'Never', args: ['help'], securityContext: restricted }],
      }),
    );
    assert.equal(stderr.trim(), '', 'no Pod Security warning');
    await podPhase(node, 'help', 'Succeeded');
    assert.match(await node.cp.kubectl(['-n', NS, 'logs', 'help']), /collect/);
  });

  test('a pod with a native sidecar, a memory emptyDir and a projected token reaches the API server through its ClusterIP', async () => {
    const shared = [{ name: 'shared', mountPath: '/shared' }];
    const { stderr } = await node.kubectlWithWarnings(
      ['apply', '-f', '-'],
      pod('probe', {
        volumes: [{ name: 'shared', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } }],
        initContainers: [
          {
            name: 'sidecar',
            image: IMAGE,
            imagePullPolicy: 'Never',
            restartPolicy: 'Always',
            securityContext: restricted,
            volumeMounts: shared,
            // Node is PID 1 here (command replaces the image's tini entrypoint), and PID 1 has no
            // default SIGTERM action: without the handler the pod waits out its grace period.
            command: [
              'node',
              '-e',
              "require('node:fs').writeFileSync('/shared/sidecar', 'written by the sidecar'); process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1e9)",
            ],
            // The main container starts only once the sidecar is started, i.e. has written the file.
            startupProbe: { exec: { command: ['cat', '/shared/sidecar'] }, periodSeconds: 1 },
          },
        ],
        containers: [
          { name: 'main', image: IMAGE, imagePullPolicy: 'Never', command: ['node', '-e', probeScript], securityContext: restricted, volumeMounts: shared },
        ],
      }),
    );
    assert.equal(stderr.trim(), '', 'no Pod Security warning');
    await podPhase(node, 'probe', 'Succeeded');
    const logs = await node.cp.kubectl(['-n', NS, 'logs', 'probe', '-c', 'main']);
    assert.match(logs, /^shared: tmpfs written by the sidecar$/m);
    assert.match(logs, new RegExp(`^via 10\\.98\\.0\\.1: 201 system:serviceaccount:${NS}:default$`, 'm'));
  });
});
