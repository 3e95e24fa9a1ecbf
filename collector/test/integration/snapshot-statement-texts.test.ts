// pg_stat_statements texts bounded on a real PostgreSQL 15 (security review R2, statement-texts.ts):
// 60 statements of about 700 kB of normalised text each (`SELECT ARRAY[$1,…]`, as the review's
// psql loop makes them), read by a pg_monitor role in READ ONLY transactions as the collector
// reads. What the statement returns is already cut (and, past the sample's bound, dropped) on
// the server; readStatistics flags and counts it; the deltas the store writes carry the cut
// text with the store's cut marker and the fingerprint of what was read.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import type { Cluster } from '@pglog/test-support/pg-cluster.ts';
import { startCluster } from '@pglog/test-support/pg-cluster.ts';
import type pg from 'pg';

import { statisticsDeltas } from '../../src/snapshot/deltas.ts';
import type { Row } from '../../src/snapshot/pg-values.ts';
import { queryFingerprint } from '../../src/snapshot/query-fingerprint.ts';
import type { ServerInfo } from '../../src/snapshot/server-info.ts';
import { readServerInfo } from '../../src/snapshot/server-info.ts';
import { DEFAULT_STATEMENT_TEXT_BOUNDS, type StatementTextBounds, textChars } from '../../src/snapshot/statement-texts.ts';
import { readStatistics } from '../../src/snapshot/statistics-query.ts';
import { statementsSql } from '../../src/snapshot/statistics-sql.ts';
import { cutMarker } from '../../src/store/text-clean.ts';
import { ClusterClients } from '../helpers/cluster-clients.ts';

