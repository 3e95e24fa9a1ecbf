/**
 * A simulated fleet behind the real operator and collectors on the real node, as users run it
 * (`make fleet`, bench/fleet-node.ts, and operator/test/integration/fleet-e2e.test.ts):
 *   - the real node of e2e-cluster.ts with the built image; a store on the node's gateway
 *     (password over TCP, given to the pods in a Secret); N simulated servers (fleet-sim/: one
 *     sshd each, log-normal rates, markers, rotation) on 10.97.x.y, a range made local on the
 *     host, which the pods reach through their default route to the gateway; K real PostgreSQL
 *     servers behind K more of the fleet's sshd, with SQL snapshots;
 *   - the CRDs applied, one SSH Secret for the whole fleet (its client key and its one
 *     known_hosts), the store Secret and the N + K PostgresTargets created in bulk before
 *     `helm install`, which then installs the operator, the pool and (optionally) the HPA on the
 *     collectors' event-loop delay; the pool is patched right after: its size and the sidecar
 *     thresholds that put the hottest few percent of the servers in the sidecar.
 * Machine-wide: it holds the `fleet-node` lock while it runs (the address range and its
 * iptables rules are the machine's), and the real node takes the `real-node` lock.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import { COLLECTOR_SHARDS } from '@pglog/common/kube/resources.ts';
import { type E2eCluster, POD_SECURITY_WARNING, startE2eCluster } from '@pglog/test-support/e2e-cluster.ts';
import { createAll } from '@pglog/test-support/fleet.ts';
import { type SimulatedFleet, startSimulatedFleet } from '@pglog/test-support/fleet-sim/fleet.ts';
import type { WriterTotals } from '@pglog/test-support/fleet-sim/log-writer.ts';
import { DEFAULT_RATE_SHAPE, type RateShape } from '@pglog/test-support/fleet-sim/rates.ts';
import { localRange } from '@pglog/test-support/fleet-sim/servers.ts';
import { acquireMachineLock } from '@pglog/test-support/machine-lock.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { SERVER_USER } from '@pglog/test-support/server-user.ts';
import { createSshSecret } from '@pglog/test-support/ssh-secret.ts';
import pg from 'pg';

import { type HpaMachinery, prepareHpa } from './hpa.ts';
import {
  chartValues,
  collectorMemoryLimitMiB,
  FLEET_ADDRESS_BASE,
  FLEET_PORT,
  FLEET_RANGE,
  POOL,
  poolPatch,
  realTargetObject,
  simulatedTargetObject,
  SSH_SECRET_PREFIX,
  STORE_SECRET,
} from './objects.ts';
import { collectorPods, containersOf, type PodObject, RestartLog } from './observe.ts';
import { type RealServer, startRealLoads, startRealServers, stopRealLoads } from './real-postgres.ts';

const run = promisify(execFile);
const REPO = join(import.meta.dirname, '../../../..');
const CHART = join(REPO, 'charts/pglog');
export const NAMESPACE = 'pglog';
export const RELEASE = 'pglog';

export interface FleetNodeOptions {
  /** Simulated servers. */
  servers: number;
  /** Real PostgreSQL servers (SQL snapshots), behind sshd of their own. */
  realPostgres: number;
  /** The pool's size at the install (the HPA's minimum when it is on). */
  replicas: number;
  hpa: { min: number; max: number; targetSeconds: number } | null;
  image: string | undefined;
  docker: string;
  /** Where host keys are kept between runs. */
  keyCache: string;
  /** Where the fleet's files go (created, removed by dispose). */
  dir: string;
  seed?: number;
  shape?: RateShape;
  /** Rotate each simulated log after this many bytes (default 1 MiB: many rotations in a run). */
  rotateEveryBytes?: number;
  /** Delete rotated logs this long after their rotation (a long soak fills the disk otherwise); default: keep them. */
  keepRotatedMs?: number;
  say: (line: string) => void;
}

export interface FleetNode {
  readonly cluster: E2eCluster;
  readonly store: TestPostgres;
  /** The store, as its superuser over the Unix socket (the run's own queries). */
  readonly storePool: pg.Pool;
  readonly fleet: SimulatedFleet;
  readonly real: readonly RealServer[];
  /** The simulated servers' target names (the fleet's first N servers). */
  readonly names: readonly string[];
  readonly shape: RateShape;
  readonly memoryLimitMiB: number;
  readonly hpa: HpaMachinery | null;
  readonly restarts: RestartLog;
  /** Set-up steps and their seconds, in order. */
  readonly steps: Array<{ step: string; seconds: number }>;
  /** Starts writing and the loads, then `helm install` and the pool's patch; the moment helm started (ms). */
  install(): Promise<number>;
  /** The pool's pods now (restarts noted). */
  pods(): Promise<PodObject[]>;
  /** The targets in the spec of shard `index`. */
  shardTargets(index: number): Promise<string[]>;
  /** A crash: every container of the pod (collector and sidecar) SIGKILLed through containerd. */
  killPod(pod: PodObject): Promise<void>;
  /** Stops the writer and the loads; what was written, final. */
  stopWriting(): Promise<WriterTotals>;
  dispose(): Promise<void>;
}

