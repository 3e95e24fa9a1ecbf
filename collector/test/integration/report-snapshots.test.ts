// `pglog report locks` and `pglog report activity` through the real CLI against a real
// PostgreSQL 15 store: the schema from migrate(), snapshot rows inserted with SQL (a chain
// A <- B <- C on public.t, an older episode, a server whose runs failed), text and JSON checked.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { runPglog } from '@pglog/test-support/cli.ts';

import { migrate } from '../../src/store/migrate.ts';
import { StoreFixture } from '../helpers/store-fixture.ts';

const fixture = new StoreFixture({ prefix: 'snapreport', password: 'snapreport-pw', applicationName: 'pglog-test-report-snapshots' });
let storeUrl: string;

const BOUNDED = { timeout: 60_000 };
const WINDOW = ['--since', '2026-11-23T10:00:00Z', '--until', '2026-11-23T11:00:00Z'];
/** The current snapshot's ts has microseconds: rows must be matched on it in SQL, not through a JavaScript Date. */
const NOW = '2026-11-23T10:40:00.123456Z';
const EARLIER = '2026-11-23T10:39:50Z';
const [A, B, C, IDLE, LONG] = [4211, 4215, 4217, 4300, 4301];

before(
  async () => {
    await fixture.start();
    const store = await fixture.freshDatabase();
    storeUrl = fixture.urlOf(store);
    const client = await fixture.connect(store); // closed by fixture.stop()
    await migrate(client);
    const run = (ts: string, target: string, sessions: number, blocked: number, code: string | null = null, error: string | null = null): Promise<unknown> =>
      client.query(
        `INSERT INTO pglog.snapshot_runs (ts, target, instance, kind, duration_ms, sessions, blocked, error_code, error)
                  VALUES ($1, $2, 'main', 'activity', 12.5, $3, $4, $5, $6)`,
        [ts, target, sessions, blocked, code, error],
      );
    const session = (ts: string, pid: number, state: string, xactStart: string | null, query: string, user = 'app', lockWait = false): Promise<unknown> =>
      client.query(
        `INSERT INTO pglog.activity_samples (ts, target, instance, pid, database, username, application, client, backend_type, state,
                    wait_event_type, wait_event, xact_start, query_start, state_change, blocked_by, fingerprint, query)
                  VALUES ($1, 'db1', 'main', $2, 'shop', $3, 'web', 'local', 'client backend', $4, $5, $6, $7, $7, $7, '{}', $9, $8)`,
        [ts, pid, user, state, lockWait ? 'Lock' : null, lockWait ? 'relation' : null, xactStart, query, `fp${pid}`],
      );
    const edge = (ts: string, pid: number, blocker: number, waitMode: string, heldMode: string | null, waitMs: number): Promise<unknown> =>
      client.query(
        `INSERT INTO pglog.blocking_samples (ts, target, instance, database, pid, blocking_pid, lock_type, wait_mode, held_mode, relation, wait_ms)
                  VALUES ($1, 'db1', 'main', 'shop', $2, $3, 'relation', $4, $5, 'public.t', $6)`,
        [ts, pid, blocker, waitMode, heldMode, waitMs],
      );

    // An older episode: root 500 blocks 501 in two snapshots, then it is over.
    for (const [ts, wait] of [
      ['2026-11-23T10:10:00Z', 1500],
      ['2026-11-23T10:10:10Z', 11_500],
    ] as const) {
      await run(ts, 'db1', 2, 1);
      await session(ts, 500, 'idle in transaction', '2026-11-23T10:09:00Z', 'DELETE FROM t', 'ops');
      await session(ts, 501, 'active', '2026-11-23T10:09:58Z', 'TRUNCATE t', 'ops', true);
      await edge(ts, 501, 500, 'AccessExclusiveLock', 'RowExclusiveLock', wait);
    }
    // The chain forms: B waits for A at 10:39:50; C queues behind B by 10:40:00.
    await run(EARLIER, 'db1', 3, 1);
    await session(EARLIER, A, 'idle in transaction', '2026-11-23T10:39:15Z', 'UPDATE t SET n = n + 1 WHERE id = 1');
    await session(EARLIER, B, 'active', '2026-11-23T10:39:47Z', 'LOCK TABLE public.t IN SHARE MODE', 'app', true);
    await edge(EARLIER, B, A, 'ShareLock', 'RowExclusiveLock', 2300);
    await run(NOW, 'db1', 5, 2);
    await session(NOW, A, 'idle in transaction', '2026-11-23T10:39:15Z', 'UPDATE t SET n = n + 1 WHERE id = 1');
    await session(NOW, B, 'active', '2026-11-23T10:39:47Z', 'LOCK TABLE public.t IN SHARE MODE', 'app', true);
    await session(NOW, C, 'active', '2026-11-23T10:39:57Z', 'INSERT INTO public.t VALUES (1)', 'batch', true);
    await session(NOW, IDLE, 'idle', null, 'SELECT 1');
    await session(NOW, LONG, 'active', '2026-11-23T10:30:00Z', 'SELECT pg_sleep(3600)', 'report');
    await edge(NOW, B, A, 'ShareLock', 'RowExclusiveLock', 12_300);
    await edge(NOW, C, B, 'RowExclusiveLock', null, 3000);
    // db2 could not be read at all in the window.
    await run('2026-11-23T10:39:00Z', 'db2', 0, 0, 'SQL_CONNECT_FAILED', 'cannot reach the socket /run/postgresql/.s.PGSQL.5432');
    await run('2026-11-23T10:40:05Z', 'db2', 0, 0, 'SQL_TIMEOUT', 'the snapshot took longer than 10 s');
  },
  { timeout: 180_000 },
);