const TIMEOUT = { timeout: 300_000 };
const STATEMENTS = 60;
const LONG = /^SELECT ARRAY\[\$1,\$2,/;
/** Small enough that the 60 cut texts (16,371 characters each) do not all fit in a sample. */
const SMALL: StatementTextBounds = { maxTextBytes: 64 * 1024, maxSampleTextBytes: 512 * 1024 };

let cluster: Cluster;
const clients = new ClusterClients(() => cluster);
let monitor: pg.Client;
let info: ServerInfo;
/** The sample before the long statements ran: the baseline of the deltas. */
let baseline: Awaited<ReturnType<typeof readStatistics>>;

/** Runs `read` in a READ ONLY transaction with a statement_timeout, as the collector's session does. */
async function readOnly<T>(client: pg.ClientBase, read: (c: pg.ClientBase) => Promise<T>): Promise<T> {
  await client.query("BEGIN READ ONLY; SET LOCAL statement_timeout = '30s'");
  try {
    return await read(client);
  } finally {
    await client.query('ROLLBACK');
  }
}

const utf8 = (s: string): number => Buffer.byteLength(s, 'utf8');

/** The rows of statementsSql with `bounds`, as they came over the wire. */
function rawRows(bounds: StatementTextBounds): Promise<Row[]> {
  return readOnly(monitor, async (c) => (await c.query<Row>(statementsSql(info, bounds))).rows);
}

before(async () => {
  cluster = await startCluster({ dirPrefix: 'pglog-pgss-texts-', settings: ["shared_preload_libraries = 'pg_stat_statements'"] });
  const admin = await clients.connect('postgres', 'postgres');
  await admin.query('CREATE EXTENSION pg_stat_statements; CREATE ROLE monitor LOGIN; GRANT pg_monitor TO monitor');
  monitor = await clients.connect('monitor', 'postgres', 'pglog');
  info = await readOnly(monitor, readServerInfo);
  baseline = await readOnly(monitor, (c) => readStatistics(c, info, { statements: true, databases: false }));
  // The review's psql loop (\gexec): each statement a distinct entry of 100,001 to 100,060 constants.
  const { rows } = await admin.query<{ sql: string }>(
    "SELECT format('SELECT ARRAY[%s]', rtrim(repeat('1,', 100000 + n), ',')) AS sql FROM generate_series(1, $1::int) n",
    [STATEMENTS],
  );
  for (const { sql } of rows) await admin.query(sql);
});

after(async () => {
  await clients.endAll();
  await cluster?.dispose();
});

void describe('pg_stat_statements texts of 700 kB', () => {
  test('the server holds them whole; the statement transfers each cut to the bound, flagged, with its whole length', TIMEOUT, async () => {
    const chars = textChars(DEFAULT_STATEMENT_TEXT_BOUNDS);
    const rows = await rawRows(DEFAULT_STATEMENT_TEXT_BOUNDS);
    const long = rows.filter((r) => typeof r.query === 'string' && LONG.test(r.query));
    assert.equal(long.length, STATEMENTS, 'each statement its own entry');
    for (const r of long) {
      assert.equal((r.query as string).length, chars, 'cut on the server to the bound');
      assert.equal(r.query_cut, true);
      assert.equal(r.query_dropped, false, "60 cut texts fit in the default sample's 16 MiB");
      assert.ok((r.query_bytes as number) > 600_000, `the whole text: ${String(r.query_bytes)} bytes`);
    }
    const sent = rows.reduce((n, r) => n + (typeof r.query === 'string' ? utf8(r.query) : 0), 0);
    const whole = long.reduce((n, r) => n + (r.query_bytes as number), 0);
    assert.ok(sent <= DEFAULT_STATEMENT_TEXT_BOUNDS.maxSampleTextBytes, `texts transferred: ${sent} bytes`);
    assert.ok(whole > 2.5 * sent, `${whole} bytes of text on the server, ${sent} transferred`);
  });

  test('readStatistics counts them cut; the deltas carry the cut text, the marker and the fingerprint of what was read', TIMEOUT, async () => {
    const sample = await readOnly(monitor, (c) => readStatistics(c, info, { statements: true, databases: false }));
    assert.deepEqual(sample.statementTexts, { cut: STATEMENTS, dropped: 0 });
    const deltas = statisticsDeltas(baseline, sample).statements.filter((d) => LONG.test(d.query));
    assert.equal(deltas.length, STATEMENTS);
    const chars = textChars(DEFAULT_STATEMENT_TEXT_BOUNDS);
    for (const d of deltas) {
      const entry = sample.statements!.find((s) => s.queryId === d.queryId)!;
      assert.equal(entry.query.length, chars);
      assert.ok(entry.textCut !== undefined && !entry.textCut.dropped && entry.textCut.bytes > 600_000);
      assert.equal(d.query, entry.query + cutMarker(entry.textCut.bytes), 'the cut text and the marker, as the store writes it');
      assert.ok(utf8(d.query) <= DEFAULT_STATEMENT_TEXT_BOUNDS.maxTextBytes, 'within the store bound: not cut again');
      assert.equal(d.fingerprint, queryFingerprint(entry.query));
      assert.equal(d.calls, 1n);
    }
  });

  test("past the sample's bound texts are dropped on the server: NULL over the wire, the counters kept, counted", TIMEOUT, async () => {
    const chars = textChars(SMALL);
    const rows = await rawRows(SMALL);
    const long = rows.filter((r) => r.query_bytes !== null && (r.query_bytes as number) > 600_000);
    assert.equal(long.length, STATEMENTS);
    const sent = rows.reduce((n, r) => n + (typeof r.query === 'string' ? utf8(r.query) : 0), 0);
    assert.ok(sent <= SMALL.maxSampleTextBytes, `texts transferred: ${sent} bytes`);
    for (const r of rows) if (typeof r.query === 'string') assert.ok(r.query.length <= chars);
    const dropped = long.filter((r) => r.query_dropped === true);
    assert.ok(dropped.length > 0 && dropped.length < STATEMENTS, `${dropped.length} dropped`);
    for (const r of dropped) assert.equal(r.query, null, 'not transferred');

    const sample = await readOnly(monitor, (c) => readStatistics(c, info, { statements: true, databases: false, textBounds: SMALL }));
    assert.deepEqual(sample.statementTexts, { cut: STATEMENTS - dropped.length, dropped: dropped.length });
    const deltas = statisticsDeltas(baseline, sample).statements;
    const droppedDeltas = deltas.filter((d) => d.fingerprint === '' && d.query.startsWith(' [... cut by pglog: '));
    assert.equal(droppedDeltas.length, dropped.length, 'a dropped text is stored as the marker alone, its counters kept');
    for (const d of droppedDeltas) assert.equal(d.calls, 1n);
    assert.equal(deltas.filter((d) => LONG.test(d.query)).length, STATEMENTS - dropped.length);
  });
});
