// `report activity` text and JSON: state columns (aborted transactions count as idle in
// transaction, the rest as other), failures in full below the table, long-running rows.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { activityToJson, formatActivityText } from '../../../src/report/activity-format.ts';
import type { ActivityReport, ServerActivity } from '../../../src/report/snapshot-types.ts';
import { SERVER_RUN_KEYS, serverRuns } from '../../helpers/report-fixtures.ts';

function server(over: Partial<ServerActivity>): ServerActivity {
  return {
    ...serverRuns({ sessions: 9, blocked: 1, lastRunMs: 20, runs: 10 }),
    byState: { active: 2, idle: 3, 'idle in transaction': 1, 'idle in transaction (aborted)': 1, '': 2 },
    lockWaiting: 1,
    ...over,
  };
}

const REPORT: ActivityReport = {
  filter: { since: new Date('2026-11-23T17:40:12Z'), until: new Date('2026-11-23T18:40:12Z'), target: 'db1', database: null, limit: 20, minDurationMs: 30_000 },
  servers: [
    server({}),
    server({
      instance: 'replica',
      snapshotAt: null,
      byState: {},
      lockWaiting: 0,
      lastErrorCode: 'SQL_AUTH_FAILED',
      lastError: 'role "pglog" does not exist',
      failedRuns: 10,
    }),
  ],
  longRunning: [
    {
      target: 'db1',
      instance: 'main',
      snapshotAt: new Date('2026-11-23T18:40:12Z'),
      pid: 77,
      database: 'shop',
      user: 'app',
      application: 'psql',
      state: 'idle in transaction',
      waitEventType: 'Client',
      waitEvent: 'ClientRead',
      xactMs: 3_725_000,
      queryMs: 1200,
      durationMs: 3_725_000,
      fingerprint: 'abc',
      query: 'SELECT *\n  FROM orders',
    },
  ],
  longRunningTotal: 1,
};

test('text: servers by state, the failed one explained in full, long-running sessions', () => {
  const lines = formatActivityText(REPORT, 160).split('\n');
  assert.equal(lines[0], 'pglog report activity  2026-11-23 17:40:12 .. 2026-11-23 18:40:12 UTC  target db1  min duration 30.00 s');
  assert.match(lines.find((l) => l.startsWith('db1 ') && l.includes(' main ')) ?? '', /^db1 +main +2026-11-23 18:40:12 +9 +2 +2 +3 +2 +1 +10 +0 +ok$/);
  assert.match(lines.find((l) => l.includes('replica')) ?? '', /^db1 +replica +- +(- +){6}10 +10 +FAILED SQL_AUTH_FAILED$/);
  assert.ok(lines.includes('!  db1/replica: newest snapshot run failed at 2026-11-23 18:40:12Z after 20.0 ms: SQL_AUTH_FAILED: role "pglog" does not exist'));
  assert.match(
    lines.find((l) => l.includes(' 77 ')) ?? '',
    /^db1 +main +77 +shop +app +psql +idle in transaction +1h 02m +1\.20 s +Client:ClientRead +SELECT \* FROM orders$/,
  );
  const none = formatActivityText({ ...REPORT, servers: [], longRunning: [], longRunningTotal: 0 }, 160);
  assert.match(none, /No snapshot runs in this window/);
  assert.match(none, /Long-running sessions: transaction \(or statement\) of at least 30\.00 s: none/);
});

test('JSON: camelCase fields, sessions summed from the states, null for a server without a snapshot', () => {
  const json = JSON.parse(JSON.stringify(activityToJson(REPORT))) as {
    filters: object;
    servers: Record<string, unknown>[];
    longRunning: Record<string, unknown>[];
  };
  assert.deepEqual(json.filters, { target: 'db1', database: null, limit: 20, minDurationMs: 30_000 });
  assert.deepEqual(Object.keys(json.servers[0] ?? {}), [...SERVER_RUN_KEYS, 'sessions', 'byState', 'lockWaiting']);
  assert.deepEqual([json.servers[0]?.sessions, json.servers[1]?.sessions], [9, null]);
  assert.deepEqual(Object.keys(json.longRunning[0] ?? {}), [
    'target',
    'instance',
    'snapshotAt',
    'pid',
    'database',
    'user',
    'application',
    'state',
    'waitEventType',
    'waitEvent',
    'xactMs',
    'queryMs',
    'durationMs',
    'fingerprint',
    'query',
  ]);
  assert.equal(json.longRunning[0]?.snapshotAt, '2026-11-23T18:40:12.000Z');
});
