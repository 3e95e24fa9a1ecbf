// The operator and real collectors together, the loop closed: nobody but the collectors writes
// a shard's status and nobody but the operator writes a shard's spec. A real kube-apiserver
// with pglog's CRDs; the real `pglog operator`; a real store, sshd and two PostgreSQL servers
// logging every statement (one busy, one quiet); the store URL and the SSH keys in Secrets;
// two PostgresTargets (transport auto) and a CollectorPool created with kubectl as a user
// would. There is no kubelet: the test runs each pod's collector itself, `pglog collect
// --shard <pool>-<i>` with the store URL the pod's secretKeyRef names.
//   - the operator writes shard 0; its collector stores rows and reports both targets; each
//     PostgresTarget's status shows shard 0, a rate and Ready; the busy target is promoted by
//     the operator on its measured rate and moves to the sidecar, the quiet one stays inproc;
//     the busy one's SQL snapshots go on through the sidecar's forward (Snapshots True), and
//     its superuser SQL role (allowed by sql.allowSuperuser, ADR 0032) shows as SqlRole False,
//     SQL_ROLE_SUPERUSER;
//   - `kubectl scale --replicas 2`: one target moves to shard 1 with a higher epoch, its rows
//     keep arriving from the new owner;
//   - with the load stopped the checker finds every statement of both servers exactly once.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';
import { COLLECTOR_POOLS, COLLECTOR_SHARDS, POSTGRES_TARGETS, SECRETS, STATEFUL_SETS } from '@pglog/common/kube/resources.ts';
import { expectStoredOnce, storedRows } from '@pglog/test-support/checker.ts';
import { isErrorRecord } from '@pglog/test-support/collector-process.ts';
import { type ControlPlane, startControlPlane } from '@pglog/test-support/control-plane.ts';
import { assignmentOf, eventually } from '@pglog/test-support/fleet.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { killTree } from '@pglog/test-support/process-tree.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { launchShardCollector, logServerTarget, type ShardCollector } from '@pglog/test-support/shard-collector.ts';
import { createSshSecret } from '@pglog/test-support/ssh-secret.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { installCrds } from '../helpers/crds.ts';
import { type OperatorProcess, startOperator } from '../helpers/operator-process.ts';

const NS = 'loop';
const POOL = 'main';
// The busy server logs 200 statements of ~260 bytes a second, the quiet one 10 of ~100 bytes;
// their smoothed rates reach about 25 KB/s (200 kbit/s) and 0.6 KB/s (5 kbit/s) within
// seconds: clearly above the promotion threshold and clearly below the demotion threshold.
const BUSY = { ratePerSecond: 200, payloadBytes: 200 };
const QUIET = { ratePerSecond: 10, payloadBytes: 40 };
const TRANSPORT = { promoteAboveBitsPerSecond: 80_000, demoteBelowBitsPerSecond: 40_000, minDwellSeconds: 3 };
const TARGETS = ['busy', 'quiet'] as const;

interface StatefulSetLike extends KubeObject {
  spec: {
    replicas: number;
    template: { spec: { containers: Array<{ name: string; env?: Array<{ name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }> }> } };
  };
}

