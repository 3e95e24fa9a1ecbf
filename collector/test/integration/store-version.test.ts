// The store's PostgreSQL versions (docs/decisions/0033-supported-postgresql-majors.md): a
// PostgreSQL 13 store is refused before any migration (STORE_VERSION_UNSUPPORTED, naming its
// version and the minimum), and `pglog collect` says so once instead of retrying in a loop of
// warnings; the oldest supported store (14) and the newest (18) migrate, take a commit of
// real events and run their maintenance (the statement rollup's date_bin).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { jsonRecords, sshTarget, startCollector, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type PgMajor } from '@pglog/test-support/pg-binaries.ts';
import { migrateStore, startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { startSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { StoreWriter, streamKeyOf } from '../../src/store/store-writer.ts';
import { parseChunks } from '../helpers/parse.ts';
import { versions } from '../helpers/store-catalog.ts';

const TIMEOUT = { timeout: 120_000 };
const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

async function store(major: PgMajor): Promise<TestPostgres> {
  const server = await startPostgres({ major });
  cleanups.push(() => server.stop());
  return server;
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(sql)).rows;
  } finally {
    await c.end();
  }
}

void describe('a PostgreSQL 13 store', () => {
  let pg13: TestPostgres;

  test('is refused before any migration, naming its version and the minimum', TIMEOUT, async () => {
    pg13 = await store(13);
    const refused = await migrateStore(pg13.url).then(
      () => assert.fail('migrated a PostgreSQL 13 store'),
      (e: unknown) => e,
    );
    assert.ok(isPglogError(refused), String(refused));
    assert.equal(refused.code, 'STORE_VERSION_UNSUPPORTED');
    assert.match(refused.message, /runs PostgreSQL 13\.\d+ \(server_version_num 13\d{4}\); pglog's store needs PostgreSQL 14 or newer/);
    // Nothing was written: no half-migrated schema is left behind.
    assert.deepEqual(await query(pg13.url, "SELECT 1 FROM pg_namespace WHERE nspname = 'pglog'"), []);
  });

  test('pglog collect says so once and does not retry', TIMEOUT, async () => {
    const ssh = await startSshServer();
    cleanups.push(() => ssh.stop());
    const work = mkdtempSync(join(tmpdir(), 'pglog-store-version-'));
    cleanups.push(() => rmSync(work, { recursive: true, force: true }));
    // The target is never read: the store is opened first.
    const targets = writeTargetsFile(work, [sshTarget('db1', ssh, { dataDirectory: join(work, 'data'), logDirectory: join(work, 'data/log') })]);
    const collector = startCollector({ targetsFile: targets, storeUrl: pg13.url, outputFile: join(work, 'collector.log') });
    cleanups.push(async () => {
      await collector.stop();
    });
    const refusals = (): Array<Record<string, unknown>> => collector.logRecords().filter((r) => r['code'] === 'STORE_VERSION_UNSUPPORTED');
    await waitFor(() => refusals().length > 0, 'the refusal in the collector log', 30_000);
    // A retry loop would have tried again within 0.5 s, 1 s, 2 s ...
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    const records = jsonRecords(collector.output());
    assert.equal(refusals().length, 1, collector.output());
    const [refusal] = refusals();
    assert.equal(refusal!['level'], 'error');
    assert.match(String(refusal!['msg']), /store refused, not retried: the store runs PostgreSQL 13\.\d+ .*needs PostgreSQL 14 or newer/);
    assert.deepEqual(
      records.filter((r) => String(r['msg']).startsWith('store not available')),
      [],
    );
    const stopped = await collector.stop();
    assert.equal(stopped.code, 0, collector.output());
  });
});

for (const major of [14, 18] as const) {
  void describe(`a PostgreSQL ${major} store`, () => {
    test('migrates, takes a commit of real events and runs its maintenance', TIMEOUT, async () => {
      const server = await store(major);
      const writer = await StoreWriter.open({ url: server.url, applicationName: 'pglog-test-store-version', connectTimeoutMs: 5_000 });
      cleanups.push(() => writer.close());
      const db = new pg.Client({ connectionString: server.url });
      await db.connect();
      cleanups.push(() => db.end());
      assert.deepEqual(await versions(db), [1, 2, 3, 4, 5, 6, 7]);

      const csv = readFileSync(new URL(`../fixtures/log-majors/pg${major}.csv`, import.meta.url));
      const events = parseChunks({ format: 'csvlog' }, csv).events;
      const source = { target: 'db1', instance: 'main', file: 'log/postgresql.csv' };
      const { epoch } = await writer.claim(source.target, source.instance);
      await writer.commit(
        { items: events.map((event) => ({ source, event, readAt: Date.now() })), positions: [{ ...source, identity: 'inode:1', offset: csv.length }] },
        new Map([[streamKeyOf(source.target, source.instance), epoch]]),
      );
      const statements = events.filter((e) => e.kind === 'statement').length;
      const rows = await db.query<{ n: string }>('SELECT count(*)::text AS n FROM pglog.statements');
      assert.equal(Number(rows.rows[0]!.n), statements);
      const maintained = await writer.maintain();
      assert.equal(maintained.compaction, 'done');
      // Migrating again finds nothing to do.
      await migrateStore(server.url);
      assert.deepEqual(await versions(db), [1, 2, 3, 4, 5, 6, 7]);
    });
  });
}
