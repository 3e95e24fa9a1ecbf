// statisticsDeltas (snapshot/deltas.ts): examples of each rule, then properties over random
// samples and sequences of samples (fast-check).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import { statementKey, statisticsDeltas } from '../../../src/snapshot/deltas.ts';
import { queryFingerprint } from '../../../src/snapshot/query-fingerprint.ts';
import type { DatabaseCounters, StatementCounters, StatisticsSample } from '../../../src/snapshot/statistics-sample.ts';
import { DATABASE_COUNTERS } from '../../../src/snapshot/statistics-sample.ts';
import type { DatabaseDelta, StatementDelta } from '../../../src/snapshot/types.ts';

const T0 = new Date('2026-11-23T12:00:00Z');
const at = (seconds: number): Date => new Date(T0.getTime() + seconds * 1000);

function stmt(over: Partial<StatementCounters> = {}): StatementCounters {
  return {
    userId: 10,
    dbId: 5,
    queryId: 1n,
    toplevel: true,
    username: 'app',
    database: 'shop',
    query: 'SELECT * FROM t WHERE id = $1',
    calls: 10n,
    totalExecMs: 5,
    rows: 10n,
    sharedBlksHit: 100n,
    sharedBlksRead: 3n,
    tempBlksWritten: 0n,
    ...over,
  };
}

function db(over: Partial<DatabaseCounters> = {}): DatabaseCounters {
  return {
    database: 'shop',
    backends: 4,
    xactCommit: 100n,
    xactRollback: 1n,
    blksRead: 10n,
    blksHit: 1000n,
    tupReturned: 500n,
    tupFetched: 400n,
    tupInserted: 10n,
    tupUpdated: 5n,
    tupDeleted: 1n,
    conflicts: 0n,
    tempFiles: 0n,
    tempBytes: 0n,
    deadlocks: 0n,
    statsReset: null,
    ...over,
  };
}

function sample(ts: Date, statements: StatementCounters[] | null, databases: DatabaseCounters[] | null, statementsReset: Date | null = null): StatisticsSample {
  return { ts, statements, databases, statementsReset };
}

const STATEMENT_COUNTERS = ['calls', 'rows', 'sharedBlksHit', 'sharedBlksRead', 'tempBlksWritten'] as const;

