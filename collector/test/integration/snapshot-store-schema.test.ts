// The SQL snapshots' schema in a real PostgreSQL 15 store (issue 7): migration 3 on a fresh
// store and on one at version 2 (applied alone, events and their partitions kept), and daily
// partitions and retention of the snapshot tables. What is written into them and read back:
// snapshot-store.test.ts.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import type pg from 'pg';

import type { Snapshot } from '../../src/snapshot/types.ts';
import { DEFAULT_MIGRATIONS_DIR, migrate } from '../../src/store/migrate.ts';
import { SNAPSHOT_TABLES } from '../../src/store/snapshot-tables.ts';
import type { StoreWriter } from '../../src/store/store-writer.ts';
import { activitySnapshot, failure, statisticsSnapshot } from '../helpers/snapshot-fixtures.ts';
import { columns, count, partitions, versions } from '../helpers/store-catalog.ts';
import { StoreFixture } from '../helpers/store-fixture.ts';

const TIMEOUT = { timeout: 180_000 };

const fixture = new StoreFixture({ prefix: 'snapschema', password: 'hunter2-not-in-messages', applicationName: 'pglog-test-snapshot-schema' });
const tempDirs: string[] = [];

before(() => fixture.start());
after(async () => {
  await fixture.stop();
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

const connect = (database: string): Promise<pg.Client> => fixture.connect(database);
const freshDb = (): Promise<string> => fixture.freshDatabase();
const openWriter = (name: string): Promise<StoreWriter> => fixture.openWriter(name);
const freshStore = (options: { retentionDays?: number } = {}): ReturnType<StoreFixture['freshStore']> => fixture.freshStore(options);

/** The columns of the snapshot views, in order, as docs/store.md lists them. */
const SNAPSHOT_VIEW_COLUMNS = {
  activity: [
    'ts',
    'target',
    'instance',
    'database',
    'username',
    'application',
    'pid',
    'state',
    'wait_event_type',
    'wait_event',
    'xact_start',
    'query_start',
    'blocked_by',
    'fingerprint',
    'query',
    'leader_pid',
    'backend_type',
    'client',
    'backend_start',
    'state_change',
  ],
  blocking: [
    'ts',
    'target',
    'instance',
    'database',
    'pid',
    'blocking_pid',
    'lock_type',
    'wait_mode',
    'held_mode',
    'relation',
    'wait_ms',
    'blocker_wait_mode',
    'wait_start',
  ],
  statement_stats: ['ts', 'target', 'instance', 'interval_s', 'database', 'username', 'queryid', 'fingerprint', 'query', 'calls', 'total_exec_ms', 'rows'],
  database_stats: [
    'ts',
    'target',
    'instance',
    'interval_s',
    'database',
    'backends',
    'xact_commit',
    'xact_rollback',
    'blks_read',
    'blks_hit',
    'deadlocks',
    'temp_bytes',
  ],
};

test('migration 3 on a fresh store: the snapshot tables are partitioned, the views have their columns', TIMEOUT, async () => {
  const { db } = await freshStore();
  assert.deepEqual(await versions(db), [1, 2, 3, 4, 5, 6, 7]);
  for (const t of SNAPSHOT_TABLES) {
    const kind = await db.query<{ relkind: string }>(`SELECT relkind::text FROM pg_class WHERE oid = $1::regclass`, [`pglog.${t}`]);
    assert.equal(kind.rows[0]?.relkind, 'p', `${t} is partitioned`);
    // open() made the partitions around today for the new tables too.
    const today = new Date().toISOString().slice(0, 10).replaceAll('-', '');
    assert.ok((await partitions(db, `pglog.${t}`)).includes(`${t}_p${today}`), `${t} has today's partition`);
  }
  for (const [view, expected] of Object.entries(SNAPSHOT_VIEW_COLUMNS)) assert.deepEqual(await columns(db, `pglog.${view}`), expected, view);
});

test('migration 3 on a store at version 2: applied alone, events and their partitions kept, new tables partitioned', TIMEOUT, async () => {
  const name = await freshDb();
  const c = await connect(name);
  // The store as pglog left it before migration 3: migrations 1 and 2 only, events in it.
  const v2 = mkdtempSync(join(tmpdir(), 'pglog-mig-v2-'));
  tempDirs.push(v2);
  cpSync(DEFAULT_MIGRATIONS_DIR, v2, { recursive: true, filter: (src) => !/000[3-9]_\w+\.sql$/.test(src) });
  // Migration 3 alone on top of it (later migrations come with the writer below).
  const v3 = mkdtempSync(join(tmpdir(), 'pglog-mig-v3-'));
  tempDirs.push(v3);
  cpSync(DEFAULT_MIGRATIONS_DIR, v3, { recursive: true, filter: (src) => !/000[4-9]_\w+\.sql$/.test(src) });
  assert.deepEqual((await migrate(c, { migrationsDir: v2 })).current, 2);
  await c.query(`SELECT pglog.ensure_partitions(DATE '2026-11-21', 2)`);
  await c.query(`INSERT INTO pglog.statement_events (ts, target, instance, pid, duration_ms, fingerprint, query, protocol, file, file_offset)
    VALUES ('2026-11-21T10:00:00Z', 'db1', 'main', 42, 1.5, 'fp1', 'SELECT 1', 'simple', 'log/postgresql.log', 7)`);
  assert.deepEqual(await versions(c), [1, 2]);

  const res = await migrate(c, { migrationsDir: v3 });
  assert.deepEqual(res, { applied: ['0003_snapshots.sql'], current: 3 });
  assert.deepEqual(await versions(c), [1, 2, 3]);
  assert.equal(await count(c, `SELECT 1 FROM pglog.statements WHERE query = 'SELECT 1'`), 1);
  // The event tables have their days already: only the snapshot tables get new partitions.
  const created = await c.query<{ p: string }>(`SELECT p FROM pglog.ensure_partitions(DATE '2026-11-21', 2) AS p ORDER BY p`);
  assert.deepEqual(
    created.rows.map((r) => r.p),
    SNAPSHOT_TABLES.flatMap((t) => [`${t}_p20261121`, `${t}_p20261122`]).sort(),
  );

  // A writer opened on it applies what follows and writes snapshots.
  const writer = await openWriter(name);
  await writer.writeSnapshot(activitySnapshot());
  assert.equal(await count(c, 'SELECT 1 FROM pglog.activity_samples_p20261121'), 3);
  // Migration 6 rolled up the statement stored before it.
  assert.equal(
    await count(
      c,
      `SELECT 1 FROM pglog.statement_rollup WHERE bucket = '2026-11-21T10:00:00Z' AND calls = 1 AND timed = 1 AND total_ms = 1.5 AND bins = ARRAY[pglog.duration_bin(1.5)]`,
    ),
    1,
  );
});

test('ensure_partitions makes daily partitions of the snapshot tables (moving DEFAULT rows); retention drops them', TIMEOUT, async () => {
  const { writer, db } = await freshStore({ retentionDays: 3 });
  // Written before its day has a partition: into DEFAULT, then moved when the day is made.
  const at = (iso: string): Snapshot => activitySnapshot({ ts: new Date(iso) });
  await writer.writeSnapshot(at('2030-06-14T08:00:00Z'));
  await writer.writeSnapshot(failure({ ts: new Date('2030-06-14T08:00:01Z') }));
  await writer.writeSnapshot(statisticsSnapshot({ ts: new Date('2030-06-14T09:00:00Z') }));
  assert.equal(await count(db, 'SELECT 1 FROM pglog.snapshot_runs_default'), 3);

  const now = new Date('2030-06-15T12:00:00Z');
  const days = ['20300614', '20300615', '20300616', '20300617', '20300618'];
  const made = await writer.maintain(now);
  for (const t of SNAPSHOT_TABLES) {
    assert.deepEqual(
      made.created.filter((n) => n.startsWith(`${t}_`)).sort(),
      days.map((d) => `${t}_p${d}`),
      t,
    );
  }
  assert.equal(made.created.length, 9 * days.length, 'four event tables and five snapshot tables');
  for (const t of SNAPSHOT_TABLES) {
    assert.equal(await count(db, `SELECT 1 FROM pglog.${t}_default`), 0, `${t}: nothing left in DEFAULT`);
  }
  assert.equal(await count(db, 'SELECT 1 FROM pglog.snapshot_runs_p20300614'), 3);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.activity_samples_p20300614'), 3);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_deltas_p20300614'), 2);
  // A moved partition keeps the table's defaults and checks: a later row of that day still goes in,
  // and a kind the table does not know is still refused there.
  await db.query(`INSERT INTO pglog.activity_samples_p20300614 (ts, target, instance, pid) VALUES ('2030-06-14T10:00:00Z', 'db1', 'main', 9)`);
  assert.deepEqual((await db.query(`SELECT blocked_by, fingerprint FROM pglog.activity WHERE pid = 9`)).rows, [{ blocked_by: [], fingerprint: '' }]);
  await assert.rejects(
    db.query(`INSERT INTO pglog.snapshot_runs_p20300614 (ts, target, instance, kind, duration_ms) VALUES ('2030-06-14T10:00:00Z', 'a', 'b', 'other', 1)`),
    (e: unknown) => (e as { code?: string }).code === '23514',
  );
  // New snapshots of a partitioned day go straight into its partition.
  await writer.writeSnapshot(at('2030-06-16T00:00:00Z'));
  assert.equal(await count(db, 'SELECT 1 FROM pglog.blocking_samples_p20300616'), 3);

  // Ten days later all of it is past a 3-day retention.
  const later = await writer.maintain(new Date('2030-06-25T00:30:00Z'));
  for (const t of SNAPSHOT_TABLES) {
    assert.deepEqual(
      later.dropped.filter((n) => n.startsWith(`${t}_`)).sort(),
      days.map((d) => `${t}_p${d}`),
      t,
    );
    assert.equal(await count(db, `SELECT 1 FROM pglog.${t}`), 0, `${t} is empty`);
  }
  // Old DEFAULT rows go as well (a snapshot from before any partition existed).
  await writer.writeSnapshot(at('2020-01-01T00:00:00Z'));
  assert.equal(await count(db, 'SELECT 1 FROM pglog.activity_samples_default'), 3);
  const dropped = await db.query<{ p: string }>(`SELECT p FROM pglog.drop_partitions_before(DATE '2030-06-22') AS p`);
  assert.deepEqual(dropped.rows, []);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.activity_samples'), 0);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.snapshot_runs'), 0);
});
