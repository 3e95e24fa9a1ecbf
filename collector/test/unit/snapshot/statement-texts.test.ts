// The bounds on pg_stat_statements texts (statement-texts.ts, security review R2): readStatistics
// over a fake pg.ClientBase that returns 500 entries of 1 MB text each (as a server would that
// ignored the SQL's bounds) retains at most the sample's bound, memory measured after GC, and
// counts what it cut and dropped; the SQL cuts on the server; the flags of the SQL's rows; the
// store's cut marker on the deltas and the fingerprint of the cut text; the metrics.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import type pg from 'pg';
import { Registry } from 'prom-client';

import { SnapshotMetrics } from '../../../src/observability/snapshot-metrics.ts';
import { statisticsDeltas } from '../../../src/snapshot/deltas.ts';
import type { Row } from '../../../src/snapshot/pg-values.ts';
import { queryFingerprint } from '../../../src/snapshot/query-fingerprint.ts';
import type { ServerInfo } from '../../../src/snapshot/server-info.ts';
import {
  checkTextBounds,
  DEFAULT_MAX_SAMPLE_TEXT_BYTES,
  DEFAULT_STATEMENT_TEXT_BOUNDS,
  type StatementTextBounds,
  textChars,
} from '../../../src/snapshot/statement-texts.ts';
import { readStatistics, statementsFromRows } from '../../../src/snapshot/statistics-query.ts';
import { statementsSql } from '../../../src/snapshot/statistics-sql.ts';
import { cleanText, cutMarker, DEFAULT_MAX_TEXT_BYTES, MIN_MAX_TEXT_BYTES, noRepairs } from '../../../src/store/text-clean.ts';

const TS = new Date('2026-12-01T10:00:00Z');
const MiB = 1024 * 1024;

const INFO: ServerInfo = {
  versionNum: 150004,
  database: 'postgres',
  username: 'monitor',
  statStatementsVersion: '1.10',
  statStatementsSchema: 'public',
  superuser: false,
  canWrite: false,
  readAllStats: true,
};

/** One row of statementsSql, entry `n`, with `over` (e.g. the SQL's flags). */
function row(n: number, query: string | null, over: Row = {}): Row {
  return {
    ts: TS,
    statements_reset: null,
    userid: 10,
    dbid: 5,
    queryid: String(1000 + n),
    toplevel: true,
    calls: '1',
    total_exec_ms: 1,
    rows: '1',
    shared_blks_hit: '0',
    shared_blks_read: '0',
    temp_blks_written: '0',
    query,
    username: 'app',
    database: 'postgres',
    ...over,
  };
}

/** A pg.ClientBase whose query() answers with `rows()` (made at each call, so the test holds none) and records the SQL. */
function fakeClient(rows: () => Row[]): { client: pg.ClientBase; sql: string[] } {
  const sql: string[] = [];
  const client = {
    query: (text: string) => {
      sql.push(text);
      return Promise.resolve({ rows: rows(), rowCount: null, command: 'SELECT', oid: 0, fields: [] });
    },
  };
  return { client: client as unknown as pg.ClientBase, sql };
}

/**
 * `count` distinct texts of `bytes` ASCII bytes each, each a flat string of its own as pg makes
 * them (Buffer.toString): `SELECT ARRAY[$1,$2,...`, as pg_stat_statements normalises a long list.
 */
function longTexts(count: number, bytes: number): string[] {
  const head = Buffer.from('SELECT ARRAY[' + Array.from({ length: bytes / 4 }, (_, i) => `$${i + 1}`).join(','), 'latin1').subarray(0, bytes);
  return Array.from({ length: count }, (_, n) => {
    const b = Buffer.from(head);
    b.write(`/*${String(n).padStart(6, '0')}*/`, 7, 'latin1'); // SELECT /*000042*/ ...: distinct texts
    return b.toString('latin1');
  });
}

/**
 * Forces full garbage collections (--expose-gc turned on at run time) and returns the memory in
 * use: the heap and what lies outside it, since a string of more than about 1 MB that a Buffer
 * becomes (as pg makes them) is an external string, counted in `external`, not in the heap.
 */
function memoryAfterGc(): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  gc();
  const { heapUsed, external } = process.memoryUsage();
  return heapUsed + external;
}

const utf8 = (s: string): number => Buffer.byteLength(s, 'utf8');