void describe('statisticsDeltas: rules', () => {
  test('first sample: nothing, no interval', () => {
    assert.deepEqual(statisticsDeltas(null, sample(T0, [stmt()], [db()])), { statements: [], databases: [], intervalSeconds: null });
  });

  test("what changed, with the interval and the parser's fingerprint", () => {
    const d = statisticsDeltas(
      sample(T0, [stmt(), stmt({ queryId: 2n, query: 'SELECT 1' })], [db(), db({ database: 'idle' })]),
      sample(
        at(15),
        [stmt({ calls: 13n, totalExecMs: 6.5, rows: 13n, sharedBlksHit: 130n }), stmt({ queryId: 2n, query: 'SELECT 1' })],
        [db({ xactCommit: 110n, backends: 7 }), db({ database: 'idle' })],
      ),
    );
    assert.equal(d.intervalSeconds, 15);
    assert.deepEqual(d.statements, [
      {
        database: 'shop',
        username: 'app',
        queryId: 1n,
        toplevel: true,
        query: 'SELECT * FROM t WHERE id = $1',
        fingerprint: queryFingerprint('select * from t where id = 42'),
        calls: 3n,
        totalExecMs: 1.5,
        rows: 3n,
        sharedBlksHit: 30n,
        sharedBlksRead: 0n,
        tempBlksWritten: 0n,
      },
    ] satisfies StatementDelta[]);
    assert.deepEqual(
      d.databases,
      [
        {
          database: 'shop',
          backends: 7,
          xactCommit: 10n,
          xactRollback: 0n,
          blksRead: 0n,
          blksHit: 0n,
          tupReturned: 0n,
          tupFetched: 0n,
          tupInserted: 0n,
          tupUpdated: 0n,
          tupDeleted: 0n,
          conflicts: 0n,
          tempFiles: 0n,
          tempBytes: 0n,
          deadlocks: 0n,
        },
      ] satisfies DatabaseDelta[],
      'the unchanged database is left out',
    );
  });

  test('an entry new since the previous sample counts from zero', () => {
    const d = statisticsDeltas(sample(T0, [], []), sample(at(10), [stmt({ calls: 4n })], [db()]));
    assert.equal(d.statements[0]?.calls, 4n);
    assert.equal(d.databases[0]?.xactCommit, 100n);
  });

  test('a counter that went down is a reset: the current counters are the delta', () => {
    const d = statisticsDeltas(
      sample(T0, [stmt({ calls: 100n })], [db()]),
      sample(at(10), [stmt({ calls: 2n, rows: 50n })], [db({ xactCommit: 3n, blksHit: 2000n })]),
    );
    assert.equal(d.statements[0]?.calls, 2n);
    assert.equal(d.statements[0]?.rows, 50n);
    assert.equal(d.databases[0]?.xactCommit, 3n);
    assert.equal(d.databases[0]?.blksHit, 2000n, 'every counter of a reset entry is its current value');
  });

  test('total time alone going down is a reset too', () => {
    const d = statisticsDeltas(sample(T0, [stmt({ totalExecMs: 100 })], null), sample(at(10), [stmt({ calls: 11n, totalExecMs: 1 })], null));
    assert.equal(d.statements[0]?.calls, 11n);
    assert.equal(d.statements[0]?.totalExecMs, 1);
  });

  test('pg_stat_statements_info.stats_reset changed: every entry counts from zero', () => {
    const d = statisticsDeltas(sample(T0, [stmt({ calls: 10n })], null, at(-100)), sample(at(10), [stmt({ calls: 12n })], null, at(5)));
    assert.equal(d.statements[0]?.calls, 12n);
    const same = statisticsDeltas(sample(T0, [stmt({ calls: 10n })], null, at(-100)), sample(at(10), [stmt({ calls: 12n })], null, at(-100)));
    assert.equal(same.statements[0]?.calls, 2n);
  });

  test("pg_stat_database.stats_reset changed with no counter down: not a reset (a single table's reset moves it too)", () => {
    const d = statisticsDeltas(sample(T0, null, [db()]), sample(at(10), null, [db({ xactCommit: 101n, statsReset: at(5) })]));
    assert.equal(d.databases[0]?.xactCommit, 1n);
  });

  test('the same key in another role, database or toplevel is another entry', () => {
    const prev = [stmt(), stmt({ userId: 11 }), stmt({ dbId: 6 }), stmt({ toplevel: false })];
    const d = statisticsDeltas(
      sample(T0, prev, null),
      sample(
        at(1),
        prev.map((s) => ({ ...s, calls: s.calls + 1n })),
        null,
      ),
    );
    assert.equal(d.statements.length, 4);
    for (const s of d.statements) assert.equal(s.calls, 1n);
  });

  test('a view not read in one of the samples: no deltas for it', () => {
    const d = statisticsDeltas(sample(T0, null, [db()]), sample(at(1), [stmt()], [db({ xactCommit: 101n })]));
    assert.deepEqual(d.statements, []);
    assert.equal(d.databases.length, 1);
  });
});

// Generators: a few keys, so random samples share entries.
const keyArb = fc.record({ userId: fc.constantFrom(10, 11), dbId: fc.constantFrom(5, 6), queryId: fc.bigInt({ min: -2n, max: 2n }), toplevel: fc.boolean() });
const big = fc.bigInt({ min: 0n, max: 1n << 40n });
const statementArb = fc
  .record({
    key: keyArb,
    calls: big,
    totalExecMs: fc.double({ min: 0, max: 1e9, noNaN: true }),
    rows: big,
    sharedBlksHit: big,
    sharedBlksRead: big,
    tempBlksWritten: big,
  })
  .map(({ key, ...c }) => stmt({ ...key, ...c }));
