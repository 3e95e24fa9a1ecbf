// SQL snapshots in the store against a real PostgreSQL 15 (issue 7): snapshots and failed runs
// written by StoreWriter.writeSnapshot and read back through the stable views with their exact
// values, a refused snapshot, groups of snapshots in one transaction, snapshots beside event
// batches, and a store outage and its end. The snapshot tables' schema, partitions and
// retention: snapshot-store-schema.test.ts.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

import type { SnapshotKind } from '../../src/snapshot/types.ts';
import { SNAPSHOT_TABLES } from '../../src/store/snapshot-tables.ts';
import type { StoreBatch } from '../../src/store/store-writer.ts';
import { streamKeyOf } from '../../src/store/store-writer.ts';
import { statementEvent } from '../helpers/events.ts';
import { activitySnapshot, failure, FAILURE_TS, runRow, session, statisticsSnapshot } from '../helpers/snapshot-fixtures.ts';
import { count } from '../helpers/store-catalog.ts';
import { StoreFixture } from '../helpers/store-fixture.ts';

const TIMEOUT = { timeout: 180_000 };
const PASSWORD = 'hunter2-not-in-messages';

const fixture = new StoreFixture({ prefix: 'snap', password: PASSWORD, applicationName: 'pglog-test-snapshots' });

before(() => fixture.start());
after(() => fixture.stop());

const connect = (database: string): Promise<pg.Client> => fixture.connect(database);
const freshStore = (options: { retentionDays?: number } = {}): ReturnType<StoreFixture['freshStore']> => fixture.freshStore(options);

function statementBatch(ts: string, offset: number): StoreBatch {
  return {
    items: [
      {
        source: { target: 'db1', instance: 'main', file: 'log/postgresql.log' },
        readAt: Date.parse(ts),
        event: statementEvent({
          offset,
          end: offset + 100,
          ts,
          duration_ms: 1.5,
          protocol: 'simple',
          statement_name: null,
          query: 'SELECT 1',
          parameters: null,
          fingerprint: 'fp1',
        }),
      },
    ],
    positions: [{ target: 'db1', instance: 'main', file: 'log/postgresql.log', identity: 'inode:1', offset: offset + 100 }],
  };
}
const NO_EPOCHS = new Map<string, number>([[streamKeyOf('db1', 'main'), 0]]);

