// The test node agent (helpers/node-agent.ts) against a real control plane with the
// controller-manager: a StatefulSet of 2 replicas whose pods are tiny HTTP servers (`node -e`)
// with a native sidecar becomes 2 Running/Ready pods with distinct pod IPs; the environment
// (fieldRef, secretKeyRef, `$(VAR)`), the emptyDir mapping and the pod's service account token
// are what the pod sees; a container that exits is restarted; scale to 1 removes pod -1, its
// processes and its object.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { createKubeClient } from '../../src/kube/client.ts';
import type { KubeClient, KubeObject } from '../../src/kube/client-types.ts';
import { loadKubeconfigFile } from '../../src/kube/config.ts';
import { PODS, STATEFUL_SETS } from '../../src/kube/resources.ts';
import { kubeBin, startControlPlane, type ControlPlane } from '../helpers/control-plane.ts';
import { eventually } from '../helpers/fleet.ts';
import { startNodeAgent, type NodeAgent, type PodInfo } from '../helpers/node-agent.ts';

const NS = 'agent';
const run = promisify(execFile);

/** Listens on argv[1] (host:port), writes argv[2], answers every request with what it sees; /exit exits 3. */
const SERVER = `
const http = require('node:http'), fs = require('node:fs');
const [listen, file] = process.argv.slice(1);
fs.writeFileSync(file, process.env.POD_NAME + ' ' + process.env.WORD);
http.createServer((req, res) => {
  if (req.url === '/exit') { res.end('bye'); setTimeout(() => process.exit(3), 50); return; }
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ env: process.env, argv: process.argv.slice(1) }));
}).listen(Number(listen.slice(listen.lastIndexOf(':') + 1)), listen.slice(0, listen.lastIndexOf(':')));
`;
const SIDECAR = `require('node:fs').writeFileSync(process.argv[1], 'up'); setInterval(() => undefined, 1000);`;

interface PodObject extends KubeObject {
  spec: { nodeName?: string };
  status?: {
    phase?: string; podIP?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: Array<{ name: string; ready: boolean; restartCount: number }>;
    initContainerStatuses?: Array<{ name: string; ready: boolean; restartCount: number }>;
  };
}

const isReady = (p: PodObject | null): boolean => p?.status?.phase === 'Running' && p.status.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

async function fetchJson(url: string): Promise<Record<string, unknown>> {
  const res = await fetch(url);
  return (await res.json()) as Record<string, unknown>;
}

