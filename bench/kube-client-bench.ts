/**
 * `make bench` (kube client part): the measured comparison behind ADR 0009, our own client
 * (common/src/kube/) against `@kubernetes/client-node` 2.x (a devDependency for this bench
 * only), side by side in one run against a real kube-apiserver and etcd on loopback
 * (test-support/src/control-plane.ts; binaries in PGLOG_KUBE_BIN or
 * ~/.cache/pglog/kube/v1.37.2/bin).
 *
 *   node bench/kube-client-bench.ts [--gets 200] [--runs 7] [--out FILE.md]
 *
 * 1. TLS connections: each client talks to the API server through its own TCP proxy
 *    (operator/test/helpers/tcp-proxy.ts) that counts accepted connections; --gets GETs of one
 *    ConfigMap one after the other, then --gets at once.
 * 2. Informer after a dropped connection: each client's informer on the ConfigMaps of a
 *    namespace, synced; the proxy cuts every connection and stops listening for a second, then
 *    listens again; a second later the ConfigMap is changed through kubectl (straight to the API
 *    server). Does the informer see the change by itself, and how long after it was made
 *    (given up after --informer-wait seconds)? One that did not is started again by hand
 *    (client-node's `start()`) and waited for once more. Errors each informer reported are counted.
 * 3. Packages and disk: from package-lock.json, the packages reachable from
 *    @kubernetes/client-node that nothing else of our install reaches, and their size on disk.
 * 4. Start-up and memory: --runs child processes per client (bench/kube-client/probe.ts) that
 *    import only that client's kubeconfig loader and do one GET, interleaved; medians of wall
 *    time from spawn to exit, RSS, and heap after a GC; a bare `node` process as the baseline.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import * as k8s from '@kubernetes/client-node';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';
import { Informer } from '@pglog/common/kube/informer.ts';
import { startControlPlane } from '@pglog/test-support/control-plane.ts';

import { startTcpProxy, type TcpProxy } from '../operator/test/helpers/tcp-proxy.ts';
import { extraPackages, installedVersion } from './kube-client/packages.ts';
import { createCleanup } from './lib/cleanup.ts';
import { emitReport } from './lib/emit-report.ts';

const { values } = parseArgs({
  options: {
    gets: { type: 'string', default: '200' },
    runs: { type: 'string', default: '7' },
    'informer-wait': { type: 'string', default: '20' },
    out: { type: 'string' },
  },
});

function positiveInt(name: 'gets' | 'runs' | 'informer-wait'): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`--${name} must be a whole number >= 1, got ${values[name]}`);
  return n;
}
const GETS = positiveInt('gets');
const RUNS = positiveInt('runs');
const INFORMER_WAIT_MS = positiveInt('informer-wait') * 1000;
const NS = 'bench';
const NAME = 'bench-object';
const CONFIG_MAPS: ResourceType = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };
const ROOT = join(import.meta.dirname, '..');

const say = (line: string): void => {
  process.stderr.write(`${line}\n`);
};
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};
const mb = (bytes: number): string => (bytes / 1e6).toFixed(1);

/** A kubeconfig like the control plane's, but to the proxy's port. */
function kubeconfigVia(dir: string, file: string, server: string, caCert: string, token: string): string {
  const path = join(dir, file);
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'bench',
      clusters: [{ name: 'bench', cluster: { server, 'certificate-authority-data': Buffer.from(caCert).toString('base64'), 'tls-server-name': 'kubernetes' } }],
      users: [{ name: 'admin', user: { token } }],
      contexts: [{ name: 'bench', context: { cluster: 'bench', user: 'admin', namespace: NS } }],
    }),
    { mode: 0o600 },
  );
  return path;
}

interface InformerHandle {
  stop(): Promise<void>;
  /** Starts it again by hand (what a user of a client whose informer stays stopped must do). */
  restart(): Promise<void>;
}

/** How one client is driven: a GET, an informer that reports changes, and shutdown. */
interface Contender {
  name: string;
  proxy: TcpProxy;
  get(): Promise<void>;
  /** Starts an informer on the namespace's ConfigMaps; resolves once it has listed. */
  inform(onChange: (data: Record<string, string>) => void, onError: () => void): Promise<InformerHandle>;
  close(): void;
}

