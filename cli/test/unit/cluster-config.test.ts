// Cluster mode, pure parts: the shard status built from what the collector runs and what it
// could not resolve; the rule that decides a write; the launcher's command line; the
// cluster options.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { parseClusterConfig } from '@pglog/cli/cluster-config.ts';
import { parseCollectArgs } from '@pglog/cli/collect-config.ts';
import { exitStatusOf, launchCommand } from '@pglog/collector/cluster/launch-command.ts';
import { buildShardStatus, changedEnough, type StatusInputs } from '@pglog/collector/cluster/shard-status.ts';
import { formatTuning, parseTuning, sameTuning } from '@pglog/collector/cluster/tuning.ts';
import type { TargetSnapshot } from '@pglog/collector/collect/target-observation.ts';
import type { CollectorShardStatus, ShardTarget } from '@pglog/common/api/collector-shard.ts';
import { PglogError } from '@pglog/common/errors.ts';

const assigned: ShardTarget[] = [
  { name: 'db2', transport: 'proxy', epoch: 4 },
  { name: 'db1', transport: 'inproc', epoch: 2 },
  { name: 'db3', transport: 'inproc', epoch: 1 },
];
const snap = (name: string, over: Partial<TargetSnapshot> = {}): TargetSnapshot => ({
  name,
  transport: 'inproc',
  bytesPerSecond: 12_345.6,
  linesPerSecond: 100.04,
  lagBytes: 10,
  connected: true,
  epoch: 2,
  lastEntryTime: '2026-11-23T15:00:00.000Z',
  offsets: [{ instance: 'main', file: '/log/a.log', offset: 99 }],
  ...over,
});
const TUNING = { uvThreadpoolSize: 8, maxOldSpaceSizeMiB: 1024, maxSemiSpaceSizeMiB: 32 };
const inputs = (over: Partial<StatusInputs> = {}): StatusInputs => ({
  generation: 7,
  pod: 'pool-0',
  tuning: TUNING,
  assigned,
  running: [snap('db1'), snap('db2', { transport: 'proxy', epoch: 4, connected: false })],
  unresolved: new Map([['db3', 'KUBE_NOT_FOUND']]),
  shardProblem: null,
  previousReady: undefined,
  now: new Date('2026-11-23T15:00:10Z'),
  ...over,
});

