// The whole system on one machine: a real kube-apiserver, etcd and kube-controller-manager;
// `helm install` of charts/pglog as of the previous release (git commit 60210b1, its chart and
// CRDs: the operator Deployment, ServiceAccounts and RBAC, the default CollectorPool `main` with
// 2 replicas), later upgraded to this chart; the test node agent (helpers/node-agent.ts)
// runs every pod the Deployment and the StatefulSet create as local processes: the operator
// replicas, and per collector pod `pglog collect --shard $(POD_NAME) --sshproxy external` with
// its `pglog sshproxy` native sidecar; the containers that mount the service account's token
// get it (the collector, not the sidecar), so the chart's RBAC is what they have. Four PostgresTargets (kubectl apply) point at local sshd + PostgreSQL
// servers under load, one pinned to the sidecar, one hot (`auto`, far above the pool's promote
// threshold, which the test lowers by patching the pool's spec.transport: the chart has no
// value for it):
//   - rows of every server arrive in the store;
//   - the operator promotes the hot server to the sidecar: its shard's spec says proxy, its
//     collector reports transport proxy, and its rows keep arriving;
//   - `kubectl scale collectorpool --replicas 4`, then back to 2: within 30 s of each change
//     every target is owned by exactly one pod (in one shard's spec, reported connected by
//     that shard's collector with the same epoch, no other shard reporting it) and the pods are
//     exactly main-0 .. main-(N-1), Ready; on the way down exactly the removed shards' targets move;
//   - between the two, the operator leader (the Lease holder) is killed with SIGKILL and its pod
//     force-deleted (a crashed node): the other replica takes the Lease and carries out the
//     scale-down;
//   - `helm upgrade` to this chart (and new operator resources): its pre-upgrade hook Job
//     applies this chart's CRDs (ADR 0013: they gain spec.startAt), the Deployment rolls, a new
//     pod leads, rows of every server keep arriving, every target still owned by one pod;
//   - with the load stopped the checker finds every statement exactly once (0 lost, 0 duplicated);
//   - `helm uninstall` leaves nothing behind: no object with the release's label, no pool,
//     shard, StatefulSet or pod, no process of the agent's pods; the CRDs stay (Helm never
//     deletes CRDs), so do the user's PostgresTargets and Secrets. The operators' leader Lease,
//     created at run time and so unknown to Helm, is owned by the operator Deployment and goes
//     with it (the leader cannot give it up on SIGTERM: Helm has already deleted its RBAC).
//     Nothing else is left in the namespace.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { createKubeClient } from '../../src/kube/client.ts';
import type { DeleteOptions, KubeClient, KubeObject, ResourceType } from '../../src/kube/client-types.ts';
import { loadKubeconfigFile } from '../../src/kube/config.ts';
import { COLLECTOR_POOLS, LEASES, PODS } from '../../src/kube/resources.ts';
import { expectStoredOnce, storedRows } from '../../../collector/test/helpers/checker.ts';
import { startLogServer, type LogServer } from '../../../collector/test/helpers/log-server.ts';
import { startPostgres, type TestPostgres } from '../../../collector/test/helpers/postgres.ts';
import { startSeqLoad, type SeqLoad } from '../../../collector/test/helpers/seq-load.ts';
import { logServerTarget } from '../../../collector/test/helpers/shard-collector.ts';
import { startSshServer, type TestSshServer } from '../../../collector/test/helpers/sshd.ts';
import { kubeBin, startControlPlane, type ControlPlane } from '../helpers/control-plane.ts';
import { assignmentOf, eventually } from '../helpers/fleet.ts';
import { startNodeAgent, type NodeAgent, type PodInfo } from '../helpers/node-agent.ts';
import { descendants } from '../../../collector/test/helpers/process-tree.ts';

