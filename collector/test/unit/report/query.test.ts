// The report's SQL: only the stable views, every value a bind parameter, filters in order;
// and decoding of the rows pg returns (int8 as text, timestamptz as Date).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  errorFromRow,
  errorsQuery,
  groupsOf,
  lockWaitFromRow,
  lockWaitsQuery,
  type SqlQuery,
  statementFromRow,
  statementsQuery,
} from '../../../src/report/query.ts';
import type { ReportFilter } from '../../../src/report/types.ts';

const since = new Date('2024-05-01T10:00:00Z');
const until = new Date('2024-05-01T11:00:00Z');
const base: ReportFilter = { since, until, target: null, database: null, limit: 20 };
const builders = [statementsQuery, errorsQuery, lockWaitsQuery];

/** Relations named after FROM or JOIN. */
function relations(q: SqlQuery): string[] {
  return [...q.text.matchAll(/\b(?:FROM|JOIN)\s+([\w.]+)/gi)].map((m) => m[1] ?? '');
}

test('each section reads one stable view and nothing else', () => {
  assert.deepEqual(relations(statementsQuery(base)), ['pglog.statements']);
  assert.deepEqual(relations(errorsQuery(base)), ['pglog.errors']);
  assert.deepEqual(relations(lockWaitsQuery(base)), ['pglog.lock_waits']);
});

test('window and limit are parameters; no filter adds no condition', () => {
  for (const build of builders) {
    const q = build(base);
    assert.deepEqual(q.values, [since, until, 20]);
    assert.match(q.text, /WHERE ts >= \$1 AND ts < \$2\b/);
    assert.match(q.text, /LIMIT \$3\s*$/);
    assert.doesNotMatch(q.text, /target = \$|database = \$/);
  }
});

test('target and database filters become numbered parameters, never inlined text', () => {
  const evil = "x' OR '1'='1";
  for (const build of builders) {
    const both = build({ ...base, target: 'db1', database: evil, limit: 5 });
    assert.deepEqual(both.values, [since, until, 'db1', evil, 5]);
    assert.match(both.text, /target = \$3 AND database = \$4/);
    assert.match(both.text, /LIMIT \$5\s*$/);
    assert.ok(!both.text.includes(evil));
    const dbOnly = build({ ...base, database: 'app' });
    assert.deepEqual(dbOnly.values, [since, until, 'app', 20]);
    assert.match(dbOnly.text, /database = \$3/);
  }
});

test('statements: aggregates per target, database and fingerprint, by total time, timed statements only', () => {
  const q = statementsQuery(base).text;
  for (const part of [
    'count(*) AS calls',
    'sum(duration_ms) AS total_ms',
    'avg(duration_ms) AS mean_ms',
    'stddev_pop(duration_ms) AS stddev_ms',
    'min(duration_ms) AS min_ms',
    'max(duration_ms) AS max_ms',
    'percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95_ms',
    'count(*) OVER () AS groups',
    'duration_ms IS NOT NULL',
    'GROUP BY target, database, fingerprint',
    'ORDER BY total_ms DESC',
  ]) {
    assert.ok(q.includes(part), part);
  }
});

test('errors group by SQLSTATE and message; lock waits total only acquired waits', () => {
  assert.match(errorsQuery(base).text, /GROUP BY target, database, severity, sqlstate, left\(message, \d+\)/);
  assert.match(errorsQuery(base).text, /ORDER BY count DESC/);
  const locks = lockWaitsQuery(base).text;
  assert.match(locks, /coalesce\(sum\(wait_ms\) FILTER \(WHERE acquired\), 0\) AS total_wait_ms/);
  assert.match(locks, /GROUP BY target, database, lock_type/);
});

test('rows decode: int8 text to numbers, nulls kept, dates as Dates', () => {
  // What pg gives: int8 as text (calls, groups), float8 as numbers, timestamptz as a Date or text.
  const statement = {
    target: 'db1',
    database: null,
    fingerprint: 'abc',
    query: 'select 1',
    calls: '3',
    total_ms: 60,
    mean_ms: 20,
    stddev_ms: 0,
    min_ms: 10,
    max_ms: 30,
    p95_ms: 29,
  };
  assert.deepEqual(statementFromRow({ ...statement, groups: '7' }), { ...statement, calls: 3 });
  assert.equal(groupsOf([{ groups: '7' }]), 7);
  assert.equal(groupsOf([]), 0);
  const first = new Date('2024-05-01T10:01:00Z');
  const error = {
    target: 't',
    database: 'app',
    severity: 'ERROR',
    sqlstate: null,
    message: 'boom',
    count: '2',
    first_seen: first,
    last_seen: '2024-05-01T10:02:00Z',
  };
  assert.deepEqual(errorFromRow(error), { ...error, count: 2, last_seen: new Date('2024-05-01T10:02:00Z') });
  const l = lockWaitFromRow({ target: 't', database: 'app', lock_type: 'relation', count: '3', acquired: '1', total_wait_ms: 5200, max_wait_ms: null });
  assert.deepEqual(l, { target: 't', database: 'app', lock_type: 'relation', count: 3, acquired: 1, total_wait_ms: 5200, max_wait_ms: null });
});