test('a snapshot, a statistics snapshot and a failed run read back through the views with their exact values', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  await writer.writeSnapshot(activitySnapshot());
  await writer.writeSnapshot(statisticsSnapshot());
  await writer.writeSnapshot(failure());

  const activity = await db.query(`SELECT ts, target, instance, database, username, application, pid, state, wait_event_type,
      wait_event, xact_start, query_start, blocked_by, fingerprint, query FROM pglog.activity ORDER BY pid`);
  const ts = new Date('2026-11-21T13:29:33.123Z');
  const common = {
    ts,
    target: 'db1',
    instance: 'main',
    database: 'app',
    username: 'alice',
    application: 'psql',
    xact_start: new Date('2026-11-21T13:29:30.002Z'),
    query_start: new Date('2026-11-21T13:29:31.003Z'),
    fingerprint: 'fp-update',
  };
  assert.deepEqual(activity.rows, [
    {
      ...common,
      pid: 100,
      state: 'idle in transaction',
      wait_event_type: null,
      wait_event: null,
      blocked_by: [],
      query: 'UPDATE accounts SET balance = balance - 1 WHERE id = 100',
    },
    {
      ...common,
      pid: 101,
      state: 'active',
      wait_event_type: 'Lock',
      wait_event: 'transactionid',
      blocked_by: [100],
      query: 'UPDATE accounts SET balance = balance - 1 WHERE id = 101',
    },
    {
      ...common,
      pid: 102,
      state: 'active',
      wait_event_type: 'Lock',
      wait_event: 'transactionid',
      blocked_by: [100, 101],
      query: 'UPDATE accounts SET balance = balance - 1 WHERE id = 102',
    },
  ]);
  // The view's later columns; blocked_by is a real int4[] the server can use.
  const more = await db.query(`SELECT leader_pid, client, backend_type, backend_start, state_change, blocked_by::text AS text,
      array_lower(blocked_by, 1) AS lower, pg_typeof(blocked_by)::text AS type
    FROM pglog.activity WHERE 101 = ANY(blocked_by)`);
  assert.deepEqual(more.rows, [
    {
      leader_pid: null,
      client: '10.0.0.7',
      backend_type: 'client backend',
      backend_start: new Date('2026-11-21T12:00:00.001Z'),
      state_change: new Date('2026-11-21T13:29:31.004Z'),
      text: '{100,101}',
      lower: 1,
      type: 'integer[]',
    },
  ]);

  const blocking = await db.query(`SELECT ts, target, instance, database, pid, blocking_pid, lock_type, wait_mode, held_mode, relation, wait_ms
    FROM pglog.blocking ORDER BY pid, blocking_pid`);
  const edge = { ts, target: 'db1', instance: 'main', database: 'app', lock_type: 'transactionid', wait_mode: 'ShareLock', relation: null, wait_ms: 1623.25 };
  assert.deepEqual(blocking.rows, [
    { ...edge, pid: 101, blocking_pid: 100, held_mode: 'ExclusiveLock' },
    { ...edge, pid: 102, blocking_pid: 100, held_mode: 'ExclusiveLock' },
    { ...edge, pid: 102, blocking_pid: 101, held_mode: null },
  ]);
  const waits = await db.query('SELECT blocker_wait_mode, wait_start FROM pglog.blocking ORDER BY pid, blocking_pid');
  assert.deepEqual(
    waits.rows.map((r: { blocker_wait_mode: string | null }) => r.blocker_wait_mode),
    [null, null, 'ShareLock'],
  );
  assert.deepEqual(waits.rows[0], { blocker_wait_mode: null, wait_start: new Date('2026-11-21T13:29:31.500Z') });

  // int8 comes back as text from pg: exact, beyond 2^53 too.
  const stats = await db.query('SELECT * FROM pglog.statement_stats ORDER BY queryid');
  assert.deepEqual(stats.rows, [
    {
      ts,
      target: 'db1',
      instance: 'main',
      interval_s: 60.5,
      database: 'app',
      username: 'alice',
      queryid: '-8000000000000000001',
      fingerprint: 'fp-select',
      query: 'SELECT * FROM accounts WHERE id = $1',
      calls: '12',
      total_exec_ms: 3.75,
      rows: '12',
    },
    {
      ts,
      target: 'db1',
      instance: 'main',
      interval_s: 60.5,
      database: null,
      username: null,
      queryid: '42',
      fingerprint: 'fp-select',
      query: 'SELECT * FROM accounts WHERE id = $1',
      calls: '12',
      total_exec_ms: 3.75,
      rows: '12',
    },
  ]);
  const blocks = await db.query('SELECT toplevel, shared_blks_hit, shared_blks_read, temp_blks_written FROM pglog.statement_deltas ORDER BY queryid');
  assert.deepEqual(blocks.rows, [
    { toplevel: true, shared_blks_hit: '48', shared_blks_read: '2', temp_blks_written: '0' },
    { toplevel: false, shared_blks_hit: '48', shared_blks_read: '2', temp_blks_written: '0' },
  ]);

  const dbs = await db.query('SELECT * FROM pglog.database_stats ORDER BY database');
  const dbRow = {
    ts,
    target: 'db1',
    instance: 'main',
    interval_s: 60.5,
    xact_rollback: '2',
    blks_read: '303',
    blks_hit: '40404',
    deadlocks: '1',
    temp_bytes: '8192',
  };
  assert.deepEqual(dbs.rows, [
    { ...dbRow, database: 'app', backends: 7, xact_commit: '101' },
    { ...dbRow, database: 'postgres', backends: 0, xact_commit: '9007199254740993' },
  ]);
  const tups = await db.query(`SELECT tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted, conflicts, temp_files
    FROM pglog.database_deltas WHERE database = 'app'`);
  assert.deepEqual(tups.rows, [
    { tup_returned: '505', tup_fetched: '606', tup_inserted: '707', tup_updated: '808', tup_deleted: '909', conflicts: '0', temp_files: '1' },
  ]);

  const runs = await db.query('SELECT * FROM pglog.snapshot_runs ORDER BY ts, kind');
  assert.deepEqual(runs.rows, [
    runRow('activity', 12.5, { sessions: 3, blocked: 2 }),
    runRow('statistics', 30.25),
    runRow('activity', 5000, { ts: FAILURE_TS, error_code: 'SQL_TIMEOUT', error: 'the activity query took longer than 5 s' }),
  ]);
});

test('a snapshot the store refuses: STORE_REJECTED naming it and the table, nothing of it written; the writer goes on', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  // snapshot_runs only takes the two kinds: the server refuses the run row, the last COPY of
  // the transaction, after the samples were sent.
  const bogus = activitySnapshot({ target: 'db7', kind: 'hourly' as SnapshotKind });
  await assert.rejects(writer.writeSnapshot(bogus), (e: unknown) => {
    assert.ok(isPglogError(e) && e.code === 'STORE_REJECTED', String(e));
    assert.match(
      e.message,
      /^the store refused the hourly snapshot of db7\/main \(pglog\.snapshot_runs\), not written: SQLSTATE 23514: .*snapshot_runs_kind_check/,
    );
    return true;
  });
  for (const t of SNAPSHOT_TABLES) assert.equal(await count(db, `SELECT 1 FROM pglog.${t}`), 0, t);
  // Refused by the encoder: nothing sent at all.
  await assert.rejects(
    writer.writeSnapshot(activitySnapshot({ sessions: [session(1, { pid: 2 ** 31 })] })),
    (e: unknown) =>
      isPglogError(e) &&
      e.code === 'STORE_REJECTED' &&
      /activity snapshot of db1\/main cannot be stored \(activity_samples\).*column 3 \(int4\)/.test(e.message),
  );
  // The same connection, out of its transaction, takes the next snapshot and the next batch.
  await writer.writeSnapshot(activitySnapshot());
  assert.equal((await writer.commit(statementBatch('2026-11-21T13:00:00Z', 0), NO_EPOCHS)).rows.statement_events, 1);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.activity'), 3);
  assert.equal(await count(db, `SELECT 1 FROM pg_stat_activity WHERE application_name = 'pglog-test-snapshots' AND datname = current_database()`), 1);
});

