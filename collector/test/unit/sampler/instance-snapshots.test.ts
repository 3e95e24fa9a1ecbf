// InstanceSnapshots, one instance's SQL snapshot loop, with a scripted SnapshotSource and
// write, a real prom-client registry and a captured logger: what is stored and measured per kind,
// statistics as deltas after a baseline, failures counted by code and logged once per streak,
// the SQL role's privilege reported on change, and run() on its interval until aborted.
import { strict as assert } from 'node:assert';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';

import { TARGET_DEFAULTS, type TargetCollect } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';
import { createLogger } from '@pglog/common/observability/logger.ts';
import { Registry } from 'prom-client';

import { SnapshotMetrics } from '../../../src/observability/snapshot-metrics.ts';
import { InstanceSnapshots, snapshotKinds, type SnapshotSource } from '../../../src/sampler/instance-snapshots.ts';
import { zeroDatabaseCounters } from '../../../src/snapshot/deltas.ts';
import type { SqlRolePrivilege } from '../../../src/snapshot/server-info.ts';
import type { StatisticsSample } from '../../../src/snapshot/statistics-sample.ts';
import type { Snapshot, SnapshotFailure } from '../../../src/snapshot/types.ts';
import { edge, session } from '../../helpers/snapshot-fixtures.ts';

/** The defaults with activity and locks on. */
const collect = (over: Partial<TargetCollect> = {}): TargetCollect => ({ ...TARGET_DEFAULTS.collect, activity: true, locks: true, ...over });

/** Log lines as objects, for assertions on what was logged at which level. */
function capture(): { log: ReturnType<typeof createLogger>; lines: Array<{ level: string; msg: string }> } {
  const lines: Array<{ level: string; msg: string }> = [];
  const destination = new Writable({
    write(chunk: Buffer, _e, cb) {
      for (const l of chunk.toString('utf8').split('\n')) if (l !== '') lines.push(JSON.parse(l) as { level: string; msg: string });
      cb();
    },
  });
  return { log: createLogger({ level: 'debug', destination }), lines };
}

function harness(source: SnapshotSource, c: TargetCollect = collect(), failWrite = false) {
  const outcomes: Array<string | null> = [];
  const registry = new Registry();
  const metrics = new SnapshotMetrics(registry, 'pglog_');
  const written: Array<Snapshot | SnapshotFailure> = [];
  const { log, lines } = capture();
  const runner = new InstanceSnapshots({
    target: 'db1',
    instance: 'main',
    collect: c,
    source,
    metrics,
    log,
    outcome: (_kind, code) => {
      outcomes.push(code);
    },
    write: (s) => {
      if (failWrite) return Promise.reject(new PglogError('STORE_UNAVAILABLE', 'store down'));
      written.push(s);
      return Promise.resolve();
    },
  });
  const value = async (name: string, labels: Record<string, string>): Promise<number> => {
    // A histogram's _count series is listed under the histogram's own name.
    const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name || x.name === name.replace(/_count$/, ''));
    const values = (m?.values ?? []).filter(
      (v) => (v as { metricName?: string }).metricName === undefined || (v as { metricName?: string }).metricName === name,
    );
    return values.filter((v) => Object.entries(labels).every(([k, l]) => (v.labels as Record<string, unknown>)[k] === l)).reduce((s, v) => s + v.value, 0);
  };
  return { runner, written, lines, value, metrics, outcomes };
}

const noStatistics = (): Promise<StatisticsSample> => Promise.reject(new Error('not asked for'));

