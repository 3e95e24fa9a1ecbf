// The whole system on one machine: a real kube-apiserver, etcd and kube-controller-manager;
// `helm install` of charts/pglog (CRDs, the operator Deployment, ServiceAccounts and RBAC, the
// default CollectorPool `main` with 2 replicas); the test node agent (helpers/node-agent.ts)
// runs every pod the Deployment and the StatefulSet create as local processes: the operator
// replicas, and per collector pod `pglog collect --shard $(POD_NAME) --sshproxy external` with
// its `pglog sshproxy` native sidecar, each with its service account's token, so the chart's
// RBAC is what they have. Four PostgresTargets (kubectl apply) point at local sshd + PostgreSQL
// servers under load, one pinned to the sidecar:
//   - rows of every server arrive in the store;
//   - `kubectl scale collectorpool --replicas 3`, then back to 2: within 30 s of each change
//     every target is owned by exactly one pod (in one shard's spec, reported connected by
//     that shard's collector with the same epoch, no other shard reporting it) and the pods are
//     exactly main-0 .. main-(N-1), Ready;
//   - with the load stopped the checker finds every statement exactly once (0 lost, 0 duplicated).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { createKubeClient } from '../../src/kube/client.ts';
import type { KubeClient, KubeObject } from '../../src/kube/client-types.ts';
import { loadKubeconfigFile } from '../../src/kube/config.ts';
import { PODS } from '../../src/kube/resources.ts';
import { checkStore, formatCheck } from '../../../collector/test/helpers/checker.ts';
import { startLogServer, type LogServer } from '../../../collector/test/helpers/log-server.ts';
import { startPostgres, type TestPostgres } from '../../../collector/test/helpers/postgres.ts';
import { startSeqLoad, type SeqLoad } from '../../../collector/test/helpers/seq-load.ts';
import { logServerTarget } from '../../../collector/test/helpers/shard-collector.ts';
import { startSshServer, type TestSshServer } from '../../../collector/test/helpers/sshd.ts';
import { kubeBin, startControlPlane, type ControlPlane } from '../helpers/control-plane.ts';
import { assignmentOf, eventually } from '../helpers/fleet.ts';
import { startNodeAgent, type NodeAgent } from '../helpers/node-agent.ts';

const NS = 'pglog';
const POOL = 'main';
const CHART = join(import.meta.dirname, '../../../charts/pglog');
// Four servers of similar load: 2 per shard on 2 shards. At 3 shards they cannot all fit within
// 1.25 x the mean (2 > 1.25 x 4/3), so the operator rounds the bound up by one target: the new
// shard takes the targets whose ring home it is, and scaling back moves exactly shard 2's
// targets and nothing else. `delta` is pinned to the
// sidecar (transport proxy): its stream runs through the pod's `pglog sshproxy` and moves with it.
const TARGETS = ['alpha', 'bravo', 'charlie', 'delta'] as const;
const LOAD = { ratePerSecond: 40, payloadBytes: 100 };
const PROXIED = 'delta';
/** Every target owned by exactly one pod within this long of a scale change. */
const OWNED_WITHIN_MS = 30_000;
const run = promisify(execFile);

