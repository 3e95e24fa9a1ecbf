// Store schema migrations: the pure planning logic, and migrate() against a real PostgreSQL 15
// (one fresh database per test, so tests do not see each other's schema).
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import type { TestPostgres } from '@pglog/test-support/postgres.ts';
import { startPostgres } from '@pglog/test-support/postgres.ts';
import pg from 'pg';

import type { AppliedMigration, MigrationFile } from '../../src/store/migrate.ts';
import { checksumOf, DEFAULT_MIGRATIONS_DIR, migrate, MIGRATION_LOCK_KEY, planMigrations, readMigrations } from '../../src/store/migrate.ts';
import { columns, partitions, STABLE_VIEWS, versions } from '../helpers/store-catalog.ts';

// ---------------------------------------------------------------- planning (pure)

function file(version: number, sql = `-- ${version}`): MigrationFile {
  const name = `m${version}`;
  return { version, name, file: `${String(version).padStart(4, '0')}_${name}.sql`, sql, checksum: checksumOf(sql) };
}
function appliedOf(f: MigrationFile): AppliedMigration {
  return { version: f.version, name: f.name, checksum: f.checksum };
}
function refused(re: RegExp): (e: unknown) => boolean {
  return (e: unknown) => isPglogError(e) && e.code === 'STORE_MIGRATION' && re.test(e.message);
}

test('plan: fresh database applies every file in version order', () => {
  const files = [file(2), file(1), file(3)];
  const plan = planMigrations(files, []);
  assert.deepEqual(
    plan.toApply.map((f) => f.version),
    [1, 2, 3],
  );
  assert.equal(plan.current, 3);
});

test('plan: applies only what is not recorded; nothing when up to date', () => {
  const files = [file(1), file(2), file(3)];
  assert.deepEqual(
    planMigrations(files, [appliedOf(files[0]!)]).toApply.map((f) => f.version),
    [2, 3],
  );
  const none = planMigrations(files, files.map(appliedOf));
  assert.deepEqual(none.toApply, []);
  assert.equal(none.current, 3);
  assert.deepEqual(planMigrations([], []), { toApply: [], current: 0 });
});

test('plan: refuses an edited applied migration, naming the file', () => {
  const files = [file(1), file(2)];
  const applied = [appliedOf(files[0]!), { ...appliedOf(files[1]!), checksum: checksumOf('old text') }];
  assert.throws(() => planMigrations(files, applied), refused(/0002_m2\.sql was changed after it was applied/));
});