describe('buildShardStatus', () => {
  // A problem the collector reports for one target lands on that target alone.
  const perTarget = [
    { title: 'a failing SQL snapshot is reported per target as snapshotError', field: 'snapshotError', value: 'SQL_CONNECT_FAILED' },
    { title: 'an SQL role more powerful than monitoring needs is reported per target as sqlRoleWarning', field: 'sqlRoleWarning', value: 'SQL_ROLE_SUPERUSER' },
  ] as const;
  for (const { title, field, value } of perTarget) {
    test(title, () => {
      const status = buildShardStatus(inputs({ running: [snap('db1', { [field]: value }), snap('db2')] }));
      assert.deepEqual(
        status.targets!.map((t) => [t.name, t[field]]),
        [
          ['db1', value],
          ['db2', undefined],
          ['db3', undefined],
        ],
      );
    });
  }

  test('every assigned target, sorted; running ones with rounded rates and offsets; an unresolved one with its code', () => {
    const s = buildShardStatus(inputs());
    assert.equal(s.observedGeneration, 7);
    assert.equal(s.pod, 'pool-0');
    assert.deepEqual(s.tuning, TUNING);
    assert.equal(s.updatedAt, '2026-11-23T15:00:10.000Z');
    assert.deepEqual(
      s.targets!.map((t) => t.name),
      ['db1', 'db2', 'db3'],
    );
    assert.deepEqual(s.targets![0], {
      name: 'db1',
      transport: 'inproc',
      bytesPerSecond: 12_346,
      linesPerSecond: 100,
      lagBytes: 10,
      connected: true,
      epoch: 2,
      lastEntryTime: '2026-11-23T15:00:00.000Z',
      offsets: [{ instance: 'main', file: '/log/a.log', offset: 99 }],
    });
    assert.deepEqual(s.targets![2], {
      name: 'db3',
      transport: 'inproc',
      bytesPerSecond: 0,
      linesPerSecond: 0,
      lagBytes: 0,
      connected: false,
      epoch: 1,
      error: 'KUBE_NOT_FOUND',
    });
    const ready = s.conditions![0]!;
    assert.equal(ready.type, 'Ready');
    assert.equal(ready.status, 'False');
    assert.equal(ready.reason, 'KUBE_NOT_FOUND', 'a failure is named by its code');
    assert.match(ready.message, /1 of 3 targets failing: db3 \(KUBE_NOT_FOUND\)/);
  });

  test('Ready True when all collect; Connecting while one is not reading; Unknown when the shard is not current; transition time kept while unchanged', () => {
    const allGood = inputs({ running: [snap('db1'), snap('db2'), snap('db3')], unresolved: new Map() });
    const ready = buildShardStatus(allGood).conditions![0]!;
    assert.deepEqual([ready.status, ready.reason], ['True', 'Collecting']);
    const later = buildShardStatus({ ...allGood, previousReady: ready, now: new Date('2026-11-23T16:00:00Z') }).conditions![0]!;
    assert.equal(later.lastTransitionTime, ready.lastTransitionTime);
    const connecting = buildShardStatus(inputs({ unresolved: new Map(), running: [snap('db1'), snap('db2', { connected: false }), snap('db3')] }))
      .conditions![0]!;
    assert.deepEqual([connecting.status, connecting.reason], ['False', 'Connecting']);
    const unknown = buildShardStatus({ ...allGood, shardProblem: 'KUBE_UNAVAILABLE: timeout', previousReady: ready, now: new Date('2026-11-23T16:00:00Z') })
      .conditions![0]!;
    assert.deepEqual([unknown.status, unknown.reason], ['Unknown', 'ShardUnavailable']);
    assert.equal(unknown.lastTransitionTime, '2026-11-23T16:00:00.000Z', 'a new status is a transition');
  });
});

describe('changedEnough', () => {
  const base = buildShardStatus(inputs());
  const withTarget = (k: number, over: Record<string, unknown>): CollectorShardStatus => ({
    ...base,
    targets: base.targets!.map((t, i) => (i === k ? { ...t, ...over } : t)),
  });

  test('first write, forced refresh after 60 s, and every state change write', () => {
    assert.equal(changedEnough(undefined, base, 0), true);
    assert.equal(changedEnough(base, { ...base, updatedAt: 'later' }, 59_999), false, 'only the time changed');
    assert.equal(changedEnough(base, base, 60_000), true);
    for (const over of [
      { connected: false },
      { transport: 'proxy' },
      { epoch: 3 },
      { error: 'SSH_AUTH_FAILED' },
      { snapshotError: 'SQL_TIMEOUT' },
      { sqlRoleWarning: 'SQL_ROLE_CAN_WRITE' },
      { offsets: undefined },
    ]) {
      assert.equal(changedEnough(base, withTarget(0, over), 1000), true, JSON.stringify(over));
    }
    assert.equal(changedEnough(base, { ...base, observedGeneration: 8 }, 1000), true);
    assert.equal(changedEnough(base, { ...base, tuning: { ...TUNING, uvThreadpoolSize: 9 } }, 1000), true);
    assert.equal(changedEnough(base, { ...base, targets: base.targets!.slice(1) }, 1000), true, 'a target left');
  });

  test('rates and lag: beyond 20 % and beyond a floor; offsets moving alone ride along', () => {
    assert.equal(changedEnough(base, withTarget(0, { bytesPerSecond: 14_000 }), 1000), false, '+13 %');
    assert.equal(changedEnough(base, withTarget(0, { bytesPerSecond: 16_000 }), 1000), true, '+30 %');
    assert.equal(changedEnough(base, withTarget(0, { bytesPerSecond: 0 }), 1000), true, 'went quiet');
    assert.equal(changedEnough(base, withTarget(2, { bytesPerSecond: 900 }), 1000), false, 'under the 1 KiB/s floor');
    assert.equal(changedEnough(base, withTarget(0, { linesPerSecond: 200 }), 1000), true);
    assert.equal(changedEnough(base, withTarget(0, { lagBytes: 500_000 }), 1000), false, 'under the 1 MiB floor');
    assert.equal(changedEnough(base, withTarget(0, { lagBytes: 50_000_000 }), 1000), true);
    assert.equal(changedEnough(base, withTarget(0, { offsets: [{ instance: 'main', file: '/log/a.log', offset: 5000 }] }), 1000), false);
  });
});

