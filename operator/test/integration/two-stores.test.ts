// Two pools writing two stores, side by side, for real (issue 46: the path past one store). A
// real kube-apiserver with pglog's CRDs, the real `pglog operator`, a real sshd, two stores
// (PostgreSQL servers reached over TCP with a password, as a pod reaches its store) in two
// Secrets, and four PostgreSQL servers logging every statement: `east-1` and `east-2` name pool
// `east` (spec.pool), `west-1` and `west-2` carry a label pool `west` selects
// (spec.targetSelector); one of each pool also takes SQL snapshots. Each CollectorPool names
// its own store; each pool's collector runs as its pod would, with the store URL of the Secret
// its StatefulSet names (there is no kubelet).
//   - each pool's shard has exactly its targets; each StatefulSet takes its own Secret;
//   - each store holds every statement of its pool's targets exactly once, and nothing of the
//     other pool's (rows, read positions, snapshot runs);
//   - `pglog report --store A --store B --json` shows the targets of both pools, each target's
//     rows as the report of its own store shows them, the groups of both added, no row labelled
//     (no target is in both); `report activity` lists the snapshot servers of both pools; and
//     no store password appears in anything the report or the collectors printed.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';
import { COLLECTOR_SHARDS } from '@pglog/common/kube/resources.ts';
import { expectStoredOnce, storedRows } from '@pglog/test-support/checker.ts';
import { runPglog } from '@pglog/test-support/cli.ts';
import { isErrorRecord } from '@pglog/test-support/collector-process.ts';
import { type ControlPlane, startControlPlane } from '@pglog/test-support/control-plane.ts';
import { eventually } from '@pglog/test-support/fleet.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { MONITOR_ROLE, setUpMonitoringRole } from '@pglog/test-support/monitoring-role.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { killTree } from '@pglog/test-support/process-tree.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { logServerTarget, type ShardCollector } from '@pglog/test-support/shard-collector.ts';
import { createSshSecret } from '@pglog/test-support/ssh-secret.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { installCrds } from '../helpers/crds.ts';
import { type OperatorProcess, startOperator } from '../helpers/operator-process.ts';
import { poolStoreRef, startPoolPod } from '../helpers/pool-pod.ts';

const NS = 'stores';
const POOLS = { east: ['east-1', 'east-2'], west: ['west-1', 'west-2'] } as const;
type Pool = keyof typeof POOLS;
const TARGETS = [...POOLS.east, ...POOLS.west];
/** One target of each pool takes SQL snapshots too (report activity reads them). */
const SNAPSHOTS = new Set(['east-1', 'west-1']);
const LOAD = { ratePerSecond: 15, payloadBytes: 60 };
const TCP = { address: '127.0.0.1', clientRange: '127.0.0.1/32' };

interface JsonReport {
  statements: Array<{ target: string; store?: string }>;
  errors: Array<{ target: string; store?: string }>;
  lock_waits: Array<{ target: string; store?: string }>;
  groups: { statements: number; errors: number; lock_waits: number };
  stores?: string[];
  failed_stores?: unknown[];
}