test('plan: refuses a store newer than the files', () => {
  assert.throws(
    () => planMigrations([file(1)], [appliedOf(file(1)), appliedOf(file(2))]),
    refused(/schema version 2 .*newer than this pglog's migrations \(newest 1\)/),
  );
  assert.throws(() => planMigrations([], [appliedOf(file(1))]), refused(/schema version 1 .*newest 0/));
});

test('plan: refuses gaps and duplicate versions', () => {
  assert.throws(() => planMigrations([file(1), file(3)], []), refused(/0003_m3\.sql should have version 0002/));
  const dup = { ...file(1), name: 'other', file: '0001_other.sql' };
  assert.throws(() => planMigrations([file(1), dup], []), refused(/has the same version as/));
});

test('readMigrations: sorted by version with checksums; bad names refused, other files ignored', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-mig-'));
  try {
    writeFileSync(join(dir, 'README.md'), 'not a migration');
    writeFileSync(join(dir, '0002_two.sql'), 'SELECT 2;');
    writeFileSync(join(dir, '0001_one.sql'), 'SELECT 1;');
    const files = await readMigrations(dir);
    assert.deepEqual(
      files.map((f) => [f.version, f.name, f.file, f.checksum]),
      [
        [1, 'one', '0001_one.sql', checksumOf('SELECT 1;')],
        [2, 'two', '0002_two.sql', checksumOf('SELECT 2;')],
      ],
    );
    writeFileSync(join(dir, '3_bad.sql'), 'SELECT 3;');
    await assert.rejects(readMigrations(dir), refused(/3_bad\.sql: the name must be NNNN_name\.sql/));
    await assert.rejects(readMigrations(join(dir, 'nope')), refused(/cannot read the migrations directory/));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------- against PostgreSQL 15

let server: TestPostgres;
let admin: pg.Client;
let dbCounter = 0;
const clients: pg.Client[] = [];
const tempDirs: string[] = [];

before(async () => {
  server = await startPostgres();
  admin = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres', database: 'postgres' });
  await admin.connect();
});

after(async () => {
  for (const c of clients)
    await c.end().catch(() => {
      /* already closed */
    });
  await admin?.end().catch(() => {
    /* the server may be gone already */
  });
  await server?.stop();
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

/** A fresh, empty database. */
async function freshDb(): Promise<string> {
  const name = `mig_${++dbCounter}`;
  await admin.query(`CREATE DATABASE ${name}`);
  return name;
}

async function connect(database: string): Promise<pg.Client> {
  const c = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres', database });
  await c.connect();
  clients.push(c);
  return c;
}

/** A copy of the real migrations directory, with `extra` files written into it. */
function migrationsCopy(extra: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-mig-'));
  tempDirs.push(dir);
  cpSync(DEFAULT_MIGRATIONS_DIR, dir, { recursive: true });
  for (const [name, text] of Object.entries(extra)) writeFileSync(join(dir, name), text);
  return dir;
}

async function realFiles(): Promise<string[]> {
  return (await readMigrations(DEFAULT_MIGRATIONS_DIR)).map((f) => f.file);
}

const STATEMENT_INSERT = `INSERT INTO pglog.statement_events
  (ts, target, instance, database, username, application, pid, duration_ms, fingerprint, query, protocol, parameters, file, file_offset)
  VALUES ($1, 't1', 'main', 'db', 'alice', 'psql', 42, 1.5, 'fp1', 'SELECT 1', 'simple', NULL, 'postgresql.log', $2)`;

/** The columns of the log views, in order, as docs/store.md lists them. */
const LOG_VIEW_COLUMNS = {
  statements: ['ts', 'target', 'instance', 'database', 'username', 'application', 'pid', 'duration_ms', 'fingerprint', 'query', 'parameters'],
  errors: ['ts', 'target', 'instance', 'database', 'username', 'severity', 'sqlstate', 'message', 'detail', 'hint', 'statement'],
  lock_waits: ['ts', 'target', 'instance', 'database', 'pid', 'lock_type', 'wait_ms', 'acquired'],
  read_positions: ['target', 'instance', 'file', 'offset', 'updated_at'],
};

test('fresh database: every migration applied; tables, views and functions exist', async () => {
  const c = await connect(await freshDb());
  const files = await realFiles();
  const res = await migrate(c);
  assert.deepEqual(res.applied, files);
  assert.equal(res.current, files.length);
  assert.deepEqual(
    await versions(c),
    files.map((_, i) => i + 1),
  );

  const rel = await c.query<{ relname: string; relkind: string }>(
    `SELECT relname, relkind::text FROM pg_class WHERE relnamespace = 'pglog'::regnamespace AND relkind IN ('r', 'p', 'v') ORDER BY relname`,
  );
  const kinds = new Map(rel.rows.map((r) => [r.relname, r.relkind]));
  for (const t of [
    'statement_events',
    'error_events',
    'lock_wait_events',
    'other_events',
    'activity_samples',
    'blocking_samples',
    'statement_deltas',
    'database_deltas',
    'snapshot_runs',
  ]) {
    assert.equal(kinds.get(t), 'p', `${t} is partitioned`);
    assert.equal(kinds.get(`${t}_default`), 'r', `${t} has a default partition`);
  }
  for (const t of ['query_templates', 'read_position_state', 'quarantine', 'schema_migrations']) assert.equal(kinds.get(t), 'r', t);
  for (const v of STABLE_VIEWS) assert.equal(kinds.get(v), 'v', v);

  // The views have exactly the columns of docs/store.md, in order.
  for (const [view, expected] of Object.entries(LOG_VIEW_COLUMNS)) assert.deepEqual(await columns(c, `pglog.${view}`), expected, view);

  const fns = await c.query<{ proname: string }>(`SELECT proname FROM pg_proc WHERE pronamespace = 'pglog'::regnamespace ORDER BY proname`);
  const names = fns.rows.map((r) => r.proname);
  assert.ok(names.includes('ensure_partitions') && names.includes('drop_partitions_before'), names.join(', '));
});

test('the views show the rows of their tables', async () => {
  const c = await connect(await freshDb());
  await migrate(c);
  const ts = new Date('2026-03-04T05:06:07.123Z');
  await c.query(STATEMENT_INSERT, [ts, 100]);
  const s = await c.query('SELECT * FROM pglog.statements');
  assert.deepEqual(s.rows, [
    {
      ts,
      target: 't1',
      instance: 'main',
      database: 'db',
      username: 'alice',
      application: 'psql',
      pid: 42,
      duration_ms: 1.5,
      fingerprint: 'fp1',
      query: 'SELECT 1',
      parameters: null,
    },
  ]);

  await c.query(
    `INSERT INTO pglog.error_events (ts, target, instance, database, username, severity, sqlstate, message, detail, hint, context, statement, fingerprint, file, file_offset)
    VALUES ($1, 't1', 'main', 'db', 'bob', 'ERROR', '42P01', 'relation "x" does not exist', NULL, 'create it', NULL, 'SELECT * FROM x', 'fp2', 'postgresql.log', 200)`,
    [ts],
  );
  const e = await c.query('SELECT sqlstate, message, hint, statement FROM pglog.errors');
  assert.deepEqual(e.rows, [{ sqlstate: '42P01', message: 'relation "x" does not exist', hint: 'create it', statement: 'SELECT * FROM x' }]);

  await c.query(
    `INSERT INTO pglog.lock_wait_events (ts, target, instance, database, pid, state, lock_type, lock_mode, lock_object, wait_ms, file, file_offset)
    VALUES ($1, 't1', 'main', 'db', 7, 'waiting', 'transaction', 'ShareLock', 'transaction 1234', 1000.25, 'postgresql.log', 300),
           ($1, 't1', 'main', 'db', 7, 'acquired', 'transaction', 'ShareLock', 'transaction 1234', 2500, 'postgresql.log', 400)`,
    [ts],
  );
  const l = await c.query('SELECT pid, lock_type, wait_ms, acquired FROM pglog.lock_waits ORDER BY wait_ms');
  assert.deepEqual(l.rows, [
    { pid: 7, lock_type: 'transaction', wait_ms: 1000.25, acquired: false },
    { pid: 7, lock_type: 'transaction', wait_ms: 2500, acquired: true },
  ]);

  await c.query(`INSERT INTO pglog.read_position_state (target, instance, file, file_identity, byte_offset, epoch)
    VALUES ('t1', 'main', 'postgresql.log', 'inode:123', 4096, 1)`);
  const p = await c.query('SELECT target, instance, file, "offset" FROM pglog.read_positions');
  assert.deepEqual(p.rows, [{ target: 't1', instance: 'main', file: 'postgresql.log', offset: '4096' }]);
});

/** The partition names a call of pglog.ensure_partitions or pglog.drop_partitions_before returns (it made or dropped them). */
async function partitionsOfCall(c: pg.Client, call: string): Promise<string[]> {
  return (await c.query<{ p: string }>(`SELECT p FROM ${call} AS p`)).rows.map((r) => r.p);
}

test('ensure_partitions creates daily partitions, is idempotent; rows without a partition land in DEFAULT', async () => {
  const c = await connect(await freshDb());
  await migrate(c);
  const created = await partitionsOfCall(c, `pglog.ensure_partitions(DATE '2026-05-30', 3)`);
  assert.deepEqual(
    created.filter((p) => p.startsWith('statement_events')),
    ['statement_events_p20260530', 'statement_events_p20260531', 'statement_events_p20260601'],
  );
  assert.equal(created.length, 27, 'three days for each of the four event tables and the five snapshot tables (migration 3)');
  assert.deepEqual(await partitionsOfCall(c, `pglog.ensure_partitions(DATE '2026-05-30', 3)`), [], 'nothing created the second time');
  assert.deepEqual(await partitions(c, 'pglog.statement_events'), [
    'statement_events_default',
    'statement_events_p20260530',
    'statement_events_p20260531',
    'statement_events_p20260601',
  ]);

  // current_date works too (the brief's start-up call), and partitions are UTC days.
  await c.query(`SELECT pglog.ensure_partitions(current_date, 3)`);
  assert.deepEqual(await partitionsOfCall(c, 'pglog.ensure_partitions(current_date, 3)'), []);

  await c.query(STATEMENT_INSERT, ['2026-05-31T23:59:59.999Z', 1]); // last instant of a partitioned day
  await c.query(STATEMENT_INSERT, ['2026-06-02T00:00:00Z', 2]); // the first day without one
  await c.query(STATEMENT_INSERT, ['2001-01-01T12:00:00Z', 3]);
  const where = await c.query<{ part: string; file_offset: string }>(
    `SELECT tableoid::regclass::text AS part, file_offset FROM pglog.statement_events ORDER BY file_offset`,
  );
  assert.deepEqual(where.rows, [
    { part: 'pglog.statement_events_p20260531', file_offset: '1' },
    { part: 'pglog.statement_events_default', file_offset: '2' },
    { part: 'pglog.statement_events_default', file_offset: '3' },
  ]);

  // Creating the partition for a day whose rows sit in DEFAULT moves them into it.
  await c.query(`SELECT pglog.ensure_partitions(DATE '2026-06-02', 1)`);
  const moved = await c.query<{ part: string }>(`SELECT tableoid::regclass::text AS part FROM pglog.statement_events WHERE file_offset = 2`);
  assert.deepEqual(moved.rows, [{ part: 'pglog.statement_events_p20260602' }]);
  // ... and the attached partition has the parent's indexes.
  const idx = await c.query(`SELECT 1 FROM pg_indexes WHERE schemaname = 'pglog' AND tablename = 'statement_events_p20260602'`);
  assert.ok(idx.rows.length >= 2);
});

test('drop_partitions_before drops only partitions that end by that day, and old DEFAULT rows', async () => {
  const c = await connect(await freshDb());
  await migrate(c);
  await c.query(`SELECT pglog.ensure_partitions(DATE '2026-01-01', 5)`);
  await c.query(STATEMENT_INSERT, ['2026-01-02T10:00:00Z', 1]);
  await c.query(STATEMENT_INSERT, ['2026-01-03T10:00:00Z', 2]);
  await c.query(STATEMENT_INSERT, ['2025-12-01T10:00:00Z', 3]); // DEFAULT, older than the cut
  await c.query(STATEMENT_INSERT, ['2026-02-01T10:00:00Z', 4]); // DEFAULT, newer
  const dropped = await partitionsOfCall(c, `pglog.drop_partitions_before(DATE '2026-01-03')`);
  assert.deepEqual(
    dropped.filter((p) => p.startsWith('statement_events')),
    ['statement_events_p20260101', 'statement_events_p20260102'],
  );
  assert.equal(dropped.length, 18, 'two days of each of the nine partitioned tables');
  assert.deepEqual(await partitions(c, 'pglog.error_events'), [
    'error_events_default',
    'error_events_p20260103',
    'error_events_p20260104',
    'error_events_p20260105',
  ]);
  const left = await c.query<{ file_offset: string }>(`SELECT file_offset FROM pglog.statement_events ORDER BY file_offset`);
  assert.deepEqual(
    left.rows.map((r) => r.file_offset),
    ['2', '4'],
  );
  assert.deepEqual(await partitionsOfCall(c, `pglog.drop_partitions_before(DATE '2026-01-03')`), []);
});

test('running migrate twice applies nothing the second time', async () => {
  const c = await connect(await freshDb());
  const first = await migrate(c);
  assert.ok(first.applied.length > 0);
  const second = await migrate(c);
  assert.deepEqual(second, { applied: [], current: first.current });
  assert.deepEqual(
    await versions(c),
    first.applied.map((_, i) => i + 1),
  );
});

test('two concurrent migrate() calls both succeed and apply each migration once (advisory lock)', async () => {
  const db = await freshDb();
  const [a, b] = [await connect(db), await connect(db)];
  // Hold the lock from a third session so both calls are certainly queued behind it together.
  const holder = await connect(db);
  await holder.query('BEGIN');
  await holder.query('SELECT pg_advisory_xact_lock($1::int8)', [MIGRATION_LOCK_KEY.toString()]);
  const both = Promise.all([migrate(a), migrate(b)]);
  await new Promise((r) => setTimeout(r, 200));
  await holder.query('COMMIT');
  const [ra, rb] = await both;
  const files = await realFiles();
  assert.deepEqual([...ra.applied, ...rb.applied].sort(), [...files].sort(), 'each file applied by exactly one of the two');
  assert.ok(ra.applied.length === 0 || rb.applied.length === 0, 'one call applied everything, the other nothing');
  assert.equal(ra.current, files.length);
  assert.equal(rb.current, files.length);
  assert.deepEqual(
    await versions(a),
    files.map((_, i) => i + 1),
  );
});

test('an applied migration edited afterwards is refused, naming the file; nothing changes', async () => {
  const c = await connect(await freshDb());
  const done = await migrate(c);
  const dir = migrationsCopy();
  const first = (await realFiles())[0]!;
  writeFileSync(join(dir, first), readFileSync(join(dir, first), 'utf8') + '\n-- an innocent-looking edit\n');
  await assert.rejects(migrate(c, { migrationsDir: dir }), refused(new RegExp(`migration file ${first} was changed after it was applied.*never be edited`)));
  // The session is usable and out of the transaction, and the record is as it was.
  assert.deepEqual(
    await versions(c),
    done.applied.map((_, i) => i + 1),
  );
});

test('a store newer than the files is refused', async () => {
  const c = await connect(await freshDb());
  const files = await realFiles();
  const next = String(files.length + 1).padStart(4, '0');
  await migrate(c, { migrationsDir: migrationsCopy({ [`${next}_later.sql`]: 'CREATE TABLE pglog.later (x int);' }) });
  await assert.rejects(migrate(c), refused(new RegExp(`schema version ${files.length + 1} .*newer than this pglog's migrations \\(newest ${files.length}\\)`)));
});

test('a failing migration rolls everything back and names the file, the line and the server message', async () => {
  const c = await connect(await freshDb());
  const files = await realFiles();
  const next = String(files.length + 1).padStart(4, '0');
  const dir = migrationsCopy({
    [`${next}_broken.sql`]: 'CREATE TABLE pglog.half_done (x int);\n\nCREATE TABLE pglog.oops (x no_such_type);\n',
  });
  await assert.rejects(
    migrate(c, { migrationsDir: dir }),
    refused(new RegExp(`migration file ${next}_broken\\.sql failed, nothing was applied: line 3: type "no_such_type" does not exist \\(SQLSTATE 42704\\)`)),
  );
  // Not even the earlier, valid migrations nor the bookkeeping table survive.
  const left = await c.query(`SELECT nspname FROM pg_namespace WHERE nspname = 'pglog'`);
  assert.equal(left.rows.length, 0, 'no partial schema');
  // With the broken file gone, the same database migrates normally.
  rmSync(join(dir, `${next}_broken.sql`));
  assert.deepEqual((await migrate(c, { migrationsDir: dir })).applied, files);
});