describe('pglog operator with real collectors: the loop closed', { timeout: 300_000 }, () => {
  let work: string;
  let cp: ControlPlane;
  let client: KubeClient & { close(): void };
  let store: TestPostgres;
  let ssh: TestSshServer;
  let servers: Record<(typeof TARGETS)[number], LogServer>;
  let operator: OperatorProcess | undefined;
  const loads = new Map<string, SeqLoad>();
  const collectors: ShardCollector[] = [];
  const started = Date.now();
  const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;

  const kubectl = (args: string[], stdin?: string): Promise<string> => cp.kubectl(['-n', NS, ...args], stdin);
  const apply = (object: unknown): Promise<string> => kubectl(['apply', '-f', '-'], JSON.stringify(object));
  /** The objects as last read, for failure messages. */
  const seen = new Map<string, unknown>();
  const shard = async (index: number): Promise<CollectorShard | undefined> => {
    const s = (await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, `${POOL}-${index}`)) ?? undefined;
    seen.set(`shard ${index}`, s && { spec: s.spec, status: s.status });
    return s;
  };
  const target = async (name: string): Promise<TargetObject> => {
    const t = (await client.get<TargetObject>(POSTGRES_TARGETS, NS, name))!;
    seen.set(`target ${name}`, { spec: { transport: t.spec.transport }, status: t.status });
    return t;
  };
  const lastSeen = (): string => JSON.stringify(Object.fromEntries(seen), null, 1);
  /** Waits until `check` holds; a timeout shows the objects as last read. */
  const until = async (what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> => {
    await eventually(what, timeoutMs, async () => ((await check()) ? true : undefined), lastSeen);
  };
  /** The operator's and the collectors' output tails. */
  const outputs = (): string =>
    [`--- operator\n${(operator?.output() ?? '').slice(-6000)}`, ...collectors.map((c) => `--- collector ${c.shard}\n${c.tail(60)}`)].join('\n');
  /** A scenario that fails prints the output tails and the objects as last read. */
  const scenario = (fn: () => Promise<void>) => async (): Promise<void> => {
    try {
      await fn();
    } catch (e) {
      process.stderr.write(`# the scenario failed at ${elapsed()}; objects as last read:\n${lastSeen()}\n${outputs()}\n`);
      throw e;
    }
  };
  /** Rows of the target's run in the store; 0 until the collector has created the schema. */
  const stored = (name: string): Promise<number> => storedRows(store.url, loads.get(name)!.run);
  /** Successful SQL snapshot runs of the target since `since`. */
  const snapshotRuns = async (name: string, since: Date): Promise<number> => {
    const db = new pg.Client({ connectionString: store.url });
    await db.connect();
    try {
      return (await db.query('SELECT 1 FROM pglog.snapshot_runs WHERE target = $1 AND error_code IS NULL AND ts > $2', [name, since])).rowCount ?? 0;
    } finally {
      await db.end();
    }
  };

  /**
   * Runs pod <pool>-<index> as the kubelet would run the StatefulSet the operator wrote: the
   * collector for that shard, with PGLOG_STORE_URL from the Secret its secretKeyRef names.
   */
  async function startPod(index: number): Promise<ShardCollector> {
    const sts = (await client.get<StatefulSetLike>(STATEFUL_SETS, NS, POOL))!;
    const ref = sts.spec.template.spec.containers.find((c) => c.name === 'collector')!.env!.find((e) => e.name === 'PGLOG_STORE_URL')!.valueFrom!.secretKeyRef!;
    const secret = (await client.get<KubeObject & { data: Record<string, string> }>(SECRETS, NS, ref.name))!;
    const storeUrl = Buffer.from(secret.data[ref.key]!, 'base64').toString('utf8');
    const c = launchShardCollector({ shard: `${POOL}-${index}`, kubeconfig: cp.kubeconfig, namespace: NS, storeUrl, dir: work });
    collectors.push(c);
    return c;
  }

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-loop-'));
    let busy: LogServer, quiet: LogServer;
    [cp, store, ssh, [busy, quiet]] = await Promise.all([
      startControlPlane(),
      startPostgres(),
      startSshServer({ allowLocalForwarding: true }),
      Promise.all([startLogServer(), startLogServer()]),
    ]);
    servers = { busy, quiet };
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    await installCrds(cp);
    await cp.kubectl(['create', 'namespace', NS]);
    operator = await startOperator({ kubeconfig: cp.kubeconfig, namespace: NS, identity: 'operator' });
    await kubectl(['create', 'secret', 'generic', 'store', `--from-literal=url=${store.url}`]);
    for (const name of TARGETS) {
      await createSshSecret(kubectl, name, ssh);
      // The busy one also takes SQL snapshots: through the sidecar's forward once it is promoted.
      const sql =
        name === 'busy'
          ? ([
              { pool: POOL, collect: { logs: true, activity: true, locks: true, intervalSeconds: 2 } },
              { sql: { socketDirectory: servers[name].socketDir, port: servers[name].port, user: 'postgres', allowSuperuser: true } },
            ] as const)
          : ([{ pool: POOL }, {}] as const);
      await apply(logServerTarget(name, `${name}-ssh`, ssh, servers[name], sql[0], sql[1]));
    }
    await apply({
      apiVersion: 'pglog.io/v1alpha1',
      kind: 'CollectorPool',
      metadata: { name: POOL },
      spec: { replicas: 1, store: { secretRef: { name: 'store', key: 'url' } }, transport: TRANSPORT },
    });
    loads.set('busy', startSeqLoad(servers.busy.url, BUSY));
    loads.set('quiet', startSeqLoad(servers.quiet.url, QUIET));
    console.log(`# set up in ${elapsed()}`);
  });

  after(async () => {
    await Promise.allSettled([...loads.values()].map((l) => l.stop()));
    // Each launcher with its collector child and sidecar: a child left behind would hold the store open.
    for (const c of collectors) killTree(c.pid);
    await operator?.kill();
    client?.close();
    await Promise.allSettled([cp?.stop(), ssh?.dispose(), store?.stop(), ...Object.values(servers ?? {}).map((s) => s.dispose())]);
    rmSync(work, { recursive: true, force: true });
  });

  test(
    'shard 0 from the operator, collected: rows, shard status, target statuses; the busy target promoted to the sidecar, the quiet one inproc',
    scenario(async () => {
      const s0 = await eventually(
        `shard ${POOL}-0 with both targets`,
        30_000,
        async () => {
          const s = await shard(0);
          return s?.spec.targets.map((t) => t.name).join() === TARGETS.join() ? s : undefined;
        },
        lastSeen,
      );
      assert.ok(
        s0.spec.targets.every((t) => t.transport === 'inproc' && t.epoch >= 1),
        JSON.stringify(s0.spec.targets),
      );
      const c0 = await startPod(0);
      await until('rows of both servers in the store', 60_000, async () => (await stored('busy')) > 0 && (await stored('quiet')) > 0);
      console.log(`# first rows at ${elapsed()}`);
      await until('the shard status (collector) with both targets connected and rates', 30_000, async () => {
        const st = (await shard(0))?.status;
        return st?.targets?.map((t) => t.name).join() === TARGETS.join() && st.targets.every((t) => t.connected && t.bytesPerSecond > 0);
      });
      await until('each PostgresTarget status (operator): shard 0, a rate, Ready True', 30_000, async () => {
        for (const name of TARGETS) {
          const st = (await target(name)).status;
          const ready = st?.conditions?.find((c) => c.type === 'Ready');
          if (st?.shard !== 0 || !((st.rates?.bytesPerSecond ?? 0) > 0) || ready?.status !== 'True') return false;
        }
        return true;
      });
      // The operator promotes on the rate the collector measured; the collector follows the spec.
      await until(
        'busy promoted in the shard spec (operator)',
        40_000,
        async () => (await shard(0))?.spec.targets.find((t) => t.name === 'busy')?.transport === 'proxy',
      );
      console.log(`# busy promoted at ${elapsed()}`);
      await until('busy reading through the sidecar (shard status and target status)', 40_000, async () => {
        const reported = (await shard(0))?.status?.targets?.find((t) => t.name === 'busy');
        return reported?.transport === 'proxy' && reported.connected && (await target('busy')).status?.transport === 'proxy';
      });
      assert.ok(
        c0.records().some((r) => typeof r['switchMs'] === 'number' && r['to'] === 'proxy'),
        'the collector logged the switch to proxy',
      );
      const rates = Object.fromEntries(await Promise.all(TARGETS.map(async (n) => [n, (await target(n)).status?.rates?.bytesPerSecond ?? 0] as const)));
      console.log(
        `# rates (bytes/s): busy ${rates['busy']}, quiet ${rates['quiet']}; thresholds ${TRANSPORT.promoteAboveBitsPerSecond / 8} / ${TRANSPORT.demoteBelowBitsPerSecond / 8}`,
      );
      const after = await shard(0);
      assert.equal(after!.spec.targets.find((t) => t.name === 'quiet')!.transport, 'inproc');
      assert.equal(after!.status!.targets!.find((t) => t.name === 'quiet')!.transport, 'inproc');
      assert.equal((await target('quiet')).status?.transport, 'inproc');
      const before = await stored('busy');
      await until('busy rows still arriving through the sidecar', 15_000, async () => (await stored('busy')) > before);
      // Its SQL snapshots go on through the sidecar's forward, and the operator shows them: Snapshots True.
      const promotedAt = new Date();
      await until('a snapshot of busy after the promotion', 20_000, async () => (await snapshotRuns('busy', promotedAt)) > 0);
      await until(
        "busy's Snapshots condition True (operator)",
        30_000,
        async () => (await target('busy')).status?.conditions?.find((c) => c.type === 'Snapshots')?.status === 'True',
      );
      assert.equal(
        (await target('quiet')).status?.conditions?.find((c) => c.type === 'Snapshots'),
        undefined,
        'no Snapshots condition without snapshots',
      );
      // Its SQL role is the superuser postgres: the collector reports it, the operator says so (issue 13, review F2).
      await until("busy's SqlRole condition False with SQL_ROLE_SUPERUSER (operator)", 30_000, async () => {
        const c = (await target('busy')).status?.conditions?.find((x) => x.type === 'SqlRole');
        return c?.status === 'False' && c.reason === 'SQL_ROLE_SUPERUSER';
      });
      assert.equal((await shard(0))?.status?.targets?.find((t) => t.name === 'busy')?.sqlRoleWarning, 'SQL_ROLE_SUPERUSER');
      assert.equal(
        (await target('quiet')).status?.conditions?.find((c) => c.type === 'SqlRole'),
        undefined,
        'no SqlRole condition without snapshots',
      );
      assert.ok(
        c0.records().some((r) => r['server'] === 'busy' && typeof r['forward'] === 'string' && / ready: /.test(String(r['msg']))),
        'the sidecar set up the SQL forward of busy',
      );
    }),
  );

  test(
    'kubectl scale --replicas 2: one target moves to shard 1 with a higher epoch; its rows keep arriving from the new owner',
    scenario(async () => {
      const s0 = (await shard(0))!;
      const epochs = new Map(s0.spec.targets.map((t) => [t.name, t.epoch]));
      await kubectl(['scale', `collectorpool/${POOL}`, '--replicas', '2']);
      const s1 = await eventually(
        `shard ${POOL}-1 with one target`,
        30_000,
        async () => {
          const s = await shard(1);
          return s !== undefined && s.spec.targets.length === 1 ? s : undefined;
        },
        lastSeen,
      );
      const moved = s1.spec.targets[0]!;
      const stayed = TARGETS.find((n) => n !== moved.name)!;
      assert.ok(moved.epoch > epochs.get(moved.name)!, `epoch ${moved.epoch} above ${epochs.get(moved.name)}`);
      await until(`${moved.name} leaves shard 0`, 20_000, async () => (await shard(0))?.spec.targets.map((t) => t.name).join() === stayed);
      const kept = (await shard(0))!.spec.targets[0]!;
      const was = s0.spec.targets.find((t) => t.name === stayed)!;
      assert.deepEqual([kept.epoch, kept.transport], [was.epoch, was.transport], 'the other keeps its epoch and transport');
      assert.deepEqual((await assignmentOf(client, NS, POOL)).duplicates, [], 'no target in two shards');
      console.log(`# ${moved.name} moved to shard 1 (epoch ${epochs.get(moved.name)} -> ${moved.epoch}) at ${elapsed()}`);
      await startPod(1);
      await until(`${moved.name} collected by shard 1 with epoch ${moved.epoch}`, 30_000, async () => {
        const reported = (await shard(1))?.status?.targets?.find((t) => t.name === moved.name);
        return reported?.connected === true && reported.epoch === moved.epoch;
      });
      await until(`${moved.name} left the shard 0 status`, 20_000, async () => (await shard(0))?.status?.targets?.map((t) => t.name).join() === stayed);
      const rows = await stored(moved.name);
      await until(`${moved.name} rows keep arriving from shard 1`, 20_000, async () => (await stored(moved.name)) > rows);
      await until(`${moved.name}'s status shows shard 1 and Ready`, 30_000, async () => {
        const st = (await target(moved.name)).status;
        return st?.shard === 1 && st.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
      });
      // The StatefulSet runs two pods (its status.replicas, and the pool's, need a controller-manager: none here).
      assert.equal((await client.get<StatefulSetLike>(STATEFUL_SETS, NS, POOL))!.spec.replicas, 2);
      await until('the pool status shows the load of both shards', 20_000, async () => {
        const pool = (await client.get<KubeObject & { status?: { targets?: number; shards?: Array<{ index: number; targets: number }> } }>(
          COLLECTOR_POOLS,
          NS,
          POOL,
        ))!;
        seen.set('pool', pool.status);
        return pool.status?.targets === 2 && JSON.stringify(pool.status.shards?.map((x) => [x.index, x.targets])) === '[[0,1],[1,1]]';
      });
      console.log(`# kubectl get postgrestargets:\n${(await kubectl(['get', 'postgrestargets'])).trim().replace(/^/gm, '#   ')}`);
    }),
  );

  test(
    'load stopped: every statement of both servers is in the store exactly once',
    scenario(async () => {
      for (const l of loads.values()) await l.stop();
      for (const name of TARGETS) {
        console.log(`# ${await expectStoredOnce(store.url, name, loads.get(name)!.run, servers[name].logDirectory)}`);
      }
      const errors = collectors.flatMap((c) => c.records()).filter((r) => isErrorRecord(r) && r['code'] !== 'STORE_FENCED');
      assert.deepEqual(
        errors.map((r) => r['msg']),
        [],
        'no errors logged',
      );
      // The canary: no line of the SSH private key in what the operator and the collectors wrote
      // to the API (statuses, conditions, Events) nor in the collectors' output.
      const keyBody = readFileSync(ssh.privateKeyFile, 'utf8')
        .split('\n')
        .filter((l) => l.length > 20 && !l.startsWith('-----'));
      const written = await kubectl(['get', 'collectorshards,postgrestargets,collectorpools,events', '-o', 'json']);
      assert.ok((JSON.parse(written) as { items: unknown[] }).items.length > 0, 'statuses and Events were read');
      for (const line of keyBody) {
        assert.ok(!written.includes(line), 'a line of the private key appears in a status or an Event');
        for (const c of collectors) assert.ok(!c.output().includes(line), "a line of the private key appears in a collector's output");
      }
      console.log(`# done at ${elapsed()}`);
    }),
  );
});