describe('launchCommand', () => {
  const self = ['/usr/bin/node', '--disable-warning=ExperimentalWarning', '--max-old-space-size=64', '--max_semi_space_size', '2', '/app/main.ts'];
  test("the tuning as V8 flags (replacing the launcher's own) and UV_THREADPOOL_SIZE; collect arguments passed on with --launched", () => {
    const c = launchCommand(self, ['--shard', 's-0', '--status-interval', '5', '--launched', 'old'], TUNING, {
      PATH: '/bin',
      UV_THREADPOOL_SIZE: '4',
      PGLOG_STORE_URL: 'postgres://x',
    });
    assert.equal(c.command, '/usr/bin/node');
    assert.deepEqual(c.args, [
      '--disable-warning=ExperimentalWarning',
      '--max-old-space-size=1024',
      '--max-semi-space-size=32',
      '/app/main.ts',
      'collect',
      '--shard',
      's-0',
      '--status-interval',
      '5',
      '--launched',
      formatTuning(TUNING),
    ]);
    assert.deepEqual(c.env, { PATH: '/bin', UV_THREADPOOL_SIZE: '8', PGLOG_STORE_URL: 'postgres://x' });
  });

  test("a growing factor in the tuning replaces the launcher's; without one (an older operator's shard) the launcher's stays", () => {
    const launcher = ['/usr/bin/node', '--heap_growing_percent=50', '--max-semi-space-size=4', '/app/main.ts'];
    const tuned = launchCommand(launcher, [], { ...TUNING, heapGrowingPercent: 100 }, {});
    assert.deepEqual(tuned.args.slice(0, 3), ['--max-old-space-size=1024', '--max-semi-space-size=32', '--heap-growing-percent=100']);
    assert.equal(tuned.args.filter((a) => /heap.growing/.test(a)).length, 1);
    assert.deepEqual(parseTuning(tuned.args.at(-1)!), { ...TUNING, heapGrowingPercent: 100 });
    const older = launchCommand(launcher, [], TUNING, {});
    assert.deepEqual(older.args.slice(0, 3), ['--heap_growing_percent=50', '--max-old-space-size=1024', '--max-semi-space-size=32']);
    assert.deepEqual(parseTuning(older.args.at(-1)!), TUNING);
    // A new growing factor is a new process: the shard collector restarts its child for it.
    assert.equal(sameTuning(TUNING, { ...TUNING, heapGrowingPercent: 100 }), false);
    assert.equal(sameTuning({ ...TUNING, heapGrowingPercent: 100 }, { ...TUNING, heapGrowingPercent: 100 }), true);
  });

  test('exit status: the code, or 128 + the signal number', () => {
    assert.equal(exitStatusOf(3, null, { SIGKILL: 9 }), 3);
    assert.equal(exitStatusOf(null, 'SIGKILL', { SIGKILL: 9 }), 137);
  });
});

