// The store writer against a real PostgreSQL 15: events into their tables and the stable
// views, positions committed atomically with them, fencing, bisection and quarantine, text
// repairs, an outage and its end, partition maintenance.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { waitFor } from '@pglog/test-support/collector-process.ts';
import type pg from 'pg';

import type { PglogEvent, StatementEvent } from '../../src/logformat/events.ts';
import type { BatchItem, SourceRef, StoreBatch, StorePosition } from '../../src/store/store-writer.ts';
import { streamKeyOf } from '../../src/store/store-writer.ts';
import { nthStatement } from '../helpers/events.ts';
import { parseChunks } from '../helpers/parse.ts';
import { count, positionOf, versions } from '../helpers/store-catalog.ts';
import { StoreFixture } from '../helpers/store-fixture.ts';

const TIMEOUT = { timeout: 180_000 };
const PASSWORD = 'hunter2-not-in-messages';
const READ_AT = Date.parse('2026-11-22T00:00:00Z');

const fixture = new StoreFixture({ prefix: 'store', password: PASSWORD, applicationName: 'pglog-test-writer' });

before(() => fixture.start());
after(() => fixture.stop());

const connect = (database: string): Promise<pg.Client> => fixture.connect(database);
const freshStore = (options: { maxTextBytes?: number; retentionDays?: number } = {}): ReturnType<StoreFixture['freshStore']> => fixture.freshStore(options);

const SRC: SourceRef = { target: 'db1', instance: 'main', file: 'log/postgresql.log' };
const SRC2: SourceRef = { target: 'db2', instance: 'main', file: 'log/postgresql.log' };

function statement(i: number, over: Partial<StatementEvent> = {}): StatementEvent {
  return nthStatement(i, {
    duration_ms: 0.5 + i,
    statement_name: '<unnamed>',
    query: `UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2 -- ${i}`,
    parameters: `$1 = '${i}', $2 = '${i * 3}'`,
    normalized: 'update pgbench_accounts set abalance = abalance + $1 where aid = $2',
    fingerprint: 'fp-update',
    ...over,
  });
}

function items(source: SourceRef, events: readonly PglogEvent[]): BatchItem[] {
  return events.map((event) => ({ source, event, readAt: READ_AT }));
}

function position(source: SourceRef, offset: number): StorePosition {
  return { ...source, identity: 'inode:42', offset };
}

function batchOf(source: SourceRef, events: readonly PglogEvent[], offset: number): StoreBatch {
  return { items: items(source, events), positions: [position(source, offset)] };
}

const epochsOf = (...pairs: Array<[SourceRef, number]>): Map<string, number> => new Map(pairs.map(([s, e]) => [streamKeyOf(s.target, s.instance), e]));

test('open() migrates and makes the partitions around today', TIMEOUT, async () => {
  const { db } = await freshStore();
  assert.deepEqual(await versions(db), [1, 2, 3, 4, 5, 6, 7]);
  const today = new Date().toISOString().slice(0, 10).replaceAll('-', '');
  assert.equal(await count(db, `SELECT 1 FROM pg_class WHERE relname = $1`, [`statement_events_p${today}`]), 1);
});