after(() => fixture.stop());

interface Node {
  pid: number;
  user: string | null;
  state: string | null;
  waitMode: string | null;
  heldMode: string | null;
  relation: string | null;
  lockType: string | null;
  waitMs: number | null;
  xactMs: number | null;
  holds: { mode: string; relation: string | null }[];
  children: Node[];
}
interface LocksJson {
  report: string;
  servers: {
    target: string;
    instance: string;
    snapshotAt: string | null;
    lastRun: { ok: boolean; errorCode: string | null; error: string | null };
    runs: number;
    failedRuns: number;
    blockedSessions: number;
    longestWaitMs: number | null;
    trees: Node[];
  }[];
  episodes: Record<string, unknown>[];
  episodesTotal: number;
}

test('locks --json: the current tree with the right root, modes, relation and waits; episodes; the failed server', BOUNDED, async () => {
  const r = await runPglog(['report', 'locks', '--store', storeUrl, ...WINDOW, '--json']);
  assert.equal(r.stderr, '');
  assert.equal(r.code, 0);
  const json = JSON.parse(r.stdout) as LocksJson;
  assert.equal(json.report, 'locks');
  assert.deepEqual(
    json.servers.map((s) => [s.target, s.snapshotAt, s.lastRun.ok, s.runs, s.failedRuns]),
    [
      ['db1', '2026-11-23T10:40:00.123Z', true, 4, 0],
      ['db2', null, false, 2, 2],
    ],
  );
  const [db1, db2] = json.servers;
  assert.deepEqual([db1?.blockedSessions, db1?.longestWaitMs, db1?.trees.length], [2, 12_300, 1]);
  const a = db1?.trees[0];
  assert.deepEqual(
    [a?.pid, a?.state, a?.waitMode, a?.holds],
    [A, 'idle in transaction', null, [{ mode: 'RowExclusiveLock', lockType: 'relation', relation: 'public.t' }]],
  );
  assert.equal(a?.xactMs, 45_123.456);
  const b = a?.children[0];
  assert.deepEqual(
    [b?.pid, b?.lockType, b?.relation, b?.waitMode, b?.heldMode, b?.waitMs],
    [B, 'relation', 'public.t', 'ShareLock', 'RowExclusiveLock', 12_300],
  );
  const c = b?.children[0];
  assert.deepEqual(
    [c?.pid, c?.user, c?.relation, c?.waitMode, c?.heldMode, c?.waitMs, c?.children],
    [C, 'batch', 'public.t', 'RowExclusiveLock', null, 3000, []],
  );
  assert.deepEqual(db2?.lastRun, {
    at: '2026-11-23T10:40:05.000Z',
    durationMs: 12.5,
    ok: false,
    errorCode: 'SQL_TIMEOUT',
    error: 'the snapshot took longer than 10 s',
  });
  assert.deepEqual(db2?.trees, []);
  assert.equal(json.episodesTotal, 2);
  assert.deepEqual(
    json.episodes.map((e) => [e.rootPid, e.xactStart, e.firstSeen, e.lastSeen, e.snapshots, e.peakWaiters, e.maxWaitMs, e.user, e.query]),
    [
      [A, '2026-11-23T10:39:15.000Z', '2026-11-23T10:39:50.000Z', '2026-11-23T10:40:00.123Z', 2, 2, 12_300, 'app', 'UPDATE t SET n = n + 1 WHERE id = 1'],
      [500, '2026-11-23T10:09:00.000Z', '2026-11-23T10:10:00.000Z', '2026-11-23T10:10:10.000Z', 2, 1, 11_500, 'ops', 'DELETE FROM t'],
    ],
  );
});