/** Runs `fn` as a named set-up step, its seconds recorded and said. */
function stepper(steps: FleetNode['steps'], say: (line: string) => void) {
  return async <T>(step: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = Date.now();
    const value = await fn();
    const seconds = (Date.now() - t0) / 1000;
    steps.push({ step, seconds });
    say(`set-up: ${step}: ${seconds.toFixed(1)} s`);
    return value;
  };
}

async function routeIsLocal(cidr: string): Promise<boolean> {
  return (await run('ip', ['route', 'show', 'table', 'local', cidr])).stdout.trim() !== '';
}

/** Everything a run started, stopped in reverse; each part may be missing (a failed start). */
interface Parts {
  unlock?: () => void;
  addedRoute?: boolean;
  hpa?: HpaMachinery | null;
  cluster?: E2eCluster;
  store?: TestPostgres;
  storePool?: pg.Pool;
  fleet?: SimulatedFleet;
  real?: RealServer[];
}

async function stopParts(p: Parts, say: (line: string) => void): Promise<void> {
  const t0 = Date.now();
  const timed = async (what: string, fn: () => Promise<unknown> | undefined): Promise<void> => {
    const t = Date.now();
    try {
      await fn();
    } catch (e) {
      say(`teardown: ${what}: ${(e as Error).message}`);
    }
    say(`teardown: ${what} stopped in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  };
  await timed('HPA machinery', () => p.hpa?.stop());
  // The node first (its pods, so that nothing reconnects), the servers and the store beside it.
  await Promise.all([
    timed('real node', () => p.cluster?.stop()),
    timed('fleet', () => p.fleet?.dispose()),
    timed('real PostgreSQL servers', async () => {
      if (p.real !== undefined) await stopRealLoads(p.real);
      await Promise.allSettled((p.real ?? []).map((s) => s.server.dispose()));
    }),
    timed('store', async () => {
      await p.storePool?.end();
      await p.store?.stop();
    }),
  ]);
  if (p.addedRoute === true) await run('ip', ['route', 'del', 'local', FLEET_RANGE, 'dev', 'lo']).catch(() => undefined);
  p.unlock?.();
  say(`teardown: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

/** The simulated fleet (N + K servers: the last K front the real PostgreSQL servers) and the real servers, side by side. */
async function startServers(o: FleetNodeOptions, parts: Parts): Promise<void> {
  const [fleet, real] = await Promise.allSettled([
    startSimulatedFleet({
      count: o.servers + o.realPostgres,
      dir: o.dir,
      keyCache: o.keyCache,
      addressBase: FLEET_ADDRESS_BASE,
      port: FLEET_PORT,
      shape: o.shape ?? DEFAULT_RATE_SHAPE,
      rotateEveryBytes: o.rotateEveryBytes ?? 1024 * 1024,
      ...(o.keepRotatedMs === undefined ? {} : { keepRotatedMs: o.keepRotatedMs }),
      // The real servers' sshd: SQL sessions are forwarded to their Unix sockets.
      forwarding: new Set(Array.from({ length: o.realPostgres }, (_, k) => o.servers + k)),
      ...(o.seed === undefined ? {} : { seed: o.seed }),
    }),
    o.realPostgres > 0 ? startRealServers(o.realPostgres, SERVER_USER) : Promise.resolve([]),
  ]);
  if (fleet.status === 'fulfilled') parts.fleet = fleet.value;
  if (real.status === 'fulfilled') parts.real = real.value;
  for (const r of [fleet, real]) if (r.status === 'rejected') throw r.reason;
}

/** The store on the node's gateway (its address exists once the node's bridge does), for the pods over TCP with a password. */
async function startStore(o: FleetNodeOptions, parts: Parts): Promise<void> {
  const net = parts.cluster!.node.network;
  const maxPods = Math.max(o.replicas, o.hpa?.max ?? 0);
  parts.store = await startPostgres({ tcp: { address: net.gateway, clientRange: net.podRange }, settings: [`max_connections = ${60 + 10 * maxPods}`] });
  parts.storePool = new pg.Pool({ connectionString: parts.store.url, max: 4, application_name: 'pglog-fleet-node' });
  // A store restarted by a fault ends idle connections: the next query reconnects.
  parts.storePool.on('error', () => undefined);
}

/** The CRDs, the store and SSH Secrets and every PostgresTarget, before the install. */
async function createObjects(o: FleetNodeOptions, parts: Parts): Promise<void> {
  const { cluster, fleet, store } = parts as Required<Parts>;
  await cluster.cp.kubectl(['apply', '--server-side', '-f', join(REPO, 'crds')]);
  // Through stdin: the URL (its password) appears in no command line and no output.
  await cluster.kubectl(
    ['apply', '-f', '-'],
    JSON.stringify({ apiVersion: 'v1', kind: 'Secret', metadata: { name: STORE_SECRET }, type: 'Opaque', stringData: { url: store.tcpUrl! } }),
  );
  // One key for the whole fleet, as issue 46's users have it: it serves every target of the namespace.
  await createSshSecret((args) => cluster.kubectl(args), SSH_SECRET_PREFIX, fleet.servers, { targets: ['*'] });
  const user = fleet.servers.user;
  const simulated = fleet.logs.slice(0, o.servers).map((l, i) => simulatedTargetObject(POOL, l.name, fleet.servers.servers[i]!, user, l.dataDirectory));
  const real = (parts.real ?? []).map((r, k) => realTargetObject(POOL, r.name, fleet.servers.servers[o.servers + k]!, user, r.server));
  await createAll(
    cluster.client,
    [...simulated, ...real].map((t) => ({ ...t, metadata: { ...t.metadata, namespace: NAMESPACE } })),
  );
}

export async function startFleetNode(o: FleetNodeOptions): Promise<FleetNode> {
  const steps: FleetNode['steps'] = [];
  const step = stepper(steps, o.say);
  const parts: Parts = {};
  try {
    parts.unlock = await acquireMachineLock('fleet-node', 60 * 60_000);
    parts.hpa = o.hpa === null ? null : await step('HPA machinery (network namespace, aggregation certificates)', () => prepareHpa(NAMESPACE));
    parts.addedRoute = !(await routeIsLocal(FLEET_RANGE));
    await localRange(FLEET_RANGE);
    const [c, f] = await Promise.allSettled([
      step('real node (control plane, kubelet, containerd, CNI) and image import', () =>
        startE2eCluster({ namespace: NAMESPACE, image: o.image, docker: o.docker, ...(parts.hpa == null ? {} : { node: parts.hpa.nodeOptions }) }),
      ),
      step(`${o.servers + o.realPostgres} sshd (${o.servers} simulated servers, ${o.realPostgres} real PostgreSQL)`, () => startServers(o, parts)),
    ]);
    if (c.status === 'fulfilled') parts.cluster = c.value;
    for (const r of [c, f]) if (r.status === 'rejected') throw r.reason;
    const cluster = parts.cluster!;
    await step('store', () => startStore(o, parts));
    if (parts.hpa != null) {
      const hpa = parts.hpa;
      await step('custom metrics API registered', () => hpa.start((a, i) => cluster.cp.kubectl(a, i), cluster.client, NAMESPACE, POOL));
    }
    await step(`CRDs, Secrets and ${o.servers + o.realPostgres} PostgresTargets created`, () => createObjects(o, parts));
  } catch (e) {
    await stopParts(parts, o.say);
    throw e;
  }
  return fleetNode(o, parts as Required<Parts>, steps);
}

function fleetNode(o: FleetNodeOptions, parts: Required<Parts>, steps: FleetNode['steps']): FleetNode {
  const { cluster, fleet, store, storePool, real } = parts;
  const shape = o.shape ?? DEFAULT_RATE_SHAPE;
  const sqlSessions = Math.ceil(o.realPostgres / Math.max(1, o.replicas));
  const memoryLimitMiB = collectorMemoryLimitMiB(o.servers + o.realPostgres, o.hpa?.min ?? o.replicas, sqlSessions);
  const restarts = new RestartLog();
  let disposed = false;
  return {
    cluster,
    store,
    storePool,
    fleet,
    real,
    names: fleet.logs.slice(0, o.servers).map((l) => l.name),
    shape,
    memoryLimitMiB,
    hpa: parts.hpa,
    restarts,
    steps,
    install: async () => {
      const values = join(cluster.work, 'values.json');
      const storePort = new URL(store.tcpUrl!).port;
      const v = chartValues({
        repository: cluster.repository,
        tag: cluster.tag,
        replicas: o.replicas,
        memoryLimitMiB,
        hpa: o.hpa,
        storeCidr: `${cluster.node.network.gateway}/32`,
        storePort: Number(storePort),
      });
      writeFileSync(values, JSON.stringify(v));
      fleet.startWriting();
      startRealLoads(real);
      const t0 = Date.now();
      const { stderr } = await cluster.helm(['install', RELEASE, CHART, '-f', values]);
      assert.doesNotMatch(stderr, POD_SECURITY_WARNING, 'helm install: no Pod Security warning');
      await cluster.kubectl(['patch', `collectorpool/${POOL}`, '--type', 'merge', '-p', JSON.stringify(poolPatch(o.hpa?.min ?? o.replicas, shape))]);
      return t0;
    },
    pods: async () => {
      const list = await collectorPods(cluster.client, NAMESPACE, POOL);
      restarts.note(list);
      return list;
    },
    shardTargets: async (index) => {
      const shard = await cluster.client.get<CollectorShard>(COLLECTOR_SHARDS, NAMESPACE, `${POOL}-${index}`);
      return (shard?.spec.targets ?? []).map((t) => t.name);
    },
    killPod: async (pod) => {
      for (const c of containersOf(pod)) if (c.containerID !== undefined) await cluster.node.killContainer(c.containerID);
    },
    stopWriting: async () => {
      const [totals] = await Promise.all([fleet.stopWriting(), stopRealLoads(real)]);
      return totals;
    },
    dispose: async () => {
      if (disposed) return;
      disposed = true;
      await stopParts(parts, o.say);
    },
  };
}
