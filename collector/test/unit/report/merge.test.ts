// Several stores' reports made into one (merge.ts). Properties over random groups: a fleet
// split by target over N stores reports as one store holding all of it would (order, --limit
// and group counts kept); with a target in two stores both rows stay, each labelled with its
// store, and nothing else is labelled; the snapshot reports keep every server instance.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { buildBlockingForest } from '../../../src/report/blocking-tree.ts';
import { mergeActivityReports, mergeLocksReports, mergeReports, type StorePart } from '../../../src/report/merge.ts';
import { comparator, type SortKey } from '../../../src/report/order.ts';
import { ERROR_ORDER, LOCK_WAIT_ORDER, STATEMENT_ORDER } from '../../../src/report/query.ts';
import type { ActivityReport, BlockingEpisode, LocksReport, ServerActivity, ServerLocks, SnapshotFilter } from '../../../src/report/snapshot-types.ts';
import type { ErrorStats, LockWaitStats, Report, ReportFilter, ReportSection, StatementStats } from '../../../src/report/types.ts';

const TARGETS = ['db1', 'db-2', 'db_3', 'é4', '\u{1F600}5', 'DB6'];
const name = fc.constantFrom('app', 'shop', '', 'Ωmega', '\u{1F600}');
const nullable = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<T | null> => fc.option(a, { nil: null, freq: 4 });
/** Small domains, so that ties on the leading keys are common and the later keys decide. */
const small = fc.integer({ min: 0, max: 3 });

const statement = (target: string): fc.Arbitrary<StatementStats> =>
  fc.record({
    target: fc.constant(target),
    database: nullable(name),
    fingerprint: nullable(fc.constantFrom('aaaa', 'bbbb', 'cccc')),
    query: fc.constant('SELECT 1'),
    calls: small,
    total_ms: small,
    mean_ms: fc.constant(1),
    stddev_ms: fc.constant(0),
    min_ms: fc.constant(1),
    max_ms: fc.constant(1),
    p95_ms: fc.constant(1),
  });

const error = (target: string): fc.Arbitrary<ErrorStats> =>
  fc.record({
    target: fc.constant(target),
    database: nullable(name),
    severity: fc.constantFrom('ERROR', 'FATAL'),
    sqlstate: nullable(fc.constantFrom('23505', '42P01')),
    message: fc.constantFrom('a', 'b', 'duplicate key'),
    count: small,
    first_seen: fc.constant(new Date(0)),
    last_seen: small.map((s) => new Date(1000 * s)),
  });

const lockWait = (target: string): fc.Arbitrary<LockWaitStats> =>
  fc.record({
    target: fc.constant(target),
    database: nullable(name),
    lock_type: nullable(fc.constantFrom('relation', 'transaction')),
    count: small,
    acquired: small,
    total_wait_ms: small,
    max_wait_ms: nullable(small),
  });

/** Rows with distinct group keys (a GROUP BY yields each key once). */
function distinct<T>(rows: T[], keyOf: (r: T) => string): T[] {
  const seen = new Set<string>();
  return rows.filter((r) => !seen.has(keyOf(r)) && seen.add(keyOf(r)) !== undefined);
}

const sKey = (r: StatementStats): string => JSON.stringify([r.target, r.database, r.fingerprint]);
const eKey = (r: ErrorStats): string => JSON.stringify([r.target, r.database, r.severity, r.sqlstate, r.message]);
const lKey = (r: LockWaitStats): string => JSON.stringify([r.target, r.database, r.lock_type]);

interface Groups {
  statements: StatementStats[];
  errors: ErrorStats[];
  lockWaits: LockWaitStats[];
}

/** The groups one store holds for its targets. */
function storeGroups(targets: readonly string[]): fc.Arbitrary<Groups> {
  const per = <T>(gen: (t: string) => fc.Arbitrary<T>, keyOf: (r: T) => string): fc.Arbitrary<T[]> =>
    targets.length === 0 ? fc.constant([]) : fc.array(fc.constantFrom(...targets).chain(gen), { maxLength: 12 }).map((rows) => distinct(rows, keyOf));
  return fc.record({ statements: per(statement, sKey), errors: per(error, eKey), lockWaits: per(lockWait, lKey) });
}

/** What the SQL does with a store's groups: its order, the first `limit`, how many in all. */
function section<T>(rows: readonly T[], order: readonly SortKey<T>[], limit: number): ReportSection<T> {
  return { rows: [...rows].sort(comparator(order)).slice(0, limit), groups: rows.length };
}