describe('end to end on one machine: helm install, the node agent runs the pods, scale 2 -> 3 -> 2', { timeout: 180_000 }, () => {
  let cp: ControlPlane;
  let client: KubeClient & { close(): void };
  let agent: NodeAgent | undefined;
  let store: TestPostgres;
  let ssh: TestSshServer;
  let servers: LogServer[];
  let helmHome: string | undefined;
  const loads = new Map<string, SeqLoad>();
  const started = Date.now();
  const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const kubectl = (args: string[], stdin?: string): Promise<string> => cp.kubectl(['-n', NS, ...args], stdin);
  let lastState = '';
  const podOutputs = (): string => {
    const names = new Set([...(agent?.pods().map((p) => p.name) ?? []), `${POOL}-0`, `${POOL}-1`, `${POOL}-2`]);
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
  const stored = async (name: string): Promise<number> => {
    try {
      return (await checkStore(store.url, loads.get(name)!.run, { numbers: [] })).stored;
    } catch (e) {
      if ((e as { code?: string }).code === '42P01') return 0;
      throw e;
    }
  };

  /** undefined until every target is owned by exactly one of the pods main-0 .. main-(replicas-1), all Ready. */
  async function owned(replicas: number): Promise<true | undefined> {
    const { shards, byTarget, duplicates } = await assignmentOf(client, NS, POOL);
    const pods = (await client.list<KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }>(PODS, NS, { labelSelector: `pglog.io/pool=${POOL}` })).items;
    const reporters = new Map<string, Array<{ index: number; epoch: number }>>();
    for (const s of shards) {
      for (const t of s.status?.targets ?? []) {
        if (t.connected) reporters.set(t.name, [...(reporters.get(t.name) ?? []), { index: s.spec.index, epoch: t.epoch }]);
      }
    }
    lastState = JSON.stringify({
      shards: shards.map((s) => ({ index: s.spec.index, spec: s.spec.targets.map((t) => `${t.name}@${t.epoch}/${t.transport}`), status: s.status?.targets?.map((t) => `${t.name}@${t.epoch}/${t.transport}/${t.connected ? 'connected' : 'not connected'}`) })),
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
    const helmEnv = { ...process.env, HELM_CACHE_HOME: join(helmHome, 'cache'), HELM_CONFIG_HOME: join(helmHome, 'config'), HELM_DATA_HOME: join(helmHome, 'data') };
    await run(join(kubeBin(), 'helm'), [
      'install', 'pglog', CHART, '--kubeconfig', cp.kubeconfig, '--namespace', NS,
      '--set', `pool.name=${POOL},pool.replicas=2,operator.leaseDurationSeconds=5,operator.resyncSeconds=10`,
    ], { env: helmEnv });
    for (const [i, name] of TARGETS.entries()) {
      await kubectl(['create', 'secret', 'generic', `${name}-ssh`, `--from-file=id_ed25519=${ssh.privateKeyFile}`, `--from-file=known_hosts=${ssh.knownHostsFile}`]);
      await kubectl(['apply', '-f', '-'], JSON.stringify(logServerTarget(name, `${name}-ssh`, ssh, servers[i]!, { pool: POOL, transport: name === PROXIED ? 'proxy' : 'auto' })));
    }
    for (const [i, name] of TARGETS.entries()) loads.set(name, startSeqLoad(servers[i]!.url, LOAD));
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
    const operators = agent!.pods().filter((p) => p.name.startsWith('pglog-operator-'));
    assert.equal(operators.length, 2, 'the operator Deployment runs 2 replicas');
    const collector = agent!.pods().find((p) => p.name === `${POOL}-0`)!;
    assert.deepEqual(collector.containers.map((c) => [c.kind, c.argv[1]]), [['sidecar', 'sshproxy'], ['main', 'collect']]);
    assert.ok(collector.containers[1]!.argv.includes('external'), 'the collector uses the sidecar (--sshproxy external)');
    const proxied = (await assignmentOf(client, NS, POOL)).shards.flatMap((sh) => sh.status?.targets ?? []).find((t) => t.name === PROXIED);
    assert.equal(proxied?.transport, 'proxy', `${PROXIED} read through the sidecar`);
    console.log(`# owned at ${elapsed()}:\n${lastState.replace(/^/gm, '#   ')}`);
  }));

  for (const [from, to] of [[2, 3], [3, 2]] as const) {
    test(`kubectl scale collectorpool ${from} -> ${to}: every target owned by exactly one pod within 30 s`, scenario(async () => {
      const rows = await Promise.all(TARGETS.map((n) => stored(n)));
      const before = await assignmentOf(client, NS, POOL);
      const t0 = Date.now();
      await kubectl(['scale', `collectorpool/${POOL}`, '--replicas', String(to)]);
      // The old state never passes: the pods are main-0 .. main-(to-1) only after the change.
      await eventually(`every target owned by exactly one of ${to} pods`, OWNED_WITHIN_MS, () => owned(to), () => lastState);
      const now = await assignmentOf(client, NS, POOL);
      const moved = TARGETS.filter((n) => now.byTarget.get(n) !== before.byTarget.get(n));
      // Up: shard 2 takes load; down: exactly shard 2's targets move, the others stay put.
      if (to > from) assert.ok(TARGETS.some((n) => now.byTarget.get(n) === 2), `a target moved to shard 2: ${lastState}`);
      else assert.deepEqual(moved, TARGETS.filter((n) => before.byTarget.get(n) === 2), `only shard 2's targets moved: ${lastState}`);
      console.log(`# ${from} -> ${to}: moved ${moved.map((n) => `${n} ${before.byTarget.get(n)}->${now.byTarget.get(n)}`).join(', ')}; owned ${((Date.now() - t0) / 1000).toFixed(1)} s after kubectl scale (at ${elapsed()})`);
      await eventually('rows of every server keep arriving', 20_000, async () => {
        const now = await Promise.all(TARGETS.map((n) => stored(n)));
        return now.every((n, i) => n > rows[i]!) ? true : undefined;
      }, () => lastState);
    }));
  }

  test('load stopped: every statement of every server is in the store exactly once', scenario(async () => {
    for (const l of loads.values()) await l.stop();
    for (const [i, name] of TARGETS.entries()) {
      const check = (): ReturnType<typeof checkStore> => checkStore(store.url, loads.get(name)!.run, { logDirectory: servers[i]!.logDirectory });
      let last = '';
      await eventually(`every ${name} statement stored`, 30_000, async () => {
        const r = await check();
        last = formatCheck(r);
        return r.lost.length === 0 && r.expected > 0 ? true : undefined;
      }, () => last);
      const r = await check();
      assert.equal(r.lost.length, 0, `${name}: ${formatCheck(r)}`);
      assert.equal(r.duplicated.length, 0, `${name}: ${formatCheck(r)}`);
      console.log(`# ${name}: ${formatCheck(r)}`);
    }
    // The collectors' JSON records ("[collector] {...}" in the agent's output): no errors (a fenced old owner is expected).
    const records = [0, 1, 2].flatMap((i) => agent!.output(`${POOL}-${i}`).split('\n'))
      .flatMap((l) => { try { return l.startsWith('[collector] {') ? [JSON.parse(l.slice(12)) as Record<string, unknown>] : []; } catch { return []; } });
    assert.ok(records.length > 0, 'collector records in the pods\' output');
    const errors = records.filter((r) => Number(r['level']) >= 50 && r['code'] !== 'STORE_FENCED');
    assert.deepEqual(errors.map((r) => `${String(r['msg'])} ${String(r['code'])}`), [], 'no errors logged by the collectors');
    const { shards } = await assignmentOf(client, NS, POOL);
    console.log(`# done at ${elapsed()}; shards ${shards.map((s) => `${s.metadata.name}: ${s.spec.targets.map((t) => t.name).join(',')}`).join('; ')}`);
  }));
});
