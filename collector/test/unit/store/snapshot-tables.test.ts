// Snapshots → rows of the snapshot tables: the definitions agree with the migration, every row
// has its table's columns in order and types, text is cleaned, and the run record counts right.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';

import { CopyBinaryEncoder } from '../../../src/store/copy-binary.ts';
import type { SnapshotRows, SnapshotTable } from '../../../src/store/snapshot-tables.ts';
import { isSnapshotFailure, SNAPSHOT_TABLE_DEFS, SNAPSHOT_TABLES, snapshotRows } from '../../../src/store/snapshot-tables.ts';
import { SnapshotEncoders } from '../../../src/store/snapshot-writer.ts';
import { cutMarker, MIN_MAX_TEXT_BYTES, noRepairs } from '../../../src/store/text-clean.ts';
import { activitySnapshot, failure, FAILURE_TS, runRow, session, SNAPSHOT_TS, statementDelta, statisticsSnapshot } from '../../helpers/snapshot-fixtures.ts';

const MAX = 1024 * 1024;

/** The row as an object keyed by its table's column names. */
function named(table: SnapshotTable, values: readonly unknown[]): Record<string, unknown> {
  const cols = SNAPSHOT_TABLE_DEFS[table].columns;
  assert.equal(values.length, cols.length, `${table}: one value per column`);
  return Object.fromEntries(cols.map((c, i) => [c, values[i]]));
}

/** Every row of every table has its table's column count and encodes with its table's types. */
function assertEncodable(rows: SnapshotRows): void {
  for (const t of SNAPSHOT_TABLES) {
    const encoder = new CopyBinaryEncoder(SNAPSHOT_TABLE_DEFS[t].types);
    rows[t].forEach((r, i) => {
      assert.equal(r.length, SNAPSHOT_TABLE_DEFS[t].columns.length, `${t} row ${i}`);
      assert.doesNotThrow(() => encoder.encodeRows([r]), `${t} row ${i} encodes`);
    });
  }
}

test('the table definitions are the columns and types of migration 0003, in the order of the migration', () => {
  const sql = readFileSync(new URL('../../../src/store/migrations/0003_snapshots.sql', import.meta.url), 'utf8');
  for (const t of SNAPSHOT_TABLES) {
    const m = new RegExp(`CREATE TABLE pglog\\.${t} \\(([\\s\\S]*?)\\n\\) PARTITION BY RANGE \\(ts\\);`).exec(sql);
    assert.ok(m?.[1] !== undefined, `${t} in the migration`);
    const columns = m[1]
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '')
      .map((l) => {
        const [name, type] = l.split(/\s+/);
        return [name, type?.replace(/,$/, '')];
      });
    const def = SNAPSHOT_TABLE_DEFS[t];
    assert.deepEqual(
      def.columns.map((c, i) => [c, def.types[i]]),
      columns,
      t,
    );
    assert.equal(def.name, t);
    assert.equal(def.copySql, `COPY pglog.${t} (${def.columns.join(', ')}) FROM STDIN WITH (FORMAT binary)`);
  }
});

test('an activity snapshot: one row per session and per edge, and the run with sessions and distinct blocked pids', () => {
  const s = activitySnapshot();
  const rows = snapshotRows(s, MAX);
  assertEncodable(rows);
  assert.equal(rows.activity_samples.length, 3);
  assert.equal(rows.blocking_samples.length, 3);
  assert.equal(rows.statement_deltas.length, 0);
  assert.equal(rows.database_deltas.length, 0);
  assert.deepEqual(named('activity_samples', rows.activity_samples[2] ?? []), {
    ts: SNAPSHOT_TS,
    target: 'db1',
    instance: 'main',
    pid: 102,
    leader_pid: null,
    database: 'app',
    username: 'alice',
    application: 'psql',
    client: '10.0.0.7',
    backend_type: 'client backend',
    state: 'active',
    wait_event_type: 'Lock',
    wait_event: 'transactionid',
    backend_start: new Date('2026-11-21T12:00:00.001Z'),
    xact_start: new Date('2026-11-21T13:29:30.002Z'),
    query_start: new Date('2026-11-21T13:29:31.003Z'),
    state_change: new Date('2026-11-21T13:29:31.004Z'),
    blocked_by: [100, 101],
    fingerprint: 'fp-update',
    query: 'UPDATE accounts SET balance = balance - 1 WHERE id = 102',
  });
  assert.deepEqual(named('blocking_samples', rows.blocking_samples[2] ?? []), {
    ts: SNAPSHOT_TS,
    target: 'db1',
    instance: 'main',
    database: 'app',
    pid: 102,
    blocking_pid: 101,
    lock_type: 'transactionid',
    wait_mode: 'ShareLock',
    held_mode: null,
    blocker_wait_mode: 'ShareLock',
    relation: null,
    wait_start: new Date('2026-11-21T13:29:31.500Z'),
    wait_ms: 1623.25,
  });
  // Three edges, but two waiting sessions.
  assert.deepEqual(
    rows.snapshot_runs.map((r) => named('snapshot_runs', r)),
    [runRow('activity', 12.5, { sessions: 3, blocked: 2 })],
  );
});