test('every event kind lands in its table and the stable views, with the position', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  const fixture = parseChunks(
    { format: 'stderr', prefix: '%m [%p] %q%u@%d ' },
    readFileSync(new URL('../fixtures/pipeline-stderr.log', import.meta.url)),
  ).events;
  const exact = statement(1, { ts: '2026-11-21T13:29:33.123456+03:00' });
  const events = [...fixture, exact];
  const claimed = await writer.claim(SRC.target, SRC.instance);
  assert.deepEqual(claimed, { epoch: 1, position: null });
  const last = events.at(-1) as PglogEvent;
  const res = await writer.commit(batchOf(SRC, events, last.end), epochsOf([SRC, claimed.epoch]));
  const kinds = (k: string): number => events.filter((e) => e.kind === k).length;
  assert.deepEqual(res.rows, {
    statement_events: kinds('statement'),
    error_events: kinds('error'),
    lock_wait_events: kinds('lock_wait'),
    other_events: events.length - kinds('statement') - kinds('error') - kinds('lock_wait'),
  });
  assert.equal(res.quarantined, 0);
  assert.deepEqual(res.fenced, []);
  assert.ok(res.bytes > 0);

  // Statements: the view's columns, the microseconds and the zone offset applied.
  const st = await db.query(
    `SELECT (extract(epoch FROM ts) * 1000000)::int8::text AS us, target, instance, database, username,
      application, pid, duration_ms, fingerprint, query FROM pglog.statements WHERE query = $1`,
    [exact.query],
  );
  assert.deepEqual(st.rows, [
    {
      us: String(Date.parse('2026-11-21T10:29:33.123Z') * 1000 + 456),
      target: 'db1',
      instance: 'main',
      database: 'app',
      username: 'alice',
      application: 'pgbench',
      pid: exact.pid,
      duration_ms: exact.duration_ms,
      fingerprint: 'fp-update',
      query: exact.query,
    },
  ]);
  const fxStatement = fixture.find((e) => e.kind === 'statement') as StatementEvent;
  assert.equal(
    await count(db, 'SELECT 1 FROM pglog.statement_events WHERE query = $1 AND protocol = $2 AND file_offset = $3 AND ts_logged IS NULL', [
      fxStatement.query,
      fxStatement.protocol,
      fxStatement.offset,
    ]),
    1,
  );

  // Errors, lock waits, everything else.
  const fxError = fixture.find((e) => e.kind === 'error');
  assert.ok(fxError?.kind === 'error');
  const er = await db.query('SELECT severity, sqlstate, message, hint, statement FROM pglog.errors WHERE message = $1', [fxError.message]);
  assert.deepEqual(er.rows, [
    { severity: fxError.severity, sqlstate: fxError.sqlstate, message: fxError.message, hint: fxError.hint, statement: fxError.statement },
  ]);
  const fxLock = fixture.find((e) => e.kind === 'lock_wait');
  assert.ok(fxLock?.kind === 'lock_wait');
  const lw = await db.query('SELECT pid, lock_type, wait_ms, acquired FROM pglog.lock_waits');
  assert.deepEqual(lw.rows, [{ pid: fxLock.waiting_pid, lock_type: fxLock.lock_type, wait_ms: fxLock.wait_ms, acquired: fxLock.state === 'acquired' }]);
  const other = await db.query<{ kind: string; n: number }>('SELECT kind, count(*)::int AS n FROM pglog.other_events GROUP BY kind ORDER BY kind');
  const expectedOther = new Map<string, number>();
  for (const e of events) if (!['statement', 'error', 'lock_wait'].includes(e.kind)) expectedOther.set(e.kind, (expectedOther.get(e.kind) ?? 0) + 1);
  assert.deepEqual(
    other.rows,
    [...expectedOther].sort(([a], [b]) => (a < b ? -1 : 1)).map(([kind, n]) => ({ kind, n })),
  );
  const plan = fixture.find((e) => e.kind === 'plan');
  assert.ok(plan?.kind === 'plan');
  const planRow = await db.query<{ plan: string }>(`SELECT payload->>'plan' AS plan FROM pglog.other_events WHERE kind = 'plan' AND file_offset = $1`, [
    plan.offset,
  ]);
  assert.equal(planRow.rows[0]?.plan, plan.plan);

  // Templates: statements and plans, first and last seen.
  const tpl = await db.query(
    `SELECT normalized, (extract(epoch FROM first_seen) * 1000000)::int8::text AS first FROM pglog.query_templates WHERE fingerprint = 'fp-update'`,
  );
  assert.deepEqual(tpl.rows, [{ normalized: exact.normalized, first: String(Date.parse('2026-11-21T10:29:33.123Z') * 1000 + 456) }]);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.query_templates WHERE fingerprint = $1', [plan.fingerprint]), 1);
  // The stable view pglog.templates (store version 5) shows the same text.
  const view = await db.query('SELECT normalized FROM pglog.templates WHERE fingerprint = $1', ['fp-update']);
  assert.deepEqual(view.rows, [{ normalized: exact.normalized }]);

  // The position, and a later claim resumes from it.
  const pos = await db.query('SELECT target, instance, file, "offset"::int8::text AS off FROM pglog.read_positions');
  assert.deepEqual(pos.rows, [{ target: 'db1', instance: 'main', file: SRC.file, off: String(last.end) }]);
  const again = await writer.claim(SRC.target, SRC.instance);
  assert.deepEqual(again, { epoch: 2, position: { ...position(SRC, last.end) } });
});

