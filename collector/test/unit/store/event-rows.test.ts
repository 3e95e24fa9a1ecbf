// Events → rows of the event tables: every kind to its table, in the table's column order and
// types, text cleaned, timestamps exact.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import type { PglogEvent } from '../../../src/logformat/events.ts';
import { EVENT_KINDS } from '../../../src/logformat/events.ts';
import { CopyBinaryEncoder } from '../../../src/store/copy-binary.ts';
import { clearRowScratch, mapEvent, rowContext, rowScratch, TemplateSet } from '../../../src/store/event-rows.ts';
import { EVENT_TABLES, TABLES } from '../../../src/store/event-tables.ts';
import { quarantineRecord } from '../../../src/store/quarantine.ts';
import { cutMarker } from '../../../src/store/text-clean.ts';
import { statementEvent } from '../../helpers/events.ts';
import { pipelineEvents, ROW_MAX_TEXT, ROW_READ_AT, ROW_SOURCE } from '../../helpers/row-fixture.ts';

const SOURCE = ROW_SOURCE;
const READ_AT = ROW_READ_AT;
const MAX = ROW_MAX_TEXT;

const fixture = pipelineEvents();

function byKind<K extends PglogEvent['kind']>(kind: K): Extract<PglogEvent, { kind: K }> {
  const e = fixture.find((x) => x.kind === kind);
  assert.ok(e !== undefined, `the fixture has a ${kind} event`);
  return e as Extract<PglogEvent, { kind: K }>;
}

function column(table: keyof typeof TABLES, values: readonly unknown[], name: string): unknown {
  const i = TABLES[table].columns.indexOf(name);
  assert.ok(i >= 0, `${table}.${name}`);
  return values[i];
}

test("the fixture has every kind but autoanalyze; each maps to its table with values the table's encoder takes", () => {
  const kinds = new Set(fixture.map((e) => e.kind));
  assert.deepEqual(
    EVENT_KINDS.filter((k) => !kinds.has(k)),
    ['autoanalyze'],
  );
  const expected: Record<string, string> = { statement: 'statement_events', error: 'error_events', lock_wait: 'lock_wait_events' };
  const encoders = Object.fromEntries(EVENT_TABLES.map((t) => [t, new CopyBinaryEncoder(TABLES[t].types)]));
  for (const e of fixture) {
    const row = mapEvent(SOURCE, e, READ_AT, rowContext(MAX));
    assert.equal(row.table, expected[e.kind] ?? 'other_events', e.kind);
    assert.equal(row.values.length, TABLES[row.table].columns.length);
    assert.doesNotThrow(() => encoders[row.table]?.encodeRows([row.values]), `${e.kind} encodes`);
    assert.equal(column(row.table, row.values, 'file_offset'), e.offset);
    assert.equal(column(row.table, row.values, 'target'), 'db1');
    assert.equal(column(row.table, row.values, 'file'), SOURCE.file);
  }
});

test('a row mapped into the scratch row is the row mapped afresh, and every statement reuses the one scratch row', () => {
  const scratch = rowScratch();
  const fresh = rowContext(MAX);
  const reused = rowContext(MAX);
  let statements = 0;
  for (const e of fixture) {
    const expected = mapEvent(SOURCE, e, READ_AT, fresh);
    const row = mapEvent(SOURCE, e, READ_AT, reused, scratch);
    assert.deepEqual({ ...row, values: [...row.values] }, { ...expected, values: [...expected.values] }, `${e.kind} at ${e.offset}`);
    if (e.kind === 'statement') {
      statements++;
      assert.equal(row, scratch.statement);
    } else assert.notEqual(row, scratch.statement);
  }
  assert.ok(statements > 1, 'the fixture has statements');
  assert.deepEqual(reused.templates.sorted(), fresh.templates.sorted());
  assert.deepEqual(reused.repairs, fresh.repairs);
  assert.equal(reused.readTimeUsed, fresh.readTimeUsed);
  clearRowScratch(scratch);
  assert.ok(
    scratch.statement.values.every((v) => v === null),
    'cleared, the scratch row holds no statement text',
  );
});

