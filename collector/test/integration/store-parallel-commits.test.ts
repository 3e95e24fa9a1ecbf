// Parallel commits against a real PostgreSQL 15 (docs/store.md "Parallel commits"): the
// Batcher with 4 lanes over a StoreWriter with 4 connections. Many streams hand over
// interleaved batches; every row lands exactly once, each stream's position only moves
// forward and in the order its batches were made, streams claimed by a newer owner midway are
// fenced with nothing of theirs beyond their committed position, and a connection of the pool
// killed in the middle of a COPY costs nothing: that batch is retried and commits once while
// the other connections go on; partition maintenance never runs beside a commit.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setImmediate as yieldNow } from 'node:timers/promises';

import { isPglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

import { type BatchCommitter, Batcher } from '../../src/collect/batcher.ts';
import type { StatementEvent } from '../../src/logformat/events.ts';
import type { SourceRef, StoreWriter } from '../../src/store/store-writer.ts';
import { nthStatement } from '../helpers/events.ts';
import { StoreFixture } from '../helpers/store-fixture.ts';

const TIMEOUT = { timeout: 300_000 };
const APP = 'pglog-test-parallel';
const READ_AT = Date.parse('2026-11-22T00:00:00Z');

const fixture = new StoreFixture({ prefix: 'parallel', password: 'not-a-secret', applicationName: APP });
before(() => fixture.start());
after(() => fixture.stop());

function statement(i: number): StatementEvent {
  return nthStatement(i, {
    duration_ms: 0.5,
    protocol: 'simple',
    statement_name: null,
    query: `SELECT abalance FROM pgbench_accounts WHERE aid = ${i}`,
    parameters: null,
    normalized: 'select abalance from pgbench_accounts where aid = $1',
    fingerprint: `fp-${i % 5}`,
  });
}

const sourceOf = (i: number): SourceRef => ({ target: `db${String(i).padStart(2, '0')}`, instance: 'main', file: 'log/postgresql.log' });

/** The committer, counting the commits in flight at once. */
function counting(writer: StoreWriter): BatchCommitter & { most: number } {
  let now = 0;
  const c = {
    most: 0,
    async commit(...args: Parameters<StoreWriter['commit']>): ReturnType<StoreWriter['commit']> {
      now++;
      c.most = Math.max(c.most, now);
      try {
        return await writer.commit(...args);
      } finally {
        now--;
      }
    },
  };
  return c;
}

/**
 * Records every change of a stored position with the backend that made it: the order of
 * positions per stream (its transactions are serialized by the claim's lock, so this is their
 * commit order) and how many connections committed.
 */
async function recordPositions(db: pg.Client): Promise<void> {
  await db.query(`CREATE TABLE position_log (id bigserial PRIMARY KEY, target text, byte_offset int8, backend int)`);
  // public.position_log qualified: the trigger runs in the writer's sessions, whose
  // search_path is pg_catalog, pg_temp (store-connection.ts).
  await db.query(`CREATE FUNCTION log_position() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN INSERT INTO public.position_log (target, byte_offset, backend) VALUES (NEW.target, NEW.byte_offset, pg_backend_pid()); RETURN NEW; END $$`);
  await db.query('CREATE TRIGGER log_position AFTER INSERT OR UPDATE ON pglog.read_position_state FOR EACH ROW EXECUTE FUNCTION log_position()');
}

/** Each stream's committed offsets in commit order: they must only grow. */
async function positionsInOrder(db: pg.Client): Promise<Map<string, number[]>> {
  const r = await db.query<{ target: string; o: string }>('SELECT target, byte_offset::text AS o FROM position_log ORDER BY id');
  const by = new Map<string, number[]>();
  for (const row of r.rows) by.set(row.target, [...(by.get(row.target) ?? []), Number(row.o)]);
  return by;
}

/** Rows of a target: how many, how many distinct offsets, the highest end. */
async function rowsOf(db: pg.Client, target: string): Promise<{ n: number; distinct: number; maxEnd: number }> {
  const r = await db.query<{ n: number; d: number; m: string | null }>(
    'SELECT count(*)::int AS n, count(DISTINCT file_offset)::int AS d, max(file_offset + 100)::text AS m FROM pglog.statement_events WHERE target = $1',
    [target],
  );
  return { n: r.rows[0]?.n ?? 0, distinct: r.rows[0]?.d ?? 0, maxEnd: Number(r.rows[0]?.m ?? 0) };
}

async function positionOf(db: pg.Client, target: string): Promise<number | null> {
  const r = await db.query<{ o: string }>('SELECT byte_offset::text AS o FROM pglog.read_position_state WHERE target = $1', [target]);
  return r.rows[0] === undefined ? null : Number(r.rows[0].o);
}

test('16 streams, interleaved, over 4 connections: every row once, positions in order, streams claimed away midway are fenced', TIMEOUT, async () => {
  const { writer, db } = await fixture.freshStore({ connections: 4 });
  await recordPositions(db);
  const streams = 16;
  const perStream = 2000;
  const handover = 25;
  const fencedAway = new Set([sourceOf(3).target, sourceOf(8).target, sourceOf(13).target]);
  const sources = Array.from({ length: streams }, (_, i) => sourceOf(i));
  const epochs = await Promise.all(sources.map(async (s) => (await writer.claim(s.target, s.instance)).epoch));
  const committer = counting(writer);
  const fencedSeen: string[] = [];
  const batcher = new Batcher(committer, { maxRows: 300, maxDelayMs: 5, lanes: 4 }, { fenced: (t) => fencedSeen.push(t) });
  // The newer owner: another writer (another collector) claiming three streams once each has
  // handed over (and the batcher committed) its first half; they go on reading after it.
  const newer = await fixture.openWriter(fixture.lastDatabase);
  let arrived = 0;
  let claimed!: () => void;
  const claimedAway = new Promise<void>((r) => {
    claimed = r;
  });
  await Promise.all(
    sources.map(async (source, s) => {
      for (let i = 0; i < perStream; i += handover) {
        if (i === perStream / 2 && fencedAway.has(source.target)) {
          if (++arrived === fencedAway.size) {
            await batcher.flush();
            for (const t of fencedAway) await newer.claim(t, 'main');
            claimed();
          }
          await claimedAway;
        }
        await batcher.waitForRoom(source.target);
        const events = Array.from({ length: handover }, (_, k) => statement(i + k));
        try {
          batcher.add(source, events, { ...source, identity: 'inode:1', offset: (i + handover) * 100 }, epochs[s]!, READ_AT);
        } catch (e) {
          assert.ok(fencedAway.has(source.target) && isPglogError(e) && e.code === 'STORE_FENCED', String(e));
          return;
        }
        await yieldNow();
      }
    }),
  );
  await batcher.flush();
  await batcher.stop(Date.now() + 10_000);

  assert.ok(committer.most >= 2, `batches committed side by side (at most ${committer.most} at once)`);
  const backends = await db.query<{ n: number }>('SELECT count(DISTINCT backend)::int AS n FROM position_log');
  assert.ok((backends.rows[0]?.n ?? 0) >= 2, 'more than one store connection committed');
  const order = await positionsInOrder(db);
  for (const { target } of sources) {
    const offsets = order.get(target) ?? [];
    for (let k = 1; k < offsets.length; k++) assert.ok(offsets[k]! > offsets[k - 1]!, `${target}: position ${offsets[k]} after ${offsets[k - 1]}`);
    const position = await positionOf(db, target);
    const rows = await rowsOf(db, target);
    assert.equal(rows.n, rows.distinct, `${target}: no row twice`);
    if (fencedAway.has(target)) {
      // Everything up to its committed position (its first half), once, and nothing after it.
      assert.equal(position, (perStream / 2) * 100, `${target} was fenced after its first half`);
      assert.equal(rows.n * 100, position, `${target}: every row below the position, none beyond`);
      assert.equal(rows.maxEnd, position);
    } else {
      assert.equal(position, perStream * 100, `${target}: position at its last event`);
      assert.equal(rows.n, perStream, `${target}: every row`);
    }
  }
  assert.deepEqual([...new Set(fencedSeen)].sort(), [...fencedAway].sort(), 'the fenced streams were reported');
  const claims = await db.query<{ target: string; epoch: number }>('SELECT target, epoch::int AS epoch FROM pglog.stream_claims ORDER BY target');
  for (const c of claims.rows) assert.equal(c.epoch, fencedAway.has(c.target) ? 2 : 1, `${c.target}'s claim`);
});

test('a pool connection killed in the middle of a COPY: that batch is retried and commits once, the other connections go on meanwhile', TIMEOUT, async () => {
  const { writer, db } = await fixture.freshStore({ connections: 4 });
  // Four streams in four lanes: each stream has a lane of its own (a new stream goes to the
  // lane with the fewest), so db00's held batch holds back no other stream.
  const streams = 4;
  const perStream = 1000;
  const sources = Array.from({ length: streams }, (_, i) => sourceOf(i));
  const epochs = await Promise.all(sources.map(async (s) => (await writer.claim(s.target, s.instance)).epoch));
  // The COPY carrying row 500 of db00 waits for an advisory lock this test holds.
  await db.query(`CREATE FUNCTION pglog_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.target = 'db00' AND NEW.file_offset = 50000 THEN PERFORM pg_advisory_xact_lock(4242); END IF; RETURN NEW; END $$`);
  await db.query('CREATE TRIGGER hold BEFORE INSERT ON pglog.statement_events FOR EACH ROW EXECUTE FUNCTION pglog_test_hold()');
  const holder = await fixture.connect(fixture.lastDatabase);
  await holder.query('SELECT pg_advisory_lock(4242)');
  const failures: unknown[] = [];
  const batcher = new Batcher(writer, { maxRows: 400, maxDelayMs: 5, lanes: 4, retryBaseMs: 50, retryCapMs: 200 }, { retrying: (e) => failures.push(e) });
  const handover = 50;
  const producing = Promise.all(
    sources.map(async (source, s) => {
      for (let i = 0; i < perStream; i += handover) {
        await batcher.waitForRoom(source.target);
        batcher.add(
          source,
          Array.from({ length: handover }, (_, k) => statement(i + k)),
          { ...source, identity: 'inode:1', offset: (i + handover) * 100 },
          epochs[s]!,
          READ_AT,
        );
        await yieldNow();
      }
    }),
  );
  const held = async (): Promise<number> => {
    const r = await db.query<{ pid: number }>(
      `SELECT a.pid FROM pg_stat_activity a JOIN pg_stat_progress_copy p USING (pid)
      WHERE a.application_name = $1 AND a.wait_event = 'advisory'`,
      [APP],
    );
    return r.rows[0]?.pid ?? 0;
  };
  let pid = 0;
  while ((pid = await held()) === 0) await new Promise((r) => setTimeout(r, 10));
  // While db00's lane waits inside its COPY, the other lanes' streams commit to their end.
  await producing;
  const others = sources.filter((s) => s.target !== 'db00');
  for (const s of others) {
    while ((await positionOf(db, s.target)) !== perStream * 100) await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(await held(), pid, 'the held COPY is still waiting');
  await db.query('SELECT pg_terminate_backend($1)', [pid]);
  while (failures.length === 0) await new Promise((r) => setTimeout(r, 10));
  assert.ok(isPglogError(failures[0]) && failures[0].code === 'STORE_UNAVAILABLE', String(failures[0]));
  await holder.query('SELECT pg_advisory_unlock(4242)');
  await batcher.flush();
  await batcher.stop(Date.now() + 10_000);

  for (const { target } of sources) {
    const rows = await rowsOf(db, target);
    assert.equal(rows.n, perStream, `${target}: every row`);
    assert.equal(rows.distinct, perStream, `${target}: each once`);
    assert.equal(await positionOf(db, target), perStream * 100, `${target}: position at its end`);
  }
  const sessions = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()',
    [APP],
  );
  assert.ok((sessions.rows[0]?.n ?? 0) <= 4, 'the lost connection was made again, not added to');
});

test('maintenance runs alone: it waits for a commit in flight on another connection, while a claim beside the commit does not', TIMEOUT, async () => {
  const { writer, db } = await fixture.freshStore({ connections: 4 });
  await db.query(`CREATE FUNCTION pglog_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.file_offset = 500 THEN PERFORM pg_advisory_xact_lock(4343); END IF; RETURN NEW; END $$`);
  await db.query('CREATE TRIGGER hold BEFORE INSERT ON pglog.statement_events FOR EACH ROW EXECUTE FUNCTION pglog_test_hold()');
  const holder = await fixture.connect(fixture.lastDatabase);
  await holder.query('SELECT pg_advisory_lock(4343)');
  const source = sourceOf(0);
  const commit = writer.commit(
    {
      items: Array.from({ length: 10 }, (_, i) => ({ source, event: statement(i), readAt: READ_AT })),
      positions: [{ ...source, identity: 'inode:1', offset: 1000 }],
    },
    new Map(),
  );
  for (;;) {
    const r = await db.query('SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database() AND wait_event = $2', [
      APP,
      'advisory',
    ]);
    if (r.rows.length > 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  // Another connection of the pool serves a claim while the commit waits.
  assert.equal((await writer.claim('db99', 'main')).epoch, 1);
  let maintained = false;
  const maintenance = writer.maintain().then(() => {
    maintained = true;
  });
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(maintained, false, 'partition DDL does not run beside a commit');
  await holder.query('SELECT pg_advisory_unlock(4343)');
  assert.equal((await commit).rows.statement_events, 10);
  await maintenance;
  assert.equal(maintained, true);
});
