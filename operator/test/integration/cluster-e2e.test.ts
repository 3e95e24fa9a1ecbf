// The whole system as users run it, on one machine: the real node of helpers/real-node.ts
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy,
// containerd, runc and CNI) with the built image (PGLOG_TEST_IMAGE) imported into its
// containerd; `helm install` of charts/pglog as of the previous release (git commit 60210b1, its
// chart and CRDs) with that image, later upgraded to this chart and a new image tag. The kubelet
// runs every pod: the operator replicas and, per collector pod, `pglog collect --shard` with its
// `pglog sshproxy` native sidecar, in a namespace that enforces Pod Security `restricted` (a pod
// that breaks it is not admitted), with the probes, memory limits, read-only root and non-root
// users of the chart and the operator. Four PostgresTargets (kubectl apply) point at sshd +
// PostgreSQL servers under load on the node's gateway address (reachable from the pods, and
// from nothing beyond this machine), one pinned to the sidecar, one hot (`auto`, far above the
// pool's promote threshold, which the test lowers by patching the pool's spec.transport: the
// chart has no value for it):
//   - rows of every server arrive in the store (a PostgreSQL the pods reach over TCP with a
//     password, which appears in no container's output);
//   - the sidecar holds neither API credentials nor the store URL (checked inside it, kubectl exec);
//   - the operator promotes the hot server to the sidecar: its shard's spec says proxy, its
//     collector reports transport proxy, and its rows keep arriving;
//   - a collector's container is SIGKILLed through containerd: the kubelet restarts it in its
//     pod (restartPolicy Always), and it resumes from the store;
//   - `kubectl scale collectorpool --replicas 4`, then back to 2: within 60 s of each change
//     every target is owned by exactly one pod (in one shard's spec, reported connected by
//     that shard's collector with the same epoch, no other shard reporting it) and the pods are
//     exactly main-0 .. main-(N-1), Ready; on the way down exactly the removed shards' targets move;
//   - between the two, the operator leader's container is SIGKILLed through containerd and its
//     pod force-deleted (a crashed node): the other replica takes the Lease and carries out the
//     scale-down;
//   - `helm upgrade` to this chart, a new image tag and new operator resources: its pre-upgrade
//     hook Job applies this chart's CRDs (ADR 0013: they gain spec.startAt), the Deployment
//     rolls, a new pod leads, the StatefulSet rolls one pod at a time (never two collectors
//     down at once), every target still owned by one pod, rows keep arriving;
//   - with the load stopped the checker finds every statement exactly once (0 lost, 0
//     duplicated); no collector logged an error; no container but the killed one was restarted, none OOM-killed
//     under the memory limit the operator tuned its heap for (the peak is reported);
//   - `helm uninstall` leaves nothing behind: no object with the release's label, no pool,
//     shard, StatefulSet or pod, no container task in containerd and no process in a pod's
//     cgroup; the CRDs stay (Helm never deletes CRDs), so do the user's PostgresTargets and
//     Secrets. The operators' leader Lease, created at run time and so unknown to Helm, is
//     owned by the operator Deployment and goes with it. Nothing else is left in the namespace.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import type { DeleteOptions, KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_POOLS, CUSTOM_RESOURCE_DEFINITIONS as CRDS, LEASES, PODS } from '@pglog/common/kube/resources.ts';
import { expectStoredOnce, storedRows } from '@pglog/test-support/checker.ts';
import { isErrorRecord } from '@pglog/test-support/collector-process.ts';
import { type E2eCluster, POD_SECURITY_WARNING, startE2eCluster } from '@pglog/test-support/e2e-cluster.ts';
import { assignmentOf, eventually } from '@pglog/test-support/fleet.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { processesInCgroup } from '@pglog/test-support/process-tree.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { logServerTarget } from '@pglog/test-support/shard-collector.ts';
import { createSshSecret } from '@pglog/test-support/ssh-secret.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';

const NS = 'pglog';
const POOL = 'main';
const CHART = join(import.meta.dirname, '../../../charts/pglog');
/** The previous release: its chart (and CRDs) is what is installed first, then upgraded to CHART. */
const PREVIOUS = '60210b1';
/** The tag `helm upgrade` moves to: the same image under a new name, so every pod template changes. */
const NEXT_TAG = 'e2e-next';
const RELEASE = 'pglog';
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
/**
 * The collectors' resources: small requests so that 4 pods and the rolling upgrade fit a 2-core
 * node, and a memory limit well under the default 1 Gi, from which the operator sizes the V8
 * heap: the kubelet (the cgroup) enforces it, and the test checks that nothing was OOM-killed.
 */