const databaseArb = fc.record({
  database: fc.constantFrom('a', 'b', 'c'),
  backends: fc.nat(100),
  xactCommit: big,
  xactRollback: big,
  blksRead: big,
  blksHit: big,
  tupReturned: big,
  tupFetched: big,
  tupInserted: big,
  tupUpdated: big,
  tupDeleted: big,
  conflicts: big,
  tempFiles: big,
  tempBytes: big,
  deadlocks: big,
  statsReset: fc.option(fc.constantFrom(at(-50), at(-40))),
});
const resetArb = fc.option(fc.constantFrom(at(-30), at(-20)));
const sampleArb = (ts: Date): fc.Arbitrary<StatisticsSample> =>
  fc
    .record({
      statements: fc.uniqueArray(statementArb, { selector: statementKey, maxLength: 12 }),
      databases: fc.uniqueArray(databaseArb, { selector: (d) => d.database }),
      statementsReset: resetArb,
    })
    .map((s) => ({ ts, ...s }));

void describe('statisticsDeltas: properties', () => {
  test('deltas are never negative; statements only with calls, databases only with a counter up', () => {
    fc.assert(
      fc.property(sampleArb(T0), sampleArb(at(15)), (prev, cur) => {
        const d = statisticsDeltas(prev, cur);
        assert.equal(d.intervalSeconds, 15);
        for (const s of d.statements) {
          for (const c of STATEMENT_COUNTERS) assert.ok(s[c] >= 0n, `${c} ${s[c]}`);
          assert.ok(s.totalExecMs >= 0);
          assert.ok(s.calls > 0n);
        }
        for (const x of d.databases) {
          for (const c of DATABASE_COUNTERS) assert.ok(x[c] >= 0n, `${c} ${x[c]}`);
          assert.ok(DATABASE_COUNTERS.some((c) => x[c] > 0n));
        }
      }),
    );
  });

  test('a delta is current minus previous, or (new entry, a counter down, all reset) the current counters', () => {
    fc.assert(
      fc.property(sampleArb(T0), sampleArb(at(15)), (prev, cur) => {
        const allReset = prev.statementsReset !== null && cur.statementsReset !== null && prev.statementsReset.getTime() !== cur.statementsReset.getTime();
        const before = new Map(prev.statements!.map((s) => [statementKey(s), s]));
        // Deltas come in the order of the current sample's entries, the unchanged left out.
        const expected: [bigint, bigint, number][] = [];
        for (const c of cur.statements!) {
          const p = allReset ? undefined : before.get(statementKey(c));
          const down = p !== undefined && (STATEMENT_COUNTERS.some((k) => c[k] < p[k]) || c.totalExecMs < p.totalExecMs);
          const base = p === undefined || down ? null : p;
          const calls = base === null ? c.calls : c.calls - base.calls;
          if (calls > 0n) expected.push([c.queryId, calls, base === null ? c.totalExecMs : c.totalExecMs - base.totalExecMs]);
        }
        assert.deepEqual(
          statisticsDeltas(prev, cur).statements.map((s) => [s.queryId, s.calls, s.totalExecMs]),
          expected,
        );
      }),
    );
  });

  test('without resets, the deltas of a sequence add up to last minus first (an entry appearing later: to its last value)', () => {
    const incArb = fc
      .record({
        calls: fc.bigInt({ min: 0n, max: 50n }),
        ms: fc.integer({ min: 0, max: 1000 }),
        rows: fc.bigInt({ min: 0n, max: 500n }),
        hit: fc.bigInt({ min: 0n, max: 900n }),
      })
      // A statement's other counters move only when it is called.
      .map((i) => (i.calls === 0n ? { calls: 0n, ms: 0, rows: 0n, hit: 0n } : i));
    const entryArb = (steps: number) =>
      fc.record({
        firstStep: fc.nat(steps - 1),
        initial: statementArb,
        incs: fc.array(incArb, { minLength: steps, maxLength: steps }),
        db: databaseArb,
        dbIncs: fc.array(fc.bigInt({ min: 0n, max: 30n }), { minLength: steps, maxLength: steps }),
      });
    const scenarioArb = fc
      .integer({ min: 2, max: 8 })
      .chain((steps) => fc.record({ steps: fc.constant(steps), entries: fc.array(entryArb(steps), { maxLength: 8 }) }));
    fc.assert(
      fc.property(scenarioArb, ({ steps, entries }) => {
        // Entry n: statement with queryId n (deltas carry no userId/dbId) and database `dbN`, from step firstStep on.
        const samples: StatisticsSample[] = [];
        for (let i = 0; i < steps; i++) {
          const statements: StatementCounters[] = [];
          const databases: DatabaseCounters[] = [];
          entries.forEach((e, n) => {
            if (i < e.firstStep) return;
            // An entry never called has all counters 0.
            const called = e.initial.calls > 0n;
            let s: StatementCounters = called
              ? { ...e.initial, queryId: BigInt(n), totalExecMs: Math.round(e.initial.totalExecMs) }
              : stmt({ queryId: BigInt(n), calls: 0n, totalExecMs: 0, rows: 0n, sharedBlksHit: 0n, sharedBlksRead: 0n, tempBlksWritten: 0n });
            let d: DatabaseCounters = { ...e.db, database: `db${n}`, statsReset: null };
            for (let j = e.firstStep + 1; j <= i; j++) {
              const inc = e.incs[j]!;
              s = { ...s, calls: s.calls + inc.calls, totalExecMs: s.totalExecMs + inc.ms, rows: s.rows + inc.rows, sharedBlksHit: s.sharedBlksHit + inc.hit };
              d = { ...d, xactCommit: d.xactCommit + e.dbIncs[j]!, tupFetched: d.tupFetched + 2n * e.dbIncs[j]! };
            }
            statements.push(s);
            databases.push(d);
          });
          samples.push(sample(at(i * 15), statements, databases, at(-30)));
        }
        const sums = new Map<string, bigint | number>();
        const add = (k: string, v: bigint | number): void => {
          const old = sums.get(k);
          sums.set(k, typeof v === 'bigint' ? ((old as bigint | undefined) ?? 0n) + v : ((old as number | undefined) ?? 0) + v);
        };
        for (let i = 1; i < steps; i++) {
          const d = statisticsDeltas(samples[i - 1]!, samples[i]!);
          assert.equal(d.intervalSeconds, 15);
          for (const s of d.statements) {
            add(`calls ${s.queryId}`, s.calls);
            add(`rows ${s.queryId}`, s.rows);
            add(`ms ${s.queryId}`, s.totalExecMs);
          }
          for (const x of d.databases) {
            add(`commit ${x.database}`, x.xactCommit);
            add(`fetched ${x.database}`, x.tupFetched);
          }
        }
        const first = samples[0]!,
          last = samples[steps - 1]!;
        entries.forEach((_e, n) => {
          const lastS = last.statements!.find((s) => s.queryId === BigInt(n))!;
          const firstS = first.statements!.find((s) => s.queryId === BigInt(n));
          const lastD = last.databases!.find((x) => x.database === `db${n}`)!;
          const firstD = first.databases!.find((x) => x.database === `db${n}`);
          assert.equal(sums.get(`calls ${n}`) ?? 0n, lastS.calls - (firstS?.calls ?? 0n));
          assert.equal(sums.get(`rows ${n}`) ?? 0n, lastS.rows - (firstS?.rows ?? 0n));
          assert.equal(sums.get(`ms ${n}`) ?? 0, lastS.totalExecMs - (firstS?.totalExecMs ?? 0));
          assert.equal(sums.get(`commit db${n}`) ?? 0n, lastD.xactCommit - (firstD?.xactCommit ?? 0n));
          assert.equal(sums.get(`fetched db${n}`) ?? 0n, lastD.tupFetched - (firstD?.tupFetched ?? 0n));
        });
      }),
    );
  });

  test('a reset in the middle of a sequence: the deltas after it add up to what happened since', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 1000n }), fc.bigInt({ min: 0n, max: 1000n }), fc.bigInt({ min: 1n, max: 999n }), (before, more, afterReset) => {
        // calls: before, then before + more, then reset, then afterReset (< before + more: detectable).
        fc.pre(afterReset < before + more);
        const s = [before, before + more, afterReset].map((calls, i) => sample(at(i), [stmt({ calls, totalExecMs: Number(calls), rows: calls })], null));
        const d1 = statisticsDeltas(s[0]!, s[1]!),
          d2 = statisticsDeltas(s[1]!, s[2]!);
        assert.equal(d1.statements[0]?.calls ?? 0n, more);
        assert.equal(d2.statements[0]?.calls, afterReset);
        assert.equal(d2.statements[0]?.totalExecMs, Number(afterReset));
      }),
    );
  });
});