describe('cluster options', () => {
  const usage =
    (fragment: RegExp) =>
    (e: unknown): boolean =>
      e instanceof PglogError && e.code === 'USAGE' && fragment.test(e.message);
  test('in-cluster from the environment, or a kubeconfig; intervals; the pod name', () => {
    const c = parseClusterConfig({ shard: 'pool-0' }, { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443', POD_NAME: 'pool-0' })!;
    assert.deepEqual(c.kube, {
      kind: 'in-cluster',
      host: '10.0.0.1',
      port: '443',
      tokenFile: '/var/run/secrets/kubernetes.io/serviceaccount/token',
      caFile: '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt',
      namespaceFile: '/var/run/secrets/kubernetes.io/serviceaccount/namespace',
    });
    assert.equal(c.statusIntervalMs, 10_000);
    assert.equal(c.resolveIntervalMs, 30_000);
    assert.equal(c.pod, 'pool-0');
    assert.equal(c.launched, null);
    const k = parseClusterConfig(
      { shard: 's-1', kubeconfig: '/k', namespace: 'ns', 'status-interval': '2', launched: formatTuning(TUNING) },
      { HOSTNAME: 'h' },
    )!;
    assert.deepEqual(k.kube, { kind: 'kubeconfig', paths: ['/k'], context: null, from: '--kubeconfig', env: { HOSTNAME: 'h' } });
    assert.equal(k.namespace, 'ns');
    assert.equal(k.statusIntervalMs, 2000);
    assert.equal(k.pod, 'h');
    assert.deepEqual(k.launched, TUNING);
    assert.equal(parseClusterConfig({}, {}), null);
    // As kubectl: $KUBECONFIG (every file) before the pod's service account; --context picks the context.
    const env = { KUBECONFIG: '/a:/b', KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' };
    assert.deepEqual(parseClusterConfig({ shard: 's-1', context: 'dev' }, env)!.kube, {
      kind: 'kubeconfig',
      paths: ['/a', '/b'],
      context: 'dev',
      from: 'KUBECONFIG',
      env,
    });
  });

  test('mistakes are USAGE errors', () => {
    assert.throws(() => parseClusterConfig({ namespace: 'ns' }, {}), usage(/--namespace needs --shard/));
    assert.throws(() => parseClusterConfig({ shard: 'S_0', kubeconfig: '/k' }, {}), usage(/--shard must be/));
    assert.throws(() => parseClusterConfig({ shard: 's' }, {}), usage(/needs --kubeconfig/));
    assert.throws(() => parseClusterConfig({ shard: 's', kubeconfig: '/k', 'status-interval': '0' }, {}), usage(/--status-interval/));
    assert.throws(() => parseTuning('uvThreadpoolSize=4'), usage(/needs/));
    const store = { PGLOG_STORE_URL: 'postgresql://u:p@h/db' };
    const noFile = (): string => {
      throw new Error('no file');
    };
    assert.throws(
      () => parseCollectArgs(['--targets', 't.yaml', '--shard', 's-0', '--kubeconfig', '/k'], store, noFile),
      usage(/--targets FILE \(standalone\) or --shard NAME \(cluster\), not both/),
    );
    const c = parseCollectArgs(['--shard', 's-0', '--kubeconfig', '/k'], store, noFile);
    assert.equal(c.targetsFile, null);
    assert.equal(c.cluster?.shard, 's-0');
    assert.equal(c.storeUrl, store.PGLOG_STORE_URL, 'the store URL from PGLOG_STORE_URL, as standalone');
    assert.throws(() => parseTuning('uvThreadpoolSize=4,uvThreadpoolSize=4,maxOldSpaceSizeMiB=1'), usage(/--launched must be/));
    assert.throws(() => parseTuning('uvThreadpoolSize=4,maxOldSpaceSizeMiB=256,heapGrowingPercent=100'), usage(/needs/));
    assert.throws(() => parseTuning('uvThreadpoolSize=4,maxOldSpaceSizeMiB=256,maxSemiSpaceSizeMiB=8,heapGrowingPercent=-1'), usage(/--launched must be/));
  });
});