test('a group of snapshots in one transaction: every one stored; a refused one is lost alone; an unencodable one refused alone', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  const xactsBefore = Number((await db.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.n);
  const ok = await writer.writeSnapshots([activitySnapshot({ target: 'g1' }), statisticsSnapshot({ target: 'g2' }), failure({ target: 'g3' })]);
  assert.deepEqual(ok, [null, null, null]);
  assert.deepEqual(
    (await db.query<{ target: string }>('SELECT target FROM pglog.snapshot_runs ORDER BY target')).rows.map((r) => r.target),
    ['g1', 'g2', 'g3'],
  );
  assert.equal(await count(db, "SELECT 1 FROM pglog.activity WHERE target = 'g1'"), 3);
  assert.equal(await count(db, "SELECT 1 FROM pglog.statement_stats WHERE target = 'g2'"), 2);
  // One transaction for the three (stats counters are updated at transaction end; allow the test's own reads).
  const xactsAfter = Number(
    (await db.query<{ n: string }>('SELECT pg_stat_force_next_flush(), xact_commit AS n FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.n,
  );
  assert.ok(xactsAfter - xactsBefore <= 4, `${xactsAfter - xactsBefore} transactions`);

  const mixed = await writer.writeSnapshots([
    activitySnapshot({ target: 'h1' }),
    activitySnapshot({ target: 'h2', kind: 'hourly' as SnapshotKind }), // the server refuses its run row
    activitySnapshot({ target: 'h3', sessions: [session(1, { pid: 2 ** 31 })] }), // the encoder refuses it
    failure({ target: 'h4' }),
  ]);
  assert.deepEqual(
    mixed.map((e) => e?.code ?? null),
    [null, 'STORE_REJECTED', 'STORE_REJECTED', null],
  );
  assert.deepEqual(
    (await db.query<{ target: string }>("SELECT target FROM pglog.snapshot_runs WHERE target LIKE 'h%' ORDER BY target")).rows.map((r) => r.target),
    ['h1', 'h4'],
  );
  assert.equal(await count(db, "SELECT 1 FROM pglog.activity WHERE target IN ('h2', 'h3')"), 0);
});

test('snapshots and event batches share the connection: queued in turn, every one committed', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  const all = await Promise.all([
    writer.commit(statementBatch('2026-11-21T13:00:00Z', 0), NO_EPOCHS),
    writer.writeSnapshot(activitySnapshot()),
    writer.commit(statementBatch('2026-11-21T13:00:01Z', 100), NO_EPOCHS),
    writer.writeSnapshot(statisticsSnapshot()),
    writer.writeSnapshot(failure()),
    writer.commit(statementBatch('2026-11-21T13:00:02Z', 200), NO_EPOCHS),
  ]);
  assert.equal(all.length, 6);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statements'), 3);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.snapshot_runs'), 3);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_stats'), 2);
});

test('store stopped: writeSnapshot throws STORE_UNAVAILABLE without the password; after the restart it writes again', TIMEOUT, async () => {
  const { writer, name } = await freshStore();
  await writer.writeSnapshot(activitySnapshot());
  await fixture.server.stopServer();
  try {
    for (const s of [statisticsSnapshot(), failure()]) {
      await assert.rejects(writer.writeSnapshot(s), (e: unknown) => {
        assert.ok(isPglogError(e) && e.code === 'STORE_UNAVAILABLE', String(e));
        assert.ok(!e.message.includes(PASSWORD), e.message);
        assert.match(e.message, /snapshot of db1\/main.*store postgres@\/.*\/snap_\d+/);
        return true;
      });
    }
  } finally {
    await fixture.server.startServer();
    // The test's own clients lost their connections with the server: reconnect the admin one.
    await fixture.reconnectAdmin();
  }
  await writer.writeSnapshot(statisticsSnapshot());
  await writer.writeSnapshot(failure());
  const db = await connect(name);
  const runs = await db.query<{ kind: string; error_code: string | null }>('SELECT kind, error_code FROM pglog.snapshot_runs ORDER BY ts, kind');
  assert.deepEqual(runs.rows, [
    { kind: 'activity', error_code: null },
    { kind: 'statistics', error_code: null },
    { kind: 'activity', error_code: 'SQL_TIMEOUT' },
  ]);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_stats'), 2);
});
