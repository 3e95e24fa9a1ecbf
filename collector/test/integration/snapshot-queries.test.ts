// The snapshot queries against a real PostgreSQL 15 with pg_stat_statements preloaded, read by
// a role that has only pg_monitor, in READ ONLY transactions as the collector reads: a scripted
// blocking chain of three sessions, the activity SQL of every version branch, pg_stat_statements
// and pg_stat_database deltas across samples, and the errors of a missing or unloaded extension.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import type { Cluster } from '@pglog/test-support/pg-cluster.ts';
import { startCluster } from '@pglog/test-support/pg-cluster.ts';
import pg from 'pg';

import { activityFromRows, readActivity } from '../../src/snapshot/activity-query.ts';
import { activitySql } from '../../src/snapshot/activity-sql.ts';
import { statisticsDeltas } from '../../src/snapshot/deltas.ts';
import { queryFingerprint } from '../../src/snapshot/query-fingerprint.ts';
import type { ServerInfo } from '../../src/snapshot/server-info.ts';
import { readServerInfo } from '../../src/snapshot/server-info.ts';
import type { StatisticsOptions, StatisticsSample } from '../../src/snapshot/statistics-query.ts';
import { readStatistics } from '../../src/snapshot/statistics-query.ts';
import type { BlockingEdge } from '../../src/snapshot/types.ts';
import { ClusterClients } from '../helpers/cluster-clients.ts';

const TIMEOUT = { timeout: 120_000 };

let cluster: Cluster;
const clients = new ClusterClients(() => cluster);

