// SQL over SSH (issue 7), end to end: the real `pglog collect` with its sidecar child, a real
// sshd, two real logging PostgreSQL 15 servers that listen only on their Unix sockets, and a
// real store. The collector reaches PostgreSQL through the SSH connection (ssh2 stream-local
// channel for target db1, the sidecar's OpenSSH forward for db1p), as a role that has only
// pg_monitor and logs in by peer authentication mapped from the SSH user.
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { runPglog } from '@pglog/test-support/cli.ts';
import { metricSum, scrapeMetrics } from '@pglog/test-support/collect-scenario.ts';
import { type CollectorProcess, sshLogin, type TargetSpec, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { currentUser } from '@pglog/test-support/server-user.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { MONITOR_ROLE, setUpMonitoringRole } from '../helpers/monitoring-role.ts';
import { startSqlCollector } from '../helpers/sql-collector.ts';

const INTERVAL_S = 2;

/** The role pglog uses (pg_monitor only, peer-mapped from the SSH user) and the table of the chain. */
async function setUpMonitoring(server: LogServer, osUsers: readonly string[]): Promise<void> {
  await setUpMonitoringRole(server, osUsers);
  const c = new pg.Client({ connectionString: server.url });
  await c.connect();
  await c.query('CREATE TABLE public.t (id int)').finally(() => c.end());
}

async function connect(server: LogServer, user = 'postgres', application = 'pglog-test'): Promise<pg.Client> {
  const c = new pg.Client({ host: server.socketDir, port: server.port, user, database: 'postgres', application_name: application });
  await c.connect();
  c.on('error', () => undefined); // sessions the test ends on purpose
  return c;
}

interface TreeNode {
  pid: number;
  waitMode: string | null;
  heldMode: string | null;
  relation: string | null;
  waitMs: number | null;
  holds: Array<{ mode: string; relation: string | null }>;
  children: TreeNode[];
}
interface Edge {
  ts: Date;
  pid: number;
  blocking_pid: number;
  wait_mode: string;
  held_mode: string | null;
  relation: string | null;
  wait_ms: number | null;
}

/** The blocking edges of the newest snapshot of `target` that has any. */
async function newestEdges(store: pg.Client, target: string): Promise<Edge[]> {
  const r = await store
    .query<Edge>(
      `
    SELECT ts, pid, blocking_pid, wait_mode, held_mode, relation, wait_ms FROM pglog.blocking
    WHERE target = $1 AND ts = (SELECT max(ts) FROM pglog.blocking WHERE target = $1)
    ORDER BY pid`,
      [target],
    )
    .catch(() => ({ rows: [] as Edge[] }));
  return r.rows;
}

async function storedMarker(store: pg.Client, target: string, marker: string): Promise<boolean> {
  const r = await store
    .query('SELECT 1 FROM pglog.statements WHERE target = $1 AND query LIKE $2 LIMIT 1', [target, `%${marker}%`])
    .catch(() => ({ rowCount: 0 }));
  return (r.rowCount ?? 0) > 0;
}

/** Whether `target` has a snapshot run without an error after `since`. */
async function snapshotsWorkSince(store: pg.Client, target: string, since: Date): Promise<boolean> {
  const r = await store.query('SELECT 1 FROM pglog.snapshot_runs WHERE target = $1 AND error_code IS NULL AND ts > $2 LIMIT 1', [target, since]);
  return (r.rowCount ?? 0) > 0;
}

describe('SQL snapshots over SSH (real sshd, PostgreSQL 15 on Unix sockets only, pglog collect)', { timeout: 300_000 }, () => {
  let work: string;
  let storePg: TestPostgres;
  let ssh: TestSshServer;
  let server: LogServer;
  let other: LogServer;
  let store: pg.Client;
  let collector: CollectorProcess;
  let metricsPort: number;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-sql-'));
    [storePg, ssh, server, other] = await Promise.all([
      startPostgres(),
      startSshServer({ allowLocalForwarding: true }),
      startLogServer(),
      startLogServer({ settings: ["shared_preload_libraries = 'pg_stat_statements'"] }),
    ]);
    const osUsers = [...new Set([ssh.user, currentUser().name])];
    await Promise.all([setUpMonitoring(server, osUsers), setUpMonitoring(other, osUsers)]);
    const su = new pg.Client({ connectionString: other.url });
    await su.connect();
    await su.query('CREATE EXTENSION pg_stat_statements').finally(() => su.end());
    const base = sshLogin(ssh);
    const instance = (s: LogServer): TargetSpec['instances'][number] => ({
      name: 'main',
      dataDirectory: s.dataDirectory,
      logDirectory: s.logDirectory,
      sql: { socketDirectory: s.socketDir, port: s.port, user: MONITOR_ROLE, database: 'postgres', timeoutSeconds: 2 },
    });
    const snapshots = { activity: true, locks: true, intervalSeconds: INTERVAL_S };
    const targetsFile = writeTargetsFile(work, [
      { ...base, name: 'db1', transport: 'inproc', instances: [instance(server)], collect: { logs: true, ...snapshots } },
      { ...base, name: 'db1p', transport: 'proxy', instances: [instance(server)], collect: { logs: false, ...snapshots } },
      {
        ...base,
        name: 'db3',
        transport: 'inproc',
        instances: [instance(other)],
        collect: { logs: true, ...snapshots, statements: true, databases: true, statisticsIntervalSeconds: INTERVAL_S },
      },
    ]);
    ({ collector, metricsPort } = await startSqlCollector(work, targetsFile, storePg.url));
    store = new pg.Client({ connectionString: storePg.url });
    await store.connect();
  });

  after(async () => {
    collector?.kill('SIGKILL');
    await collector?.exited;
    await store?.end().catch(() => undefined);
    await Promise.allSettled([ssh?.dispose(), server?.dispose(), other?.dispose(), storePg?.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  const output = (): string => collector.output().split('\n').slice(-40).join('\n');
  /** Waits until db1's snapshots have failed with `code` (pglog_snapshot_failures_total). */
  const failureOf = (code: string): Promise<void> =>
    waitFor(
      async () => metricSum(await scrapeMetrics(metricsPort), 'pglog_snapshot_failures_total', { target: 'db1', code }) > 0,
      `an ${code} failure of db1`,
      30_000,
      output,
    );

  test('a scripted three-session blocking chain appears as a tree with the right root, modes and relation within one interval, through both transports', async () => {
    await waitFor(
      async () =>
        (await store.query("SELECT 1 FROM pglog.snapshot_runs WHERE target = 'db1p' AND error_code IS NULL LIMIT 1").catch(() => ({ rowCount: 0 }))).rowCount! >
        0,
      'a first snapshot through the sidecar',
      60_000,
      output,
    );
    const [a, b, c] = await Promise.all([connect(server), connect(server), connect(server)]);
    try {
      const pidOf = async (client: pg.Client): Promise<number> => (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const [pa, pb, pc] = [await pidOf(a), await pidOf(b), await pidOf(c)];
      await a.query('BEGIN');
      await a.query('LOCK TABLE public.t IN ROW EXCLUSIVE MODE');
      const bWaits = b.query('BEGIN; LOCK TABLE public.t IN SHARE MODE; COMMIT').catch(() => undefined);
      await waitFor(
        async () => (await a.query<{ n: number }>('SELECT cardinality(pg_blocking_pids($1)) AS n', [pb])).rows[0]!.n === 1,
        'B to wait for A',
        10_000,
      );
      const cWaits = c.query('INSERT INTO public.t VALUES (1)').catch(() => undefined);
      await waitFor(
        async () => (await a.query<{ n: number }>('SELECT cardinality(pg_blocking_pids($1)) AS n', [pc])).rows[0]!.n === 1,
        'C to wait for B',
        10_000,
      );
      const chainAt = Date.now();

      for (const target of ['db1', 'db1p']) {
        let edges: Edge[] = [];
        await waitFor(
          async () => {
            edges = await newestEdges(store, target);
            return edges.length === 2 && edges[0]!.ts.getTime() >= chainAt - 1000;
          },
          `the chain in ${target}'s snapshots`,
          3 * INTERVAL_S * 1000,
          () => JSON.stringify(edges),
        );
        const [bEdge, cEdge] = edges;
        // The first snapshot that shows the whole chain was taken within one interval of it forming
        // (the newest one read above may be a later one when this poll ran late).
        const first = (
          await store.query<{ ts: Date }>('SELECT min(ts) AS ts FROM pglog.blocking WHERE target = $1 AND pid = $2 AND ts >= $3', [
            target,
            pc,
            new Date(chainAt - 1000),
          ])
        ).rows[0]!.ts;
        assert.ok(
          first.getTime() - chainAt <= INTERVAL_S * 1000 + 1500,
          `${target}: first snapshot with the chain ${first.toISOString()} is more than one interval after it formed (${new Date(chainAt).toISOString()})`,
        );
        console.log(`# ${target}: the chain was in a snapshot ${first.getTime() - chainAt} ms after it formed (interval ${INTERVAL_S * 1000} ms)`);
        assert.deepEqual(
          [bEdge!.pid, bEdge!.blocking_pid, bEdge!.wait_mode, bEdge!.held_mode, bEdge!.relation],
          [pb, pa, 'ShareLock', 'RowExclusiveLock', 'public.t'],
        );
        assert.deepEqual([cEdge!.pid, cEdge!.blocking_pid, cEdge!.wait_mode, cEdge!.relation], [pc, pb, 'RowExclusiveLock', 'public.t']);
        assert.ok((bEdge!.wait_ms ?? 0) > 0);
      }

      // The report shows the tree: root A (holding RowExclusiveLock on public.t), B below it, C below B.
      for (const target of ['db1', 'db1p']) {
        const report = await runPglog(['report', 'locks', '--store', storePg.url, '--json', '--target', target]);
        assert.equal(report.code, 0, report.stderr);
        const doc = JSON.parse(report.stdout) as { servers: Array<{ target: string; trees: TreeNode[]; blockedSessions: number }> };
        const srv = doc.servers.find((x) => x.target === target)!;
        assert.equal(srv.blockedSessions, 2);
        assert.equal(srv.trees.length, 1);
        const root = srv.trees[0]!;
        assert.deepEqual([root.pid, root.waitMode, root.holds.map((h) => [h.mode, h.relation])], [pa, null, [['RowExclusiveLock', 'public.t']]]);
        const child = root.children[0]!;
        assert.deepEqual(
          [root.children.length, child.pid, child.waitMode, child.heldMode, child.relation],
          [1, pb, 'ShareLock', 'RowExclusiveLock', 'public.t'],
        );
        const grandchild = child.children[0]!;
        assert.deepEqual(
          [child.children.length, grandchild.pid, grandchild.waitMode, grandchild.heldMode, grandchild.relation],
          [1, pc, 'RowExclusiveLock', null, 'public.t'],
        );
        assert.ok((child.waitMs ?? 0) > 0);
      }
      const text = await runPglog(['report', 'locks', '--store', storePg.url, '--target', 'db1']);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, new RegExp(`└─ ${pa}\\b[^\\n]*\\n\\s+└─ ${pb}\\b[^\\n]*ShareLock[^\\n]*\\n\\s+└─ ${pc}\\b`), text.stdout);

      // report activity: sessions by state, and A's open transaction among the long-running ones.
      await new Promise((r) => setTimeout(r, INTERVAL_S * 1000));
      const activity = await runPglog(['report', 'activity', '--store', storePg.url, '--json', '--target', 'db1', '--min-duration', '1s']);
      assert.equal(activity.code, 0, activity.stderr);
      const act = JSON.parse(activity.stdout) as {
        servers: Array<{ target: string; byState: Record<string, number>; lockWaiting: number }>;
        longRunning: Array<{ pid: number; state: string }>;
      };
      const db1 = act.servers.find((x) => x.target === 'db1')!;
      assert.ok((db1.byState['active'] ?? 0) >= 2 && (db1.byState['idle in transaction'] ?? 0) >= 1, JSON.stringify(db1));
      assert.equal(db1.lockWaiting, 2);
      assert.ok(
        act.longRunning.some((l) => l.pid === pa && l.state === 'idle in transaction'),
        activity.stdout,
      );

      const metrics = await scrapeMetrics(metricsPort);
      assert.equal(metricSum(metrics, 'pglog_blocked_sessions', { target: 'db1', instance: 'main' }), 2);
      assert.ok(metricSum(metrics, 'pglog_longest_blocking_wait_seconds', { target: 'db1', instance: 'main' }) > 0);
      assert.ok(metricSum(metrics, 'pglog_sessions', { target: 'db1', instance: 'main', state: 'active' }) >= 2);
      assert.ok(metricSum(metrics, 'pglog_snapshot_duration_seconds_count', { target: 'db1p', kind: 'activity' }) > 0);
      await a.query('ROLLBACK');
      await Promise.all([bWaits, cWaits]);
    } finally {
      await Promise.allSettled([a.end(), b.end(), c.end()]);
    }
  });

  test('no TCP port of PostgreSQL is used, and the monitoring role can only read', async () => {
    const su = await connect(server);
    try {
      assert.equal((await su.query<{ listen_addresses: string }>('SHOW listen_addresses')).rows[0]!.listen_addresses, '');
      // pglog's sessions arrive on the Unix socket (client_port -1), as the monitoring role.
      await waitFor(async () => (await su.query("SELECT 1 FROM pg_stat_activity WHERE application_name = 'pglog'")).rowCount! >= 2, 'pglog sessions', 20_000);
      const sessions = (
        await su.query<{ usename: string; client_addr: string | null; client_port: number }>(
          "SELECT usename, client_addr, client_port FROM pg_stat_activity WHERE application_name = 'pglog'",
        )
      ).rows;
      for (const s of sessions) assert.deepEqual([s.usename, s.client_addr, s.client_port], [MONITOR_ROLE, null, -1]);
    } finally {
      await su.end();
    }
    const monitor = await connect(server, MONITOR_ROLE);
    try {
      await assert.rejects(monitor.query('INSERT INTO public.t VALUES (2)'), /permission denied/);
      await assert.rejects(monitor.query('CREATE TABLE public.u (id int)'), /permission denied/);
      await assert.rejects(monitor.query('UPDATE public.t SET id = 3'), /permission denied/);
      // And pglog's own session refuses writes even for a role that could: read-only from start-up.
      await monitor.query('SET default_transaction_read_only = on');
      await assert.rejects(monitor.query('CREATE TEMP TABLE x (id int)'), /read-only transaction/);
    } finally {
      await monitor.end();
    }
    assert.doesNotMatch(collector.output(), /can write/);
    // The refused statements are ERRORs in db1's log: counted by SQLSTATE class, here `unknown`
    // since this server's stderr log_line_prefix has no %e (docs/metrics.md).
    await waitFor(
      async () => metricSum(await scrapeMetrics(metricsPort), 'pglog_log_errors_total', { target: 'db1', instance: 'main', sqlstate_class: 'unknown' }) >= 4,
      'the refused statements counted in pglog_log_errors_total',
      20_000,
    );
  });

  test("pg_stat_statements and pg_stat_database deltas are stored, and statement fingerprints join the log's", async () => {
    const o = await connect(other);
    try {
      for (let i = 0; i < 25; i++) await o.query(`SELECT count(*) FROM pg_class WHERE relpages > ${i}`);
    } finally {
      await o.end();
    }
    let calls = 0;
    await waitFor(
      async () => {
        const r = await store.query<{ calls: string }>(
          "SELECT coalesce(sum(calls), 0) AS calls FROM pglog.statement_stats WHERE target = 'db3' AND query LIKE 'SELECT count(*) FROM pg_class WHERE relpages > $1'",
        );
        calls = Number(r.rows[0]!.calls);
        return calls >= 25;
      },
      'the 25 calls in pglog.statement_stats',
      30_000,
      () => `calls ${calls}\n${output()}`,
    );
    // The template of those calls is the one the log parser gave the same statements.
    let joined = 0;
    await waitFor(
      async () => {
        const r = await store.query<{ n: string }>(`
        SELECT count(*) AS n FROM pglog.statements s
        WHERE s.target = 'db3' AND s.query LIKE 'SELECT count(*) FROM pg_class WHERE relpages > %'
          AND s.fingerprint IN (SELECT fingerprint FROM pglog.statement_stats WHERE target = 'db3')`);
        joined = Number(r.rows[0]!.n);
        return joined >= 25;
      },
      'the 25 logged statements joined to pg_stat_statements by fingerprint',
      30_000,
      () => `joined ${joined}`,
    );
    const db = await store.query<{ commits: string }>(
      "SELECT coalesce(sum(xact_commit), 0) AS commits FROM pglog.database_stats WHERE target = 'db3' AND database = 'postgres'",
    );
    assert.ok(Number(db.rows[0]!.commits) >= 25);
  });

  test('a hung backend makes the snapshot fail with SQL_TIMEOUT in metrics and logs; log streaming goes on', async () => {
    const su = await connect(server);
    try {
      const pids = (await su.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE application_name = 'pglog'")).rows.map((r) => r.pid);
      assert.ok(pids.length >= 1);
      for (const pid of pids) process.kill(pid, 'SIGSTOP');
      try {
        await failureOf('SQL_TIMEOUT');
        assert.match(collector.output(), /db1\/main: activity snapshot failed: .*SQL|db1\/main: activity snapshot failed/);
        // The log keeps flowing meanwhile: a statement logged now is stored.
        await su.query("SELECT 'pglog-sql-hung-marker'");
        await waitFor(() => storedMarker(store, 'db1', 'pglog-sql-hung-marker'), 'the marker logged during the hang', 30_000, output);
      } finally {
        for (const pid of pids) process.kill(pid, 'SIGCONT');
      }
      // A new session works while the hung one was given up.
      const since = new Date();
      await waitFor(() => snapshotsWorkSince(store, 'db1', since), 'db1 snapshots to work again', 30_000, output);
    } finally {
      await su.end();
    }
  });

  test('PostgreSQL down: SQL_CONNECT_FAILED in metrics, logs and the store; the other server and log streaming go on; snapshots recover', async () => {
    await server.stop();
    const downAt = new Date();
    try {
      await failureOf('SQL_CONNECT_FAILED');
      assert.match(collector.output(), /db1\/main: activity snapshot failed: .*could not connect to the Unix socket/);
      // Recorded in the store too (snapshots reach it in groups, within half a second).
      await waitFor(
        async () =>
          (await store.query("SELECT 1 FROM pglog.snapshot_runs WHERE target = 'db1' AND error_code = 'SQL_CONNECT_FAILED' AND ts >= $1 LIMIT 1", [downAt]))
            .rowCount === 1,
        'the failed run in pglog.snapshot_runs',
        10_000,
        output,
      );
      // The other server: snapshots and logs go on.
      const o = await connect(other);
      await o.query("SELECT 'pglog-sql-other-marker'");
      await o.end();
      await waitFor(() => storedMarker(store, 'db3', 'pglog-sql-other-marker'), "the other server's marker", 30_000, output);
      await waitFor(() => snapshotsWorkSince(store, 'db3', downAt), 'db3 snapshots while db1 is down', 30_000, output);
    } finally {
      await server.start();
    }
    const su = await connect(server);
    await su.query("SELECT 'pglog-sql-after-restart-marker'");
    await su.end();
    await waitFor(() => storedMarker(store, 'db1', 'pglog-sql-after-restart-marker'), 'db1 logs after the restart', 30_000, output);
    const upAt = new Date();
    await waitFor(() => snapshotsWorkSince(store, 'db1', upAt), 'db1 snapshots after the restart', 30_000, output);
    assert.match(collector.output(), /db1\/main: activity snapshots work again after \d+ failed/);
  });
});
