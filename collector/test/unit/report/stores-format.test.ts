// The report of several stores as text and JSON: the stores named under the header (and those
// --partial left out), a `store` column only when a row carries one, `stores` fields in JSON
// only with several stores; one store prints as it always did.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { formatActivityText } from '../../../src/report/activity-format.ts';
import { formatReportJson, formatReportText } from '../../../src/report/format.ts';
import { locksToJson } from '../../../src/report/locks-format.ts';
import type { ActivityReport, LocksReport, SnapshotFilter } from '../../../src/report/snapshot-types.ts';
import type { Report, StatementStats } from '../../../src/report/types.ts';

const FILTER = { since: new Date('2024-05-01T10:00:00Z'), until: new Date('2024-05-01T11:00:00Z'), target: null, database: null, limit: 20 };

function stat(target: string, store?: string): StatementStats {
  return {
    target,
    database: 'app',
    fingerprint: 'aaaa',
    query: 'SELECT 1',
    calls: 1,
    total_ms: 1,
    mean_ms: 1,
    stddev_ms: 0,
    min_ms: 1,
    max_ms: 1,
    p95_ms: 1,
    ...(store === undefined ? {} : { store }),
  };
}

function report(rows: StatementStats[], stores?: Report['stores']): Report {
  return {
    filter: FILTER,
    statements: { rows, groups: rows.length },
    errors: { rows: [], groups: 0 },
    lockWaits: { rows: [], groups: 0 },
    ...(stores === undefined ? {} : { stores }),
  };
}

test('one store: no stores line, no store column, no stores fields', () => {
  const r = report([stat('db1')]);
  const text = formatReportText(r, 160);
  assert.doesNotMatch(text, /^stores /m);
  assert.doesNotMatch(text, /^store /m);
  const json = JSON.parse(formatReportJson(r)) as Record<string, unknown>;
  assert.deepEqual(Object.keys(json), ['window', 'filters', 'statements', 'errors', 'lock_waits', 'groups']);
  assert.equal('store' in (json.statements as object[])[0]!, false);
});

test('several stores: named under the header; a store column only for a group found in two; --partial failures said', () => {
  const stores = {
    names: ['pglog@a:5432/pglog', 'pglog@b:5432/pglog', 'pglog@c:5432/pglog'],
    failed: [{ store: 'pglog@c:5432/pglog', error: 'cannot\nconnect' }],
  };
  const plain = formatReportText(report([stat('db1'), stat('db2')], stores), 160).split('\n');
  assert.equal(plain[1], 'stores  pglog@a:5432/pglog  pglog@b:5432/pglog  pglog@c:5432/pglog');
  assert.equal(plain[2], '!  store pglog@c:5432/pglog not read (--partial): cannot connect');
  assert.ok(
    plain.some((l) => /^target +database +calls/.test(l)),
    'no store column when no row has one',
  );
  const moved = formatReportText(report([stat('db1', 'pglog@a:5432/pglog'), stat('db2'), stat('db1', 'pglog@b:5432/pglog')], stores), 160).split('\n');
  assert.ok(moved.some((l) => /^store +target +database +calls/.test(l)));
  assert.ok(moved.some((l) => /^pglog@a:5432\/pglog +db1 /.test(l)));
  assert.ok(moved.some((l) => /^- +db2 /.test(l)));
  assert.ok(moved.some((l) => /^pglog@b:5432\/pglog +db1 /.test(l)));
  const json = JSON.parse(formatReportJson(report([stat('db1', 'pglog@a:5432/pglog'), stat('db2')], stores))) as {
    statements: Array<Record<string, unknown>>;
    stores: string[];
    failed_stores: unknown[];
  };
  assert.deepEqual(json.stores, stores.names);
  assert.deepEqual(json.failed_stores, stores.failed);
  assert.equal(json.statements[0]!.store, 'pglog@a:5432/pglog');
  assert.equal('store' in json.statements[1]!, false);
});

test('snapshot reports: servers of two stores named; stores in JSON', () => {
  const filter: SnapshotFilter = { ...FILTER, minDurationMs: 30_000 };
  const server = {
    target: 'db1',
    instance: 'main',
    snapshotAt: null,
    sessions: null,
    blocked: null,
    lastRunAt: new Date('2024-05-01T10:59:00Z'),
    lastRunMs: 10,
    lastErrorCode: 'SQL_TIMEOUT',
    lastError: 'slow',
    runs: 1,
    failedRuns: 1,
    byState: {},
    lockWaiting: 0,
    store: 'pglog@b:5432/pglog',
  };
  const stores = { names: ['pglog@a:5432/pglog', 'pglog@b:5432/pglog'], failed: [] };
  const activity: ActivityReport = { filter, servers: [server], longRunning: [], longRunningTotal: 0, stores };
  const text = formatActivityText(activity, 160);
  assert.match(text, /^store +target +instance/m);
  assert.match(text, /^! {2}db1\/main \(store pglog@b:5432\/pglog\): newest snapshot run failed/m);
  const locks: LocksReport = { filter, servers: [], episodes: [], episodesTotal: 0, stores };
  const json = locksToJson(locks) as Record<string, unknown>;
  assert.deepEqual([json.stores, json.failedStores], [stores.names, []]);
});
