// A test-only node for a test control plane (startControlPlane has no scheduler and no
// kubelet): it registers a Ready Node and keeps its heartbeat, schedules the pods of the given
// namespaces that have no node (pods/binding), and runs the pods bound to it as local
// processes, the way a kubelet would run them in containers (node-agent/pod-run.ts). What
// differs from a real node, by design:
//   - a pod's emptyDir volumes are directories under /tmp/na-XXXXXX/<n>/ (short: an OpenSSH
//     control socket path must fit in ~100 bytes); nothing is mounted, instead each mountPath
//     is rewritten to its directory wherever it occurs in the container's args and env values.
//     A projected volume becomes a directory with `token`, `ca.crt` and `namespace`, a configMap
//     volume one with a file per key (read once at start); other
//     volume kinds are ignored;
//   - the agent requests a token for the pod's serviceAccountName with the TokenRequest API
//     (bound to the pod, so the pod's real RBAC applies), writes a kubeconfig with it and
//     appends `--kubeconfig FILE` to `pglog collect`, `pglog operator` and `pglog crds`, in the containers
//     that have a token as the kubelet would give it: all of them when the pod automounts its
//     token, else those that mount a projected volume with a serviceAccountToken source;
//     `pglog` runs collector/bin/pglog and `node` this Node.js;
//   - each pod gets its own loopback address 127.0.60.N as status.podIP; `0.0.0.0:` in args is
//     rewritten to it, and readiness probes (httpGet) go to it; probes run every second whatever
//     their periodSeconds (liveness and startup probes are not run);
//   - a process runs as the test's user, with PATH and HOME of the test process.
// Deletion is the kubelet's: SIGTERM, SIGKILL after the grace period, then the final delete
// (gracePeriodSeconds 0), so StatefulSet scale-down and garbage collection complete.
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createKubeClient } from '../../src/kube/client.ts';
import type { DeleteOptions, KubeObject, ResourceType } from '../../src/kube/client-types.ts';
import { loadKubeconfigFile } from '../../src/kube/config.ts';
import { isKubeError } from '../../src/kube/errors.ts';
import { Informer, type InformerEvent } from '../../src/kube/informer.ts';
import { PODS } from '../../src/kube/resources.ts';
import { onProcessExit } from '../../../collector/test/helpers/exit-cleanup.ts';
import { PodRun, type PodInfo } from './node-agent/pod-run.ts';
import type { Pod } from './node-agent/pod-spec.ts';

export type { PodInfo, ContainerInfo } from './node-agent/pod-run.ts';

const NODES: ResourceType = { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false };
const bindings = (pod: string): ResourceType => ({ group: '', version: 'v1', plural: `pods/${pod}/binding`, kind: 'Binding', namespaced: true });

export interface NodeAgentOptions {
  kubeconfig: string;
  /** Namespaces whose pods it schedules and runs. */
  namespaces: readonly string[];
  /** Default `pglog-test-node`. */
  nodeName?: string;
  /** A directory put first on the pods' PATH (commands other than pglog and node are looked up there). */
  binDir?: string;
}

export interface NodeAgent {
  readonly nodeName: string;
  /** The pods it runs now (not the ones that are gone). */
  pods(): PodInfo[];
  /** What the pod's containers wrote, each line prefixed with `[container] ` (the latest pod of that name, even once gone). */
  output(podName: string): string;
  /** Stops every pod (SIGTERM, SIGKILL after `graceSeconds`, default 10), deletes the Node, stops watching. */
  stop(graceSeconds?: number): Promise<void>;
}

/** Loopback addresses in use by the agents of this process: 127.0.60.N, from a random start (test files may run side by side). */
const addresses = new Set<string>();
let nextAddress = 2 + Math.floor(Math.random() * 200);
function allocateAddress(): string {
  for (let i = 0; i < 253; i++) {
    const ip = `127.0.60.${nextAddress}`;
    nextAddress = nextAddress >= 254 ? 2 : nextAddress + 1;
    if (!addresses.has(ip)) { addresses.add(ip); return ip; }
  }
  throw new Error('node agent: no free pod address in 127.0.60.0/24');
}