test("fencing: a newer owner's claim leaves the old owner's events and position out; other streams commit", TIMEOUT, async () => {
  const { writer: a, db } = await freshStore();
  const b = await fixture.openWriter(fixture.lastDatabase);
  assert.equal((await a.claim(SRC.target, SRC.instance, 5)).epoch, 5);
  assert.equal((await a.claim(SRC2.target, SRC2.instance, 5)).epoch, 5);
  await a.commit(batchOf(SRC, [statement(1)], 100), epochsOf([SRC, 5]));
  // The shard moves: owner B claims with the next epoch and resumes from A's position.
  assert.deepEqual(await b.claim(SRC.target, SRC.instance, 6), { epoch: 6, position: position(SRC, 100) });
  // A, not yet told, commits both streams.
  const res = await a.commit(
    {
      items: [...items(SRC, [statement(2), statement(3)]), ...items(SRC2, [statement(4)])],
      positions: [position(SRC, 400), position(SRC2, 500)],
    },
    epochsOf([SRC, 5], [SRC2, 5]),
  );
  assert.deepEqual(res.fenced, [{ target: 'db1', instance: 'main', epoch: 6 }]);
  assert.equal(res.rows.statement_events, 1);
  assert.equal(await count(db, `SELECT 1 FROM pglog.statements WHERE target = 'db1'`), 1, 'only what A wrote before B took over');
  assert.equal(await count(db, `SELECT 1 FROM pglog.statements WHERE target = 'db2'`), 1);
  assert.equal(await positionOf(db, SRC), 100);
  assert.equal(await positionOf(db, SRC2), 500);
  // A claiming again with its old epoch is refused; B commits.
  await assert.rejects(a.claim(SRC.target, SRC.instance, 5), (e) => isPglogError(e) && e.code === 'STORE_FENCED' && /epoch 6/.test(e.message));
  const bRes = await b.commit(batchOf(SRC, [statement(2)], 300), epochsOf([SRC, 6]));
  assert.deepEqual(bRes.fenced, []);
  assert.equal(await positionOf(db, SRC), 300);
  // Standalone: a restarted process takes the next epoch and fences the zombie of the last.
  const zombie = await a.claim(SRC2.target, SRC2.instance);
  const restarted = await b.claim(SRC2.target, SRC2.instance);
  assert.equal(restarted.epoch, zombie.epoch + 1);
  const z = await a.commit(batchOf(SRC2, [statement(9)], 900), epochsOf([SRC2, zombie.epoch]));
  assert.deepEqual(z.fenced, [{ target: 'db2', instance: 'main', epoch: restarted.epoch }]);
  assert.equal(await positionOf(db, SRC2), 500);
});

test('bisection: 1,000 rows with 3 the server refuses → 997 committed, 3 quarantined with reasons, position committed', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  await db.query(`ALTER TABLE pglog.statement_events ADD CONSTRAINT no_poison CHECK (query NOT LIKE '%POISON%')`);
  const poison = new Set([3, 500, 998]);
  const events = Array.from({ length: 1000 }, (_, i) => statement(i, poison.has(i) ? { query: `SELECT 'POISON ${i}'` } : {}));
  // One more the encoder refuses (pid beyond int4) in the same batch, quarantined without being sent.
  events.push(statement(1000, { pid: 2 ** 40 }));
  const res = await writer.commit(batchOf(SRC, events, 100_100), epochsOf());
  assert.equal(res.rows.statement_events, 997);
  assert.equal(res.quarantined, 4);
  assert.deepEqual(res.quarantinedByTable, { statement_events: 4 });
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_events'), 997);
  assert.equal(await count(db, `SELECT 1 FROM pglog.statement_events WHERE query LIKE '%POISON%' OR pid > 5000`), 0);
  const q = await db.query<{ file_offset: string; reason: string; query: string }>(
    `SELECT file_offset::text AS file_offset, reason, "row"->>'query' AS query FROM pglog.quarantine q ORDER BY q.file_offset`,
  );
  assert.deepEqual(
    q.rows.map((r) => Number(r.file_offset)),
    [300, 50_000, 99_800, 100_000],
  );
  for (const r of q.rows.slice(0, 3)) {
    assert.match(r.reason, /^statement_events: SQLSTATE 23514: .*no_poison/);
    assert.match(r.query, /POISON/);
  }
  assert.match(q.rows[3]?.reason ?? '', /^statement_events: STORE_ENCODING: column pid \(int4\)/);
  assert.equal(await positionOf(db, SRC), 100_100);
  await db.query('ALTER TABLE pglog.statement_events DROP CONSTRAINT no_poison');
});

