// How many PostgresTarget status writes the operator makes, counted through a watch on a real
// kube-apiserver with the real `pglog operator` CLI (ADR 0030): one per target when the pool
// assigns it and one when its collector first reports it, none for collector reports that only
// move rates a few per cent, the lag and the newest entry's time, and exactly one for a target
// whose rate moved beyond its band or whose collector lost it. No collector runs: the test
// writes the CollectorShards' statuses as collectors would, with byte rates under the sharding
// floor (1 KiB/s) so that shards reporting one after the other move no target.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import type { CollectorShard, ShardTargetStatus } from '@pglog/common/api/collector-shard.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';
import { Informer } from '@pglog/common/kube/informer.ts';
import { COLLECTOR_POOLS, COLLECTOR_SHARDS, POSTGRES_TARGETS } from '@pglog/common/kube/resources.ts';
import { type ControlPlane, startControlPlane } from '@pglog/test-support/control-plane.ts';
import { createAll, eventually, poolObject, targetObject } from '@pglog/test-support/fleet.ts';

import { installCrds } from '../helpers/crds.ts';
import { type OperatorProcess, startOperator } from '../helpers/operator-process.ts';

const NS = 'writes';
const TARGETS = 60;
const REPLICAS = 3;

describe('target status writes on a real API server', { timeout: 240_000 }, () => {
  let cp: ControlPlane;
  let client: KubeClient & { close(): void };
  let operator: OperatorProcess;
  const stop = new AbortController();
  let targets: Informer<TargetObject>;
  let shards: Informer<CollectorShard>;
  /** Status changes per target name since the last reset. */
  const writes = new Map<string, number>();
  /** The status of each write per target since the last reset, for the failure message. */
  const history = new Map<string, string[]>();
  const twice = (): string =>
    [...history]
      .filter(([, h]) => h.length > 1)
      .map(([name, h]) => `${name}:\n  ${h.join('\n  ')}`)
      .join('\n');
  const total = (): number => [...writes.values()].reduce((a, n) => a + n, 0);
  const output = (): string => `--- operator\n${operator.output().slice(-6000)}`;

  before(async () => {
    cp = await startControlPlane();
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    await installCrds(cp);
    await cp.kubectl(['create', 'namespace', NS]);
    targets = new Informer<TargetObject>(client, POSTGRES_TARGETS, { namespace: NS });
    shards = new Informer<CollectorShard>(client, COLLECTOR_SHARDS, { namespace: NS });
    targets.onChange((e) => {
      if (e.type === 'update' && JSON.stringify(e.old?.status ?? {}) !== JSON.stringify(e.object.status ?? {})) {
        writes.set(e.object.metadata.name, (writes.get(e.object.metadata.name) ?? 0) + 1);
        history.set(e.object.metadata.name, [...(history.get(e.object.metadata.name) ?? []), JSON.stringify(e.object.status)]);
      }
    });
    void targets.run(stop.signal);
    void shards.run(stop.signal);
    operator = await startOperator({ kubeconfig: cp.kubeconfig, namespace: NS, identity: 'writes-operator', leaseSeconds: 15 });
  });
  after(async () => {
    stop.abort();
    await operator?.stop();
    client?.close();
    await cp?.stop();
  });

  /** Pool passes the operator finished so far (its own metric). */
  const poolPasses = async (): Promise<number> => {
    const text = await (await fetch(operator.metricsUrl)).text();
    const line = text.split('\n').find((l) => l.startsWith('pglog_operator_reconcile_duration_seconds_count{controller="pool"}'));
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
  };
  /** Waits until two pool passes have ended since now: one of them began after whatever was just written. */
  const twoPassesLater = async (): Promise<void> => {
    const from = await poolPasses();
    await eventually('two more pool passes', 60_000, async () => ((await poolPasses()) >= from + 2 ? true : undefined), output);
  };

  const ready = (name: string): string | undefined => targets.get(NS, name)?.status?.conditions?.find((c) => c.type === 'Ready')?.reason;

  /** Writes every shard's status as its collector would: `over` changes single targets. */
  const report = async (entryTime: Date, wobble: number, over: Record<string, Partial<ShardTargetStatus>> = {}): Promise<void> => {
    for (const shard of shards.list()) {
      const reported: ShardTargetStatus[] = shard.spec.targets.map((t, i) => ({
        name: t.name,
        transport: t.transport,
        // Every other target a little up, the others a little down.
        bytesPerSecond: Math.round(1000 * (1 + (i % 2 === 0 ? wobble : -wobble))),
        linesPerSecond: Math.round(200 * (1 + wobble)),
        lagBytes: 1000 + Math.round(wobble * 100_000),
        connected: true,
        epoch: t.epoch,
        lastEntryTime: entryTime.toISOString(),
        ...over[t.name],
      }));
      const status = { observedGeneration: shard.metadata.generation ?? 1, updatedAt: entryTime.toISOString(), targets: reported };
      await client.mergePatch(COLLECTOR_SHARDS, NS, shard.metadata.name, { status }, 'status');
    }
  };

  test('assigned: one write per target', async () => {
    await createAll(
      client,
      Array.from({ length: TARGETS }, (_, i) => targetObject(NS, `db${String(i).padStart(2, '0')}`, 'main')),
    );
    await eventually('every target marked NoPool', 60_000, () =>
      Promise.resolve(targets.list().every((t) => ready(t.metadata.name) === 'NoPool') ? true : undefined),
    );
    writes.clear();
    history.clear();
    await client.create(COLLECTOR_POOLS, poolObject(NS, 'main', REPLICAS));
    await eventually(
      'every target assigned',
      60_000,
      () => Promise.resolve(targets.list().length === TARGETS && targets.list().every((t) => ready(t.metadata.name) === 'Assigned') ? true : undefined),
      output,
    );
    await twoPassesLater();
    assert.equal(shards.list().length, REPLICAS);
    assert.equal(total(), TARGETS, `one status write per target; written more than once:\n${twice()}`);
    assert.ok([...writes.values()].every((n) => n === 1));
  });

  test("the collectors' first report: one more write per target (Ready True, rates)", async () => {
    writes.clear();
    await report(new Date(), 0);
    await eventually(
      'every target Ready',
      60_000,
      () => Promise.resolve(targets.list().every((t) => ready(t.metadata.name) === 'Collecting') ? true : undefined),
      output,
    );
    await twoPassesLater();
    assert.equal(total(), TARGETS);
  });

  test('reports that move rates by 3 %, the lag and the newest entry by 20 s: no writes', async () => {
    writes.clear();
    const start = Date.now();
    for (const [k, wobble] of [0.03, -0.03, 0.02].entries()) {
      await report(new Date(start + (k + 1) * 20_000), wobble);
      await twoPassesLater();
    }
    assert.equal(total(), 0, `status writes: ${JSON.stringify(Object.fromEntries(writes))}`);
    assert.equal(targets.get(NS, 'db00')?.status?.rates?.bytesPerSecond, 1000, 'the rate written with Ready, within its band of the newest');
  });

  test('a line rate 50 % up and a lost connection: one write each, no other', async () => {
    writes.clear();
    await report(new Date(Date.now() + 80_000), 0, { db07: { linesPerSecond: 300 }, db08: { connected: false } });
    await eventually('db08 not Ready', 60_000, () => Promise.resolve(ready('db08') === 'NotConnected' ? true : undefined), output);
    await eventually(
      'db07 at 300 lines/s',
      60_000,
      () => Promise.resolve(targets.get(NS, 'db07')?.status?.rates?.linesPerSecond === 300 ? true : undefined),
      output,
    );
    await twoPassesLater();
    assert.deepEqual(Object.fromEntries(writes), { db07: 1, db08: 1 });
  });
});