test('locks as text: an ASCII tree, a visible failure, the episodes table', BOUNDED, async () => {
  const r = await runPglog(['report', 'locks', '--store', storeUrl, ...WINDOW]);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split('\n');
  assert.equal(lines[0], 'pglog report locks  2026-11-23 10:00:00 .. 2026-11-23 11:00:00 UTC');
  assert.deepEqual(lines.slice(2, 7), [
    'db1/main  snapshot 2026-11-23 10:40:00Z  2 sessions blocked, longest wait 12.30 s',
    `└─ ${A} app@shop  idle in transaction  holds RowExclusiveLock on public.t  xact 45.12 s  [web]  "UPDATE t SET n = n + 1 WHERE id = 1"`,
    `   └─ ${B} app@shop  active  waits ShareLock on public.t 12.30 s  xact 13.12 s  [web]  "LOCK TABLE public.t IN SHARE MODE"`,
    `      └─ ${C} batch@shop  active  waits RowExclusiveLock on public.t 3.00 s (queued behind ${B}'s ShareLock)  xact 3.12 s  [web]  "INSERT INTO public.t VALUES…"`, // cut to 160 columns
    'db2/main  no snapshot in the window: newest snapshot run failed at 2026-11-23 10:40:05Z after 12.5 ms: SQL_TIMEOUT: the snapshot took longer than 10 s',
  ]);
  assert.ok(lines.includes('Blocking episodes, newest first (2 of 2)'));
  assert.match(
    lines.find((l) => l.includes(` ${A} `) && l.startsWith('db1')) ?? '',
    /^db1 +main +4211 +2026-11-23 10:39:50 +2026-11-23 10:40:00 +2 +2 +12\.30 s +app@shop +UPDATE t SET n = n \+ 1 WHERE id = 1$/,
  );
});

test('locks filters: --target, --until (an earlier current snapshot), --database', BOUNDED, async () => {
  const db2 = JSON.parse((await runPglog(['report', 'locks', '--store', storeUrl, ...WINDOW, '--target', 'db2', '--json'])).stdout) as LocksJson;
  assert.deepEqual(
    db2.servers.map((s) => s.target),
    ['db2'],
  );
  assert.equal(db2.episodesTotal, 0);
  const earlier = JSON.parse(
    (
      await runPglog([
        'report',
        'locks',
        '--store',
        storeUrl,
        '--since',
        '2026-11-23T10:00:00Z',
        '--until',
        '2026-11-23T10:39:55Z',
        '--target',
        'db1',
        '--json',
      ])
    ).stdout,
  ) as LocksJson;
  assert.equal(earlier.servers[0]?.snapshotAt, '2026-11-23T10:39:50.000Z');
  assert.deepEqual(
    earlier.servers[0]?.trees.map((t) => [t.pid, t.children.map((c) => [c.pid, c.waitMs, c.children.length])]),
    [[A, [[B, 2300, 0]]]],
  );
  const other = JSON.parse((await runPglog(['report', 'locks', '--store', storeUrl, ...WINDOW, '--database', 'crm', '--json'])).stdout) as LocksJson;
  assert.deepEqual([other.servers[0]?.trees, other.episodesTotal], [[], 0]);
});

