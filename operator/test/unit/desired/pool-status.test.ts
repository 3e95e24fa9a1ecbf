// The statuses the operator writes: a target's shard, transport, rates and Ready condition
// from its collector's report; the pool's scale fields and conditions; no write when nothing
// changed (a rate wobbling in its fourth digit included).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { ShardTargetStatus } from '@pglog/common/api/collector-shard.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import type { KubeObject } from '@pglog/common/kube/client-types.ts';

import { mapLimit } from '../../../src/controller/map-limit.ts';
import { DESIRED_HASH_ANNOTATION, desiredHash, withDesiredHash } from '../../../src/controller/owned-objects.ts';
import { unassignedStatusPatch } from '../../../src/controller/unassigned-targets.ts';
import { desiredPoolStatus } from '../../../src/desired/pool-status.ts';
import { desiredTargetStatus, roundRate, targetStatusChanged } from '../../../src/desired/target-status.ts';

const target = (status?: TargetObject['status']): TargetObject => ({
  apiVersion: 'pglog.io/v1alpha1',
  kind: 'PostgresTarget',
  metadata: { name: 'db1', namespace: 'ns', generation: 3 },
  spec: {
    host: 'h',
    port: 22,
    user: 'postgres',
    ssh: { secretRef: { name: 's' } },
    transport: 'auto',
    instances: [],
    collect: { logs: true, activity: false, locks: false, statements: false, databases: false, intervalSeconds: 15, statisticsIntervalSeconds: 15 },
  },
  ...(status === undefined ? {} : { status }),
});

const report = { name: 'db1', transport: 'proxy' as const, bytesPerSecond: 123_456.7, linesPerSecond: 1_000.2, lagBytes: 10, connected: true, epoch: 2 };