/** Per minute and key: calls, timed, total ms, max ms from the raw rows, and from the rollup's parts summed. */
async function rollupVersusRows(db: pg.Client): Promise<{ rows: string[]; rollup: string[] }> {
  const key = `to_char(bucket AT TIME ZONE 'UTC', 'HH24:MI') || ' ' || target || '/' || instance || ' ' || coalesce(database, '-') || ' ' || coalesce(fingerprint, '-')`;
  const raw = await db.query<{
    line: string;
  }>(`SELECT ${key} || ' ' || calls || ' ' || timed || ' ' || round(total::numeric, 3) || ' ' || coalesce(mx::text, '-') AS line FROM (
      SELECT date_bin('1 minute', ts, timestamptz 'epoch') AS bucket, target, instance, database, fingerprint, count(*) AS calls,
             count(duration_ms) AS timed, coalesce(sum(duration_ms), 0) AS total, max(duration_ms) AS mx
        FROM pglog.statements GROUP BY 1, 2, 3, 4, 5) x ORDER BY 1`);
  const rolled = await db.query<{
    line: string;
  }>(`SELECT ${key} || ' ' || calls || ' ' || timed || ' ' || round(total::numeric, 3) || ' ' || coalesce(mx::text, '-') AS line FROM (
      SELECT bucket, target, instance, database, fingerprint, sum(calls) AS calls, sum(timed) AS timed, sum(total_ms) AS total, max(max_ms) AS mx
        FROM pglog.statement_rollup GROUP BY 1, 2, 3, 4, 5) x ORDER BY 1`);
  return { rows: raw.rows.map((r) => r.line), rollup: rolled.rows.map((r) => r.line) };
}

test('the statement rollup counts exactly the rows stored: refused and unencodable rows are left out', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  await db.query(`ALTER TABLE pglog.statement_events ADD CONSTRAINT no_poison CHECK (query NOT LIKE '%POISON%')`);
  const at = (i: number): string => new Date(Date.parse('2026-11-21T13:29:00Z') + i * 700).toISOString();
  const events = Array.from({ length: 600 }, (_, i) =>
    statement(i, {
      ts: at(i),
      fingerprint: `fp-${i % 3}`,
      database: i % 7 === 0 ? null : 'app',
      duration_ms: i % 5 === 0 ? null : 0.5 + i,
      ...(i === 10 || i === 333 ? { query: `SELECT 'POISON ${i}'` } : {}),
    }),
  );
  events.push(statement(600, { ts: at(600), pid: 2 ** 40 }));
  const res = await writer.commit(batchOf(SRC, events, 60_100), epochsOf());
  assert.equal(res.quarantined, 3);
  // A second batch of the same minutes from another stream: a second set of parts, summed.
  await writer.commit(batchOf(SRC2, events.slice(0, 100), 10_000), epochsOf());
  const { rows, rollup } = await rollupVersusRows(db);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_events'), 697);
  assert.ok(rows.length > 10, rows.join('\n'));
  assert.deepEqual(rollup, rows);
  // Histogram counts add up to the timed statements of each part.
  assert.equal(await count(db, `SELECT 1 FROM pglog.statement_rollup WHERE (SELECT coalesce(sum(c), 0) FROM unnest(counts) c) <> timed`), 0);
  // Migration 0006's backfill (for rows stored before it; report-bench uses it too) makes the
  // same sums and the same histograms as the writer did.
  const histograms = async (): Promise<string[]> =>
    (
      await db.query<{ h: string }>(`SELECT target || ' ' || fingerprint || ' ' || b || ' ' || sum(c) AS h
      FROM pglog.statement_rollup, unnest(bins, counts) AS u(b, c) GROUP BY target, fingerprint, b ORDER BY 1`)
    ).rows.map((r) => r.h);
  const written = await histograms();
  const backfill = /INSERT INTO pglog\.statement_rollup_parts[^;]*;/.exec(
    readFileSync(new URL('../../src/store/migrations/0006_statement_rollup.sql', import.meta.url), 'utf8'),
  );
  await db.query('TRUNCATE pglog.statement_rollup_parts');
  await db.query(backfill?.[0] ?? 'no backfill');
  assert.deepEqual((await rollupVersusRows(db)).rollup, rows);
  assert.deepEqual(await histograms(), written);
  await db.query('ALTER TABLE pglog.statement_events DROP CONSTRAINT no_poison');
});