const FILTER = (limit: number): ReportFilter => ({ since: new Date(0), until: new Date(3_600_000), target: null, database: null, limit });

function reportOf(g: Groups, limit: number): Report {
  return {
    filter: FILTER(limit),
    statements: section(g.statements, STATEMENT_ORDER, limit),
    errors: section(g.errors, ERROR_ORDER, limit),
    lockWaits: section(g.lockWaits, LOCK_WAIT_ORDER, limit),
  };
}

/** Targets dealt to `n` stores, each target to one. */
const split = fc
  .integer({ min: 1, max: 4 })
  .chain((n) => fc.tuple(fc.constant(n), fc.array(fc.integer({ min: 0, max: n - 1 }), { minLength: TARGETS.length, maxLength: TARGETS.length })));

test('property: a fleet split by target over N stores merges into the report of one store holding it all', () => {
  fc.assert(
    fc.property(
      split.chain(([n, owner]) =>
        fc.tuple(fc.tuple(...Array.from({ length: n }, (_, i) => storeGroups(TARGETS.filter((_, t) => owner[t] === i)))), fc.integer({ min: 1, max: 8 })),
      ),
      ([stores, limit]) => {
        const parts: Array<StorePart<Report>> = stores.map((g, i) => ({ store: `s${i}`, report: reportOf(g, limit) }));
        const union: Groups = {
          statements: stores.flatMap((g) => g.statements),
          errors: stores.flatMap((g) => g.errors),
          lockWaits: stores.flatMap((g) => g.lockWaits),
        };
        const names = parts.map((p) => p.store);
        const merged = mergeReports(FILTER(limit), parts, { names, failed: [] });
        assert.deepEqual(merged, { ...reportOf(union, limit), stores: { names, failed: [] } });
      },
    ),
    { numRuns: 400 },
  );
});

test('property: a target in several stores keeps a row per store, labelled with it; nothing else is labelled', () => {
  fc.assert(
    fc.property(
      fc
        .integer({ min: 2, max: 3 })
        .chain((n) => fc.tuple(fc.tuple(...Array.from({ length: n }, () => storeGroups(TARGETS.slice(0, 3)))), fc.integer({ min: 1, max: 8 }))),
      ([stores, limit]) => {
        const parts: Array<StorePart<Report>> = stores.map((g, i) => ({ store: `s${i}`, report: reportOf(g, limit) }));
        const merged = mergeReports(FILTER(limit), parts, { names: parts.map((p) => p.store), failed: [] });
        const check = <T extends { store?: string }>(pick: (r: Report) => ReportSection<T>, order: readonly SortKey<T>[], keyOf: (r: T) => string): void => {
          const got = pick(merged);
          // Each store's returned rows, with where they came from; a key returned by two stores is labelled.
          const returned = parts.flatMap((p, i) => pick(p.report).rows.map((row) => ({ row, store: p.store, i })));
          const storesOf = (key: string): Set<number> => new Set(returned.filter((x) => keyOf(x.row) === key).map((x) => x.i));
          const expected = returned
            .sort((a, b) => comparator(order)(a.row, b.row) || a.i - b.i)
            .slice(0, limit)
            .map((x) => (storesOf(keyOf(x.row)).size > 1 ? { ...x.row, store: x.store } : x.row));
          assert.deepEqual(got.rows, expected);
          assert.equal(
            got.groups,
            parts.reduce((n, p) => n + pick(p.report).groups, 0),
          );
          // A key shown twice is shown for two different stores, both named.
          const shown = new Map<string, string[]>();
          for (const r of got.rows) shown.set(keyOf(r), [...(shown.get(keyOf(r)) ?? []), r.store ?? '']);
          for (const labels of shown.values()) if (labels.length > 1) assert.ok(labels.every((s) => s !== '') && new Set(labels).size === labels.length);
        };
        check((r) => r.statements, STATEMENT_ORDER, sKey);
        check((r) => r.errors, ERROR_ORDER, eKey);
        check((r) => r.lockWaits, LOCK_WAIT_ORDER, lKey);
      },
    ),
    { numRuns: 300 },
  );
});