test("a statement row holds the statement's fields, and its template is sighted", () => {
  const ctx = rowContext(MAX);
  const row = mapEvent(SOURCE, statementEvent(), READ_AT, ctx);
  const t = 'statement_events';
  const v = row.values;
  assert.deepEqual(Object.fromEntries(TABLES[t].columns.map((c) => [c, column(t, v, c)])), {
    ts: 1795267773120456,
    target: 'db1',
    instance: 'main',
    database: 'app',
    username: 'alice',
    application: 'psql',
    pid: 42,
    duration_ms: 1.25,
    fingerprint: 'abc123',
    query: 'SELECT $1',
    protocol: 'extended',
    parameters: "$1 = '5'",
    file: SOURCE.file,
    file_offset: 100,
    ts_logged: null,
  });
  assert.deepEqual(ctx.templates.sorted(), [{ fingerprint: 'abc123', normalized: 'select $1', first: 1795267773120456, last: 1795267773120456 }]);
  assert.equal(ctx.readTimeUsed, 0);
});

test('error and lock wait rows', () => {
  const err = byKind('error');
  const e = mapEvent(SOURCE, err, READ_AT, rowContext(MAX)).values;
  assert.equal(column('error_events', e, 'message'), err.message);
  assert.equal(column('error_events', e, 'hint'), err.hint);
  assert.equal(column('error_events', e, 'severity'), 'ERROR');
  assert.equal(column('error_events', e, 'username'), err.user);
  const lock = byKind('lock_wait');
  const l = mapEvent(SOURCE, lock, READ_AT, rowContext(MAX)).values;
  assert.equal(column('lock_wait_events', l, 'state'), lock.state);
  assert.equal(column('lock_wait_events', l, 'pid'), lock.waiting_pid);
  assert.equal(column('lock_wait_events', l, 'wait_ms'), lock.wait_ms);
  assert.equal(column('lock_wait_events', l, 'lock_object'), lock.lock_object);
});

test('other events keep the event in the payload, without the fields that are columns', () => {
  const plan = byKind('plan');
  const ctx = rowContext(MAX);
  const v = mapEvent(SOURCE, plan, READ_AT, ctx).values;
  assert.equal(column('other_events', v, 'kind'), 'plan');
  assert.equal(column('other_events', v, 'message'), null);
  const payload = JSON.parse(column('other_events', v, 'payload') as string) as Record<string, unknown>;
  assert.equal(payload.plan, plan.plan);
  assert.equal(payload.duration_ms, plan.duration_ms);
  for (const k of ['kind', 'severity', 'database', 'message', 'offset', 'ts']) assert.ok(!(k in payload), k);
  assert.deepEqual(
    ctx.templates.sorted().map((x) => x.fingerprint),
    [plan.fingerprint],
  );
  const deadlock = byKind('deadlock');
  const d = mapEvent(SOURCE, deadlock, READ_AT, rowContext(MAX)).values;
  assert.equal(column('other_events', d, 'message'), deadlock.message);
  assert.deepEqual((JSON.parse(column('other_events', d, 'payload') as string) as { processes: unknown }).processes, deadlock.processes);
});

test('without a usable ts the row takes the read time and keeps the text as logged', () => {
  const ctx = rowContext(MAX);
  const unknownZone = mapEvent(SOURCE, statementEvent({ ts: '2026-11-21 13:29:33.120 IST' }), READ_AT, ctx);
  assert.equal(column('statement_events', unknownZone.values, 'ts'), READ_AT * 1000);
  assert.equal(column('statement_events', unknownZone.values, 'ts_logged'), '2026-11-21 13:29:33.120 IST');
  assert.equal(ctx.readTimeUsed, 1);
  const none = mapEvent(SOURCE, statementEvent({ ts: null }), READ_AT, ctx);
  assert.equal(column('statement_events', none.values, 'ts'), READ_AT * 1000);
  assert.equal(column('statement_events', none.values, 'ts_logged'), '');
  assert.equal(ctx.readTimeUsed, 2);
});

