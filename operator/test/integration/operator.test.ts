// The operator against a real kube-apiserver, etcd and kube-controller-manager, run as the
// real `pglog operator` CLI (two replicas competing for the Lease):
// - a pool with 5 replicas and 1,000 targets: 5 shards, every target in exactly one, within
//   seconds; `kubectl get postgrestargets` shows shard and transport;
// - `kubectl scale` to 6 moves about a sixth of the load, the rest stays; back to 5 moves only
//   the sixth shard's targets;
// - a reported rate above the band promotes, below it demotes after the dwell time, inside it
//   never flaps;
// - a deleted StatefulSet or CollectorShard comes back; a concurrent writer causing 409s does
//   not keep the operator from converging;
// - a pool whose spec is invalid beyond what the CRD schema checks gets Ready False with the
//   error code as reason and is not retried with backoff; once fixed it is reconciled;
// - killing the leader: the other replica leads within the Lease duration.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';
import { COLLECTOR_POOLS, COLLECTOR_SHARDS, LEASES, POSTGRES_TARGETS, STATEFUL_SETS } from '@pglog/common/kube/resources.ts';
import { type ControlPlane, startControlPlane } from '@pglog/test-support/control-plane.ts';
import { assignmentOf, createAll, eventually, poolObject, targetObject } from '@pglog/test-support/fleet.ts';

import { installCrds } from '../helpers/crds.ts';
import { type OperatorProcess, startOperator } from '../helpers/operator-process.ts';

const NS = 'fleet';
const LEASE_SECONDS = 4;