interface ActivityJson {
  servers: {
    target: string;
    snapshotAt: string | null;
    sessions: number | null;
    byState: Record<string, number>;
    lockWaiting: number;
    lastRun: { ok: boolean; errorCode: string | null };
  }[];
  longRunning: Record<string, unknown>[];
  longRunningTotal: number;
}

test('activity --json: sessions by state, lock waiters, long-running sessions longest first, the failed server', BOUNDED, async () => {
  const r = await runPglog(['report', 'activity', '--store', storeUrl, ...WINDOW, '--json']);
  assert.equal(r.code, 0, r.stderr);
  const json = JSON.parse(r.stdout) as ActivityJson;
  assert.deepEqual(
    json.servers.map((s) => [s.target, s.snapshotAt, s.sessions, s.byState, s.lockWaiting, s.lastRun.ok, s.lastRun.errorCode]),
    [
      ['db1', '2026-11-23T10:40:00.123Z', 5, { active: 3, idle: 1, 'idle in transaction': 1 }, 2, true, null],
      ['db2', null, null, {}, 0, false, 'SQL_TIMEOUT'],
    ],
  );
  assert.equal(json.longRunningTotal, 2);
  assert.deepEqual(
    json.longRunning.map((l) => [l.pid, l.state, l.user, l.durationMs, l.xactMs]),
    [
      [LONG, 'active', 'report', 600_123.456, 600_123.456],
      [A, 'idle in transaction', 'app', 45_123.456, 45_123.456],
    ],
  );
  const minute = JSON.parse((await runPglog(['report', 'activity', '--store', storeUrl, ...WINDOW, '--min-duration', '1m', '--json'])).stdout) as ActivityJson;
  assert.deepEqual(
    minute.longRunning.map((l) => l.pid),
    [LONG],
  );
});

test('activity as text: the servers table and the long-running table', BOUNDED, async () => {
  const r = await runPglog(['report', 'activity', '--store', storeUrl, ...WINDOW]);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split('\n');
  assert.equal(lines[0], 'pglog report activity  2026-11-23 10:00:00 .. 2026-11-23 11:00:00 UTC  min duration 30.00 s');
  assert.match(lines.find((l) => l.startsWith('db1 ')) ?? '', /^db1 +main +2026-11-23 10:40:00 +5 +3 +1 +1 +0 +2 +4 +0 +ok$/);
  assert.match(lines.find((l) => l.startsWith('db2 ')) ?? '', /^db2 +main +- +- +- +- +- +- +- +2 +2 +FAILED SQL_TIMEOUT$/);
  assert.ok(lines.includes('!  db2/main: newest snapshot run failed at 2026-11-23 10:40:05Z after 12.5 ms: SQL_TIMEOUT: the snapshot took longer than 10 s'));
  assert.ok(lines.includes('Long-running sessions: transaction (or statement) of at least 30.00 s, longest first (2 of 2)'));
  assert.match(lines.find((l) => l.includes(` ${LONG} `)) ?? '', /^db1 +main +4301 +shop +report +web +active +10m 00s +10m 00s +- +SELECT pg_sleep\(3600\)$/);
  assert.match(
    lines.find((l) => l.includes(` ${A} `)) ?? '',
    /^db1 +main +4211 +shop +app +web +idle in transaction +45\.12 s +45\.12 s +- +UPDATE t SET n = n \+ 1 WHERE id = 1$/,
  );
});

test('help, usage errors, and the classic report unchanged', BOUNDED, async () => {
  const help = await runPglog(['report', 'locks', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^usage: pglog report locks --store URL/);
  const activityHelp = await runPglog(['report', 'activity', '-h']);
  assert.match(activityHelp.stdout, /--min-duration/);
  const bad = await runPglog(['report', 'activity', '--store', storeUrl, '--min-duration', 'soon']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^pglog: --min-duration soon: expected a duration/);
  const unknown = await runPglog(['report', 'locks', '--store', storeUrl, '--min-duration', '1m']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /min-duration[\s\S]*usage: pglog report locks/);
  const classic = await runPglog(['report', '--store', storeUrl, ...WINDOW, '--json']);
  assert.equal(classic.code, 0, classic.stderr);
  assert.deepEqual(Object.keys(JSON.parse(classic.stdout) as object), ['window', 'filters', 'statements', 'errors', 'lock_waits', 'groups']);
});
