// One pod as the test node agent runs it: its volumes (emptyDir, configMap, projected) as host directories, a token for its
// service account, its containers as local processes (native sidecars first, init containers
// to completion, then the containers; restarts with backoff), readiness probes, its status
// written through pods/status, and termination in the kubelet's order (containers, then
// sidecars in reverse; SIGKILL at the grace deadline).
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import type { KubeClient, KubeObject, ResourceType } from '../../../src/kube/client-types.ts';
import type { KubeConfig } from '../../../src/kube/config.ts';
import { isKubeError } from '../../../src/kube/errors.ts';
import { PODS } from '../../../src/kube/resources.ts';
import { descendants, killTree } from '../../../../collector/test/helpers/process-tree.ts';
import { condition, containerReady, containerStatus, httpProbe, now, podPhase, type ContainerRun } from './pod-status.ts';
import { containerArgv, containerEnv, hasToken, isSidecar, podKubeconfig, type Pod, type PodContainer } from './pod-spec.ts';

export interface ContainerInfo {
  name: string;
  kind: 'init' | 'sidecar' | 'main';
  /** The running process (the container's "PID 1"), if any. */
  pid: number | undefined;
  /** When the agent started its current process (performance.now(), ms). */
  startedAtMs: number | undefined;
  /** Every pid seen in its process tree, for checks that nothing is left. */
  pids: number[];
  restartCount: number;
  ready: boolean;
  argv: string[];
  env: Record<string, string>;
}

export interface PodInfo {
  namespace: string;
  name: string;
  uid: string;
  podIP: string;
  phase: string;
  ready: boolean;
  terminating: boolean;
  /** Volume name → host directory. */
  volumes: Record<string, string>;
  kubeconfig: string;
  containers: ContainerInfo[];
}


const OUTPUT_CAP = 4 * 1024 * 1024;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const tokenRequests = (sa: string): ResourceType => ({ group: '', version: 'v1', plural: `serviceaccounts/${sa}/token`, kind: 'TokenRequest', namespaced: true });
const CONFIG_MAPS: ResourceType = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };

export class PodRun {
  readonly pod: Pod;
  readonly podIP: string;
  terminating = false;
  private readonly client: KubeClient;
  private readonly kube: KubeConfig;
  private readonly dir: string;
  private readonly env: Record<string, string>;
  private readonly volumes = new Map<string, string>();
  private readonly runs: ContainerRun[] = [];
  private readonly chunks: string[] = [];
  private outputSize = 0;
  private initialized = false;
  private readonly conditionTimes = new Map<string, { status: string; time: string }>();
  private written = '';
  private syncing: Promise<void> | undefined;
  private again = false;
  private ticker: NodeJS.Timeout | undefined;
  private ticks = 0;
  private readonly startTime = now();

  constructor(options: { client: KubeClient; kube: KubeConfig; pod: Pod; podIP: string; dir: string; env: Record<string, string> }) {
    this.client = options.client;
    this.kube = options.kube;
    this.pod = options.pod;
    this.podIP = options.podIP;
    this.dir = options.dir;
    this.env = options.env;
    for (const c of options.pod.spec.initContainers ?? []) this.runs.push(this.newRun(c, isSidecar(c) ? 'sidecar' : 'init'));
    for (const c of options.pod.spec.containers) this.runs.push(this.newRun(c, 'main'));
  }

  get name(): string { return this.pod.metadata.name; }
  get namespace(): string { return this.pod.metadata.namespace ?? 'default'; }
  get kubeconfig(): string { return join(this.dir, 'kubeconfig'); }

  private newRun(spec: PodContainer, kind: ContainerRun['kind']): ContainerRun {
    return {
      spec, kind, child: undefined, exited: Promise.resolve(), startedAt: undefined, startedAtMs: undefined, restartCount: 0, probeOk: false, probeFailures: 0, probing: false,
      last: undefined, done: false, waiting: 'ContainerCreating', tree: new Set(), argv: [], env: new Map(), partial: '',
    };
  }