test('one store merged is that store (no labels)', () => {
  const g: Groups = {
    statements: [
      { target: 'db1', database: 'app', fingerprint: 'f', query: 'q', calls: 2, total_ms: 3, mean_ms: 1.5, stddev_ms: 0.5, min_ms: 1, max_ms: 2, p95_ms: 1.95 },
    ],
    errors: [],
    lockWaits: [],
  };
  const merged = mergeReports(FILTER(20), [{ store: 'a', report: reportOf(g, 20) }], { names: ['a'], failed: [] });
  assert.deepEqual(merged.statements, reportOf(g, 20).statements);
});

// ---------------------------------------------------------------- snapshot reports

const SNAP_FILTER: SnapshotFilter = { since: new Date(0), until: new Date(3_600_000), target: null, database: null, limit: 2, minDurationMs: 0 };

function runs(target: string, instance = 'main'): ServerActivity & ServerLocks {
  return {
    target,
    instance,
    snapshotAt: new Date(1000),
    sessions: 1,
    blocked: 0,
    lastRunAt: new Date(1000),
    lastRunMs: 1,
    lastErrorCode: null,
    lastError: null,
    runs: 1,
    failedRuns: 0,
    byState: { active: 1 },
    lockWaiting: 0,
    forest: buildBlockingForest([], []),
  };
}

function episode(target: string, lastSeenS: number, rootPid: number): BlockingEpisode {
  return {
    target,
    instance: 'main',
    rootPid,
    xactStart: null,
    firstSeen: new Date(0),
    lastSeen: new Date(lastSeenS * 1000),
    snapshots: 1,
    peakWaiters: 1,
    maxWaitMs: 1,
    database: null,
    user: null,
    application: null,
    fingerprint: null,
    query: null,
  };
}

test('report locks of two stores: servers by target, episodes newest first cut to --limit, totals summed; a server in both labelled', () => {
  const a: LocksReport = {
    filter: SNAP_FILTER,
    servers: [runs('db1'), runs('db3')],
    episodes: [episode('db1', 5, 10), episode('db3', 1, 11)],
    episodesTotal: 4,
  };
  const b: LocksReport = {
    filter: SNAP_FILTER,
    servers: [runs('db2'), runs('db3')],
    episodes: [episode('db2', 7, 20), episode('db3', 3, 21)],
    episodesTotal: 2,
  };
  const m = mergeLocksReports(
    SNAP_FILTER,
    [
      { store: 'A', report: a },
      { store: 'B', report: b },
    ],
    { names: ['A', 'B'], failed: [] },
  );
  assert.deepEqual(
    m.servers.map((s) => [s.target, s.store ?? null]),
    [
      ['db1', null],
      ['db2', null],
      ['db3', 'A'],
      ['db3', 'B'],
    ],
  );
  assert.deepEqual(
    m.episodes.map((e) => [e.rootPid, e.store ?? null]),
    [
      [20, null],
      [10, null],
    ],
  );
  assert.equal(m.episodesTotal, 6);
  assert.deepEqual(m.stores, { names: ['A', 'B'], failed: [] });
});

test('report activity of two stores: long-running sessions merged longest first, their server labelled when in both', () => {
  const long = (target: string, durationMs: number, pid: number): ActivityReport['longRunning'][number] => ({
    target,
    instance: 'main',
    snapshotAt: new Date(1000),
    pid,
    database: null,
    user: null,
    application: null,
    state: 'active',
    waitEventType: null,
    waitEvent: null,
    xactMs: durationMs,
    queryMs: durationMs,
    durationMs,
    fingerprint: null,
    query: null,
  });
  const a: ActivityReport = {
    filter: SNAP_FILTER,
    servers: [runs('db1'), runs('db3')],
    longRunning: [long('db3', 900, 1), long('db1', 100, 2)],
    longRunningTotal: 2,
  };
  const b: ActivityReport = { filter: SNAP_FILTER, servers: [runs('db3')], longRunning: [long('db3', 500, 3)], longRunningTotal: 1 };
  const m = mergeActivityReports(
    SNAP_FILTER,
    [
      { store: 'A', report: a },
      { store: 'B', report: b },
    ],
    { names: ['A', 'B'], failed: [{ store: 'C', error: 'down' }] },
  );
  assert.deepEqual(
    m.longRunning.map((l) => [l.pid, l.store ?? null]),
    [
      [1, 'A'],
      [3, 'B'],
    ],
  );
  assert.equal(m.longRunningTotal, 3);
  assert.deepEqual(
    m.servers.map((s) => s.store ?? null),
    [null, 'A', 'B'],
  );
});