test('NULs and unpaired surrogates are cleaned and counted; a 50 MB statement is capped and commits', TIMEOUT, async () => {
  const { writer, db } = await freshStore({ maxTextBytes: 64 * 1024 });
  const huge = `SELECT '${'x'.repeat(50 * 1024 * 1024)}'`;
  const res = await writer.commit(
    batchOf(SRC, [statement(1, { query: 'SELECT 1\0\0', parameters: "$1 = '\ud800'" }), statement(2, { query: huge })], 300),
    epochsOf(),
  );
  assert.equal(res.rows.statement_events, 2);
  assert.deepEqual(res.repairs, { nulRemoved: 2, invalidReplaced: 1, cut: 1 });
  const r = await db.query<{ query: string; parameters: string; bytes: number }>(
    'SELECT query, parameters, octet_length(query) AS bytes FROM pglog.statement_events ORDER BY file_offset',
  );
  assert.equal(r.rows[0]?.query, 'SELECT 1');
  assert.equal(r.rows[0]?.parameters, "$1 = '\ufffd'");
  const stored = r.rows[1]?.query ?? '';
  assert.ok((r.rows[1]?.bytes ?? Infinity) <= 64 * 1024, `${r.rows[1]?.bytes} bytes stored`);
  assert.ok(huge.startsWith(stored.slice(0, 60_000)), 'the start of the text is kept');
  // (not assert.match: its failure message would print the whole text)
  assert.ok(stored.endsWith(` [... cut by pglog: ${huge.length} bytes in all]`), stored.slice(-100));
});

test('a connection killed in the middle of a COPY commits nothing of the batch; the retry commits it once', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  const n = 50_000;
  const events = Array.from({ length: n }, (_, i) => statement(i));
  // Deterministic "middle": a trigger makes the COPY wait, at row 30,000, for an advisory
  // lock this test holds; by then rows have been copied and the COPY is still running.
  await db.query(`CREATE FUNCTION pglog_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.file_offset = 3000000 THEN PERFORM pg_advisory_xact_lock(4242); END IF; RETURN NEW; END $$`);
  await db.query('CREATE TRIGGER hold BEFORE INSERT ON pglog.statement_events FOR EACH ROW EXECUTE FUNCTION pglog_test_hold()');
  const holder = await connect(db.database as string);
  await holder.query('SELECT pg_advisory_lock(4242)');
  const batch = batchOf(SRC, events, n * 100);
  const commit = writer.commit(batch, epochsOf());
  commit.catch(() => {
    /* asserted below */
  });
  let pid = 0;
  await waitFor(async () => {
    const r = await db.query<{ pid: number; tuples: string }>(`SELECT a.pid, p.tuples_processed::text AS tuples FROM pg_stat_activity a
      JOIN pg_stat_progress_copy p USING (pid) WHERE a.application_name = 'pglog-test-writer' AND a.wait_event = 'advisory'`);
    pid = r.rows[0]?.pid ?? 0;
    return pid !== 0 && Number(r.rows[0]?.tuples) > 0;
  }, 'the COPY to wait in the middle');
  await db.query('SELECT pg_terminate_backend($1)', [pid]);
  await assert.rejects(commit, (e) => isPglogError(e) && e.code === 'STORE_UNAVAILABLE' && !e.message.includes(PASSWORD));
  await holder.query('SELECT pg_advisory_unlock(4242)');
  await db.query('DROP TRIGGER hold ON pglog.statement_events');
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_events'), 0);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.query_templates'), 0);
  assert.equal(await positionOf(db, SRC), null);
  // The caller retries the same batch: the writer reconnects and it goes in once.
  const res = await writer.commit(batch, epochsOf());
  assert.equal(res.rows.statement_events, n);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_events'), n);
  assert.equal(await count(db, 'SELECT DISTINCT file_offset FROM pglog.statement_events'), n);
  assert.equal(await positionOf(db, SRC), n * 100);
});