describe('pglog operator on a real control plane', { timeout: 420_000 }, () => {
  let cp: ControlPlane;
  let client: KubeClient & { close(): void };
  const operators: OperatorProcess[] = [];
  const outputs = (): string => operators.map((o) => `--- ${o.identity}\n${o.output().slice(-6000)}`).join('\n');

  before(async () => {
    cp = await startControlPlane({ controllerManager: true });
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    await installCrds(cp);
    await cp.kubectl(['create', 'namespace', NS]);
    for (const identity of ['operator-a', 'operator-b'])
      operators.push(await startOperator({ kubeconfig: cp.kubeconfig, namespace: NS, identity, leaseSeconds: LEASE_SECONDS }));
  });
  after(async () => {
    for (const o of operators) await o.kill();
    client?.close();
    await cp?.stop();
  });

  const leaseHolder = async (): Promise<string | undefined> => {
    const lease = await client.get<KubeObject & { spec?: { holderIdentity?: string } }>(LEASES, NS, 'pglog-operator');
    return lease?.spec?.holderIdentity;
  };

  /** Waits until pool main has `shards` shards, each with targets, that hold all 1,000 targets. */
  const allTargetsIn = (shards: number, what: string, timeoutMs: number): Promise<Awaited<ReturnType<typeof assignmentOf>>> =>
    eventually(
      what,
      timeoutMs,
      async () => {
        const a = await assignmentOf(client, NS, 'main');
        return a.shards.length === shards && a.byTarget.size === 1000 && a.shards.every((s) => s.spec.targets.length > 0) ? a : undefined;
      },
      outputs,
    );

  test('a pool with 5 replicas and 1,000 targets: 5 shards, every target in exactly one, within seconds', async () => {
    await eventually('a leader', 20_000, leaseHolder, outputs);
    const targets = Array.from({ length: 1000 }, (_, i) => targetObject(NS, `db${String(i).padStart(4, '0')}`, 'main'));
    await createAll(client, targets);
    const started = Date.now();
    await client.create(COLLECTOR_POOLS, poolObject(NS, 'main', 5));
    const done = await allTargetsIn(5, '5 shards holding all 1,000 targets', 60_000);
    const seconds = (Date.now() - started) / 1000;
    assert.deepEqual(done.duplicates, [], 'no target in two shards');
    assert.deepEqual(
      done.shards.map((s) => s.metadata.name),
      ['main-0', 'main-1', 'main-2', 'main-3', 'main-4'],
    );
    for (const s of done.shards)
      assert.ok(s.spec.targets.length >= 150 && s.spec.targets.length <= 250, `${s.metadata.name}: ${s.spec.targets.length} targets, within the 1.25 bound`);
    // The statuses follow: kubectl shows every target's shard and transport.
    const table = await eventually('every target shows its shard and transport', 60_000, async () => {
      const out = await cp.kubectl([
        'get',
        'postgrestargets',
        '-n',
        NS,
        '--no-headers',
        '-o',
        'custom-columns=SHARD:.status.shard,TRANSPORT:.status.transport',
      ]);
      return out.includes('<none>') ? undefined : out;
    });
    assert.equal(table.trim().split('\n').length, 1000);
    const printed = await cp.kubectl(['get', 'postgrestargets', '-n', NS, 'db0001', 'db0002']);
    assert.match(printed.split('\n')[0]!, /SHARD\s+TRANSPORT/);
    assert.match(printed, /db0001\s+\S+\s+main\s+\d\s+inproc/);
    process.stdout.write(
      `# 1,000 targets over 5 shards in ${seconds.toFixed(1)} s; all statuses written after ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    );
  });

  test("kubectl scale 5 -> 6 moves about a sixth, the rest stays; back to 5 moves only the sixth shard's targets", async () => {
    const before5 = (await assignmentOf(client, NS, 'main')).byTarget;
    await cp.kubectl(['scale', '-n', NS, 'collectorpool/main', '--replicas', '6']);
    const six = await allTargetsIn(6, '6 shards holding all targets', 30_000);
    assert.deepEqual(six.duplicates, []);
    const moved = [...before5].filter(([t, s]) => six.byTarget.get(t) !== s);
    // All targets weigh the same (none has a measured rate yet): load = count.
    assert.ok(moved.length <= 1000 / 6 + 50, `moved ${moved.length} of 1000 (ideal ${Math.round(1000 / 6)})`);
    assert.ok(moved.length >= 1000 / 6 - 50, `moved ${moved.length}: the new shard took its share`);
    const sixthShard = new Set(six.shards[5]!.spec.targets.map((t) => t.name));
    await cp.kubectl(['scale', '-n', NS, 'collectorpool/main', '--replicas', '5']);
    const five = await allTargetsIn(5, 'back to 5 shards holding all targets', 30_000);
    const movedBack = [...six.byTarget].filter(([t, s]) => five.byTarget.get(t) !== s).map(([t]) => t);
    assert.equal(movedBack.length, sixthShard.size, "exactly the sixth shard's targets moved");
    assert.ok(
      movedBack.every((t) => sixthShard.has(t)),
      'only targets of the removed shard moved',
    );
    // A moved target's epoch was raised: its new owner fences the old one in the store.
    const epochsAt = (a: { shards: CollectorShard[] }): Map<string, number> =>
      new Map(a.shards.flatMap((s) => s.spec.targets.map((t) => [t.name, t.epoch] as const)));
    const [sixEpochs, fiveEpochs] = [epochsAt(six), epochsAt(five)];
    assert.ok(
      movedBack.every((t) => fiveEpochs.get(t)! > sixEpochs.get(t)!),
      'every moved target has a higher epoch',
    );
    assert.ok(
      [...fiveEpochs].every(([t, e]) => movedBack.includes(t) || e === sixEpochs.get(t)),
      'the others keep theirs',
    );
    process.stdout.write(
      `# scale 5 -> 6 moved ${moved.length} of 1000 targets (ideal ${Math.round(1000 / 6)}); 6 -> 5 moved ${movedBack.length}, all from the sixth shard\n`,
    );
    const pool = await client.get<KubeObject & { status?: { replicas?: number; selector?: string } }>(COLLECTOR_POOLS, NS, 'main');
    assert.match(pool?.status?.selector ?? '', /pglog.io\/pool=main/);
  });

  test('a rate above the band promotes; below it demotes only after the dwell time; inside it never flaps', async () => {
    await client.create(COLLECTOR_POOLS, poolObject(NS, 'hot', 1, { transport: { minDwellSeconds: 6 } }));
    await client.create(POSTGRES_TARGETS, targetObject(NS, 'busy', 'hot'));
    const shardOf = async (): Promise<CollectorShard | undefined> => (await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, 'hot-0')) ?? undefined;
    await eventually('shard hot-0 with the target', 20_000, async () => ((await shardOf())?.spec.targets.length === 1 ? true : undefined), outputs);
    const report = async (bytesPerSecond: number): Promise<void> => {
      await client.mergePatch(
        COLLECTOR_SHARDS,
        NS,
        'hot-0',
        {
          status: {
            updatedAt: new Date().toISOString(),
            targets: [
              {
                name: 'busy',
                transport: (await shardOf())!.spec.targets[0]!.transport,
                bytesPerSecond,
                linesPerSecond: bytesPerSecond / 100,
                lagBytes: 0,
                connected: true,
                epoch: 1,
              },
            ],
          },
        },
        'status',
      );
    };
    const transport = async (): Promise<string | undefined> => (await shardOf())?.spec.targets[0]?.transport;
    // Dwell counts from the assignment: wait it out, then 3.2 Mbit/s.
    await new Promise((r) => setTimeout(r, 6_500));
    await report(400_000);
    await eventually('promoted to proxy', 20_000, async () => ((await transport()) === 'proxy' ? true : undefined), outputs);
    const promotedAt = Date.now();
    await report(50_000);
    // Not before the dwell time.
    await new Promise((r) => setTimeout(r, 3_000));
    assert.equal(await transport(), 'proxy', 'still in proxy inside the dwell time');
    await eventually('demoted after the dwell time', 25_000, async () => ((await transport()) === 'inproc' ? true : undefined), outputs);
    assert.ok(Date.now() - promotedAt >= 6_000, 'demotion waited for the dwell time');
    // Inside the band [0.75, 1.25] Mbit/s: no switch, whatever the wobble.
    const changes: string[] = [];
    for (let i = 0; i < 10; i++) {
      await report(i % 2 === 0 ? 100_000 : 150_000);
      await new Promise((r) => setTimeout(r, 1000));
      changes.push((await transport())!);
    }
    assert.ok(
      changes.every((t) => t === 'inproc'),
      `never flapped: ${changes.join(',')}`,
    );
  });

  test('a deleted StatefulSet and a deleted CollectorShard come back', async () => {
    const sts = await eventually('StatefulSet main', 20_000, async () => (await client.get(STATEFUL_SETS, NS, 'main')) ?? undefined);
    const shard = (await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, 'main-2'))!;
    await cp.kubectl(['delete', '-n', NS, 'statefulset/main', '--wait=false']);
    await cp.kubectl(['delete', '-n', NS, 'collectorshard/main-2', '--wait=false']);
    const sts2 = await eventually(
      'StatefulSet recreated',
      30_000,
      async () => {
        const s = await client.get(STATEFUL_SETS, NS, 'main');
        return s !== null && s.metadata.uid !== sts.metadata.uid ? s : undefined;
      },
      outputs,
    );
    assert.equal((sts2 as KubeObject & { spec: { replicas: number } }).spec.replicas, 5);
    const shard2 = await eventually(
      'CollectorShard recreated',
      30_000,
      async () => {
        const s = await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, 'main-2');
        return s !== null && s.metadata.uid !== shard.metadata.uid ? s : undefined;
      },
      outputs,
    );
    assert.deepEqual(
      shard2.spec.targets.map((t) => t.name),
      shard.spec.targets.map((t) => t.name),
      'the same assignment',
    );
  });

  test('a concurrent writer causing 409s: the operator converges once it stops', async () => {
    const wanted = (await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, 'main-1'))!.spec;
    const holderNow = (await leaseHolder())!;
    const until = Date.now() + 6_000;
    let writes = 0;
    while (Date.now() < until) {
      const s = await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, 'main-1');
      try {
        await client.replace(COLLECTOR_SHARDS, { ...s!, spec: { ...s!.spec, targets: s!.spec.targets.slice(1) } });
        writes++;
      } catch {
        /* the operator won this round */
      }
    }
    assert.ok(writes > 0);
    await eventually(
      'the operator restored the assignment',
      30_000,
      async () => {
        const s = await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, 'main-1');
        return JSON.stringify(s?.spec.targets.map((t) => t.name)) === JSON.stringify(wanted.targets.map((t) => t.name)) ? true : undefined;
      },
      outputs,
    );
    // The leader met the 409s (counted by code) and still converged.
    const leader = operators.find((o) => o.identity === holderNow)!;
    const metrics = await (await fetch(leader.metricsUrl)).text();
    assert.match(metrics, /pglog_operator_reconcile_errors_total\{controller="pool",code="KUBE_CONFLICT"\} [1-9]/);
  });

  test('a target no pool collects shows Ready False NoPool and no shard; one that leaves its pool loses its shard', async () => {
    type Status = { shard?: number; transport?: string; conditions?: Array<{ type: string; status: string; reason: string }> };
    const statusOf = async (name: string): Promise<Status | undefined> =>
      (await client.get<KubeObject & { status?: Status }>(POSTGRES_TARGETS, NS, name))?.status;
    const noPool = (s: Status | undefined): boolean =>
      s?.shard === undefined && s?.conditions?.some((c) => c.type === 'Ready' && c.status === 'False' && c.reason === 'NoPool') === true;
    await client.create(POSTGRES_TARGETS, targetObject(NS, 'stray', 'nowhere'));
    await eventually('the stray target is marked NoPool', 20_000, async () => (noPool(await statusOf('stray')) ? true : undefined), outputs);
    assert.equal((await statusOf('busy'))?.shard, 0);
    await client.mergePatch(POSTGRES_TARGETS, NS, 'busy', { spec: { pool: 'nowhere' } });
    await eventually('busy left pool hot: no shard, NoPool', 20_000, async () => (noPool(await statusOf('busy')) ? true : undefined), outputs);
    await eventually('shard hot-0 no longer lists it', 20_000, async () =>
      (await client.get<CollectorShard>(COLLECTOR_SHARDS, NS, 'hot-0'))?.spec.targets.length === 0 ? true : undefined,
    );
  });

  test('an invalid spec (a memory limit out of range): Ready False with the code as reason, not retried; fixed, the pool is reconciled', async () => {
    type Status = { conditions?: Array<{ type: string; status: string; reason: string; message: string }> };
    const pool = poolObject(NS, 'broken', 1, { collector: { resources: { limits: { memory: '1e400' } } } });
    await client.create(COLLECTOR_POOLS, pool);
    const ready = await eventually(
      'Ready False CONFIG_INVALID',
      20_000,
      async () => {
        const p = await client.get<KubeObject & { status?: Status }>(COLLECTOR_POOLS, NS, 'broken');
        return p?.status?.conditions?.find((c) => c.type === 'Ready' && c.status === 'False' && c.reason === 'CONFIG_INVALID');
      },
      outputs,
    );
    assert.match(ready.message, /1e400/);
    assert.equal(await client.get(STATEFUL_SETS, NS, 'broken'), null, 'nothing written but the status');
    // The loop took it as terminal: no retry with backoff, only when the pool changes (or the resync).
    await eventually(
      'the leader logged a terminal failure',
      20_000,
      () => Promise.resolve(/broken failed \(CONFIG_INVALID\); not retried until the object changes/.test(outputs()) ? true : undefined),
      outputs,
    );
    assert.doesNotMatch(outputs(), /broken failed \(CONFIG_INVALID\); retrying with backoff/);
    await client.mergePatch(COLLECTOR_POOLS, NS, 'broken', { spec: { collector: { resources: { limits: { memory: '512Mi' } } } } });
    await eventually('StatefulSet broken once the spec is valid', 20_000, async () => (await client.get(STATEFUL_SETS, NS, 'broken')) ?? undefined, outputs);
    await client.delete(COLLECTOR_POOLS, NS, 'broken');
  });

  test('killing the leader: the other replica takes over within the Lease duration', async () => {
    const holder = (await leaseHolder())!;
    const leader = operators.find((o) => o.identity === holder)!;
    const standby = operators.find((o) => o.identity !== holder)!;
    const killedAt = Date.now();
    await leader.kill();
    await eventually(
      'the standby holds the Lease',
      (LEASE_SECONDS + 6) * 1000,
      async () => ((await leaseHolder()) === standby.identity ? true : undefined),
      outputs,
    );
    const tookOver = (Date.now() - killedAt) / 1000;
    assert.ok(tookOver <= LEASE_SECONDS + 3, `took over after ${tookOver.toFixed(1)} s (Lease ${LEASE_SECONDS} s)`);
    // And it reconciles: a scale is carried out by the new leader.
    await cp.kubectl(['scale', '-n', NS, 'collectorpool/main', '--replicas', '4']);
    await eventually(
      '4 shards under the new leader',
      30_000,
      async () => ((await assignmentOf(client, NS, 'main')).shards.length === 4 ? true : undefined),
      outputs,
    );
    process.stdout.write(`# leader killed; the standby led after ${tookOver.toFixed(1)} s\n`);
  });
});