void describe('pg_stat_statements texts are bounded', () => {
  test('500 entries of 1 MB text: at most the sample bound is retained (memory after GC), every text cut, the rest dropped, all counted', async () => {
    const { client, sql } = fakeClient(() => longTexts(500, MiB).map((q, n) => row(n, q)));
    const before = memoryAfterGc();
    const sample = await readStatistics(client, INFO, { statements: true, databases: false });
    const retained = memoryAfterGc() - before;

    const statements = sample.statements ?? [];
    assert.equal(statements.length, 500, 'every entry keeps its counters');
    const kept = statements.filter((s) => s.query !== '');
    const keptBytes = kept.reduce((n, s) => n + utf8(s.query), 0);
    assert.ok(keptBytes <= DEFAULT_MAX_SAMPLE_TEXT_BYTES, `texts kept: ${keptBytes} bytes`);
    for (const s of kept) assert.ok(s.query.length <= textChars(DEFAULT_STATEMENT_TEXT_BOUNDS) && s.query.startsWith('SELECT /*'));
    assert.ok(kept.length >= 60, `the bound is used, not thrown away: ${kept.length} texts kept`);
    assert.deepEqual(sample.statementTexts, { cut: kept.length, dropped: 500 - kept.length });
    for (const s of statements) assert.deepEqual(s.textCut, { bytes: MiB, dropped: s.query === '' });
    // The kept texts are strings of their own: a slice would keep its whole 1 MB text alive.
    assert.ok(retained < DEFAULT_MAX_SAMPLE_TEXT_BYTES + 8 * MiB, `memory retained by the sample: ${(retained / MiB).toFixed(1)} MiB`);
    assert.match(sql[0] ?? '', new RegExp(`pg_catalog\\.left\\(p\\.query, ${textChars(DEFAULT_STATEMENT_TEXT_BOUNDS)}\\)`), 'cut on the server');
  });

  test("the SQL's flags: a text the server cut, one it dropped, one whole; counted once each", () => {
    const read = statementsFromRows([
      row(1, 'SELECT $1', { query_cut: false, query_dropped: false, query_bytes: 9 }),
      row(2, 'SELECT ARRAY[$1,$2', { query_cut: true, query_dropped: false, query_bytes: 700_000 }),
      row(3, null, { query_cut: true, query_dropped: true, query_bytes: 800_000 }),
      row(4, null, { query_cut: null, query_dropped: false, query_bytes: null }), // text file garbage-collected
    ]);
    assert.deepEqual(
      read.statements.map((s) => [s.query, s.textCut]),
      [
        ['SELECT $1', undefined],
        ['SELECT ARRAY[$1,$2', { bytes: 700_000, dropped: false }],
        ['', { bytes: 800_000, dropped: true }],
        ['', undefined],
      ],
    );
    assert.equal('textCut' in read.statements[0]!, false, 'a whole text has no textCut property at all');
    assert.deepEqual(read.texts, { cut: 1, dropped: 1 });
  });

  test('deltas: a cut text carries the marker and the fingerprint of what was read; a dropped one the marker alone, no fingerprint', () => {
    const rows = (calls: string): Row[] => [
      row(1, 'SELECT ARRAY[$1,$2', { calls, query_cut: true, query_bytes: 700_000 }),
      row(2, null, { calls, query_cut: true, query_dropped: true, query_bytes: 800_000 }),
    ];
    const sample = (calls: string, ts: Date) => ({ ts, statements: statementsFromRows(rows(calls)).statements, statementsReset: null, databases: null });
    const { statements } = statisticsDeltas(sample('1', TS), sample('3', new Date(TS.getTime() + 15_000)));
    assert.deepEqual(
      statements.map((d) => [d.query, d.fingerprint, d.calls]),
      [
        [`SELECT ARRAY[$1,$2${cutMarker(700_000)}`, queryFingerprint('SELECT ARRAY[$1,$2'), 2n],
        [cutMarker(800_000), '', 2n],
      ],
    );
  });

  test('multi-byte texts: the bytes stay within the bound with the marker, no character split, and the store keeps the text as it is', () => {
    const bounds: StatementTextBounds = { maxTextBytes: MIN_MAX_TEXT_BYTES, maxSampleTextBytes: 64 * 1024 };
    const texts = ["SELECT '" + '😀'.repeat(5000), "SELECT '" + 'ж'.repeat(9000), "SELECT '" + '€'.repeat(9000)];
    const read = statementsFromRows(
      texts.map((q, n) => row(n, q)),
      bounds,
    );
    assert.deepEqual(read.texts, { cut: 3, dropped: 0 });
    for (const [i, s] of read.statements.entries()) {
      assert.ok(s.query.isWellFormed() && texts[i]!.startsWith(s.query), 'a beginning of the text, no surrogate pair split');
      assert.equal(s.textCut?.bytes, utf8(texts[i]!));
    }
    const sample = (ts: Date, calls: bigint) => ({ ts, statements: read.statements.map((s) => ({ ...s, calls })), statementsReset: null, databases: null });
    const deltas = statisticsDeltas(sample(TS, 1n), sample(new Date(TS.getTime() + 1000), 2n)).statements;
    assert.equal(deltas.length, 3);
    for (const d of deltas) {
      assert.ok(utf8(d.query) <= bounds.maxTextBytes, `${utf8(d.query)} bytes with the marker`);
      const repairs = noRepairs();
      assert.equal(cleanText(d.query, bounds.maxTextBytes, repairs), d.query, 'the store keeps it as it is');
      assert.equal(repairs.cut, 0, 'not cut a second time by the store');
    }
  });

  test("the sample's bound keeps the shortest texts; the longest are dropped, ties in order", () => {
    const bounds: StatementTextBounds = { maxTextBytes: MIN_MAX_TEXT_BYTES, maxSampleTextBytes: MIN_MAX_TEXT_BYTES };
    const chars = textChars(bounds); // 1011
    const sizes = [3000, 100, 1000, 900, 50, chars, 5000];
    const read = statementsFromRows(
      sizes.map((n, i) => row(i, 'x'.repeat(n))),
      bounds,
    );
    // Cut to 1011 first; then 50 + 100 + 900 + 1000 + 1011 (the 3000) + 1011 = 4072 fit in 4096, the 5000's 1011 does not.
    assert.deepEqual(
      read.statements.map((s) => s.query.length),
      [chars, 100, 1000, 900, 50, chars, 0],
    );
    assert.deepEqual(
      read.statements.map((s) => s.textCut),
      [{ bytes: 3000, dropped: false }, undefined, undefined, undefined, undefined, undefined, { bytes: 5000, dropped: true }],
    );
    assert.deepEqual(read.texts, { cut: 1, dropped: 1 });
  });

  test('statementsSql: the cut and the running total on the server, the flags; bounds out of range refused', () => {
    const bounds: StatementTextBounds = { maxTextBytes: 65_536, maxSampleTextBytes: MiB };
    const sql = statementsSql(INFO, bounds);
    const chars = textChars(bounds);
    assert.equal(chars, Math.floor((65_536 - utf8(cutMarker(Number.MAX_SAFE_INTEGER))) / 4));
    assert.match(sql, new RegExp(`pg_catalog\\.left\\(p\\.query, ${chars}\\) AS query, pg_catalog\\.length\\(p\\.query\\) > ${chars} AS query_cut`));
    assert.match(sql, /pg_catalog\.octet_length\(p\.query\) AS query_bytes/);
    assert.match(sql, /pg_catalog\.sum\(pg_catalog\.octet_length\(c\.query\)\)\s+OVER \(ORDER BY pg_catalog\.octet_length\(c\.query\), /);
    assert.match(sql, /CASE WHEN s\.text_total <= 1048576::int8 THEN s\.query END AS query/);
    assert.match(sql, /s\.query IS NOT NULL AND s\.text_total > 1048576::int8 AS query_dropped/);
    assert.doesNotMatch(sql, /[^.]\bp\.query AS query\b/, 'the whole text is never selected');
    assert.equal(statementsSql(INFO), statementsSql(INFO, { maxTextBytes: DEFAULT_MAX_TEXT_BYTES, maxSampleTextBytes: 16 * MiB }), 'the defaults');
    for (const bad of [
      { maxTextBytes: 100, maxSampleTextBytes: MiB },
      { maxTextBytes: Number.NaN, maxSampleTextBytes: MiB },
      { maxTextBytes: 2 ** 31, maxSampleTextBytes: 2 ** 32 },
      { maxTextBytes: 8192, maxSampleTextBytes: 4096 },
      { maxTextBytes: 8192, maxSampleTextBytes: 1.5e6 + 0.5 },
    ]) {
      assert.throws(() => checkTextBounds(bad), RangeError, JSON.stringify(bad));
      assert.throws(() => statementsSql(INFO, bad), RangeError);
    }
  });

  test('the counts reach pglog_pgss_texts_cut_total and pglog_pgss_texts_dropped_total, per target and instance', async () => {
    const registry = new Registry();
    const metrics = new SnapshotMetrics(registry, 'pglog_');
    metrics.statementTexts('db1', 'main', { cut: 0, dropped: 0 });
    metrics.statementTexts('db1', 'main', { cut: 3, dropped: 2 });
    const text = await registry.metrics();
    assert.match(text, /^pglog_pgss_texts_cut_total\{target="db1",instance="main"\} 3$/m);
    assert.match(text, /^pglog_pgss_texts_dropped_total\{target="db1",instance="main"\} 2$/m);
    metrics.forgetTarget('db1');
    assert.doesNotMatch(await registry.metrics(), /target="db1"/);
  });
});