async function ownContender(proxy: TcpProxy, kubeconfig: string): Promise<Contender> {
  const client = createKubeClient(await loadKubeconfigFile(kubeconfig));
  return {
    name: 'pglog (operator/src/kube)',
    proxy,
    async get() {
      if ((await client.get(CONFIG_MAPS, NS, NAME)) === undefined) throw new Error('own: not found');
    },
    async inform(onChange, onError) {
      type Cm = KubeObject & { data?: Record<string, string> };
      const informer = new Informer<Cm>(client, CONFIG_MAPS, {
        namespace: NS,
        log: (level) => {
          if (level === 'warn' || level === 'error') onError();
        },
      });
      informer.onChange((e) => {
        if (e.object.metadata.name === NAME) onChange(e.object.data ?? {});
      });
      const abort = new AbortController();
      const running = informer.run(abort.signal);
      while (!informer.hasSynced()) await sleep(20);
      return {
        async stop() {
          abort.abort();
          await running;
        },
        async restart() {
          /* never stops by itself */
        },
      };
    },
    close() {
      client.close();
    },
  };
}

function clientNodeContender(proxy: TcpProxy, kubeconfig: string): Contender {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const api = kc.makeApiClient(k8s.CoreV1Api);
  return {
    name: '@kubernetes/client-node 2.x',
    proxy,
    async get() {
      await api.readNamespacedConfigMap({ name: NAME, namespace: NS });
    },
    async inform(onChange, onError) {
      const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${NS}/configmaps`, () => api.listNamespacedConfigMap({ namespace: NS }));
      const seen = (o: k8s.V1ConfigMap): void => {
        if (o.metadata?.name === NAME) onChange(o.data ?? {});
      };
      informer.on('add', seen);
      informer.on('update', seen);
      informer.on('error', onError);
      await informer.start();
      return { stop: () => informer.stop(), restart: () => informer.start() };
    },
    close() {
      /* no handle to close: its agents are per request */
    },
  };
}

interface ConnectionResult {
  sequential: number;
  concurrent: number;
  seqMs: number;
  concMs: number;
}

async function connections(c: Contender): Promise<ConnectionResult> {
  // No warm-up: the first of the GETs opens the first connection, so reuse counts as 1.
  let before = c.proxy.accepted();
  let t0 = performance.now();
  for (let i = 0; i < GETS; i++) await c.get();
  const seqMs = performance.now() - t0;
  const sequential = c.proxy.accepted() - before;
  before = c.proxy.accepted();
  t0 = performance.now();
  await Promise.all(Array.from({ length: GETS }, () => c.get()));
  const concMs = performance.now() - t0;
  const concurrent = c.proxy.accepted() - before;
  say(
    `${c.name}: ${sequential} connections for ${GETS} sequential GETs (${seqMs.toFixed(0)} ms), ${concurrent} for ${GETS} concurrent (${concMs.toFixed(0)} ms)`,
  );
  return { sequential, concurrent, seqMs, concMs };
}

interface InformerResult {
  seenAfterMs: number | null;
  errors: number;
  restartedSeenMs: number | null;
}

async function afterDrop(c: Contender, change: (value: string) => Promise<void>): Promise<InformerResult> {
  let latest = '';
  let errors = 0;
  const handle = await c.inform(
    (data) => {
      latest = data['step'] ?? '';
    },
    () => {
      errors += 1;
    },
  );
  await sleep(500);
  await c.proxy.close();
  await sleep(1000);
  await c.proxy.open();
  await sleep(1000);
  const value = `after-drop-${c.proxy.port}-${Date.now()}`;
  const changed = performance.now();
  await change(value);
  const seenAfterMs = await waitFor(() => latest === value, changed);
  // One that did not resume: does a start() by hand bring it back?
  let restartedSeenMs: number | null = null;
  if (seenAfterMs === null) {
    const restarted = performance.now();
    await handle.restart();
    restartedSeenMs = await waitFor(() => latest === value, restarted);
    say(`${c.name}: restarted by hand, ${restartedSeenMs === null ? 'still did not see the change' : `saw the change ${restartedSeenMs.toFixed(0)} ms later`}`);
  }
  await handle.stop();
  say(
    `${c.name}: informer after a dropped connection ${seenAfterMs === null ? `did not see the change within ${INFORMER_WAIT_MS / 1000} s` : `saw the change ${seenAfterMs.toFixed(0)} ms after it was made`} (${errors} errors reported)`,
  );
  return { seenAfterMs, errors, restartedSeenMs };
}

/** Milliseconds from `since` until `done()` holds, or null after --informer-wait. */
async function waitFor(done: () => boolean, since: number): Promise<number | null> {
  while (performance.now() - since < INFORMER_WAIT_MS) {
    if (done()) return performance.now() - since;
    await sleep(10);
  }
  return null;
}

interface ProbeResult {
  startMs: number;
  rss: number;
  heapUsed: number;
}

function probe(which: string, kubeconfig: string): Promise<ProbeResult> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['--expose-gc', join(import.meta.dirname, 'kube-client/probe.ts'), which, kubeconfig, NS, NAME], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
    });
    child.stderr.on('data', (b: Buffer) => {
      err += b.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      const startMs = performance.now() - t0;
      if (code !== 0) {
        reject(new Error(`probe ${which} exited ${code}: ${err}`));
        return;
      }
      const m = JSON.parse(out) as { rss: number; heapUsed: number };
      resolve({ startMs, ...m });
    });
  });
}

async function processes(kubeconfig: string): Promise<Map<string, ProbeResult>> {
  const kinds = ['none', 'own', 'client-node'];
  const samples = new Map(kinds.map((k) => [k, [] as ProbeResult[]]));
  for (const k of kinds) await probe(k, kubeconfig); // warm the file cache
  for (let i = 0; i < RUNS; i++) for (const k of kinds) samples.get(k)!.push(await probe(k, kubeconfig));
  return new Map(
    kinds.map((k) => {
      const s = samples.get(k)!;
      const m = { startMs: median(s.map((x) => x.startMs)), rss: median(s.map((x) => x.rss)), heapUsed: median(s.map((x) => x.heapUsed)) };
      say(`process ${k}: start-up ${m.startMs.toFixed(0)} ms, RSS ${mb(m.rss)} MB, heap ${mb(m.heapUsed)} MB (median of ${RUNS})`);
      return [k, m];
    }),
  );
}

const cleanup = createCleanup(say);
// Start-up times move with what else the machine runs: the section says how busy it was.
const loadAtStart = loadavg()[0]!;
let text = '';
try {
  const pkgs = extraPackages(ROOT, '@kubernetes/client-node');
  say(`packages: ${pkgs.count} only for client-node, ${mb(pkgs.bytes)} MB on disk`);
  say('starting etcd and kube-apiserver');
  const cp = await startControlPlane();
  cleanup.push(() => cp.stop());
  await cp.kubectl(['create', 'namespace', NS]);
  await cp.kubectl(['-n', NS, 'create', 'configmap', NAME, '--from-literal=step=0']);
  const change = async (value: string): Promise<void> => {
    await cp.kubectl(['-n', NS, 'patch', 'configmap', NAME, '--type=merge', '-p', JSON.stringify({ data: { step: value } })]);
  };
  const dir = join(cp.kubeconfig, '..');
  const server = new URL(cp.server);
  const contenders: Contender[] = [];
  for (const [i, make] of [ownContender, clientNodeContender].entries()) {
    const proxy = await startTcpProxy(server);
    cleanup.push(() => proxy.close());
    const c = await make(proxy, kubeconfigVia(dir, `bench-${i}.kubeconfig`, `https://127.0.0.1:${proxy.port}`, cp.caCert, cp.token));
    cleanup.push(() => c.close());
    contenders.push(c);
  }
  const conns = [];
  for (const c of contenders) conns.push(await connections(c));
  const informers = [];
  for (const c of contenders) informers.push(await afterDrop(c, change));
  const procs = await processes(cp.kubeconfig);
  const [own, node, base] = [procs.get('own')!, procs.get('client-node')!, procs.get('none')!];
  const [o, n] = contenders;

  const seen = (r: InformerResult): string =>
    r.seenAfterMs === null ? `no: not within ${INFORMER_WAIT_MS / 1000} s` : `yes, ${(r.seenAfterMs / 1000).toFixed(2)} s after the change`;
  const restarted = (r: InformerResult): string =>
    r.seenAfterMs !== null ? 'not needed' : r.restartedSeenMs === null ? 'still not seen' : `seen ${(r.restartedSeenMs / 1000).toFixed(2)} s after \`start()\``;
  text = [
    '<!-- kube-client-bench:start -->',
    '## Kubernetes client: ours against @kubernetes/client-node (ADR 0009)',
    '',
    `\`node bench/kube-client-bench.ts --gets ${GETS} --runs ${RUNS}\` (part of \`make bench\`): a real kube-apiserver v1.37.2 and etcd on loopback, ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, Linux ${release()}, Node ${process.version}, load average ${loadAtStart.toFixed(1)} at the start; \`@kubernetes/client-node\` ${installedVersion(ROOT, '@kubernetes/client-node')}. Each client reaches the API server through its own counting TCP proxy.`,
    '',
    `| | ${o!.name} | ${n!.name} |`,
    '|---|---:|---:|',
    `| TLS connections, ${GETS} sequential GETs of one ConfigMap | ${conns[0]!.sequential} | ${conns[1]!.sequential} |`,
    `| … their wall time | ${conns[0]!.seqMs.toFixed(0)} ms | ${conns[1]!.seqMs.toFixed(0)} ms |`,
    `| TLS connections, ${GETS} concurrent GETs | ${conns[0]!.concurrent} | ${conns[1]!.concurrent} |`,
    `| … their wall time | ${conns[0]!.concMs.toFixed(0)} ms | ${conns[1]!.concMs.toFixed(0)} ms |`,
    `| Informer sees a change made after its connection was dropped (1 s outage), by itself | ${seen(informers[0]!)} | ${seen(informers[1]!)} |`,
    `| … after starting it again by hand | ${restarted(informers[0]!)} | ${restarted(informers[1]!)} |`,
    `| … errors it reported | ${informers[0]!.errors} (warn logs) | ${informers[1]!.errors} (\`error\` callbacks) |`,
    `| Packages in the install only for this client (package-lock.json; client-node itself included) | 0 | ${pkgs.count} |`,
    `| … their size on disk (allocated blocks under node_modules/) | 0 | ${mb(pkgs.bytes)} MB |`,
    `| Process that imports the kubeconfig loader and does one GET: start-up to exit (median of ${RUNS}) | ${own.startMs.toFixed(0)} ms | ${node.startMs.toFixed(0)} ms (${(node.startMs / own.startMs).toFixed(2)} ×, +${(node.startMs - own.startMs).toFixed(0)} ms) |`,
    `| … its RSS | ${mb(own.rss)} MB | ${mb(node.rss)} MB (${(node.rss / own.rss).toFixed(2)} ×, +${mb(node.rss - own.rss)} MB) |`,
    `| … its heap after a GC | ${mb(own.heapUsed)} MB | ${mb(node.heapUsed)} MB (${(node.heapUsed / own.heapUsed).toFixed(2)} ×, +${mb(node.heapUsed - own.heapUsed)} MB) |`,
    '',
    `A bare \`node\` process (no client, no GET) for scale: ${base.startMs.toFixed(0)} ms, RSS ${mb(base.rss)} MB, heap ${mb(base.heapUsed)} MB.`,
    `Packages only for client-node: ${pkgs.names.join(', ')}.`,
    '<!-- kube-client-bench:end -->',
  ].join('\n');
} finally {
  await cleanup.run();
}
emitReport(text, values.out);
// client-node's informer may leave a reconnect timer behind: end here.
process.exit(0);