const COLLECTOR_RESOURCES = { requests: { cpu: '100m', memory: '192Mi' }, limits: { memory: '384Mi' } };
/** Every target owned by exactly one pod within this long of a scale change (pods start, probes pass). */
const OWNED_WITHIN_MS = 60_000;

interface PodObject extends KubeObject {
  spec: {
    nodeName?: string;
    containers: Array<{ name: string; image: string; args?: string[]; resources?: { requests?: Record<string, string> } }>;
    initContainers?: Array<{ name: string; args?: string[]; restartPolicy?: string }>;
  };
  status?: {
    phase?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: PodStatusList;
    initContainerStatuses?: PodStatusList;
  };
}
type PodStatusList = Array<{
  name: string;
  containerID?: string;
  restartCount: number;
  started?: boolean;
  state?: { running?: { startedAt: string } };
  lastState?: { terminated?: { reason?: string } };
}>;
const isReady = (p: PodObject): boolean => p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

describe(
  'end to end on a real node: helm install, a hot server promoted, scale 2 -> 4 -> 2 with the operator leader killed, helm upgrade to a new image and uninstall',
  { timeout: 900_000 },
  () => {
    let cluster: E2eCluster;
    let client: KubeClient & { close(): void };
    let store: TestPostgres;
    let storePassword = '';
    let ssh: TestSshServer;
    let servers: LogServer[];
    const loads = new Map<string, SeqLoad>();
    const started = Date.now();
    const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const since = (t0: number): string => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
    const kubectl = (args: string[], stdin?: string): Promise<string> => cluster.kubectl(args, stdin);
    /** helm, checked for Pod Security warnings (the namespace warns on `restricted`). */
    const helm = async (args: string[]): Promise<void> => {
      const { stderr } = await cluster.helm(args);
      assert.doesNotMatch(stderr, POD_SECURITY_WARNING, `helm ${args[0]}: no Pod Security warning`);
    };
    let lastState = '';
    const podOutputs = (): string => cluster?.node.podLogs.all(NS).slice(-150).join('\n') ?? '';
    const scenario = (fn: () => Promise<void>) => async (): Promise<void> => {
      try {
        await fn();
      } catch (e) {
        process.stderr.write(
          `# failed at ${elapsed()}; last state:\n${lastState}\n--- pods' output (last lines)\n${podOutputs()}\n--- pods\n${await kubectl(['get', 'pods', '-o', 'wide']).catch(() => '')}\n`,
        );
        throw e;
      }
    };
    const stored = (name: string): Promise<number> => storedRows(store.url, loads.get(name)!.run);
    async function rowsKeepArriving(): Promise<void> {
      const rows = await Promise.all(TARGETS.map((n) => stored(n)));
      await eventually(
        'rows of every server keep arriving',
        30_000,
        async () => {
          const now = await Promise.all(TARGETS.map((n) => stored(n)));
          return now.every((n, i) => n > rows[i]!) ? true : undefined;
        },
        () => lastState,
      );
    }

    const pods = async (selector: string): Promise<PodObject[]> => (await client.list<PodObject>(PODS, NS, { labelSelector: selector })).items;
    const collectorPods = (): Promise<PodObject[]> => pods(`pglog.io/pool=${POOL}`);
    const operatorPods = async (): Promise<PodObject[]> =>
      (await pods('app.kubernetes.io/component=operator')).filter((p) => p.metadata.deletionTimestamp === undefined);
    const leaseHolder = async (): Promise<string> =>
      (await client.get<KubeObject & { spec?: { holderIdentity?: string } }>(LEASES, NS, 'pglog-operator'))?.spec?.holderIdentity ?? '';
    /** Restarts and OOM kills of every container of the pool's pods seen so far, by pod uid and container. */
    const restarts = new Map<string, string>();
    const noteRestarts = (list: readonly PodObject[]): void => {
      for (const p of list) {
        for (const c of [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]) {
          if (c.restartCount > 0) restarts.set(`${p.metadata.name}/${c.name}`, `${c.restartCount} restart(s), last ${c.lastState?.terminated?.reason ?? '?'}`);
        }
      }
    };

    /** undefined until every target is owned by exactly one of the pods main-0 .. main-(replicas-1), all Ready. */
    async function owned(replicas: number): Promise<true | undefined> {
      const { shards, byTarget, duplicates } = await assignmentOf(client, NS, POOL);
      const podList = await collectorPods();
      noteRestarts(podList);
      const reporters = new Map<string, Array<{ index: number; epoch: number }>>();
      for (const s of shards) {
        for (const t of s.status?.targets ?? []) {
          if (t.connected) reporters.set(t.name, [...(reporters.get(t.name) ?? []), { index: s.spec.index, epoch: t.epoch }]);
        }
      }
      lastState = JSON.stringify(
        {
          shards: shards.map((s) => ({
            index: s.spec.index,
            spec: s.spec.targets.map((t) => `${t.name}@${t.epoch}/${t.transport}`),
            status: s.status?.targets?.map(
              (t) => `${t.name}@${t.epoch}/${t.transport}/${t.connected ? 'connected' : 'not connected'}/${Math.round((t.bytesPerSecond * 8) / 1000)} kbit/s`,
            ),
          })),
          pods: podList.map((p) => `${p.metadata.name} ready=${isReady(p)}${p.metadata.deletionTimestamp === undefined ? '' : ' terminating'}`),
        },
        null,
        1,
      );
      const names = podList
        .map((p) => p.metadata.name)
        .sort()
        .join();
      const want = Array.from({ length: replicas }, (_, i) => `${POOL}-${i}`).join();
      if (names !== want || !podList.every(isReady)) return undefined;
      if (duplicates.length > 0 || shards.length !== replicas) return undefined;
      for (const name of TARGETS) {
        const index = byTarget.get(name);
        const spec = shards.find((s) => s.spec.index === index)?.spec.targets.find((t) => t.name === name);
        const by = reporters.get(name) ?? [];
        if (index === undefined || index >= replicas || by.length !== 1 || by[0]!.index !== index || by[0]!.epoch !== spec?.epoch) return undefined;
      }
      return true;
    }
    /** Waits until every target is owned by exactly one of the pods main-0 .. main-(replicas-1), all Ready. */
    const ownedByOneOf = (replicas: number): Promise<true> =>
      eventually(
        `every target owned by exactly one of ${replicas} pods`,
        OWNED_WITHIN_MS,
        () => owned(replicas),
        () => lastState,
      );

    /** The transport of `name` in its shard's spec, and as that shard's collector reports it (connected). */
    async function transportOf(name: string): Promise<{ spec: string | undefined; reported: string | undefined }> {
      const { shards, byTarget } = await assignmentOf(client, NS, POOL);
      const shard = shards.find((s) => s.spec.index === byTarget.get(name));
      return {
        spec: shard?.spec.targets.find((t) => t.name === name)?.transport,
        reported: shard?.status?.targets?.find((t) => t.name === name && t.connected)?.transport,
      };
    }
    const inSidecar = (name: string, withinMs: number): Promise<true> =>
      eventually(
        `${name} in the sidecar (shard spec and its collector's report: proxy)`,
        withinMs,
        async () => {
          await owned(0).catch(() => undefined); // only to refresh lastState
          const t = await transportOf(name);
          return t.spec === 'proxy' && t.reported === 'proxy' ? true : undefined;
        },
        () => lastState,
      );

    before(async () => {
      cluster = await startE2eCluster({
        namespace: NS,
        image: process.env['PGLOG_TEST_IMAGE'],
        docker: process.env['PGLOG_TEST_DOCKER'] ?? 'docker',
        extraTags: [NEXT_TAG],
      });
      client = cluster.client;
      const net = cluster.node.network;
      // The store and sshd listen on the node's gateway, where the pods reach them.
      [store, ssh, servers] = await Promise.all([
        startPostgres({ tcp: { address: net.gateway, clientRange: net.podRange }, settings: ['max_connections = 100'] }),
        startSshServer({ address: net.gateway }),
        Promise.all(TARGETS.map(() => startLogServer())),
      ]);
      storePassword = decodeURIComponent(new URL(store.tcpUrl!).password);
      await kubectl(['create', 'secret', 'generic', 'pglog-store', `--from-literal=url=${store.tcpUrl!}`]);
      const values = join(cluster.work, 'values.json');
      writeFileSync(
        values,
        JSON.stringify({
          image: { repository: cluster.repository, tag: cluster.tag },
          pool: { name: POOL, replicas: 2, collector: { resources: COLLECTOR_RESOURCES } },
          operator: { leaseDurationSeconds: 5, resyncSeconds: 10 },
        }),
      );
      await helm(['install', RELEASE, await cluster.chartAt(PREVIOUS), '-f', values]);
      // The chart has no values for the pool's sharding and transport tuning: patched as a user would.
      await kubectl(['patch', `collectorpool/${POOL}`, '--type', 'merge', '-p', JSON.stringify({ spec: POOL_TUNING })]);
      for (const [i, name] of TARGETS.entries()) {
        await createSshSecret(kubectl, name, ssh);
        await kubectl(
          ['apply', '-f', '-'],
          JSON.stringify(logServerTarget(name, `${name}-ssh`, ssh, servers[i]!, { pool: POOL, transport: name === PROXIED ? 'proxy' : 'auto' })),
        );
      }
      for (const [i, name] of TARGETS.entries()) loads.set(name, startSeqLoad(servers[i]!.url, name === HOT ? HOT_LOAD : LOAD));
      console.log(`# set up (real node, image imported, helm install, targets applied, load running) in ${elapsed()}`);
    });

    after(async () => {
      await Promise.allSettled([...loads.values()].map((l) => l.stop()));
      await cluster?.stop();
      await Promise.allSettled([ssh?.dispose(), store?.stop(), ...(servers ?? []).map((s) => s.dispose())]);
    });

    test(
      'the kubelet runs the operator Deployment and the pool StatefulSet: rows of every server arrive, each target owned by one pod, the pinned one through the sidecar',
      scenario(async () => {
        await eventually(
          'rows of every server in the store',
          180_000,
          async () => ((await Promise.all(TARGETS.map((n) => stored(n)))).every((n) => n > 0) ? true : undefined),
          () => lastState,
        );
        console.log(`# first rows at ${elapsed()}`);
        await ownedByOneOf(2);
        const operators = await operatorPods();
        assert.equal(operators.length, 2, 'the operator Deployment runs 2 replicas');
        assert.ok(
          operators.every((p) => p.spec.nodeName === cluster.node.nodeName && isReady(p)),
          'both on the real node, Ready',
        );
        const collector = (await collectorPods()).find((p) => p.metadata.name === `${POOL}-0`)!;
        assert.equal(collector.spec.nodeName, cluster.node.nodeName);
        assert.deepEqual(
          collector.spec.initContainers?.map((c) => [c.name, c.restartPolicy, c.args?.[0]]),
          [['sshproxy', 'Always', 'sshproxy']],
          'the sidecar is a native sidecar',
        );
        assert.deepEqual(
          collector.spec.containers.map((c) => [c.name, c.image, c.args?.[0]]),
          [['collector', `${cluster.repository}:${cluster.tag}`, 'collect']],
        );
        assert.ok(collector.spec.containers[0]!.args!.join(' ').includes('--sshproxy external'), 'the collector uses the sidecar');
        // Native sidecar order: the kubelet started the collector only once the sidecar's startup probe passed.
        const startedAt = (list: PodStatusList | undefined, name: string): number =>
          Date.parse(list?.find((c) => c.name === name)?.state?.running?.startedAt ?? '');
        const sidecarStarted = startedAt(collector.status?.initContainerStatuses, 'sshproxy');
        const collectorStarted = startedAt(collector.status?.containerStatuses, 'collector');
        assert.ok(sidecarStarted <= collectorStarted, `sidecar started at ${sidecarStarted}, collector at ${collectorStarted}`);
        assert.equal(collector.status?.initContainerStatuses?.[0]?.started, true);
        // Inside the running containers: only the collector has API credentials (the projected
        // token it alone mounts) and the store URL; the sidecar, which talks to the remote servers,
        // has neither.
        const inSidecarContainer = (cmd: string[]): Promise<string> => kubectl(['exec', `${POOL}-0`, '-c', 'sshproxy', '--', ...cmd]);
        await assert.rejects(
          inSidecarContainer(['ls', '/var/run/secrets/kubernetes.io/serviceaccount']),
          /No such file or directory/,
          'no token in the sidecar',
        );
        await assert.rejects(inSidecarContainer(['printenv', 'PGLOG_STORE_URL']), /exit 1/, 'no store URL in the sidecar');
        assert.match(await kubectl(['exec', `${POOL}-0`, '-c', 'collector', '--', 'ls', '/var/run/secrets/kubernetes.io/serviceaccount']), /^token$/m);
        assert.equal((await kubectl(['exec', `${POOL}-0`, '-c', 'collector', '--', 'id', '-u'])).trim(), '65532', 'non-root');
        await assert.rejects(kubectl(['exec', `${POOL}-0`, '-c', 'collector', '--', 'touch', '/usr/e2e']), /Read-only file system/, 'read-only root');
        const proxied = (await assignmentOf(client, NS, POOL)).shards.flatMap((sh) => sh.status?.targets ?? []).find((t) => t.name === PROXIED);
        assert.equal(proxied?.transport, 'proxy', `${PROXIED} read through the sidecar`);
        console.log(`# owned at ${elapsed()}:\n${lastState.replace(/^/gm, '#   ')}`);
      }),
    );

    test(
      `the operator promotes the hot server (${HOT}, auto) to the sidecar; the others stay; its rows keep arriving`,
      scenario(async () => {
        const t0 = Date.now();
        await inSidecar(HOT, 90_000);
        const promoted = since(t0);
        for (const name of TARGETS.filter((n) => n !== HOT && n !== PROXIED))
          assert.equal((await transportOf(name)).spec, 'inproc', `${name} (below the threshold) stays in process: ${lastState}`);
        assert.equal((await transportOf(PROXIED)).spec, 'proxy', `${PROXIED} stays pinned to the sidecar`);
        await rowsKeepArriving();
        console.log(`# ${HOT} promoted to the sidecar ${promoted} after the first rows (at ${elapsed()}):\n${lastState.replace(/^/gm, '#   ')}`);
      }),
    );

    let crashed = '';
    test(
      'a collector crashes while its sidecar streams (its container SIGKILLed through containerd): the kubelet restarts it in its pod (restartPolicy Always), it resumes from the store',
      scenario(async () => {
        // The pod of the promoted server: the new collector process takes over streams its sidecar runs.
        const name = `${POOL}-${(await assignmentOf(client, NS, POOL)).byTarget.get(HOT)}`;
        crashed = `${name}/collector`;
        const pod = (await collectorPods()).find((p) => p.metadata.name === name)!;
        const container = pod.status?.containerStatuses?.find((c) => c.name === 'collector');
        assert.ok(container?.containerID !== undefined && container.restartCount === 0, 'the collector runs, never restarted');
        const t0 = Date.now();
        await cluster.node.killContainer(container.containerID);
        await eventually(
          'the collector restarted in the same pod, Ready again',
          60_000,
          async () => {
            const now = (await collectorPods()).find((p) => p.metadata.name === name);
            const c = now?.status?.containerStatuses?.find((x) => x.name === 'collector');
            return now !== undefined && now.metadata.uid === pod.metadata.uid && c?.restartCount === 1 && isReady(now) ? true : undefined;
          },
          () => lastState,
        );
        const sidecar = (await collectorPods()).find((p) => p.metadata.name === name)?.status?.initContainerStatuses?.[0];
        assert.equal(sidecar?.restartCount, 0, 'the sidecar kept running');
        console.log(`# ${name}'s collector killed; restarted and Ready ${since(t0)} later (at ${elapsed()})`);
        await ownedByOneOf(2);
        await inSidecar(HOT, 30_000);
        await rowsKeepArriving();
      }),
    );

    const scaleTest = (from: number, to: number, note = '', leader?: () => string): void => {
      test(
        `kubectl scale collectorpool ${from} -> ${to}${note}: every target owned by exactly one pod`,
        scenario(async () => {
          const before = await assignmentOf(client, NS, POOL);
          const t0 = Date.now();
          await kubectl(['scale', `collectorpool/${POOL}`, '--replicas', String(to)]);
          // The old state never passes: the pods are main-0 .. main-(to-1) only after the change.
          await ownedByOneOf(to);
          const ownedAfter = since(t0);
          const now = await assignmentOf(client, NS, POOL);
          const moved = TARGETS.filter((n) => now.byTarget.get(n) !== before.byTarget.get(n));
          // Up: four targets of equal weight over four shards, one each. Down: exactly the removed
          // shards' targets move, the others stay put.
          if (to > from)
            assert.deepEqual(
              now.shards.map((s) => s.spec.targets.length),
              [1, 1, 1, 1],
              `one target per shard: ${lastState}`,
            );
          else
            assert.deepEqual(
              moved,
              TARGETS.filter((n) => before.byTarget.get(n)! >= to),
              `only the removed shards' targets moved: ${lastState}`,
            );
          console.log(
            `# ${from} -> ${to}: moved ${moved.map((n) => `${n} ${before.byTarget.get(n)}->${now.byTarget.get(n)}`).join(', ')}; owned ${ownedAfter} after kubectl scale (at ${elapsed()})`,
          );
          // The promoted target keeps its transport wherever it goes.
          await inSidecar(HOT, 30_000);
          await rowsKeepArriving();
          if (leader !== undefined) assert.equal(await leaseHolder(), leader(), 'the scale step was carried out under the new leader');
        }),
      );
    };
    scaleTest(2, 4);

    let newLeader = '';
    test(
      'the operator leader crashes (its container SIGKILLed through containerd, its pod force-deleted) while the load runs: the other replica takes the Lease',
      scenario(async () => {
        const holder = await leaseHolder();
        const operators = await operatorPods();
        const leader = operators.find((p) => p.metadata.name === holder);
        assert.ok(leader !== undefined, `the Lease holder (${holder}) is one of the operator pods (${operators.map((p) => p.metadata.name).join(', ')})`);
        const standby = operators.find((p) => p.metadata.name !== holder)!;
        const t0 = Date.now();
        // A crash: no SIGTERM, so the Lease is not given up; the pod is force-deleted right after,
        // as when its node dies, so that the kubelet does not restart it under the same identity.
        for (const c of leader.status?.containerStatuses ?? []) if (c.containerID !== undefined) await cluster.node.killContainer(c.containerID);
        const now: DeleteOptions & { gracePeriodSeconds: number } = { gracePeriodSeconds: 0 };
        await client.delete(PODS, NS, holder, now);
        const next = await eventually('another replica holds the Lease', 45_000, async () => {
          const h = await leaseHolder();
          return h !== '' && h !== holder ? h : undefined;
        });
        // Usually the standby (it saw the last renewal first); the Deployment's replacement pod may
        // win the race when it starts within a retry period of the kill.
        assert.ok(
          next === standby.metadata.name || !operators.some((p) => p.metadata.name === next),
          `a live replica (${standby.metadata.name} or the replacement) took over, not ${next}`,
        );
        newLeader = next;
        console.log(
          `# leader ${holder} killed; ${next}${next === standby.metadata.name ? ' (the standby)' : ' (the replacement pod)'} holds the Lease ${since(t0)} later (at ${elapsed()})`,
        );
        await rowsKeepArriving();
      }),
    );
    scaleTest(4, 2, ', carried out by the new leader', () => newLeader);

    test(
      'helm upgrade from the previous chart to this one and a new image tag: the hook applies the new CRDs, the Deployment rolls, the StatefulSet rolls one pod at a time, rows keep arriving, every target owned',
      scenario(async () => {
        const crd = (): Promise<
          | (KubeObject & { spec: { versions: Array<{ schema: { openAPIV3Schema: { properties: { spec: { properties: Record<string, unknown> } } } } }> } })
          | null
        > => client.get(CRDS, undefined, 'postgrestargets.pglog.io');
        assert.ok(!('startAt' in (await crd())!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties), 'installed with the previous CRDs');
        const oldOperators = new Set((await operatorPods()).map((p) => p.metadata.name));
        const nextImage = `${cluster.repository}:${NEXT_TAG}`;
        // Watch the collectors' roll: how many of the 2 are not (Ready and running) at each look.
        let watching = true;
        let mostDown = 0;
        const replaced: string[] = [];
        const seenUids = new Map((await collectorPods()).map((p) => [p.metadata.name, p.metadata.uid]));
        const watch = (async (): Promise<void> => {
          while (watching) {
            const list = (await collectorPods()).filter((p) => p.metadata.deletionTimestamp === undefined);
            noteRestarts(list);
            mostDown = Math.max(mostDown, 2 - list.filter(isReady).length);
            for (const p of list) {
              if (seenUids.get(p.metadata.name) !== p.metadata.uid) {
                seenUids.set(p.metadata.name, p.metadata.uid);
                replaced.push(p.metadata.name);
              }
            }
            await new Promise((r) => setTimeout(r, 200));
          }
        })();
        const t0 = Date.now();
        try {
          await helm([
            'upgrade',
            RELEASE,
            CHART,
            '--reset-then-reuse-values',
            '--set',
            `${cluster.imageValues(NEXT_TAG)},operator.resources.requests.cpu=150m`,
          ]);
          let state = '';
          await eventually(
            'the operator Deployment rolled: 2 new Ready replicas with the new image and resources, one holding the Lease',
            120_000,
            async () => {
              const running = await operatorPods();
              const holder = await leaseHolder();
              state = `operator pods ${running.map((p) => `${p.metadata.name}${isReady(p) ? ' ready' : ''}`).join(', ')}; Lease holder ${holder}`;
              if (
                running.length !== 2 ||
                running.some((p) => oldOperators.has(p.metadata.name) || !isReady(p)) ||
                !running.some((p) => p.metadata.name === holder)
              )
                return undefined;
              return running.every((p) => p.spec.containers[0]?.resources?.requests?.['cpu'] === '150m' && p.spec.containers[0]?.image === nextImage)
                ? true
                : undefined;
            },
            () => state,
          );
          console.log(`# helm upgrade: operator rolled ${since(t0)} after (at ${elapsed()}); ${state}`);
          await eventually(
            'the StatefulSet rolled: both collector pods run the new image, Ready',
            180_000,
            async () => {
              const list = await collectorPods();
              return list.length === 2 && list.every((p) => isReady(p) && p.spec.containers[0]?.image === nextImage) ? true : undefined;
            },
            () => `replaced so far: ${replaced.join(', ')}; ${lastState}`,
          );
        } finally {
          watching = false;
          await watch;
        }
        console.log(
          `# collectors rolled ${since(t0)} after helm upgrade, in the order ${replaced.join(', ')}; at most ${mostDown} of 2 not Ready at once (at ${elapsed()})`,
        );
        // One at a time, highest ordinal first (a StatefulSet's RollingUpdate): never both down.
        assert.deepEqual(replaced, [`${POOL}-1`, `${POOL}-0`], 'each collector pod replaced once, main-1 first');
        assert.equal(mostDown, 1, 'never both collectors down at once');
        const upgraded = await crd();
        assert.ok('startAt' in upgraded!.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties, 'the upgrade brought the new CRD (spec.startAt)');
        assert.ok(
          (upgraded!.metadata as { managedFields?: Array<{ manager: string }> }).managedFields?.some((f) => f.manager === 'pglog-crds'),
          "applied by the chart's hook",
        );
        await ownedByOneOf(2);
        await inSidecar(HOT, 30_000);
        await rowsKeepArriving();
      }),
    );

    test(
      'load stopped: every statement of every server is in the store exactly once; no collector error, restart or OOM kill; the store password in no output',
      scenario(async () => {
        for (const l of loads.values()) await l.stop();
        for (const [i, name] of TARGETS.entries()) {
          console.log(`# ${await expectStoredOnce(store.url, name, loads.get(name)!.run, servers[i]!.logDirectory)}`);
        }
        // The collectors' JSON records (every collector container that ran, kept beyond its pod): no errors (a fenced old owner is expected).
        const lines = cluster.node.podLogs.lines({ namespace: NS, pod: (n) => /^main-\d+$/.test(n), container: 'collector' });
        const records = lines.flatMap((l) => {
          try {
            return l.startsWith('{') ? [JSON.parse(l) as Record<string, unknown>] : [];
          } catch {
            return [];
          }
        });
        assert.ok(records.length > 0, "collector records in the pods' output");
        const errors = records.filter((r) => isErrorRecord(r) && r['code'] !== 'STORE_FENCED');
        assert.deepEqual(
          errors.map((r) => `${String(r['msg'])} ${String(r['code'])}`),
          [],
          'no errors logged by the collectors',
        );
        const everything = cluster.node.podLogs.all(NS);
        assert.ok(everything.length > records.length, "the operators' and sidecars' output is kept too");
        assert.deepEqual(
          everything.filter((l) => l.includes(storePassword)),
          [],
          "the store password appears in no container's output",
        );
        const podList = await collectorPods();
        noteRestarts(podList);
        // Only the collector the test killed was restarted: no other container, no OOM kill under the memory limit.
        assert.deepEqual([...restarts.keys()], [crashed], `restarts: ${JSON.stringify([...restarts])}`);
        assert.doesNotMatch(restarts.get(crashed)!, /OOMKilled/);
        // The peak memory of each running collector container, from its cgroup (v1, cgroupfs driver).
        const peaks = podList.map((p) => {
          const id = p.status?.containerStatuses?.find((c) => c.name === 'collector')?.containerID?.replace(/^containerd:\/\//, '') ?? '';
          const podDir = findPodCgroup(p.metadata.uid ?? '');
          const peak = podDir === undefined ? NaN : Number(readFileSync(join(podDir, id, 'memory.max_usage_in_bytes'), 'utf8'));
          return `${p.metadata.name} ${(peak / 2 ** 20).toFixed(0)} MiB`;
        });
        const { shards } = await assignmentOf(client, NS, POOL);
        console.log(
          `# checked at ${elapsed()}; shards ${shards.map((s) => `${s.metadata.name}: ${s.spec.targets.map((t) => t.name).join(',')}`).join('; ')}; collector peak memory (limit ${COLLECTOR_RESOURCES.limits.memory}): ${peaks.join(', ')}`,
        );
      }),
    );

    test(
      'helm uninstall leaves nothing behind: no object of the release, no pool, shard, StatefulSet or pod, no container or process of a pod; the CRDs stay',
      scenario(async () => {
        const before = await cluster.node.tasks();
        assert.ok(
          before.length >= 8,
          `containerd runs the pods' tasks while they run (${before.length}: 2 operators, 2 x collector + sidecar, and their sandboxes)`,
        );
        assert.ok(podProcesses().length >= 6, "the check sees the pods' processes while they run");
        const t0 = Date.now();
        await helm(['uninstall', RELEASE, '--wait', '--timeout', '90s']);
        const uninstalled = since(t0);
        const types = async (namespaced: boolean): Promise<string[]> =>
          (await cluster.cp.kubectl(['api-resources', '--verbs=list', `--namespaced=${namespaced}`, '-o', 'name']))
            .split('\n')
            .filter((n) => n !== '' && !n.startsWith('events'));
        const namespacedTypes = await types(true);
        const all = [...namespacedTypes, ...(await types(false))].join(',');
        let state = '';
        // The processes too: containerd can list no task while a sandbox's pause process is still
        // being killed (a CI run saw `/pause` in a pod's cgroup right after the last task went).
        await eventually(
          'nothing of the release left, no container task, no process in a pod cgroup',
          120_000,
          async () => {
            const labelled = (await cluster.cp.kubectl(['get', all, '-A', '-l', `app.kubernetes.io/instance=${RELEASE}`, '-o', 'name'])).trim();
            const pool = (
              await kubectl([
                'get',
                'collectorpools,collectorshards,statefulsets,controllerrevisions,poddisruptionbudgets,deployments,replicasets,pods,services',
                '-o',
                'name',
              ])
            ).trim();
            const tasks = await cluster.node.tasks();
            const processes = podProcesses();
            state = `labelled: ${labelled}\npool's: ${pool}\ncontainerd tasks: ${tasks.join(' ')}\npod processes: ${processes.join(', ')}`;
            return labelled === '' && pool === '' && tasks.length === 0 && processes.length === 0 ? true : undefined;
          },
          () => state,
        );
        const gone = since(t0);
        assert.deepEqual(podProcesses(), [], "no process left in a pod's cgroup");
        // Helm never deletes CRDs: they stay, and so do the user's PostgresTargets and Secrets.
        const crds = (await cluster.cp.kubectl(['get', 'crd', '-o', 'name']))
          .trim()
          .split('\n')
          .filter((n) => n.endsWith('.pglog.io'))
          .sort();
        assert.deepEqual(crds, [
          'customresourcedefinition.apiextensions.k8s.io/collectorpools.pglog.io',
          'customresourcedefinition.apiextensions.k8s.io/collectorshards.pglog.io',
          'customresourcedefinition.apiextensions.k8s.io/postgrestargets.pglog.io',
        ]);
        assert.equal(await client.get(COLLECTOR_POOLS, NS, POOL), null);
        // What is left in the namespace is the user's (targets, Secrets) and the namespace's own
        // (default ServiceAccount, kube-root-ca.crt); the leader Lease went with its owner, the
        // operator Deployment (garbage collector); events, not listed here, expire.
        const expected = [
          'configmap/kube-root-ca.crt',
          ...TARGETS.map((n) => `postgrestarget.pglog.io/${n}`),
          ...TARGETS.map((n) => `secret/${n}-ssh`),
          'secret/pglog-store',
          'serviceaccount/default',
        ].join(' ');
        let remaining = '';
        // (Endpoints and EndpointSlices of the deleted Services go a moment later.)
        await eventually(
          `only these left in ${NS}: ${expected}`,
          30_000,
          async () => {
            remaining = (await kubectl(['get', namespacedTypes.join(','), '-o', 'name'])).trim().split('\n').sort().join(' ');
            return remaining === expected ? true : undefined;
          },
          () => remaining,
        );
        console.log(
          `# helm uninstall returned after ${uninstalled}, everything gone after ${gone} (at ${elapsed()}); ${before.length} containerd tasks before, none after; CRDs kept: ${crds.map((c) => c.split('/')[1]).join(', ')}; left in ${NS}: ${remaining}`,
        );
      }),
    );
  },
);

/** The kubelet's cgroup (v1 memory controller, cgroupfs driver) of the pod with this uid. */
function findPodCgroup(uid: string): string | undefined {
  const root = '/sys/fs/cgroup/memory/kubepods';
  for (const qos of ['', 'burstable', 'besteffort']) {
    const dir = join(root, qos, `pod${uid}`);
    try {
      readdirSync(dir);
      return dir;
    } catch {
      /* not this class */
    }
  }
  return undefined;
}

/** Processes in a pod's cgroup (the kubelet's `kubepods` hierarchy): `pid: command line`. */
function podProcesses(): string[] {
  return processesInCgroup('/kubepods');
}