before(async () => {
  cluster = await startCluster({ dirPrefix: 'pglog-snap-', settings: ["shared_preload_libraries = 'pg_stat_statements'"] });
  const admin = await connect('postgres', 'postgres');
  await admin.query(`
    CREATE EXTENSION pg_stat_statements;
    CREATE TABLE public.t (id int);
    CREATE TABLE public.w (id int);
    CREATE ROLE app LOGIN;
    GRANT ALL ON public.t TO app;
    CREATE ROLE monitor LOGIN;
    GRANT pg_monitor TO monitor;`);
  await admin.query('CREATE DATABASE noext'); // not in a multi-statement query: that is a transaction block
  await admin.query("CREATE DATABASE legacy ENCODING 'WIN1251' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
});

after(async () => {
  await clients.endAll();
  await cluster?.dispose();
});

function connect(user: string, database: string, applicationName?: string): Promise<pg.Client> {
  return clients.connect(user, database, applicationName);
}

/** Runs `read` in a READ ONLY transaction with a statement_timeout, as the collector's session does. */
async function readOnly<T>(client: pg.ClientBase, read: (c: pg.ClientBase) => Promise<T>): Promise<T> {
  await client.query("BEGIN READ ONLY; SET LOCAL statement_timeout = '10s'");
  try {
    return await read(client);
  } finally {
    await client.query('ROLLBACK');
  }
}

async function pidOf(c: pg.Client): Promise<number> {
  return (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function waitsOnLock(observer: pg.Client, pid: number): Promise<void> {
  await waitUntil(
    `pid ${pid} to wait on a lock`,
    async () => (await observer.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", [pid])).rowCount === 1,
  );
}

void describe('texts of other databases in their own encoding', () => {
  test("a WIN1251 database's Cyrillic query reads back as Cyrillic in pg_stat_activity and pg_stat_statements", TIMEOUT, async () => {
    const legacy = await connect('postgres', 'legacy', 'legacy-app');
    await legacy.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    const running = legacy.query('SELECT pg_sleep(1.5) /* привет, мир */');
    const monitor = await connect('monitor', 'postgres', 'pglog');
    const info = await readOnly(monitor, readServerInfo);
    await waitUntil('the Cyrillic query to run', async () => {
      const snap = await readOnly(monitor, (cl) => readActivity(cl, info, { sessions: true, locks: false }));
      return snap.sessions.some((x) => x.application === 'legacy-app' && x.query === 'SELECT pg_sleep(1.5) /* привет, мир */');
    });
    await running;
    await legacy.query("SELECT 'ёлка' AS tree");
    // pg_stat_statements texts of that database: read from a database that has the extension, all databases' entries.
    const stats = await readOnly(monitor, (cl) => readStatistics(cl, info, { statements: true, databases: false }));
    assert.ok(
      stats.statements?.some((x) => x.database === 'legacy' && x.query.includes('привет, мир')),
      JSON.stringify(stats.statements?.filter((x) => x.database === 'legacy').map((x) => x.query)),
    );
  });
});

void describe('blocking chain A <- B <- C on public.t', () => {
  let monitor: pg.Client;
  let info: ServerInfo;
  let a: pg.Client, b: pg.Client, c: pg.Client;
  let pids: { a: number; b: number; c: number };
  let bDone: Promise<unknown>, cDone: Promise<unknown>;

  before(async () => {
    const observer = await connect('postgres', 'postgres');
    monitor = await connect('monitor', 'postgres', 'pglog');
    info = await readOnly(monitor, readServerInfo);
    [a, b, c] = [await connect('app', 'postgres', 'A'), await connect('app', 'postgres', 'B'), await connect('app', 'postgres', 'C')];
    pids = { a: await pidOf(a), b: await pidOf(b), c: await pidOf(c) };
    await a.query('BEGIN');
    await a.query('LOCK TABLE t IN ROW EXCLUSIVE MODE');
    await b.query('BEGIN');
    bDone = b.query('LOCK TABLE t IN SHARE MODE');
    await waitsOnLock(observer, pids.b);
    cDone = c.query('INSERT INTO t VALUES (42)');
    await waitsOnLock(observer, pids.c);
    await new Promise((r) => setTimeout(r, 20)); // so that every wait is measurably long
  });

  after(async () => {
    await a.query('ROLLBACK').catch(() => {
      /* ended */
    });
    await bDone.catch(() => {
      /* ended */
    });
    await b.query('ROLLBACK').catch(() => {
      /* ended */
    });
    await cDone.catch(() => {
      /* ended */
    });
  });

  test('server info of a pg_monitor role', () => {
    assert.ok(info.versionNum >= 150000 && info.versionNum < 160000, String(info.versionNum));
    assert.equal(info.database, 'postgres');
    assert.equal(info.username, 'monitor');
    assert.equal(info.superuser, false);
    assert.equal(info.canWrite, false);
    assert.equal(info.readAllStats, true);
    assert.equal(info.statStatementsSchema, 'public');
    assert.match(info.statStatementsVersion ?? '', /^1\.\d+$/);
  });

  test('a superuser is reported as one that can write', TIMEOUT, async () => {
    const su = await readOnly(await connect('postgres', 'postgres'), readServerInfo);
    assert.equal(su.superuser, true);
    assert.equal(su.canWrite, true);
  });

  test('sessions and edges of the chain', TIMEOUT, async () => {
    const snap = await readOnly(monitor, (cl) => readActivity(cl, info, { sessions: true, locks: true }));
    const byPid = new Map(snap.sessions.map((s) => [s.pid, s]));
    assert.equal(byPid.has(await pidOf(monitor)), false, 'the snapshot leaves its own backend out');

    const sa = byPid.get(pids.a),
      sb = byPid.get(pids.b),
      sc = byPid.get(pids.c);
    assert.ok(sa && sb && sc, 'A, B and C are there');
    assert.equal(sa.state, 'idle in transaction');
    assert.equal(sa.query, 'LOCK TABLE t IN ROW EXCLUSIVE MODE');
    assert.deepEqual(sa.blockedBy, []);
    assert.equal(sb.state, 'active');
    assert.equal(sb.waitEventType, 'Lock');
    assert.equal(sb.waitEvent, 'relation');
    assert.deepEqual(sb.blockedBy, [pids.a]);
    assert.equal(sc.state, 'active');
    assert.deepEqual(sc.blockedBy, [pids.b]);
    assert.equal(sc.query, 'INSERT INTO t VALUES (42)');
    for (const s of [sa, sb, sc]) {
      assert.equal(s.username, 'app');
      assert.equal(s.database, 'postgres');
      assert.equal(s.backendType, 'client backend');
      assert.equal(s.client, 'local');
      assert.equal(s.leaderPid, null);
      assert.ok(s.backendStart instanceof Date && s.xactStart instanceof Date && s.stateChange instanceof Date);
      assert.equal(s.fingerprint, queryFingerprint(s.query));
      assert.match(s.fingerprint, /^[0-9a-f]{16}$/);
    }
    assert.equal(sc.fingerprint, queryFingerprint('insert into t values (7)'), 'the same template as the log parser');

    const edges = snap.blocking.toSorted((x, y) => x.pid - y.pid);
    const expected: Omit<BlockingEdge, 'waitStart' | 'waitMs'>[] = [
      {
        pid: pids.b,
        blockingPid: pids.a,
        database: 'postgres',
        lockType: 'relation',
        waitMode: 'ShareLock',
        heldMode: 'RowExclusiveLock',
        blockerWaitMode: null,
        relation: 'public.t',
      },
      {
        pid: pids.c,
        blockingPid: pids.b,
        database: 'postgres',
        lockType: 'relation',
        waitMode: 'RowExclusiveLock',
        heldMode: null,
        blockerWaitMode: 'ShareLock',
        relation: 'public.t',
      },
    ].toSorted((x, y) => x.pid - y.pid);
    assert.deepEqual(
      edges.map(({ waitStart: _s, waitMs: _m, ...rest }) => rest),
      expected,
    );
    for (const e of edges) {
      assert.ok(e.waitStart instanceof Date);
      assert.ok(e.waitMs !== null && e.waitMs > 0, `waitMs ${e.waitMs}`);
      assert.equal(e.waitMs, snap.ts.getTime() - e.waitStart.getTime());
    }
  });

  test('locks alone: only the sessions of the chain', TIMEOUT, async () => {
    const snap = await readOnly(monitor, (cl) => readActivity(cl, info, { sessions: false, locks: true }));
    assert.deepEqual(
      snap.sessions.map((s) => s.pid).toSorted((x, y) => x - y),
      [pids.a, pids.b, pids.c].toSorted((x, y) => x - y),
    );
    assert.equal(snap.blocking.length, 2);
  });

  test('sessions alone: no edges, blockedBy still there', TIMEOUT, async () => {
    const snap = await readOnly(monitor, (cl) => readActivity(cl, info, { sessions: true, locks: false }));
    assert.equal(snap.blocking.length, 0);
    assert.deepEqual(snap.sessions.find((s) => s.pid === pids.c)?.blockedBy, [pids.b]);
  });

  test('the SQL of every version branch runs and gives the same chain', TIMEOUT, async () => {
    for (const version of [100000, 120000, 130000, 140000, info.versionNum]) {
      const snap = await readOnly(monitor, async (cl) => activityFromRows((await cl.query(activitySql(version, { sessions: true, locks: true }))).rows));
      const edges = snap.blocking.toSorted((x, y) => x.pid - y.pid);
      assert.deepEqual(
        edges.map((e) => [e.pid, e.blockingPid, e.waitMode, e.heldMode, e.blockerWaitMode, e.relation]),
        [
          [pids.b, pids.a, 'ShareLock', 'RowExclusiveLock', null, 'public.t'],
          [pids.c, pids.b, 'RowExclusiveLock', null, 'ShareLock', 'public.t'],
        ].toSorted((x, y) => (x[0] as number) - (y[0] as number)),
        `version ${version}`,
      );
      if (version < 140000) {
        // Before pg_locks.waitstart: the waiter's state_change.
        for (const e of edges) assert.equal(e.waitStart?.getTime(), snap.sessions.find((s) => s.pid === e.pid)?.stateChange?.getTime());
      }
    }
  });

  test('the monitoring role cannot write', TIMEOUT, async () => {
    await assert.rejects(
      readOnly(monitor, (cl) => cl.query('CREATE TABLE public.x (i int)')),
      (e: unknown) => (e as { code?: string }).code === '25006',
    );
    // Not into t: an INSERT takes its lock before the checks and would queue behind B.
    await assert.rejects(
      readOnly(monitor, (cl) => cl.query('INSERT INTO w VALUES (1)')),
      (e: unknown) => (e as { code?: string }).code === '25006',
    );
    // Outside a read-only transaction too: pg_monitor grants no write privilege.
    await assert.rejects(monitor.query('INSERT INTO w VALUES (1)'), (e: unknown) => (e as { code?: string }).code === '42501');
    await assert.rejects(monitor.query('CREATE TABLE public.x (i int)'), (e: unknown) => (e as { code?: string }).code === '42501');
  });
});

void describe('statistics', () => {
  const both: StatisticsOptions = { statements: true, databases: true };

  async function sample(monitor: pg.Client, info: ServerInfo, options = both): Promise<StatisticsSample> {
    return readOnly(monitor, (cl) => readStatistics(cl, info, options));
  }

  test('pg_stat_statements and pg_stat_database deltas across two samples', TIMEOUT, async () => {
    const monitor = await connect('monitor', 'postgres', 'pglog');
    const info = await readOnly(monitor, readServerInfo);
    const first = await sample(monitor, info);
    assert.deepEqual(statisticsDeltas(null, first), { statements: [], databases: [], intervalSeconds: null });
    assert.ok(first.statements !== null && first.databases !== null);
    assert.ok(first.databases.some((d) => d.database === 'postgres'));

    const app = await connect('app', 'postgres', 'workload');
    for (const id of [1, 2, 3]) await app.query(`SELECT count(*) FROM t WHERE id = ${id} AND id > -1`);
    for (let i = 0; i < 5; i++) await app.query('INSERT INTO t VALUES ($1)', [1000 + i]);
    await app.end(); // a backend that exits flushes its pg_stat_database counters

    let deltas = statisticsDeltas(first, await sample(monitor, info));
    await waitUntil('the workload in pg_stat_database', async () => {
      deltas = statisticsDeltas(first, await sample(monitor, info));
      return (deltas.databases.find((d) => d.database === 'postgres')?.tupInserted ?? 0n) >= 5n;
    });

    assert.ok(deltas.intervalSeconds !== null && deltas.intervalSeconds > 0);
    const select = deltas.statements.find((s) => s.query.startsWith('SELECT count(*) FROM t WHERE id ='));
    assert.ok(select, JSON.stringify(deltas.statements.map((s) => s.query)));
    assert.equal(select.calls, 3n);
    assert.equal(select.rows, 3n);
    assert.equal(select.username, 'app');
    assert.equal(select.database, 'postgres');
    assert.equal(select.toplevel, true);
    assert.ok(select.totalExecMs > 0);
    assert.equal(select.fingerprint, queryFingerprint('SELECT count(*) FROM t WHERE id = 9 AND id > -1'), 'joins the log parser templates');
    const insert = deltas.statements.find((s) => s.query.startsWith('INSERT INTO t VALUES'));
    assert.equal(insert?.calls, 5n);
    assert.equal(insert?.rows, 5n);
    for (const s of deltas.statements) assert.ok(s.calls > 0n);

    const db = deltas.databases.find((d) => d.database === 'postgres');
    assert.ok(db);
    assert.ok(db.xactCommit >= 8n, String(db.xactCommit));
    assert.ok(db.backends >= 1);
    assert.equal(
      deltas.databases.some((d) => d.database === 'template0'),
      false,
      'an unchanged database has no delta',
    );
  });

  test('pg_stat_statements_reset(): the counters since the reset are the delta', TIMEOUT, async () => {
    const monitor = await connect('monitor', 'postgres', 'pglog');
    const info = await readOnly(monitor, readServerInfo);
    const app = await connect('app', 'postgres', 'workload');
    for (let i = 0; i < 4; i++) await app.query(`SELECT ${i} AS reset_probe`);
    const before = await sample(monitor, info, { statements: true, databases: false });
    const admin = await connect('postgres', 'postgres');
    await admin.query('SELECT pg_stat_statements_reset()');
    await app.query('SELECT 9 AS reset_probe');
    const afterReset = await sample(monitor, info, { statements: true, databases: false });
    assert.ok(afterReset.statementsReset !== null && before.statementsReset !== null && afterReset.statementsReset > before.statementsReset);
    const probe = statisticsDeltas(before, afterReset).statements.find((s) => s.query.includes('reset_probe'));
    assert.equal(probe?.calls, 1n);
  });

  test('statements asked for in a database without the extension: an error that says how to fix it', TIMEOUT, async () => {
    const monitor = await connect('monitor', 'noext', 'pglog');
    const info = await readOnly(monitor, readServerInfo);
    assert.equal(info.statStatementsVersion, null);
    await assert.rejects(sample(monitor, info), (e: unknown) => {
      assert.ok(isPglogError(e));
      assert.equal(e.code, 'SQL_QUERY_FAILED');
      assert.match(e.message, /pg_stat_statements is not installed in database "noext"/);
      assert.match(e.message, /CREATE EXTENSION pg_stat_statements/);
      assert.match(e.message, /shared_preload_libraries/);
      return true;
    });
    const databases = await sample(monitor, info, { statements: false, databases: true });
    assert.equal(databases.statements, null);
    assert.ok(databases.databases?.some((d) => d.database === 'noext'));
  });

  test('the extension created but not preloaded: an error that says so', TIMEOUT, async () => {
    const plain = await startCluster({ dirPrefix: 'pglog-snap-nopreload-' });
    try {
      const c = new pg.Client({ host: plain.socketDir, port: plain.port, user: 'postgres', database: 'postgres' });
      c.on('error', () => {
        /* seen through the queries */
      });
      await c.connect();
      try {
        await c.query('CREATE EXTENSION pg_stat_statements');
        const info = await readOnly(c, readServerInfo);
        await assert.rejects(sample(c, info), (e: unknown) => {
          assert.ok(isPglogError(e));
          assert.equal(e.code, 'SQL_QUERY_FAILED');
          assert.match(e.message, /not loaded: add 'pg_stat_statements' to shared_preload_libraries/);
          return true;
        });
      } finally {
        await c.end();
      }
    } finally {
      await plain.dispose();
    }
  });
});