describe('test node agent: a StatefulSet run as local processes', { timeout: 150_000 }, () => {
  let cp: ControlPlane;
  let client: KubeClient & { close(): void };
  let agent: NodeAgent | undefined;
  const started = Date.now();
  const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const pod = (name: string): Promise<PodObject | null> => client.get<PodObject>(PODS, NS, name);
  const describePods = (): string => ['web-0', 'web-1'].map((n) => `--- ${n}\n${agent?.output(n) ?? ''}`).join('\n') + `\n${JSON.stringify(agent?.pods(), null, 1)}`;
  const info = (name: string): PodInfo => {
    const found = agent!.pods().find((p) => p.name === name);
    assert.ok(found, `the agent runs ${name}`);
    return found;
  };

  before(async () => {
    cp = await startControlPlane({ controllerManager: true });
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    await cp.kubectl(['create', 'namespace', NS]);
    await cp.kubectl(['-n', NS, 'create', 'secret', 'generic', 'words', '--from-literal=word=avocado']);
    // The controller-manager creates the namespace's default ServiceAccount; pods need it.
    await eventually('the default ServiceAccount', 30_000, async () => ((await cp.kubectl(['-n', NS, 'get', 'serviceaccounts', '-o', 'name'])).includes('default') ? true : undefined));
    agent = await startNodeAgent({ kubeconfig: cp.kubeconfig, namespaces: [NS] });
    console.log(`# set up in ${elapsed()}`);
  });

  after(async () => {
    await agent?.stop(2);
    client?.close();
    await cp?.stop();
  });

  test('2 replicas: Running and Ready with distinct pod IPs; env, volumes and the service account token mapped', async () => {
    await client.create(STATEFUL_SETS, {
      apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name: 'web', namespace: NS },
      spec: {
        replicas: 2, serviceName: 'web', podManagementPolicy: 'Parallel', selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: {
            terminationGracePeriodSeconds: 5,
            initContainers: [{ name: 'side', image: 'test', restartPolicy: 'Always', command: ['node', '-e', SIDECAR, '/data/sidecar'], volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
            containers: [{
              name: 'web', image: 'test', command: ['node', '-e', SERVER], args: ['0.0.0.0:8080', '/data/out.txt'],
              env: [
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
                { name: 'WORD', valueFrom: { secretKeyRef: { name: 'words', key: 'word' } } },
                { name: 'GREETING', value: 'hello $(WORD) from $(POD_NAME)' },
                { name: 'DATA_DIR', value: '/data' },
              ],
              ports: [{ name: 'http', containerPort: 8080 }],
              readinessProbe: { httpGet: { path: '/ready', port: 'http' }, periodSeconds: 10 },
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            }],
            volumes: [{ name: 'data', emptyDir: {} }],
          },
        },
      },
    } as KubeObject);
    const pods = await eventually('web-0 and web-1 Running and Ready', 60_000, async () => {
      const both = await Promise.all([pod('web-0'), pod('web-1')]);
      return both.every(isReady) ? both as PodObject[] : undefined;
    }, describePods);
    console.log(`# 2 pods ready at ${elapsed()}`);
    const ips = pods.map((p) => p.status!.podIP!);
    assert.notEqual(ips[0], ips[1]);
    for (const ip of ips) assert.match(ip, /^127\.0\.60\.\d+$/);
    assert.ok(pods.every((p) => p.spec.nodeName === agent!.nodeName), 'bound to the agent node');
    await eventually('the StatefulSet status: 2 ready', 30_000, async () => {
      const sts = await client.get<KubeObject & { status?: { readyReplicas?: number } }>(STATEFUL_SETS, NS, 'web');
      return sts?.status?.readyReplicas === 2 ? true : undefined;
    });
    for (const [i, p] of pods.entries()) {
      const name = `web-${i}`;
      const local = info(name);
      const data = local.volumes['data']!;
      assert.ok(data.length < 40, `short volume path ${data}`);
      const seen = await fetchJson(`http://${p.status!.podIP!}:8080/`);
      const env = seen['env'] as Record<string, string>;
      assert.deepEqual(
        [env['POD_NAME'], env['POD_IP'], env['WORD'], env['GREETING'], env['DATA_DIR']],
        [name, p.status!.podIP, 'avocado', `hello avocado from ${name}`, data],
      );
      assert.deepEqual(seen['argv'], [`${p.status!.podIP!}:8080`, join(data, 'out.txt')]);
      const [side, web] = local.containers;
      assert.deepEqual([side?.name, side?.kind, web?.name, web?.kind], ['side', 'sidecar', 'web', 'main']);
      assert.ok(side!.startedAtMs! < web!.startedAtMs!, 'the native sidecar started first');
      await eventually(`${name}'s sidecar wrote into the shared volume`, 10_000, () => Promise.resolve(existsSync(join(data, 'sidecar')) ? true : undefined));
      assert.equal(readFileSync(join(data, 'out.txt'), 'utf8'), `${name} avocado`);
      // The token is the pod's service account's, bound to the pod.
      const { stdout } = await run(join(kubeBin(), 'kubectl'), ['--kubeconfig', local.kubeconfig, 'auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}']);
      assert.equal(stdout, `system:serviceaccount:${NS}:default`);
    }
  });

  test('a container that exits is restarted: restartCount 1, Ready again', async () => {
    const ip = info('web-0').podIP;
    await fetch(`http://${ip}:8080/exit`).then((r) => r.text());
    await eventually('web-0 restarted and Ready', 30_000, async () => {
      const p = await pod('web-0');
      return isReady(p) && p!.status!.containerStatuses?.find((c) => c.name === 'web')?.restartCount === 1 ? true : undefined;
    }, describePods);
    assert.equal((await pod('web-0'))!.status!.initContainerStatuses?.find((c) => c.name === 'side')?.restartCount, 0);
    assert.match(agent!.output('web-0'), /\[web\] node agent: exited with 3/);
    console.log(`# restarted at ${elapsed()}`);
  });

  test('scale to 1: pod web-1, its processes and its directories are gone', async () => {
    const before = info('web-1');
    const pids = before.containers.flatMap((c) => c.pids);
    assert.ok(pids.length >= 2, JSON.stringify(before.containers));
    await cp.kubectl(['-n', NS, 'scale', 'statefulset/web', '--replicas', '1']);
    await eventually('web-1 deleted', 30_000, async () => ((await pod('web-1')) === null ? true : undefined), describePods);
    console.log(`# web-1 gone at ${elapsed()}`);
    assert.deepEqual(agent!.pods().map((p) => p.name), ['web-0']);
    const alive = pids.filter((pid) => existsSync(`/proc/${pid}`));
    assert.deepEqual(alive, [], 'no process of web-1 left');
    assert.equal(existsSync(before.volumes['data']!), false, 'its volume directory removed');
    assert.ok(isReady(await pod('web-0')), 'web-0 still Ready');
  });
});