const NS = 'pglog';
const POOL = 'main';
const CHART = join(import.meta.dirname, '../../../charts/pglog');
/** The previous release: its chart (and CRDs) is what is installed first, then upgraded to CHART. */
const PREVIOUS = '60210b1';
const CRDS: ResourceType = { group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions', kind: 'CustomResourceDefinition', namespaced: false };
const RELEASE = 'pglog';
const HELM_VALUES = `pool.name=${POOL},pool.replicas=2,operator.leaseDurationSeconds=5,operator.resyncSeconds=10`;
// Four servers: 2 per shard on 2 shards, 1 per shard on 4. Their rates differ (`charlie` is hot),
// but the pool's sharding floor (minWeightBytesPerSecond) is above all of them, so every target
// weighs the same and the placement is that of four equal targets: 4 shards hold one target
// each, and scaling back to 2 moves exactly the targets of shards 2 and 3 and nothing else.
// `delta` is pinned to the sidecar (transport proxy): its stream runs through the pod's
// `pglog sshproxy` and moves with it. `charlie` is `auto` and hot: about 0.7 Mbit/s against a
// promote threshold of 0.12 Mbit/s (the others, about 0.06 Mbit/s, stay below it), so the
// operator moves it to the sidecar once its smoothed rate (tau 30 s, from 0) crosses it.
const TARGETS = ['alpha', 'bravo', 'charlie', 'delta'] as const;
const LOAD = { ratePerSecond: 40, payloadBytes: 100 };
const PROXIED = 'delta';
const HOT = 'charlie';
const HOT_LOAD = { ratePerSecond: 60, payloadBytes: 1400 };
const POOL_TUNING = {
  sharding: { minWeightBytesPerSecond: 4 * 1024 * 1024 },
  transport: { promoteAboveBitsPerSecond: 120_000, demoteBelowBitsPerSecond: 20_000, minDwellSeconds: 2 },
};
/** Every target owned by exactly one pod within this long of a scale change. */
const OWNED_WITHIN_MS = 30_000;
const run = promisify(execFile);

describe('end to end on one machine: helm install, a hot server promoted, scale 2 -> 4 -> 2 with the operator leader killed, helm upgrade and uninstall', { timeout: 180_000 }, () => {
  let cp: ControlPlane;
  let client: KubeClient & { close(): void };
  let agent: NodeAgent | undefined;
  let store: TestPostgres;
  let ssh: TestSshServer;
  let servers: LogServer[];
  let helmHome: string | undefined;
  let helmEnv: NodeJS.ProcessEnv = process.env;
  const loads = new Map<string, SeqLoad>();
  const started = Date.now();
  const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const since = (t0: number): string => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const kubectl = (args: string[], stdin?: string): Promise<string> => cp.kubectl(['-n', NS, ...args], stdin);
  const helm = async (args: string[]): Promise<void> => {
    await run(join(kubeBin(), 'helm'), [...args, '--kubeconfig', cp.kubeconfig, '--namespace', NS], { env: helmEnv });
  };
  let lastState = '';
  const podOutputs = (): string => {
    const names = new Set([...(agent?.pods().map((p) => p.name) ?? []), ...[0, 1, 2, 3].map((i) => `${POOL}-${i}`)]);
    return [...names].map((n) => `--- pod ${n}\n${(agent?.output(n) ?? '').split('\n').slice(-40).join('\n')}`).join('\n');
  };
  const scenario = (fn: () => Promise<void>) => async (): Promise<void> => {
    try {
      await fn();
    } catch (e) {
      process.stderr.write(`# failed at ${elapsed()}; last state:\n${lastState}\n${podOutputs()}\n`);
      throw e;
    }
  };
  const stored = (name: string): Promise<number> => storedRows(store.url, loads.get(name)!.run);
  async function rowsKeepArriving(): Promise<void> {
    const rows = await Promise.all(TARGETS.map((n) => stored(n)));
    await eventually('rows of every server keep arriving', 20_000, async () => {
      const now = await Promise.all(TARGETS.map((n) => stored(n)));
      return now.every((n, i) => n > rows[i]!) ? true : undefined;
    }, () => lastState);
  }

  // Every process the agent ran for the pods (pids, and the agent's directory: the pods' working
  // directories and kubeconfigs are under it), for the check that none is left after uninstall.
  const seenPids = new Set<number>();
  let agentRoot: string | undefined;
  const notePids = (): void => {
    for (const p of agent?.pods() ?? []) {
      agentRoot ??= dirname(dirname(p.kubeconfig));
      for (const c of p.containers) for (const pid of [c.pid, ...c.pids]) if (pid !== undefined) seenPids.add(pid);
    }
  };
  const leaseHolder = async (): Promise<string> => (await client.get<KubeObject & { spec?: { holderIdentity?: string } }>(LEASES, NS, 'pglog-operator'))?.spec?.holderIdentity ?? '';
  const operatorPods = (): PodInfo[] => agent!.pods().filter((p) => p.name.startsWith('pglog-operator-'));

  /** undefined until every target is owned by exactly one of the pods main-0 .. main-(replicas-1), all Ready. */
  async function owned(replicas: number): Promise<true | undefined> {
    notePids();
    const { shards, byTarget, duplicates } = await assignmentOf(client, NS, POOL);
    const pods = (await client.list<KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }>(PODS, NS, { labelSelector: `pglog.io/pool=${POOL}` })).items;
    const reporters = new Map<string, Array<{ index: number; epoch: number }>>();
    for (const s of shards) {
      for (const t of s.status?.targets ?? []) {
        if (t.connected) reporters.set(t.name, [...(reporters.get(t.name) ?? []), { index: s.spec.index, epoch: t.epoch }]);
      }
    }
    lastState = JSON.stringify({
      shards: shards.map((s) => ({
        index: s.spec.index, spec: s.spec.targets.map((t) => `${t.name}@${t.epoch}/${t.transport}`),
        status: s.status?.targets?.map((t) => `${t.name}@${t.epoch}/${t.transport}/${t.connected ? 'connected' : 'not connected'}/${Math.round(t.bytesPerSecond * 8 / 1000)} kbit/s`),
      })),
      pods: pods.map((p) => `${p.metadata.name} ready=${p.status?.conditions?.find((c) => c.type === 'Ready')?.status}${p.metadata.deletionTimestamp === undefined ? '' : ' terminating'}`),
    }, null, 1);
    const names = pods.map((p) => p.metadata.name).sort().join();
    const want = Array.from({ length: replicas }, (_, i) => `${POOL}-${i}`).join();
    if (names !== want || !pods.every((p) => p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True')) return undefined;
    if (duplicates.length > 0 || shards.length !== replicas) return undefined;
    for (const name of TARGETS) {
      const index = byTarget.get(name);
      const spec = shards.find((s) => s.spec.index === index)?.spec.targets.find((t) => t.name === name);
      const by = reporters.get(name) ?? [];
      if (index === undefined || index >= replicas || by.length !== 1 || by[0]!.index !== index || by[0]!.epoch !== spec?.epoch) return undefined;
    }
    return true;
  }

  /** The transport of `name` in its shard's spec, and as that shard's collector reports it (connected). */
  async function transportOf(name: string): Promise<{ spec: string | undefined; reported: string | undefined }> {
    const { shards, byTarget } = await assignmentOf(client, NS, POOL);
    const shard = shards.find((s) => s.spec.index === byTarget.get(name));
    return { spec: shard?.spec.targets.find((t) => t.name === name)?.transport, reported: shard?.status?.targets?.find((t) => t.name === name && t.connected)?.transport };
  }
  const inSidecar = (name: string, withinMs: number): Promise<true> => eventually(`${name} in the sidecar (shard spec and its collector's report: proxy)`, withinMs, async () => {
    await owned(0).catch(() => undefined); // only to refresh lastState
    const t = await transportOf(name);
    return t.spec === 'proxy' && t.reported === 'proxy' ? true : undefined;
  }, () => lastState);

  before(async () => {
    [cp, store, ssh, servers] = await Promise.all([
      startControlPlane({ controllerManager: true }), startPostgres(), startSshServer(), Promise.all(TARGETS.map(() => startLogServer())),
    ]);
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    await cp.kubectl(['create', 'namespace', NS]);
    await kubectl(['create', 'secret', 'generic', 'pglog-store', `--from-literal=url=${store.url}`]);
    agent = await startNodeAgent({ kubeconfig: cp.kubeconfig, namespaces: [NS] });
    // helm's cache, config and data in a private directory: nothing of the user's is read or written.
    helmHome = mkdtempSync(join(tmpdir(), 'pglog-e2e-helm-'));
    helmEnv = { ...process.env, HELM_CACHE_HOME: join(helmHome, 'cache'), HELM_CONFIG_HOME: join(helmHome, 'config'), HELM_DATA_HOME: join(helmHome, 'data') };
    // The previous release's chart, CRDs included, as it was committed.
    const archive = join(helmHome, 'previous.tar');
    await run('git', ['-C', join(CHART, '../..'), 'archive', '--output', archive, PREVIOUS, 'charts', 'crds']);
    await run('tar', ['-xf', archive, '-C', helmHome]);
    await helm(['install', RELEASE, join(helmHome, 'charts/pglog'), '--set', HELM_VALUES]);
    // The chart has no values for the pool's sharding and transport tuning: patched as a user would.
    await kubectl(['patch', `collectorpool/${POOL}`, '--type', 'merge', '-p', JSON.stringify({ spec: POOL_TUNING })]);
    for (const [i, name] of TARGETS.entries()) {
      await kubectl(['create', 'secret', 'generic', `${name}-ssh`, `--from-file=id_ed25519=${ssh.privateKeyFile}`, `--from-file=known_hosts=${ssh.knownHostsFile}`]);
      // The Secret opts in to serving pglog (docs/targets.md).
      await kubectl(['label', 'secret', `${name}-ssh`, 'pglog.io/ssh-credentials=true']);
      await kubectl(['apply', '-f', '-'], JSON.stringify(logServerTarget(name, `${name}-ssh`, ssh, servers[i]!, { pool: POOL, transport: name === PROXIED ? 'proxy' : 'auto' })));
    }
    for (const [i, name] of TARGETS.entries()) loads.set(name, startSeqLoad(servers[i]!.url, name === HOT ? HOT_LOAD : LOAD));
    console.log(`# set up (helm install, targets applied, load running) in ${elapsed()}`);
  });

  after(async () => {
    await Promise.allSettled([...loads.values()].map((l) => l.stop()));
    await agent?.stop(5);
    client?.close();
    await Promise.allSettled([cp?.stop(), ssh?.dispose(), store?.stop(), ...(servers ?? []).map((s) => s.dispose())]);
    if (helmHome !== undefined) rmSync(helmHome, { recursive: true, force: true });
  });

  test('the operator Deployment and the pool StatefulSet run: rows of every server arrive, each target owned by one pod, the pinned one through the sidecar', scenario(async () => {
    await eventually('rows of every server in the store', 90_000, async () => ((await Promise.all(TARGETS.map((n) => stored(n)))).every((n) => n > 0) ? true : undefined), () => lastState);
    console.log(`# first rows at ${elapsed()}`);
    await eventually('every target owned by exactly one of 2 pods', OWNED_WITHIN_MS, () => owned(2), () => lastState);
    assert.equal(operatorPods().length, 2, 'the operator Deployment runs 2 replicas');
    const collector = agent!.pods().find((p) => p.name === `${POOL}-0`)!;
    assert.deepEqual(collector.containers.map((c) => [c.kind, c.argv[1]]), [['sidecar', 'sshproxy'], ['main', 'collect']]);
    assert.ok(collector.containers[1]!.argv.includes('external'), 'the collector uses the sidecar (--sshproxy external)');
    // Only the collector container has API credentials (the projected token it alone mounts)
    // and the store URL; the sidecar, which talks to the remote servers, has neither.
    const [sidecar, main] = collector.containers;
    assert.ok(main!.argv.includes('--kubeconfig') && main!.env['PGLOG_STORE_URL'] !== undefined);
    assert.ok(!sidecar!.argv.includes('--kubeconfig'), 'no token for the sidecar');
    assert.equal(sidecar!.env['PGLOG_STORE_URL'], undefined);
    const proxied = (await assignmentOf(client, NS, POOL)).shards.flatMap((sh) => sh.status?.targets ?? []).find((t) => t.name === PROXIED);
    assert.equal(proxied?.transport, 'proxy', `${PROXIED} read through the sidecar`);
    console.log(`# owned at ${elapsed()}:\n${lastState.replace(/^/gm, '#   ')}`);
  }));

  test(`the operator promotes the hot server (${HOT}, auto) to the sidecar; the others stay; its rows keep arriving`, scenario(async () => {
    const t0 = Date.now();
    await inSidecar(HOT, 60_000);
    const promoted = since(t0);
    for (const name of TARGETS.filter((n) => n !== HOT && n !== PROXIED)) assert.equal((await transportOf(name)).spec, 'inproc', `${name} (below the threshold) stays in process: ${lastState}`);
    assert.equal((await transportOf(PROXIED)).spec, 'proxy', `${PROXIED} stays pinned to the sidecar`);
    await rowsKeepArriving();
    console.log(`# ${HOT} promoted to the sidecar ${promoted} after the first rows (at ${elapsed()}):\n${lastState.replace(/^/gm, '#   ')}`);
  }));

  const scaleTest = (from: number, to: number, note = '', leader?: () => string): void => {
    test(`kubectl scale collectorpool ${from} -> ${to}${note}: every target owned by exactly one pod within 30 s`, scenario(async () => {
      const before = await assignmentOf(client, NS, POOL);
      const t0 = Date.now();
      await kubectl(['scale', `collectorpool/${POOL}`, '--replicas', String(to)]);
      // The old state never passes: the pods are main-0 .. main-(to-1) only after the change.
      await eventually(`every target owned by exactly one of ${to} pods`, OWNED_WITHIN_MS, () => owned(to), () => lastState);
      const ownedAfter = since(t0);
      const now = await assignmentOf(client, NS, POOL);
      const moved = TARGETS.filter((n) => now.byTarget.get(n) !== before.byTarget.get(n));
      // Up: four targets of equal weight over four shards, one each. Down: exactly the removed
      // shards' targets move, the others stay put.
      if (to > from) assert.deepEqual(now.shards.map((s) => s.spec.targets.length), [1, 1, 1, 1], `one target per shard: ${lastState}`);
      else assert.deepEqual(moved, TARGETS.filter((n) => before.byTarget.get(n)! >= to), `only the removed shards' targets moved: ${lastState}`);
      console.log(`# ${from} -> ${to}: moved ${moved.map((n) => `${n} ${before.byTarget.get(n)}->${now.byTarget.get(n)}`).join(', ')}; owned ${ownedAfter} after kubectl scale (at ${elapsed()})`);
      // The promoted target keeps its transport wherever it goes.
      await inSidecar(HOT, 20_000);
      await rowsKeepArriving();
      if (leader !== undefined) assert.equal(await leaseHolder(), leader(), 'the scale step was carried out under the new leader');
    }));
  };
  scaleTest(2, 4);

  let newLeader = '';
  test('the operator leader is killed (SIGKILL, its pod force-deleted) while the load runs: the other replica takes the Lease', scenario(async () => {
    const holder = await leaseHolder();
    const operators = operatorPods();
    const leader = operators.find((p) => p.name === holder);
    assert.ok(leader !== undefined, `the Lease holder (${holder}) is one of the operator pods (${operators.map((p) => p.name).join(', ')})`);
    const standby = operators.find((p) => p.name !== holder)!;
    const t0 = Date.now();
    // A crash: no SIGTERM, so the Lease is not given up; the pod is force-deleted right after,
    // as when its node dies, so that the agent does not restart it under the same identity.
    for (const c of leader.containers) {
      if (c.pid === undefined) continue;
      for (const pid of [c.pid, ...descendants(c.pid)]) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
    }
    const now: DeleteOptions & { gracePeriodSeconds: number } = { gracePeriodSeconds: 0 };
    await client.delete(PODS, NS, holder, now);
    const next = await eventually('another replica holds the Lease', 30_000, async () => {
      const h = await leaseHolder();
      return h !== '' && h !== holder ? h : undefined;
    });
    // Usually the standby (it saw the last renewal first); the Deployment's replacement pod may
    // win the race when it starts within a retry period of the kill.
    assert.ok(next === standby.name || !operators.some((p) => p.name === next), `a live replica (${standby.name} or the replacement) took over, not ${next}`);
    newLeader = next;
    console.log(`# leader ${holder} killed; ${next}${next === standby.name ? ' (the standby)' : ' (the replacement pod)'} holds the Lease ${since(t0)} later (at ${elapsed()})`);
    await rowsKeepArriving();
  }));
  scaleTest(4, 2, ', carried out by the new leader', () => newLeader);

  test('helm upgrade from the previous chart to this one: its hook applies the new CRDs, the Deployment rolls, a new replica leads, rows keep arriving, every target owned', scenario(async () => {
    const crd = (): Promise<(KubeObject & { spec: { versions: Array<{ schema: { openAPIV3Schema: { properties: { spec: { properties: Record<string, unknown> } } } } }> } }) | null> =>
      client.get(CRDS, undefined, 'postgrestargets.pglog.io');
    assert.ok(!('startAt' in (await crd())!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties), 'installed with the previous CRDs');
    const old = new Set(operatorPods().map((p) => p.name));
    const t0 = Date.now();
    await helm(['upgrade', RELEASE, CHART, '--set', `${HELM_VALUES},operator.resources.requests.cpu=150m`]);
    let state = '';
    await eventually('the operator Deployment rolled: 2 new Ready replicas with the new resources, one holding the Lease', 90_000, async () => {
      const running = operatorPods();
      const holder = await leaseHolder();
      state = `operator pods ${running.map((p) => `${p.name}${p.ready ? ' ready' : ''}`).join(', ')}; Lease holder ${holder}`;
      if (running.length !== 2 || running.some((p) => old.has(p.name) || !p.ready) || !running.some((p) => p.name === holder)) return undefined;
      for (const p of running) {
        const pod = await client.get<KubeObject & { spec: { containers: Array<{ resources?: { requests?: Record<string, string> } }> } }>(PODS, NS, p.name);
        if (pod?.spec.containers[0]?.resources?.requests?.['cpu'] !== '150m') return undefined;
      }
      return true;
    }, () => state);
    console.log(`# helm upgrade: rolled ${since(t0)} after (at ${elapsed()}); ${state}`);
    const upgraded = await crd();
    assert.ok('startAt' in upgraded!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties, 'the upgrade brought the new CRD (spec.startAt)');
    assert.ok((upgraded!.metadata as { managedFields?: Array<{ manager: string }> }).managedFields?.some((f) => f.manager === 'pglog-crds'), 'applied by the chart\'s hook');
    await eventually('every target owned by exactly one of 2 pods', OWNED_WITHIN_MS, () => owned(2), () => lastState);
    await inSidecar(HOT, 20_000);
    await rowsKeepArriving();
  }));

  test('load stopped: every statement of every server is in the store exactly once', scenario(async () => {
    for (const l of loads.values()) await l.stop();
    for (const [i, name] of TARGETS.entries()) {
      console.log(`# ${await expectStoredOnce(store.url, name, loads.get(name)!.run, servers[i]!.logDirectory)}`);
    }
    // The collectors' JSON records ("[collector] {...}" in the agent's output): no errors (a fenced old owner is expected).
    const records = [0, 1, 2, 3].flatMap((i) => agent!.output(`${POOL}-${i}`).split('\n'))
      .flatMap((l) => { try { return l.startsWith('[collector] {') ? [JSON.parse(l.slice(12)) as Record<string, unknown>] : []; } catch { return []; } });
    assert.ok(records.length > 0, 'collector records in the pods\' output');
    const errors = records.filter((r) => Number(r['level']) >= 50 && r['code'] !== 'STORE_FENCED');
    assert.deepEqual(errors.map((r) => `${String(r['msg'])} ${String(r['code'])}`), [], 'no errors logged by the collectors');
    const { shards } = await assignmentOf(client, NS, POOL);
    console.log(`# checked at ${elapsed()}; shards ${shards.map((s) => `${s.metadata.name}: ${s.spec.targets.map((t) => t.name).join(',')}`).join('; ')}`);
  }));

  test('helm uninstall leaves nothing behind: no object of the release, no pool, shard, StatefulSet, pod or process; the CRDs stay', scenario(async () => {
    notePids();
    const root = agentRoot;
    assert.ok(root !== undefined && root.startsWith('/tmp/na-'), `the agent's directory (${root})`);
    // No process whose working directory or command line is in the agent's directory (pods,
    // their sidecars, and whatever they started: ssh clients), and none of the pids seen alive.
    const ours = (pid: string): string | undefined => {
      try {
        const cwd = readlinkSync(`/proc/${pid}/cwd`);
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
        return cwd.startsWith(root) || cmdline.includes(root) ? `${pid} (${cwd}): ${cmdline}` : undefined;
      } catch {
        return undefined;
      }
    };
    const ourProcesses = (): string[] => readdirSync('/proc').filter((p) => /^\d+$/.test(p)).flatMap((p) => ours(p) ?? []);
    const before = ourProcesses().length;
    assert.ok(before >= 6, `the check sees the pods' processes while they run (${before}: 2 operators, 2 x collector + sidecar)`);
    const t0 = Date.now();
    await helm(['uninstall', RELEASE, '--wait', '--timeout', '90s']);
    const uninstalled = since(t0);
    const types = async (namespaced: boolean): Promise<string[]> => (await cp.kubectl(['api-resources', '--verbs=list', `--namespaced=${namespaced}`, '-o', 'name']))
      .split('\n').filter((n) => n !== '' && !n.startsWith('events'));
    const namespacedTypes = await types(true);
    const all = [...namespacedTypes, ...await types(false)].join(',');
    let state = '';
    await eventually('nothing of the release left', 90_000, async () => {
      const labelled = (await cp.kubectl(['get', all, '-A', '-l', `app.kubernetes.io/instance=${RELEASE}`, '-o', 'name'])).trim();
      const pool = (await kubectl(['get', 'collectorpools,collectorshards,statefulsets,controllerrevisions,poddisruptionbudgets,deployments,replicasets,pods,services', '-o', 'name'])).trim();
      const running = agent!.pods().map((p) => p.name).join(' ');
      state = `labelled: ${labelled}\npool's: ${pool}\nagent's pods: ${running}`;
      return labelled === '' && pool === '' && running === '' ? true : undefined;
    }, () => state);
    const gone = since(t0);
    assert.deepEqual(ourProcesses(), [], 'no process of the agent\'s pods is left');
    assert.deepEqual([...seenPids].flatMap((p) => ours(String(p)) ?? []), []);
    // Helm never deletes CRDs: they stay, and so do the user's PostgresTargets and Secrets.
    const crds = (await cp.kubectl(['get', 'crd', '-o', 'name'])).trim().split('\n').filter((n) => n.endsWith('.pglog.io')).sort();
    assert.deepEqual(crds, ['customresourcedefinition.apiextensions.k8s.io/collectorpools.pglog.io', 'customresourcedefinition.apiextensions.k8s.io/collectorshards.pglog.io', 'customresourcedefinition.apiextensions.k8s.io/postgrestargets.pglog.io']);
    assert.equal(await client.get(COLLECTOR_POOLS, NS, POOL), null);
    // What is left in the namespace is the user's (targets, Secrets) and the namespace's own
    // (default ServiceAccount, kube-root-ca.crt); the leader Lease went with its owner, the
    // operator Deployment (garbage collector); events, not listed here, expire.
    const expected = [
      'configmap/kube-root-ca.crt',
      ...TARGETS.map((n) => `postgrestarget.pglog.io/${n}`), ...TARGETS.map((n) => `secret/${n}-ssh`), 'secret/pglog-store', 'serviceaccount/default',
    ].join(' ');
    let remaining = '';
    // (Endpoints and EndpointSlices of the deleted Services go a moment later.)
    await eventually(`only these left in ${NS}: ${expected}`, 20_000, async () => {
      remaining = (await kubectl(['get', namespacedTypes.join(','), '-o', 'name'])).trim().split('\n').sort().join(' ');
      return remaining === expected ? true : undefined;
    }, () => remaining);
    console.log(`# helm uninstall returned after ${uninstalled}, everything gone after ${gone} (at ${elapsed()}); ${before} processes before, none after, ${seenPids.size} pids seen gone; CRDs kept: ${crds.map((c) => c.split('/')[1]).join(', ')}; left in ${NS}: ${remaining}`);
  }));
});