describe('two CollectorPools writing two stores, and one report of both', { timeout: 300_000 }, () => {
  let work: string;
  let cp: ControlPlane;
  let client: KubeClient & { close(): void };
  let ssh: TestSshServer;
  const stores = {} as Record<Pool, TestPostgres>;
  const servers = new Map<string, LogServer>();
  const loads = new Map<string, SeqLoad>();
  const collectors: ShardCollector[] = [];
  let operator: OperatorProcess | undefined;
  const started = new Date();
  const elapsed = (): string => `${((Date.now() - started.getTime()) / 1000).toFixed(1)} s`;

  const kubectl = (args: string[], stdin?: string): Promise<string> => cp.kubectl(['-n', NS, ...args], stdin);
  const apply = (object: unknown): Promise<string> => kubectl(['apply', '-f', '-'], JSON.stringify(object));
  const poolOf = (target: string): Pool => (target.startsWith('east') ? 'east' : 'west');
  const storeUrl = (pool: Pool): string => stores[pool].tcpUrl!;
  const passwords = (): string[] => (['east', 'west'] as const).map((p) => new URL(storeUrl(p)).password);
  /** A scenario that fails prints the operator's and the collectors' output tails. */
  const scenario = (fn: () => Promise<void>) => async (): Promise<void> => {
    try {
      await fn();
    } catch (e) {
      const tails = [`--- operator\n${(operator?.output() ?? '').slice(-4000)}`, ...collectors.map((c) => `--- collector ${c.shard}\n${c.tail(40)}`)];
      process.stderr.write(`# the scenario failed at ${elapsed()}\n${tails.join('\n')}\n`);
      throw e;
    }
  };
  const query = async <R extends pg.QueryResultRow>(pool: Pool, sql: string, values: unknown[] = []): Promise<R[]> => {
    const db = new pg.Client({ connectionString: storeUrl(pool) });
    await db.connect();
    try {
      return (await db.query<R>(sql, values)).rows;
    } finally {
      await db.end();
    }
  };
  const targetsIn = async (pool: Pool, relation: string): Promise<string[]> =>
    (await query<{ target: string }>(pool, `SELECT DISTINCT target FROM pglog.${relation} ORDER BY 1`)).map((r) => r.target);

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-two-stores-'));
    let east: TestPostgres, west: TestPostgres, logServers: LogServer[];
    [cp, east, west, ssh, logServers] = await Promise.all([
      startControlPlane(),
      startPostgres({ tcp: TCP }),
      startPostgres({ tcp: TCP }),
      startSshServer({ allowLocalForwarding: true }),
      Promise.all(TARGETS.map(() => startLogServer())),
    ]);
    stores.east = east;
    stores.west = west;
    TARGETS.forEach((name, i) => servers.set(name, logServers[i]!));
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    await installCrds(cp);
    await cp.kubectl(['create', 'namespace', NS]);
    operator = await startOperator({ kubeconfig: cp.kubeconfig, namespace: NS, identity: 'operator', storeSecrets: ['store-east', 'store-west'] });
    for (const pool of ['east', 'west'] as const) await kubectl(['create', 'secret', 'generic', `store-${pool}`, `--from-literal=url=${storeUrl(pool)}`]);
    for (const name of TARGETS) {
      const server = servers.get(name)!;
      await createSshSecret(kubectl, name, ssh);
      const snapshots = SNAPSHOTS.has(name);
      const spec = {
        ...(poolOf(name) === 'east' ? { pool: 'east' } : {}),
        ...(snapshots ? { collect: { logs: true, activity: true, locks: true, intervalSeconds: 2 } } : {}),
      };
      // Snapshots as a role with only pg_monitor (a superuser is refused, ADR 0032).
      if (snapshots) await setUpMonitoringRole(server, [ssh.user]);
      const instance = snapshots ? { sql: { socketDirectory: server.socketDir, port: server.port, user: MONITOR_ROLE } } : {};
      const target = logServerTarget(name, `${name}-ssh`, ssh, server, spec, instance);
      // West's targets name no pool: pool west selects them by this label.
      if (poolOf(name) === 'west') target['metadata'] = { name, labels: { region: 'west' } };
      await apply(target);
    }
    for (const pool of ['east', 'west'] as const) {
      await apply({
        apiVersion: 'pglog.io/v1alpha1',
        kind: 'CollectorPool',
        metadata: { name: pool },
        spec: {
          replicas: 1,
          store: { secretRef: { name: `store-${pool}`, key: 'url' } },
          ...(pool === 'west' ? { targetSelector: { matchLabels: { region: 'west' } } } : {}),
        },
      });
    }
    for (const name of TARGETS) loads.set(name, startSeqLoad(servers.get(name)!.url, LOAD));
    console.log(`# set up in ${elapsed()}`);
  });

  after(async () => {
    await Promise.allSettled([...loads.values()].map((l) => l.stop()));
    // Each launcher with its collector child and sidecar: a child left behind would hold a store open.
    for (const c of collectors) killTree(c.pid);
    await operator?.kill();
    client?.close();
    await Promise.allSettled([cp?.stop(), ssh?.dispose(), ...Object.values(stores).map((s) => s.stop()), ...[...servers.values()].map((s) => s.dispose())]);
    rmSync(work, { recursive: true, force: true });
  });

  test(
    "each pool's shard has its targets and its pod writes its store",
    scenario(async () => {
      for (const pool of ['east', 'west'] as const) {
        await eventually(`shard ${pool}-0 with ${POOLS[pool].join(', ')}`, 30_000, async () => {
          const s = await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, `${pool}-0`);
          return s?.spec.targets.map((t) => t.name).join() === POOLS[pool].join() ? true : undefined;
        });
        assert.deepEqual(await poolStoreRef(client, NS, pool), { name: `store-${pool}`, key: 'url' }, `the StatefulSet of ${pool} takes its own Secret`);
        collectors.push(await startPoolPod({ client, kubeconfig: cp.kubeconfig, namespace: NS, pool, index: 0, dir: work }));
      }
      for (const name of TARGETS) {
        const store = storeUrl(poolOf(name));
        await eventually(`rows of ${name} in the store of pool ${poolOf(name)}`, 60_000, async () =>
          (await storedRows(store, loads.get(name)!.run)) > 0 ? true : undefined,
        );
      }
      for (const pool of SNAPSHOTS) {
        await eventually(`a snapshot of ${pool}`, 30_000, async () =>
          (await query(poolOf(pool), 'SELECT 1 FROM pglog.snapshot_runs WHERE target = $1 AND error_code IS NULL', [pool])).length > 0 ? true : undefined,
        );
      }
      console.log(`# rows of every target in its pool's store at ${elapsed()}`);
    }),
  );

  test(
    "load stopped: each store holds every statement of its pool's targets exactly once, and nothing of the other pool",
    scenario(async () => {
      for (const l of loads.values()) await l.stop();
      // One more statement on each server after the load's last: an entry ends where the next
      // one begins, so the last numbered statement is complete without waiting for the idle
      // silence that ends a quiet log's last entry (not what this test is about).
      for (const server of servers.values()) {
        const db = new pg.Client({ connectionString: server.url });
        await db.connect();
        await db.query("SELECT 'pglog-two-stores: after the load'").finally(() => db.end());
      }
      for (const name of TARGETS) {
        const pool = poolOf(name);
        const other: Pool = pool === 'east' ? 'west' : 'east';
        const run = loads.get(name)!.run;
        console.log(`# ${pool}: ${await expectStoredOnce(storeUrl(pool), name, run, servers.get(name)!.logDirectory)}`);
        assert.equal(await storedRows(storeUrl(other), run), 0, `no statement of ${name} in the store of pool ${other}`);
      }
      for (const pool of ['east', 'west'] as const) {
        assert.deepEqual(await targetsIn(pool, 'statements'), [...POOLS[pool]], `targets with statements in the store of ${pool}`);
        assert.deepEqual(await targetsIn(pool, 'read_positions'), [...POOLS[pool]], `targets with read positions in the store of ${pool}`);
        assert.deepEqual(
          await targetsIn(pool, 'snapshot_runs'),
          [...POOLS[pool]].filter((t) => SNAPSHOTS.has(t)),
          `snapshot runs in the store of ${pool}`,
        );
      }
      const errors = collectors.flatMap((c) => c.records()).filter(isErrorRecord);
      assert.deepEqual(
        errors.map((r) => r['msg']),
        [],
        'no errors logged',
      );
    }),
  );

  test(
    'pglog report --store A --store B: the targets of both pools, each as its own store reports it; activity of both; no password printed',
    scenario(async () => {
      // Stores that no longer change: the same window then reads the same rows in every run below.
      for (const c of collectors) await c.stop();
      const window = ['--since', new Date(started.getTime() - 60_000).toISOString(), '--until', new Date(Date.now() + 60_000).toISOString(), '--limit', '1000'];
      const report = async (args: string[]): Promise<{ stdout: string; stderr: string }> => {
        const r = await runPglog(['report', ...args, ...window]);
        assert.equal(r.code, 0, r.stderr);
        for (const secret of passwords()) {
          assert.ok(!r.stdout.includes(secret) && !r.stderr.includes(secret), `pglog report ${args[0]}: a store password is printed`);
        }
        return r;
      };
      const both = ['--store', storeUrl('east'), '--store', storeUrl('west')];
      const merged = JSON.parse((await report([...both, '--json'])).stdout) as JsonReport;
      const single = {
        east: JSON.parse((await report(['--store', storeUrl('east'), '--json'])).stdout) as JsonReport,
        west: JSON.parse((await report(['--store', storeUrl('west'), '--json'])).stdout) as JsonReport,
      };
      assert.deepEqual(new Set(merged.statements.map((s) => s.target)), new Set(TARGETS), 'statements of every target of both pools');
      for (const pool of ['east', 'west'] as const) {
        assert.deepEqual(new Set(single[pool].statements.map((s) => s.target)), new Set(POOLS[pool]), `the store of ${pool} alone: its targets`);
        for (const name of POOLS[pool]) {
          for (const section of ['statements', 'errors', 'lock_waits'] as const) {
            const of = (r: JsonReport): unknown[] => r[section].filter((row) => row.target === name);
            assert.deepEqual(of(merged), of(single[pool]), `${name}: ${section} as the store of ${pool} reports them`);
          }
        }
      }
      for (const section of ['statements', 'errors', 'lock_waits'] as const) {
        assert.equal(merged.groups[section], single.east.groups[section] + single.west.groups[section], `${section}: the groups of both stores`);
      }
      assert.ok(
        merged.statements.every((s) => s.store === undefined),
        'no target is in both stores: no row names its store',
      );
      assert.equal(merged.stores?.length, 2);
      assert.deepEqual(merged.failed_stores, []);
      const text = (await report(both)).stdout;
      for (const name of TARGETS) assert.match(text, new RegExp(`^${name} `, 'm'), `${name} in the tables`);
      const activity = JSON.parse((await report(['activity', ...both, '--json'])).stdout) as { servers: Array<{ target: string; snapshotAt: string | null }> };
      assert.deepEqual(
        activity.servers.map((s) => s.target),
        [...SNAPSHOTS].sort(),
        'the snapshot servers of both pools',
      );
      assert.ok(activity.servers.every((s) => s.snapshotAt !== null));
      const locks = JSON.parse((await report(['locks', ...both, '--json'])).stdout) as { servers: Array<{ target: string }> };
      assert.equal(locks.servers.length, 2);
      // Nor in what the collectors printed.
      for (const c of collectors) for (const secret of passwords()) assert.ok(!c.output().includes(secret), `collector ${c.shard} printed a store password`);
      console.log(`# statements: ${merged.groups.statements} groups from ${TARGETS.length} targets in 2 stores; done at ${elapsed()}`);
    }),
  );
});