  /** Volumes, token, then the containers in order; resolves once the main containers are started. */
  async start(): Promise<void> {
    mkdirSync(this.dir, { recursive: true });
    (this.pod.spec.volumes ?? []).forEach((v, i) => {
      if (v.emptyDir === undefined) return;
      const dir = join(this.dir, `v${i}`);
      mkdirSync(dir, { mode: 0o777 });
      this.volumes.set(v.name, dir);
    });
    const sa = this.pod.spec.serviceAccountName ?? 'default';
    const answer = await this.client.create<KubeObject & { spec: unknown; status?: { token?: string } }>(tokenRequests(sa), {
      apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', metadata: { name: sa, namespace: this.namespace },
      spec: { expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: this.name, uid: this.pod.metadata.uid } },
    });
    const token = answer.status?.token ?? '';
    writeFileSync(this.kubeconfig, podKubeconfig(this.kube.server, this.kube.caCert, this.kube.tlsServerName, token, this.namespace), { mode: 0o600 });
    // A projected volume gets the files its sources name (token, CA, namespace), for a
    // container that reads them by its mountPath.
    (this.pod.spec.volumes ?? []).forEach((v, i) => {
      if (v.projected === undefined) return;
      const dir = join(this.dir, `v${i}`);
      mkdirSync(dir, { mode: 0o755 });
      if (v.projected.sources.some((s) => s.serviceAccountToken !== undefined)) writeFileSync(join(dir, 'token'), token, { mode: 0o600 });
      writeFileSync(join(dir, 'ca.crt'), this.kube.caCert ?? '');
      writeFileSync(join(dir, 'namespace'), this.namespace);
      this.volumes.set(v.name, dir);
    });
    // A configMap volume: one file per key, read once at start (the kubelet's later updates are not imitated).
    for (const [i, v] of (this.pod.spec.volumes ?? []).entries()) {
      if (v.configMap === undefined) continue;
      const cm = await this.client.get<KubeObject & { data?: Record<string, string> }>(CONFIG_MAPS, this.namespace, v.configMap.name);
      if (cm === null) throw new Error(`configMap ${v.configMap.name} of volume ${v.name} not found`);
      const dir = join(this.dir, `v${i}`);
      mkdirSync(dir, { mode: 0o755 });
      for (const [key, text] of Object.entries(cm.data ?? {})) writeFileSync(join(dir, key), text);
      this.volumes.set(v.name, dir);
    }
    this.ticker = setInterval(() => this.tick(), 1000);
    for (const r of this.runs) {
      if (this.terminating) return;
      if (r.kind === 'init') {
        await this.runToCompletion(r);
      } else if (r.kind === 'sidecar') {
        await this.launch(r);
      }
    }
    this.initialized = true;
    for (const r of this.runs) if (r.kind === 'main' && !this.terminating) await this.launch(r);
    this.sync();
  }

  private async runToCompletion(r: ContainerRun): Promise<void> {
    for (;;) {
      await this.launch(r);
      await r.exited;
      if (this.terminating || r.last?.exitCode === 0) { r.done = true; return; }
      if (this.pod.spec.restartPolicy === 'Never') throw new Error(`init container ${r.spec.name} failed`);
      await sleep(this.backoffMs(r));
      r.restartCount++;
    }
  }

  private backoffMs(r: ContainerRun): number {
    return Math.min(10_000, 1000 * 2 ** Math.min(r.restartCount, 4));
  }

  private mountsOf(c: PodContainer): Map<string, string> {
    const mounts = new Map<string, string>();
    for (const m of c.volumeMounts ?? []) {
      const dir = this.volumes.get(m.name);
      if (dir !== undefined) mounts.set(m.mountPath, dir);
    }
    return mounts;
  }

  /** Starts the container's process (retrying its configuration until it resolves, as the kubelet does). */
  private async launch(r: ContainerRun): Promise<void> {
    const mounts = this.mountsOf(r.spec);
    for (;;) {
      if (this.terminating) return;
      try {
        r.env = await containerEnv(this.client, this.pod, this.podIP, r.spec, mounts);
        r.argv = containerArgv(r.spec, r.env, mounts, this.podIP, hasToken(this.pod, r.spec) ? this.kubeconfig : undefined);
        break;
      } catch (e) {
        r.waiting = 'CreateContainerConfigError';
        this.append(r, `node agent: ${(e as Error).message}\n`);
        this.sync();
        await sleep(1000);
      }
    }
    // Deleted while its configuration was being read: nothing may start after terminate().
    if (this.terminating) return;
    const child = spawn(r.argv[0]!, r.argv.slice(1), {
      cwd: this.dir, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...this.env, HOSTNAME: this.name, ...Object.fromEntries(r.env) },
    });
    r.child = child;
    r.waiting = undefined;
    r.startedAt = now();
    r.startedAtMs = performance.now();
    r.probeOk = false;
    r.probeFailures = 0;
    if (child.pid !== undefined) r.tree.add(child.pid);
    child.stdout.on('data', (b: Buffer) => this.append(r, b.toString('utf8')));
    child.stderr.on('data', (b: Buffer) => this.append(r, b.toString('utf8')));
    r.exited = new Promise<void>((resolve) => {
      child.once('error', (e) => this.append(r, `node agent: ${e.message}\n`));
      child.once('close', (code, signal) => {
        r.child = undefined;
        r.last = { exitCode: code ?? 128 + (signal === null ? 0 : constants.signals[signal]), signal, startedAt: r.startedAt ?? now(), finishedAt: now() };
        this.append(r, `node agent: exited with ${signal ?? code}\n`);
        // Like a container's cgroup: whatever the process left behind goes with it.
        for (const pid of r.tree) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
        r.tree.clear();
        resolve();
        if (r.kind !== 'init') void this.restartLater(r);
        this.sync();
      });
    });
    this.sync();
  }

  private async restartLater(r: ContainerRun): Promise<void> {
    const policy = r.kind === 'sidecar' ? 'Always' : (this.pod.spec.restartPolicy ?? 'Always');
    if (this.terminating || policy === 'Never' || (policy === 'OnFailure' && r.last?.exitCode === 0)) { r.done = true; return; }
    r.waiting = 'CrashLoopBackOff';
    await sleep(this.backoffMs(r));
    if (this.terminating) return;
    r.restartCount++;
    await this.launch(r);
  }

  private append(r: ContainerRun, text: string): void {
    const lines = (r.partial + text).split('\n');
    r.partial = lines.pop() ?? '';
    for (const line of lines) {
      const chunk = `[${r.spec.name}] ${line}\n`;
      this.chunks.push(chunk);
      this.outputSize += chunk.length;
    }
    while (this.outputSize > OUTPUT_CAP && this.chunks.length > 1) this.outputSize -= this.chunks.shift()!.length;
  }

  output(): string {
    return this.chunks.join('') + this.runs.filter((r) => r.partial !== '').map((r) => `[${r.spec.name}] ${r.partial}\n`).join('');
  }

  /** Every second: readiness probes, process trees (every other tick), status. */
  private tick(): void {
    this.ticks++;
    for (const r of this.runs) {
      const pid = r.child?.pid;
      if (pid === undefined) continue;
      if (this.ticks % 2 === 0) for (const p of descendants(pid)) r.tree.add(p);
      const probe = r.spec.readinessProbe?.httpGet;
      if (probe === undefined || r.probing) continue;
      const port = typeof probe.port === 'number' ? probe.port : (r.spec.ports?.find((p) => p.name === probe.port)?.containerPort ?? Number(probe.port));
      r.probing = true;
      void httpProbe(this.podIP, port, probe.path, (r.spec.readinessProbe?.timeoutSeconds ?? 1) * 1000).then((ok) => {
        r.probing = false;
        if (r.child?.pid !== pid) return;
        if (ok) { r.probeOk = true; r.probeFailures = 0; } else if (++r.probeFailures >= (r.spec.readinessProbe?.failureThreshold ?? 3)) r.probeOk = false;
        this.sync();
      });
    }
    this.sync();
  }

  info(): PodInfo {
    return {
      namespace: this.namespace, name: this.name, uid: this.pod.metadata.uid ?? '', podIP: this.podIP, phase: podPhase(this.runs, this.initialized), ready: this.podReady(),
      terminating: this.terminating, volumes: Object.fromEntries(this.volumes), kubeconfig: this.kubeconfig,
      containers: this.runs.map((r) => ({
        name: r.spec.name, kind: r.kind, pid: r.child?.pid, startedAtMs: r.startedAtMs, pids: [...r.tree], restartCount: r.restartCount, ready: containerReady(r), argv: r.argv, env: Object.fromEntries(r.env),
      })),
    };
  }

  private podReady(): boolean {
    return this.initialized && !this.terminating && this.runs.filter((r) => r.kind !== 'init').every((r) => containerReady(r));
  }

  /** Writes the status when it changed; one write at a time, the latest state wins. */
  sync(): void {
    if (this.syncing !== undefined) { this.again = true; return; }
    const ready = this.podReady();
    const status = {
      phase: podPhase(this.runs, this.initialized), hostIP: '127.0.0.1', hostIPs: [{ ip: '127.0.0.1' }], podIP: this.podIP, podIPs: [{ ip: this.podIP }], startTime: this.startTime,
      conditions: [
        condition(this.conditionTimes, 'PodScheduled', true), condition(this.conditionTimes, 'Initialized', this.initialized),
        condition(this.conditionTimes, 'ContainersReady', ready), condition(this.conditionTimes, 'Ready', ready),
      ],
      initContainerStatuses: this.runs.filter((r) => r.kind !== 'main').map((r) => containerStatus(r)),
      containerStatuses: this.runs.filter((r) => r.kind === 'main').map((r) => containerStatus(r)),
    };
    const json = JSON.stringify(status);
    if (json === this.written) return;
    this.syncing = this.client.mergePatch(PODS, this.namespace, this.name, { status }, 'status').then(
      () => { this.written = json; },
      (e: unknown) => { if (isKubeError(e, 'KUBE_NOT_FOUND')) this.written = json; },
    ).finally(() => {
      this.syncing = undefined;
      if (this.again) { this.again = false; this.sync(); }
    });
  }

  /** The kubelet's termination: SIGTERM to the containers, then to the sidecars in reverse order; SIGKILL at the deadline. */
  async terminate(graceSeconds: number): Promise<void> {
    this.terminating = true;
    const deadline = Date.now() + graceSeconds * 1000;
    const stopAll = async (runs: ContainerRun[]): Promise<void> => {
      for (const r of runs) r.child?.kill('SIGTERM');
      const left = deadline - Date.now();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(runs.map((r) => r.exited)), new Promise<void>((res) => { timer = setTimeout(res, Math.max(0, left)); })]);
      clearTimeout(timer);
    };
    await stopAll(this.runs.filter((r) => r.kind === 'main'));
    for (const r of this.runs.filter((x) => x.kind !== 'main').reverse()) await stopAll([r]);
    for (const r of this.runs) if (r.child?.pid !== undefined) killTree(r.child.pid);
    await Promise.all(this.runs.map((r) => r.exited));
    for (const r of this.runs) r.done = true;
    clearInterval(this.ticker);
    await this.syncing;
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** SIGKILL to every process (the test process is exiting). */
  killNow(): void {
    this.terminating = true;
    clearInterval(this.ticker);
    for (const r of this.runs) {
      if (r.child?.pid !== undefined) killTree(r.child.pid);
      for (const pid of r.tree) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
    }
  }
}