test('a statistics snapshot: delta rows with the interval, bigints as they are; the run counts no sessions', () => {
  const rows = snapshotRows(statisticsSnapshot(), MAX);
  assertEncodable(rows);
  assert.equal(rows.activity_samples.length + rows.blocking_samples.length, 0);
  assert.deepEqual(named('statement_deltas', rows.statement_deltas[0] ?? []), {
    ts: SNAPSHOT_TS,
    target: 'db1',
    instance: 'main',
    interval_s: 60.5,
    database: 'app',
    username: 'alice',
    queryid: -8_000_000_000_000_000_001n,
    toplevel: true,
    fingerprint: 'fp-select',
    query: 'SELECT * FROM accounts WHERE id = $1',
    calls: 12n,
    total_exec_ms: 3.75,
    rows: 12n,
    shared_blks_hit: 48n,
    shared_blks_read: 2n,
    temp_blks_written: 0n,
  });
  assert.deepEqual(named('statement_deltas', rows.statement_deltas[1] ?? []).database, null);
  assert.deepEqual(named('database_deltas', rows.database_deltas[1] ?? []), {
    ts: SNAPSHOT_TS,
    target: 'db1',
    instance: 'main',
    interval_s: 60.5,
    database: 'postgres',
    backends: 0,
    xact_commit: 9_007_199_254_740_993n,
    xact_rollback: 2n,
    blks_read: 303n,
    blks_hit: 40404n,
    tup_returned: 505n,
    tup_fetched: 606n,
    tup_inserted: 707n,
    tup_updated: 808n,
    tup_deleted: 909n,
    conflicts: 0n,
    temp_files: 1n,
    temp_bytes: 8192n,
    deadlocks: 1n,
  });
  assert.deepEqual(
    rows.snapshot_runs.map((r) => named('snapshot_runs', r)),
    [runRow('statistics', 30.25)],
  );
  // A first sample has no baseline: no deltas, no interval, and only the run is recorded.
  const first = snapshotRows(statisticsSnapshot({ statements: [], databases: [], intervalSeconds: null }), MAX);
  assert.deepEqual(
    SNAPSHOT_TABLES.map((t) => first[t].length),
    [0, 0, 0, 0, 1],
  );
});

test('a failure is one run row with its code and message, and nothing else', () => {
  const f = failure({ message: 'could not\0 connect \ud800' });
  assert.ok(isSnapshotFailure(f));
  assert.ok(!isSnapshotFailure(activitySnapshot()));
  const repairs = noRepairs();
  const rows = snapshotRows(f, MAX, repairs);
  assertEncodable(rows);
  assert.deepEqual(
    SNAPSHOT_TABLES.map((t) => rows[t].length),
    [0, 0, 0, 0, 1],
  );
  assert.deepEqual(
    named('snapshot_runs', rows.snapshot_runs[0] ?? []),
    runRow('activity', 5000, { ts: FAILURE_TS, error_code: 'SQL_TIMEOUT', error: 'could not connect \ufffd' }),
  );
  assert.deepEqual(repairs, { nulRemoved: 1, invalidReplaced: 1, cut: 0 });
});

test('text is cleaned as event text is: NULs out, surrogates replaced, long query text cut but never below 1000 characters', () => {
  const long = 'SELECT ' + 'ж'.repeat(10_000);
  const s = activitySnapshot({
    target: 'db\0 1',
    sessions: [session(7, { query: long, application: 'app\0name', fingerprint: 'fp\ud800' })],
    blocking: [],
  });
  const repairs = noRepairs();
  const rows = snapshotRows(s, MIN_MAX_TEXT_BYTES, repairs);
  assertEncodable(rows);
  const a = named('activity_samples', rows.activity_samples[0] ?? []);
  assert.equal(a.target, 'db 1');
  assert.equal(a.application, 'appname');
  assert.equal(a.fingerprint, 'fp\ufffd');
  const query = a.query as string;
  assert.ok(query.startsWith(long.slice(0, 1000)), 'the first 1000 characters are kept');
  assert.ok(query.endsWith(cutMarker(Buffer.byteLength(long))), query.slice(-60));
  assert.ok(Buffer.byteLength(query) <= MIN_MAX_TEXT_BYTES);
  assert.equal(named('snapshot_runs', rows.snapshot_runs[0] ?? []).target, 'db 1');
  assert.deepEqual(repairs, { nulRemoved: 2, invalidReplaced: 1, cut: 1 });
  // pg_stat_statements text is cut the same way.
  const st = snapshotRows(statisticsSnapshot({ statements: [statementDelta(1n, { query: long })] }), MIN_MAX_TEXT_BYTES);
  const q = named('statement_deltas', st.statement_deltas[0] ?? []).query as string;
  assert.ok(q.startsWith(long.slice(0, 1000)) && Buffer.byteLength(q) <= MIN_MAX_TEXT_BYTES);
});

