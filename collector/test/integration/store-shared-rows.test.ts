// The rows every collector of a fleet shares in one store, on a real PostgreSQL: the query
// templates (every server runs the same application, so every commit names the same
// fingerprints) and the statement rollup's compaction. Issue 46's soak, six collectors of
// 1,000 servers: commits queued on the templates' row locks, and compactions of the same
// parts ran at once in every collector (and at every start, before the first read).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import type { StatementEvent } from '../../src/logformat/events.ts';
import { COMPACTION_LOCK_KEY } from '../../src/store/store-sql.ts';
import type { SourceRef, StoreBatch } from '../../src/store/store-writer.ts';
import { streamKeyOf } from '../../src/store/store-writer.ts';
import { nthStatement } from '../helpers/events.ts';
import { count } from '../helpers/store-catalog.ts';
import { StoreFixture } from '../helpers/store-fixture.ts';

const TIMEOUT = { timeout: 180_000 };
const fixture = new StoreFixture({ prefix: 'shared', password: 'shared-rows-secret', applicationName: 'pglog-test-shared' });
before(() => fixture.start());
after(() => fixture.stop());

const SRC: SourceRef = { target: 'db1', instance: 'main', file: 'log/postgresql.log' };
const EPOCHS = new Map([[streamKeyOf(SRC.target, SRC.instance), 1]]);

/** Statements of one template (`fp-shared`) and two fingerprints, at `at(i)`. */
function batch(at: (i: number) => number, from: number, n: number, offset: number): StoreBatch {
  const events: StatementEvent[] = Array.from({ length: n }, (_, k) =>
    nthStatement(from + k, {
      ts: new Date(at(from + k)).toISOString(),
      duration_ms: 1 + k,
      database: 'app',
      normalized: 'select $1',
      fingerprint: (from + k) % 2 === 0 ? 'fp-shared' : 'fp-other',
    }),
  );
  return {
    items: events.map((event) => ({ source: SRC, event, readAt: at(from + n) })),
    positions: [{ ...SRC, identity: 'inode:42', offset }],
  };
}

const seen = async (db: { query: (q: string, v: unknown[]) => Promise<{ rows: Array<{ first: string; last: string }> }> }, fp: string) =>
  (
    await db.query(
      `SELECT (extract(epoch FROM first_seen) * 1000)::int8::text AS first, (extract(epoch FROM last_seen) * 1000)::int8::text AS last
         FROM pglog.query_templates WHERE fingerprint = $1`,
      [fp],
    )
  ).rows[0];

test('a template another commit holds: a commit moving its last_seen does not wait for it; an earlier first_seen is still exact', TIMEOUT, async () => {
  const { writer, db, name } = await fixture.freshStore();
  const t0 = Date.parse('2026-12-07T10:00:00Z');
  const at = (i: number): number => t0 + i * 10_000;
  await writer.commit(batch(at, 100, 4, 100), EPOCHS);
  assert.deepEqual(await seen(db, 'fp-shared'), { first: String(at(100)), last: String(at(102)) });

  // Another collector's commit holds fp-shared's row (as the upsert did until its commit ended).
  const other = await fixture.connect(name);
  await other.query('BEGIN');
  await other.query(`SELECT 1 FROM pglog.query_templates WHERE fingerprint = 'fp-shared' FOR UPDATE`);
  const committed = writer.commit(batch(at, 200, 4, 200), EPOCHS).then(() => 'committed');
  const outcome = await Promise.race([committed, new Promise((r) => setTimeout(() => r('waiting on the row lock'), 20_000))]);
  await other.query('ROLLBACK');
  await other.end();
  assert.equal(outcome, 'committed');
  await committed;
  assert.equal(await count(db, `SELECT 1 FROM pglog.statements WHERE fingerprint = 'fp-shared'`), 4);

  // Not held: last_seen moves once a minute behind; an earlier entry (a backlog) widens first_seen exactly.
  await writer.commit(batch(at, 300, 4, 300), EPOCHS);
  assert.equal((await seen(db, 'fp-shared'))?.last, String(at(302)));
  await writer.commit(batch(at, 10, 2, 400), EPOCHS);
  assert.deepEqual(await seen(db, 'fp-shared'), { first: String(at(10)), last: String(at(302)) });
  // Within a minute of the stored last_seen: the row is left alone.
  await writer.commit(batch(at, 304, 2, 500), EPOCHS);
  assert.equal((await seen(db, 'fp-shared'))?.last, String(at(302)));
});

test("the rollup's compaction: one collector at a time in the store, and none when a writer opens (a restarted collector reads at once)", TIMEOUT, async () => {
  const { writer, db, name } = await fixture.freshStore();
  // An hour ago: within the two days a compaction covers, past the 10 minutes it leaves alone.
  const hourAgo = Date.now() - 3_600_000;
  const at = (i: number): number => hourAgo + i * 1_300;
  for (let b = 0; b < 5; b++) await writer.commit(batch(at, b * 20, 20, 1000 * (b + 1)), EPOCHS);
  const parts = await count(db, 'SELECT 1 FROM pglog.statement_rollup');
  assert.ok(parts > 2, `${parts} parts`);
  // Another writer opening the same store makes its partitions and leaves the rollup alone.
  await fixture.openWriter(name);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_rollup'), parts, 'no compaction at open');
  // Another collector compacting (its lock held here): this one skips its round.
  await db.query('BEGIN');
  await db.query('SELECT pg_advisory_xact_lock($1::int8)', [COMPACTION_LOCK_KEY.toString()]);
  const skipped = await writer.maintain();
  await db.query('ROLLBACK');
  assert.equal(skipped.compaction, 'skipped');
  assert.equal(skipped.compacted, 0);
  assert.equal(await count(db, 'SELECT 1 FROM pglog.statement_rollup'), parts);
  // Parts of keys (minute, target, instance, database, fingerprint) that have more than one: what a compaction removes.
  const manyPartsOf = `SELECT coalesce(sum(c), 0)::int AS n FROM (SELECT count(*) AS c FROM pglog.statement_rollup_parts
                        GROUP BY bucket, target, instance, database, fingerprint HAVING count(*) > 1) k`;
  const removable = (await db.query<{ n: number }>(manyPartsOf)).rows[0]!.n;
  assert.ok(removable > 0, 'five batches over the same minutes leave keys with several parts');
  const done = await writer.maintain();
  assert.equal(done.compaction, 'done');
  assert.equal(done.compacted, removable);
  assert.equal((await db.query<{ n: number }>(manyPartsOf)).rows[0]!.n, 0, 'one part per key left');
});