describe('InstanceSnapshots', () => {
  test('snapshotKinds follows spec.collect', () => {
    assert.deepEqual(snapshotKinds(collect()), ['activity']);
    assert.deepEqual(snapshotKinds(collect({ activity: false, locks: false })), []);
    assert.deepEqual(snapshotKinds(collect({ activity: false, locks: false, databases: true })), ['statistics']);
    assert.deepEqual(snapshotKinds(collect({ statements: true })), ['activity', 'statistics']);
  });

  test('an activity snapshot is stored and sets sessions by state, blocked sessions and the longest wait', async () => {
    const ts = new Date('2026-11-23T18:00:00Z');
    const h = harness({
      activity: () =>
        Promise.resolve({
          ts,
          sessions: [session(1), session(2), session(3, { state: 'idle in transaction' }), session(4, { state: null })],
          blocking: [edge(2, 3, { waitMs: 1500 }), edge(1, 2, { waitMs: 400 })],
        }),
      statistics: noStatistics,
    });
    await h.runner.runOnce('activity');
    assert.equal(h.written.length, 1);
    const s = h.written[0] as Snapshot;
    assert.deepEqual([s.kind, s.ts, s.sessions.length, s.blocking.length], ['activity', ts, 4, 2]);
    assert.equal(await h.value('pglog_sessions', { state: 'active' }), 2);
    assert.equal(await h.value('pglog_sessions', { state: 'idle in transaction' }), 1);
    assert.equal(await h.value('pglog_blocked_sessions', {}), 2);
    assert.equal(await h.value('pglog_longest_blocking_wait_seconds', {}), 1.5);
    assert.equal(await h.value('pglog_snapshot_duration_seconds_count', { kind: 'activity' }), 1);
  });

  test("the SQL role's privilege is reported when a session finds it changed, after a failed run too: pglog_sql_role_privileged and the hook", async () => {
    let privilege: SqlRolePrivilege | null | undefined;
    let fail = false;
    const source: SnapshotSource = {
      activity: () =>
        fail ? Promise.reject(new PglogError('SQL_TIMEOUT', 'timeout expired')) : Promise.resolve({ ts: new Date(), sessions: [], blocking: [] }),
      statistics: noStatistics,
      get rolePrivilege() {
        return privilege;
      },
    };
    const registry = new Registry();
    const heard: Array<SqlRolePrivilege | null> = [];
    const runner = new InstanceSnapshots({
      target: 'db1',
      instance: 'main',
      collect: collect(),
      source,
      metrics: new SnapshotMetrics(registry, 'pglog_'),
      log: capture().log,
      write: () => Promise.resolve(),
      rolePrivilege: (p) => {
        heard.push(p);
      },
    });
    const gauge = async (): Promise<Record<string, number>> =>
      Object.fromEntries(
        ((await registry.getMetricsAsJSON()).find((m) => m.name === 'pglog_sql_role_privileged')?.values ?? []).map((v) => [
          String((v.labels as Record<string, unknown>)['reason']),
          v.value,
        ]),
      );
    await runner.runOnce('activity'); // no session has found the role yet
    assert.deepEqual(await gauge(), {});
    privilege = 'SQL_ROLE_SUPERUSER';
    await runner.runOnce('activity');
    await runner.runOnce('activity');
    assert.deepEqual(await gauge(), { SQL_ROLE_SUPERUSER: 1, SQL_ROLE_CAN_WRITE: 0 });
    privilege = null; // a new session as a role without the privilege, then the query failed
    fail = true;
    await runner.runOnce('activity');
    assert.deepEqual(await gauge(), { SQL_ROLE_SUPERUSER: 0, SQL_ROLE_CAN_WRITE: 0 });
    assert.deepEqual(heard, ['SQL_ROLE_SUPERUSER', null], 'told once per change');
  });

  test('with locks but not activity, only the sessions of blocking chains are kept', async () => {
    const h = harness(
      {
        activity: () => Promise.resolve({ ts: new Date(), sessions: [session(1), session(2), session(9)], blocking: [edge(2, 1, { waitMs: 10 })] }),
        statistics: noStatistics,
      },
      collect({ activity: false }),
    );
    await h.runner.runOnce('activity');
    assert.deepEqual(
      (h.written[0] as Snapshot).sessions.map((x) => x.pid),
      [1, 2],
    );
  });

  test('failures are counted by code, recorded, and logged once per streak; recovery is logged', async () => {
    let fail: PglogError | null = new PglogError('SQL_CONNECT_FAILED', 'db1/main: the server could not connect to the Unix socket');
    const h = harness({
      activity: () => (fail !== null ? Promise.reject(fail) : Promise.resolve({ ts: new Date(), sessions: [], blocking: [] })),
      statistics: noStatistics,
    });
    for (let i = 0; i < 3; i++) await h.runner.runOnce('activity');
    fail = new PglogError('SQL_TIMEOUT', 'db1/main: activity snapshot failed: timeout expired');
    await h.runner.runOnce('activity');
    fail = null;
    await h.runner.runOnce('activity');
    assert.equal(await h.value('pglog_snapshot_failures_total', { code: 'SQL_CONNECT_FAILED' }), 3);
    assert.equal(await h.value('pglog_snapshot_failures_total', { code: 'SQL_TIMEOUT' }), 1);
    const failures = h.written.filter((w): w is SnapshotFailure => 'code' in w);
    assert.deepEqual(
      failures.map((f) => f.code),
      ['SQL_CONNECT_FAILED', 'SQL_CONNECT_FAILED', 'SQL_CONNECT_FAILED', 'SQL_TIMEOUT'],
    );
    // What the target's status hears (its Snapshots condition in the cluster).
    assert.deepEqual(h.outcomes, ['SQL_CONNECT_FAILED', 'SQL_CONNECT_FAILED', 'SQL_CONNECT_FAILED', 'SQL_TIMEOUT', null]);
    const warnings = h.lines.filter((l) => l.level === 'warn').map((l) => l.msg);
    assert.deepEqual(warnings.length, 2, warnings.join('\n'));
    assert.match(warnings[0]!, /db1\/main: activity snapshot failed: .*Unix socket/);
    assert.ok(h.lines.some((l) => l.level === 'info' && /activity snapshots work again after 1 failed/.test(l.msg)));
  });

  test('a refused role is logged as an error, not a warning', async () => {
    const h = harness({ activity: () => Promise.reject(new PglogError('SQL_AUTH_FAILED', 'role "x" does not exist')), statistics: noStatistics });
    await h.runner.runOnce('activity');
    assert.ok(h.lines.some((l) => l.level === 'error' && /role "x"/.test(l.msg)));
  });

  test('statistics: the first sample is the baseline, the next one stores the deltas', async () => {
    const sample = (ms: number, commits: bigint): StatisticsSample => ({
      ts: new Date(ms),
      statements: null,
      statementsReset: null,
      databases: [
        {
          database: 'shop',
          backends: 3,
          ...zeroDatabaseCounters(),
          xactCommit: commits,
          statsReset: null,
        },
      ],
    });
    const samples = [sample(0, 100n), sample(15_000, 130n)];
    const h = harness(
      { activity: () => Promise.reject(new Error('no')), statistics: () => Promise.resolve(samples.shift()!) },
      collect({ activity: false, locks: false, databases: true }),
    );
    await h.runner.runOnce('statistics');
    await h.runner.runOnce('statistics');
    const [first, second] = h.written as Snapshot[];
    assert.deepEqual(first!.databases, []);
    assert.equal(second!.intervalSeconds, 15);
    assert.equal(second!.databases[0]!.xactCommit, 30n);
  });

  test('statements: deltas carry the current text and fingerprint (the kept baseline has counters only)', async () => {
    const entry = (calls: bigint) => ({
      userId: 10,
      dbId: 5,
      queryId: 42n,
      toplevel: true,
      username: 'app',
      database: 'shop',
      query: 'SELECT * FROM t WHERE id = $1',
      calls,
      totalExecMs: Number(calls),
      rows: calls,
      sharedBlksHit: 0n,
      sharedBlksRead: 0n,
      tempBlksWritten: 0n,
    });
    const samples: StatisticsSample[] = [
      { ts: new Date(0), statements: [entry(10n)], statementsReset: null, databases: null },
      { ts: new Date(15_000), statements: [entry(25n)], statementsReset: null, databases: null },
    ];
    const h = harness(
      { activity: () => Promise.reject(new Error('no')), statistics: () => Promise.resolve(samples.shift()!) },
      collect({ activity: false, locks: false, statements: true }),
    );
    await h.runner.runOnce('statistics');
    await h.runner.runOnce('statistics');
    const [delta] = (h.written[1] as Snapshot).statements;
    assert.deepEqual([delta!.calls, delta!.query, delta!.fingerprint !== ''], [15n, 'SELECT * FROM t WHERE id = $1', true]);
  });

  test('a store that refuses the snapshot is counted as a failure, and the snapshot is not retried', async () => {
    const h = harness({ activity: () => Promise.resolve({ ts: new Date(), sessions: [], blocking: [] }), statistics: noStatistics }, collect(), true);
    await h.runner.runOnce('activity');
    assert.equal(await h.value('pglog_snapshot_failures_total', { code: 'STORE_UNAVAILABLE' }), 1);
  });

  test('run() takes snapshots on the interval until aborted, the first at a random point of it', async () => {
    let calls = 0;
    const h = harness(
      {
        activity: () => {
          calls++;
          return Promise.resolve({ ts: new Date(), sessions: [], blocking: [] });
        },
        statistics: noStatistics,
      },
      collect({ intervalSeconds: 1 }),
    );
    const abort = new AbortController();
    const running = h.runner.run(abort.signal);
    await new Promise((r) => setTimeout(r, 2300));
    abort.abort();
    await running;
    assert.ok(calls >= 2 && calls <= 3, `calls ${calls}`);
  });

  test('forgetTarget removes every snapshot series of the target', async () => {
    const h = harness({ activity: () => Promise.resolve({ ts: new Date(), sessions: [session(1)], blocking: [] }), statistics: noStatistics });
    await h.runner.runOnce('activity');
    h.metrics.forgetTarget('db1');
    assert.equal(await h.value('pglog_sessions', {}), 0);
    assert.equal(await h.value('pglog_snapshot_duration_seconds_count', {}), 0);
  });
});