describe('target status', () => {
  test('assigned but not reported yet: shard and planned transport, Ready Unknown', () => {
    const s = desiredTargetStatus(target(), { shard: 2, transport: 'inproc' }, undefined, '2026-11-23T10:00:00.000Z');
    assert.equal(s.shard, 2);
    assert.equal(s.transport, 'inproc');
    assert.equal(s.observedGeneration, 3);
    assert.deepEqual(
      s.conditions?.map((c) => [c.type, c.status, c.reason]),
      [['Ready', 'Unknown', 'Assigned']],
    );
  });

  test('reported: the transport in use, rounded rates, Ready True; an error code becomes the reason', () => {
    const s = desiredTargetStatus(target(), { shard: 1, transport: 'inproc' }, report, '2026-11-23T10:00:00.000Z');
    assert.equal(s.transport, 'proxy');
    assert.deepEqual(s.rates, { bytesPerSecond: 123_000, linesPerSecond: 1_000 });
    assert.equal(s.conditions?.[0]?.status, 'True');
    const failing = desiredTargetStatus(
      target(),
      { shard: 1, transport: 'inproc' },
      { ...report, error: 'SSH_AUTH_FAILED', connected: false },
      '2026-11-23T10:00:00.000Z',
    );
    assert.deepEqual([failing.conditions?.[0]?.status, failing.conditions?.[0]?.reason], ['False', 'SSH_AUTH_FAILED']);
  });

  test('a target that takes SQL snapshots gets a Snapshots condition: the failing code as reason, True when they succeed', () => {
    const sql = target();
    sql.spec.collect = { ...sql.spec.collect, activity: true, locks: true };
    const pending = desiredTargetStatus(sql, { shard: 1, transport: 'inproc' }, undefined, '2026-11-23T10:00:00.000Z');
    assert.deepEqual(
      pending.conditions?.map((c) => [c.type, c.status, c.reason]),
      [
        ['Ready', 'Unknown', 'Assigned'],
        ['Snapshots', 'Unknown', 'Assigned'],
        ['SqlRole', 'Unknown', 'Assigned'],
      ],
    );
    const failing = desiredTargetStatus(sql, { shard: 1, transport: 'inproc' }, { ...report, snapshotError: 'SQL_CONNECT_FAILED' }, '2026-11-23T10:00:00.000Z');
    assert.deepEqual(
      failing.conditions?.map((c) => [c.type, c.status, c.reason]),
      [
        ['Ready', 'True', 'Collecting'],
        ['Snapshots', 'False', 'SQL_CONNECT_FAILED'],
        ['SqlRole', 'Unknown', 'SnapshotsFailing'],
      ],
    );
    const ok = desiredTargetStatus(sql, { shard: 1, transport: 'inproc' }, report, '2026-11-23T10:00:00.000Z');
    assert.deepEqual(ok.conditions?.find((c) => c.type === 'Snapshots')?.reason, 'Succeeding');
    // Logs only: no Snapshots condition at all.
    assert.equal(desiredTargetStatus(target(), { shard: 1, transport: 'inproc' }, report, '2026-11-23T10:00:00.000Z').conditions?.length, 1);
  });

  test('SqlRole: False with SQL_ROLE_SUPERUSER / SQL_ROLE_CAN_WRITE when the collector reports the role more powerful than monitoring needs, True when not', () => {
    const sql = target();
    sql.spec.collect = { ...sql.spec.collect, activity: true };
    const role = (over: Partial<ShardTargetStatus>): string[] | undefined => {
      const c = desiredTargetStatus(sql, { shard: 1, transport: 'inproc' }, { ...report, ...over }, '2026-11-23T10:00:00.000Z').conditions?.find(
        (x) => x.type === 'SqlRole',
      );
      return c === undefined ? undefined : [c.status, c.reason, c.message];
    };
    assert.deepEqual(role({ sqlRoleWarning: 'SQL_ROLE_SUPERUSER' }), [
      'False',
      'SQL_ROLE_SUPERUSER',
      'the SQL role (spec.instances[].sql.user) is a superuser (snapshots are refused unless sql.allowSuperuser is true): use a role with only pg_monitor (docs/snapshots.md)',
    ]);
    assert.deepEqual(role({ sqlRoleWarning: 'SQL_ROLE_CAN_WRITE', snapshotError: 'SQL_TIMEOUT' })?.slice(0, 2), ['False', 'SQL_ROLE_CAN_WRITE']);
    assert.deepEqual(role({})?.slice(0, 2), ['True', 'NotPrivileged']);
    // Logs only: no SqlRole condition.
    assert.equal(
      desiredTargetStatus(
        target(),
        { shard: 1, transport: 'inproc' },
        { ...report, sqlRoleWarning: 'SQL_ROLE_SUPERUSER' },
        '2026-11-23T10:00:00.000Z',
      ).conditions?.some((c) => c.type === 'SqlRole'),
      false,
    );
  });

  test('KUBE_NOT_FOUND says the Secret may be missing or not opted in (one answer for both: existence is not revealed)', () => {
    const s = desiredTargetStatus(
      target(),
      { shard: 1, transport: 'inproc' },
      { ...report, error: 'KUBE_NOT_FOUND', connected: false },
      '2026-11-23T10:00:00.000Z',
    );
    const ready = s.conditions!.find((c) => c.type === 'Ready')!;
    assert.deepEqual([ready.status, ready.reason], ['False', 'KUBE_NOT_FOUND']);
    assert.match(
      ready.message,
      /does not exist or does not carry the label pglog\.io\/ssh-credentials: "true" and the annotation pglog\.io\/allowed-targets listing this target/,
    );
  });

  test('no write when only the time or the fourth digit of a rate moved', () => {
    const first = desiredTargetStatus(target(), { shard: 1, transport: 'inproc' }, report, '2026-11-23T10:00:00.000Z');
    const stored = target(first);
    const again = desiredTargetStatus(stored, { shard: 1, transport: 'inproc' }, { ...report, bytesPerSecond: 123_401 }, '2026-11-23T10:05:00.000Z');
    assert.equal(targetStatusChanged(stored, again), false);
    const moved = desiredTargetStatus(stored, { shard: 4, transport: 'inproc' }, report, '2026-11-23T10:05:00.000Z');
    assert.equal(targetStatusChanged(stored, moved), true);
  });

  test('roundRate keeps three significant digits', () => {
    assert.deepEqual([roundRate(0), roundRate(0.12345), roundRate(98_765), roundRate(Number.NaN)], [0, 0.123, 98_800, 0]);
  });
});