export async function startNodeAgent(options: NodeAgentOptions): Promise<NodeAgent> {
  const nodeName = options.nodeName ?? 'pglog-test-node';
  const kube = await loadKubeconfigFile(options.kubeconfig);
  const client = createKubeClient(kube, { userAgent: 'pglog-test-node-agent' });
  const root = mkdtempSync('/tmp/na-');
  const podEnv: Record<string, string> = {
    PATH: [...(options.binDir === undefined ? [] : [options.binDir]), process.env['PATH'] ?? '/usr/bin:/bin'].join(':'),
    ...(process.env['HOME'] === undefined ? {} : { HOME: process.env['HOME'] }),
  };
  const runs = new Map<string, PodRun>();
  const last = new Map<string, PodRun>();
  const chains = new Map<string, Promise<void>>();
  const errors: string[] = [];
  let podCount = 0;
  const forget = onProcessExit(() => { for (const r of runs.values()) r.killNow(); rmSync(root, { recursive: true, force: true }); });

  const heartbeat = async (): Promise<void> => {
    const time = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    await client.mergePatch(NODES, undefined, nodeName, {
      status: {
        conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'pglog test node agent', lastHeartbeatTime: time, lastTransitionTime: time }],
        addresses: [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: nodeName }],
        capacity: { cpu: '64', memory: '256Gi', pods: '250' }, allocatable: { cpu: '64', memory: '256Gi', pods: '250' },
      },
    }, 'status');
  };
  try {
    await client.create(NODES, { apiVersion: 'v1', kind: 'Node', metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } } });
  } catch (e) {
    if (!isKubeError(e, 'KUBE_CONFLICT')) throw e;
  }
  await heartbeat();
  const beat = setInterval(() => { heartbeat().catch((e: unknown) => errors.push(`heartbeat: ${(e as Error).message}`)); }, 10_000);

  /** The kubelet's final delete: the object goes once its processes are gone. */
  const finalDelete = async (pod: Pod): Promise<void> => {
    const opts: DeleteOptions & { gracePeriodSeconds: number } = { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata.uid! } };
    try {
      await client.delete(PODS, pod.metadata.namespace, pod.metadata.name, opts);
    } catch (e) {
      if (!isKubeError(e, 'KUBE_CONFLICT') && !isKubeError(e, 'KUBE_NOT_FOUND')) throw e;
    }
  };

  /** Its processes are gone (or going): never started again, its address free. */
  const finished = new Set<string>();
  const ended = (uid: string, run: PodRun): void => {
    runs.delete(uid);
    finished.add(uid);
    addresses.delete(run.podIP);
  };

  const handle = async (event: InformerEvent<Pod>): Promise<void> => {
    const pod = event.object;
    const uid = pod.metadata.uid ?? '';
    const run = runs.get(uid);
    if (event.type === 'delete') {
      // Deleted without us (a forced delete): nothing waits for the processes.
      if (run !== undefined) { ended(uid, run); await run.terminate(0); }
      return;
    }
    if (pod.spec.nodeName === undefined || pod.spec.nodeName === '') {
      if (pod.metadata.deletionTimestamp !== undefined || (pod.spec.schedulerName ?? 'default-scheduler') !== 'default-scheduler') return;
      try {
        await client.create(bindings(pod.metadata.name), {
          apiVersion: 'v1', kind: 'Binding', metadata: { name: pod.metadata.name, namespace: pod.metadata.namespace, uid }, target: { apiVersion: 'v1', kind: 'Node', name: nodeName },
        } as KubeObject);
      } catch (e) {
        if (!isKubeError(e, 'KUBE_CONFLICT') && !isKubeError(e, 'KUBE_NOT_FOUND')) throw e;
      }
      return;
    }
    if (pod.spec.nodeName !== nodeName) return;
    if (pod.metadata.deletionTimestamp !== undefined) {
      if (run !== undefined) {
        await run.terminate(pod.metadata.deletionGracePeriodSeconds ?? pod.spec.terminationGracePeriodSeconds ?? 30);
        ended(uid, run);
      }
      await finalDelete(pod);
      return;
    }
    if (run !== undefined || finished.has(uid) || pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return;
    const started = new PodRun({ client, kube, pod, podIP: allocateAddress(), dir: join(root, String(++podCount)), env: podEnv });
    runs.set(uid, started);
    last.set(pod.metadata.name, started);
    // Not awaited: the pod's later events (its deletion) must not wait for its start.
    started.start().catch((e: unknown) => errors.push(`${pod.metadata.name}: start: ${(e as Error).message}`));
  };

  const enqueue = (event: InformerEvent<Pod>): void => {
    const key = `${event.object.metadata.namespace}/${event.object.metadata.name}`;
    const next = (chains.get(key) ?? Promise.resolve()).then(() => handle(event)).catch((e: unknown) => {
      errors.push(`${key}: ${(e as Error).message}`);
    });
    chains.set(key, next);
    void next.then(() => { if (chains.get(key) === next) chains.delete(key); });
  };

  const abort = new AbortController();
  const informers = options.namespaces.map((namespace) => new Informer<Pod>(client, PODS, { namespace, backoffBaseMs: 200, backoffCapMs: 2000, watchTimeoutSeconds: 60 }));
  for (const i of informers) i.onChange(enqueue);
  const watching = informers.map((i) => i.run(abort.signal));

  let stopped = false;
  return {
    nodeName,
    pods: () => [...runs.values()].map((r) => r.info()),
    output: (podName) => {
      const r = last.get(podName);
      const problems = errors.filter((e) => e.includes(podName));
      return `${r?.output() ?? ''}${problems.length === 0 ? '' : `node agent errors:\n${problems.join('\n')}\n`}`;
    },
    async stop(graceSeconds = 10) {
      if (stopped) return;
      stopped = true;
      abort.abort();
      clearInterval(beat);
      await Promise.all(watching);
      await Promise.allSettled([...runs.values()].map((r) => r.terminate(graceSeconds)));
      for (const r of runs.values()) addresses.delete(r.podIP);
      runs.clear();
      try { await client.delete(NODES, undefined, nodeName); } catch { /* the control plane may be gone */ }
      client.close();
      forget();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