test('deltas without the interval they cover are refused before any row exists', () => {
  assert.throws(
    () => snapshotRows(statisticsSnapshot({ intervalSeconds: null }), MAX),
    (e: unknown) => {
      assert.ok(isPglogError(e) && e.code === 'STORE_ENCODING', String(e));
      assert.match(e.message, /^db1\/main: a statistics snapshot with statement or database deltas must say the interval/);
      return true;
    },
  );
});

test('encode: samples first, the run last; large tables in several chunks that equal one encoding of all rows', () => {
  const encoders = new SnapshotEncoders();
  const small = encoders.encode(activitySnapshot(), MAX);
  assert.equal(small.what, 'the activity snapshot of db1/main');
  assert.deepEqual(
    small.tables.map((t) => [t.table, t.rows, t.data.length]),
    [
      ['activity_samples', 3, 3],
      ['blocking_samples', 3, 3],
      ['snapshot_runs', 1, 3],
    ],
  );
  assert.equal(encoders.encode(failure(), MAX).what, 'the failed activity snapshot of db1/main');

  // 2000 sessions of about 1 KB of query text each: about 2.3 MB, so several chunks.
  const sessions = Array.from({ length: 2000 }, (_, i) =>
    session(i + 1, { query: `SELECT ${i} -- ${'x'.repeat(1000)}`, blockedBy: i % 3 === 0 ? [i + 2, i + 3] : [] }),
  );
  const big = encoders.encode(activitySnapshot({ sessions, blocking: [] }), MAX);
  const activity = big.tables[0];
  assert.ok(activity !== undefined && activity.table === 'activity_samples');
  assert.ok(activity.data.length > 4, `${activity.data.length} pieces`);
  const reference = new CopyBinaryEncoder(SNAPSHOT_TABLE_DEFS.activity_samples.types);
  const all = Buffer.concat([
    reference.header(),
    reference.encodeRows(snapshotRows(activitySnapshot({ sessions, blocking: [] }), MAX).activity_samples),
    reference.trailer(),
  ]);
  assert.deepEqual(Buffer.concat(activity.data), all);
  assert.deepEqual(
    big.tables.map((t) => t.table),
    ['activity_samples', 'snapshot_runs'],
  );
});

test('encode: a value the encoder refuses rejects the whole snapshot, naming target, instance, table and value', () => {
  const encoders = new SnapshotEncoders();
  const bad = activitySnapshot({ blocking: [], sessions: [session(1), session(2, { blockedBy: [1, 2.5] })] });
  assert.throws(
    () => encoders.encode(bad, MAX),
    (e: unknown) => {
      assert.ok(isPglogError(e) && e.code === 'STORE_REJECTED', String(e));
      assert.equal(
        e.message,
        'the activity snapshot of db1/main cannot be stored (activity_samples), not written: ' +
          'row 1, column 17 (int4[]): expected an array of integers from -2147483648 to 2147483647 without nulls, got number 2.5 at index 1',
      );
      return true;
    },
  );
  // Deep in a large table the row number says where its chunk starts.
  const many = Array.from({ length: 600 }, (_, i) => session(i + 1, { query: 'y'.repeat(1000) }));
  many[599] = session(600, { xactStart: new Date(Number.NaN) });
  assert.throws(
    () => encoders.encode(activitySnapshot({ sessions: many, blocking: [] }), MAX),
    (e: unknown) => {
      assert.ok(isPglogError(e) && e.code === 'STORE_REJECTED', String(e));
      assert.match(e.message, /\(activity_samples\).*column 14 \(timestamptz\).*Invalid Date \(rows counted from row \d+\)$/);
      return true;
    },
  );
  assert.throws(
    () => encoders.encode(statisticsSnapshot({ intervalSeconds: null }), MAX),
    (e: unknown) =>
      isPglogError(e) &&
      e.code === 'STORE_REJECTED' &&
      /^the statistics snapshot of db1\/main cannot be stored, not written: db1\/main: a statistics snapshot/.test(e.message),
  );
  // The encoders are fine afterwards.
  assert.equal(encoders.encode(activitySnapshot(), MAX).tables.length, 3);
});