describe('pool status', () => {
  const pool = {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'CollectorPool',
    metadata: { name: 'p', namespace: 'ns', generation: 7 },
    spec: { replicas: 3 },
  } as unknown as CollectorPool;
  test('scale fields, counts and conditions; Progressing while the StatefulSet has other replicas', () => {
    const s = desiredPoolStatus(
      { pool, selector: 'pglog.io/pool=p', statefulSet: { replicas: 2, readyReplicas: 1 }, targets: 10, loads: [], shards: [] },
      '2026-11-23T10:00:00.000Z',
    );
    assert.deepEqual([s.replicas, s.selector, s.readyReplicas, s.targets, s.observedGeneration], [2, 'pglog.io/pool=p', 1, 10, 7]);
    const byType = new Map(s.conditions?.map((c) => [c.type, c]));
    assert.equal(byType.get('Ready')?.status, 'False');
    assert.equal(byType.get('Progressing')?.status, 'True');
    assert.equal(byType.get('Degraded')?.status, 'False');
  });
});

describe('owned objects and helpers', () => {
  test('the desired hash covers the object and is stable', () => {
    const o: KubeObject = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'a' } };
    assert.equal(desiredHash(o), desiredHash(structuredClone(o)));
    assert.notEqual(desiredHash(o), desiredHash({ ...o, metadata: { name: 'b' } }));
    assert.equal(withDesiredHash(o).metadata.annotations?.[DESIRED_HASH_ANNOTATION], desiredHash(o));
  });

  test('mapLimit runs everything with at most the limit in flight and reports the first failure', async () => {
    let inFlight = 0;
    let most = 0;
    const seen: number[] = [];
    await mapLimit(
      Array.from({ length: 20 }, (_, i) => i),
      3,
      async (i) => {
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((r) => setTimeout(r, 1));
        seen.push(i);
        inFlight--;
      },
    );
    assert.equal(most, 3);
    assert.equal(seen.length, 20);
    await assert.rejects(
      mapLimit([1, 2, 3], 2, (i) => (i === 2 ? Promise.reject(new Error('two')) : Promise.resolve())),
      /two/,
    );
  });
});

describe('unassigned targets', () => {
  test('a stale shard and Ready True become NoPool with the fields removed; an already marked target needs no write', () => {
    const stale = target({
      shard: 3,
      transport: 'proxy',
      rates: { bytesPerSecond: 1, linesPerSecond: 1 },
      conditions: [{ type: 'Ready', status: 'True', reason: 'Collecting', message: 'm', lastTransitionTime: '2026-11-23T09:00:00.000Z' }],
    });
    const patch = unassignedStatusPatch({ ...stale, spec: { ...stale.spec, pool: 'gone' } }, '2026-11-23T10:00:00.000Z');
    assert.ok(patch !== null);
    assert.deepEqual([patch.status['shard'], patch.status['transport'], patch.status['rates'], patch.status['lag']], [null, null, null, null]);
    const ready = (patch.status['conditions'] as Array<{ type: string; status: string; reason: string; message: string; lastTransitionTime: string }>)[0]!;
    assert.deepEqual([ready.status, ready.reason, ready.lastTransitionTime], ['False', 'NoPool', '2026-11-23T10:00:00.000Z']);
    assert.match(ready.message, /no CollectorPool gone/);
    const marked = target({ conditions: patch.status['conditions'] as never });
    assert.equal(unassignedStatusPatch({ ...marked, spec: { ...marked.spec, pool: 'gone' } }, '2026-11-23T11:00:00.000Z'), null);
  });
});