test('NULs and lone surrogates are cleaned and counted, in columns and in the payload', () => {
  const ctx = rowContext(MAX);
  const { repairs } = ctx;
  const m = mapEvent(SOURCE, statementEvent({ query: 'SELECT \0 1\0', parameters: "$1 = '\ud800'" }), READ_AT, ctx);
  assert.equal(column('statement_events', m.values, 'query'), 'SELECT  1');
  assert.equal(column('statement_events', m.values, 'parameters'), "$1 = '\ufffd'");
  assert.deepEqual(repairs, { nulRemoved: 2, invalidReplaced: 1, cut: 0 });
  const other = { ...byKind('other'), message: 'bad\0byte', detail: 'x\udc00' };
  const o = mapEvent(SOURCE, other, READ_AT, ctx).values;
  assert.equal(column('other_events', o, 'message'), 'badbyte');
  const payload = column('other_events', o, 'payload') as string;
  assert.ok(!payload.includes('\\u0000'));
  assert.equal((JSON.parse(payload) as { detail: string }).detail, 'x\ufffd');
  assert.deepEqual(repairs, { nulRemoved: 3, invalidReplaced: 2, cut: 0 });
});

test('names seen clean lately are kept per column: a dirty name is cleaned and counted every time, a clean one passes through many fingerprints', () => {
  const ctx = rowContext(MAX);
  const users = ['alice', 'bob\0', 'carol'];
  for (let i = 0; i < 60; i++) {
    const user = users[i % users.length]!;
    const fingerprint = `fp${String(i % 40).padStart(2, '0')}`;
    const values = mapEvent(SOURCE, statementEvent({ user, database: 'db\ud800', fingerprint }), READ_AT, ctx).values;
    assert.equal(column('statement_events', values, 'username'), user.replace('\0', ''));
    assert.equal(column('statement_events', values, 'database'), 'db\ufffd');
    assert.equal(column('statement_events', values, 'fingerprint'), fingerprint);
  }
  // 20 rows with bob's NUL, 60 with the database's lone surrogate.
  assert.equal(ctx.repairs.nulRemoved, 20);
  assert.equal(ctx.repairs.invalidReplaced, 60);
});

test('long text is capped at maxTextBytes, in columns and inside the payload', () => {
  const ctx = rowContext(8192);
  const big = `SELECT '${'é'.repeat(20_000)}'`;
  const q = column('statement_events', mapEvent(SOURCE, statementEvent({ query: big }), READ_AT, ctx).values, 'query') as string;
  assert.ok(Buffer.byteLength(q) <= 8192);
  assert.ok(q.endsWith(cutMarker(Buffer.byteLength(big))));
  assert.ok(big.startsWith(q.slice(0, 1000)));
  const plan = { ...byKind('plan'), plan: 'x'.repeat(100_000) };
  const p = JSON.parse(column('other_events', mapEvent(SOURCE, plan, READ_AT, ctx).values, 'payload') as string) as { plan: string };
  assert.ok(Buffer.byteLength(p.plan) <= 8192);
  assert.equal(ctx.repairs.cut, 2);
});

test('templates merge per fingerprint with first and last sighting, sorted', () => {
  const set = new TemplateSet();
  const r = rowContext(MAX).repairs;
  set.see('b', 'B', 5n, MAX, r);
  set.see('a', 'A', 9n, MAX, r);
  set.see('b', 'B', 2n, MAX, r);
  set.see('b', 'B', 7n, MAX, r);
  set.see('', 'no fingerprint: not a template', 1n, MAX, r);
  assert.deepEqual(set.sorted(), [
    { fingerprint: 'a', normalized: 'A', first: 9n, last: 9n },
    { fingerprint: 'b', normalized: 'B', first: 2n, last: 7n },
  ]);
});

test('a quarantine record names the table and column and keeps the row as JSON', () => {
  const rec = quarantineRecord(
    mapEvent(SOURCE, statementEvent({ query: 'q'.repeat(200_000) }), READ_AT, rowContext(MAX)),
    'SQLSTATE 23514: new row violates check constraint "x"',
  );
  assert.equal(rec.reason, 'statement_events: SQLSTATE 23514: new row violates check constraint "x"');
  assert.deepEqual([rec.target, rec.instance, rec.file, rec.fileOffset], ['db1', 'main', SOURCE.file, 100]);
  const row = JSON.parse(rec.row) as Record<string, unknown>;
  assert.equal(row.ts, '2026-11-21T13:29:33.120456Z');
  assert.equal(row.table, 'statement_events');
  assert.ok(Buffer.byteLength(row.query as string) <= 64 * 1024, 'shortened');
});