test('store stopped: STORE_UNAVAILABLE without the password; once it is back, commits go in', TIMEOUT, async () => {
  const { writer } = await freshStore();
  await writer.commit(batchOf(SRC, [statement(1)], 200), epochsOf());
  await fixture.server.stopServer();
  try {
    for (const attempt of [() => writer.commit(batchOf(SRC, [statement(2)], 300), epochsOf()), () => writer.claim('db9', 'main')]) {
      await assert.rejects(attempt(), (e) => {
        assert.ok(isPglogError(e) && e.code === 'STORE_UNAVAILABLE', String(e));
        assert.ok(!e.message.includes(PASSWORD), e.message);
        assert.match(e.message, /store postgres@\/.*:5432\/store_\d+/);
        return true;
      });
    }
  } finally {
    await fixture.server.startServer();
    // The test's own clients lost their connections with the server: reconnect the admin one.
    await fixture.reconnectAdmin();
  }
  const res = await writer.commit(batchOf(SRC, [statement(2)], 300), epochsOf());
  assert.equal(res.rows.statement_events, 1);
  const db = await connect(fixture.lastDatabase);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statements'), 2);
  assert.equal(await positionOf(db, SRC), 300);
});

test('maintain() makes partitions from yesterday to three days ahead and drops those past retention', TIMEOUT, async () => {
  const { writer, db } = await freshStore({ retentionDays: 3 });
  const now = new Date('2030-06-15T12:00:00Z');
  const first = await writer.maintain(now);
  const days = ['20300614', '20300615', '20300616', '20300617', '20300618'];
  assert.deepEqual(
    first.created.filter((n) => n.startsWith('statement_events_')).sort(),
    days.map((d) => `statement_events_p${d}`),
  );
  assert.equal(first.created.length, 9 * days.length);
  assert.deepEqual((await writer.maintain(now)).created, []);
  // Rows of 2030-06-14 commit into their partition.
  await writer.commit(batchOf(SRC, [statement(1, { ts: '2030-06-14T08:00:00Z' })], 100), epochsOf());
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_events_p20300614'), 1);
  // Ten days later everything before 2030-06-22 is past a 3-day retention.
  const later = await writer.maintain(new Date('2030-06-25T00:30:00Z'));
  assert.deepEqual(
    later.dropped.filter((n) => n.startsWith('statement_events_')).sort(),
    days.map((d) => `statement_events_p${d}`),
  );
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_events'), 0);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_rollup'), 0, 'the rollup is kept as long as its statements');
});

test('maintain() compacts the rollup: one row per minute and key, the same sums and histograms; recent minutes are left', TIMEOUT, async () => {
  const { writer, db } = await freshStore();
  const at = (i: number): string => new Date(Date.parse('2026-11-21T13:29:00Z') + i * 1_300).toISOString();
  const events = Array.from({ length: 300 }, (_, i) =>
    statement(i, { ts: at(i), fingerprint: `fp-${i % 2}`, database: i % 5 === 0 ? null : 'app', duration_ms: i % 7 === 0 ? null : 0.3 * i }),
  );
  // Ten batches of one stream over the same minutes: ten parts per minute and key.
  for (let b = 0; b < 10; b++)
    await writer.commit(
      batchOf(
        SRC,
        events.filter((_, i) => i % 10 === b),
        1000 * (b + 1),
      ),
      epochsOf(),
    );
  const histograms = async (): Promise<string[]> =>
    (
      await db.query<{ h: string }>(`SELECT concat_ws(' ', bucket, database, fingerprint, b, sum(c)) AS h
      FROM pglog.statement_rollup, unnest(bins, counts) AS u(b, c) GROUP BY bucket, database, fingerprint, b ORDER BY 1`)
    ).rows.map((r) => r.h);
  const { rows } = await rollupVersusRows(db);
  const before = await histograms();
  const parts = await count(db, 'SELECT 1 FROM pglog.statement_rollup');
  // Minutes less than ten minutes old are left alone.
  assert.equal((await writer.maintain(new Date('2026-11-21T13:33:00Z'))).compacted, 0);
  const res = await writer.maintain(new Date('2026-11-22T00:00:00Z'));
  // Keys with one part (here the NULL-database ones: two batches hold them, one per fingerprint) stay as they are.
  assert.equal(res.compacted, parts - (await count(db, `SELECT 1 FROM pglog.statement_rollup WHERE database IS NULL`)));
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_rollup'), rows.length, 'one row per minute and key');
  assert.ok(parts > rows.length, `${parts} parts for ${rows.length} minutes and keys`);
  assert.deepEqual((await rollupVersusRows(db)).rollup, rows);
  assert.deepEqual(await histograms(), before);
  assert.equal((await writer.maintain(new Date('2026-11-22T00:00:00Z'))).compacted, 0, 'nothing left to compact');
});
