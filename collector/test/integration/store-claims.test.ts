// Claims and first positions of many streams at once (claims.ts, issue 46), against a real
// PostgreSQL 15: calls made together share transactions, and still each gets its own answer:
// its epoch and position, or its own STORE_FENCED, the others unaffected.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

import { StoreFixture } from '../helpers/store-fixture.ts';

const TIMEOUT = { timeout: 180_000 };
const fixture = new StoreFixture({ prefix: 'claims', password: 'claims-secret', applicationName: 'pglog-test-claims' });
before(() => fixture.start());
after(() => fixture.stop());

const names = (n: number, prefix = 'db'): string[] => Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, '0')}`);

/** Transactions committed in the store's database so far (pg_stat_database, flushed first). */
async function commits(db: pg.Client): Promise<number> {
  await db.query('SELECT pg_stat_force_next_flush()');
  const { rows } = await db.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()');
  return Number(rows[0]!.n);
}

test('300 standalone claims at once: epoch 1 each, no position, in far fewer transactions than streams; again: epoch 2', TIMEOUT, async () => {
  const { writer, db } = await fixture.freshStore();
  const targets = names(300);
  const before = await commits(db);
  const first = await Promise.all(targets.map((t) => writer.claim(t, 'main')));
  const used = (await commits(db)) - before;
  assert.ok(
    first.every((c) => c.epoch === 1 && c.position === null),
    'epoch 1 and no position for every new stream',
  );
  // Our own two statistics reads commit too; 300 claims one by one would be 300 more.
  assert.ok(used < 30, `${used} transactions for 300 claims`);
  const second = await Promise.all(targets.map((t) => writer.claim(t, 'main')));
  assert.ok(second.every((c) => c.epoch === 2));
});

test('cluster claims at once: the one whose stored epoch is higher is fenced alone; first positions stored together, a stored one kept', TIMEOUT, async () => {
  const { writer, db } = await fixture.freshStore();
  const other = await fixture.openWriter(fixture.lastDatabase);
  const targets = names(50, 'c');
  // Another owner holds c0007 with epoch 9.
  assert.equal((await other.claim('c0007', 'main', 9)).epoch, 9);
  const claims = await Promise.allSettled(targets.map((t) => writer.claim(t, 'main', 3)));
  const fenced = claims.flatMap((r, i) => (r.status === 'rejected' ? [targets[i]] : []));
  assert.deepEqual(fenced, ['c0007']);
  const reason = (claims[7] as PromiseRejectedResult).reason as Error;
  assert.ok(isPglogError(reason) && reason.code === 'STORE_FENCED' && /epoch 9, newer than this owner's 3/.test(reason.message), String(reason));
  // c0011 already has a position: its start is not stored, the stored one comes back.
  await db.query(
    `INSERT INTO pglog.read_position_state (target, instance, file, file_identity, byte_offset, epoch, updated_at) VALUES ('c0011', 'main', 'log/old.log', 'i:1', 777, 3, now())`,
  );
  const ok = targets.filter((t) => t !== 'c0007');
  const starts = await Promise.allSettled(
    [...ok, 'c0007'].map((t) => writer.storeStart({ target: t, instance: 'main', file: 'log/postgresql.log', identity: 'i:2', offset: 10 }, 3)),
  );
  assert.equal(((starts.at(-1) as PromiseRejectedResult).reason as { code?: string }).code, 'STORE_FENCED');
  for (const [i, t] of ok.entries()) {
    const r = starts[i]!;
    assert.equal(r.status, 'fulfilled', `${t}: ${r.status === 'rejected' ? String(r.reason) : ''}`);
    const stored = (r as PromiseFulfilledResult<{ file: string; offset: number }>).value;
    assert.deepEqual([stored.file, stored.offset], t === 'c0011' ? ['log/old.log', 777] : ['log/postgresql.log', 10]);
  }
  const { rows } = await db.query<{ n: string }>("SELECT count(*) AS n FROM pglog.read_position_state WHERE target LIKE 'c%' AND epoch = 3");
  assert.equal(Number(rows[0]!.n), ok.length);
});
