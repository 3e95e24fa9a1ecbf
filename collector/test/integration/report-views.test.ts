// The stable views of migration 4 (checkpoints, maintenance, temp_files, sessions, plans,
// deadlocks) against a real PostgreSQL 15: events of every such kind, parsed from a real
// server's log and committed by the store writer, read back through the views with the exact
// values the parser produced, typed (numbers, booleans, jsonb) instead of payload text.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';

import type { PglogEvent } from '../../src/logformat/events.ts';
import type { SourceRef } from '../../src/store/store-writer.ts';
import { streamKeyOf } from '../../src/store/store-writer.ts';
import { parseChunks } from '../helpers/parse.ts';
import { StoreFixture } from '../helpers/store-fixture.ts';

const TIMEOUT = { timeout: 180_000 };
const fixture = new StoreFixture({ prefix: 'views', password: 'views-pw', applicationName: 'pglog-test-views' });
before(() => fixture.start());
after(() => fixture.stop());

const SRC: SourceRef = { target: 'db1', instance: 'main', file: 'log/postgresql.log' };

function ofKind<K extends PglogEvent['kind']>(events: readonly PglogEvent[], kind: K): Array<Extract<PglogEvent, { kind: K }>> {
  return events.filter((e): e is Extract<PglogEvent, { kind: K }> => e.kind === kind);
}

test('migration 4 views: every checkpoint, vacuum, temp file, connection, plan and deadlock with its typed values', TIMEOUT, async () => {
  const { writer, db } = await fixture.freshStore();
  const events = parseChunks(
    { format: 'stderr', prefix: '%m [%p] %q%u@%d ' },
    readFileSync(new URL('../fixtures/pipeline-stderr.log', import.meta.url)),
  ).events;
  const claimed = await writer.claim(SRC.target, SRC.instance);
  const last = events.at(-1) as PglogEvent;
  await writer.commit(
    {
      items: events.map((event) => ({ source: SRC, event, readAt: Date.parse('2026-11-22T00:00:00Z') })),
      positions: [{ ...SRC, identity: 'inode:1', offset: last.end }],
    },
    new Map([[streamKeyOf(SRC.target, SRC.instance), claimed.epoch]]),
  );
  const ts = (e: PglogEvent): Date => new Date(e.ts ?? '');
  const common = (e: PglogEvent): Record<string, unknown> => ({ ts: ts(e), target: 'db1', instance: 'main' });
  /** The view's rows (`sql`) are the events of `kinds` in log order, each its ts, target and instance, then `row(e)`. */
  const expectView = async <K extends PglogEvent['kind']>(
    kinds: readonly K[],
    sql: string,
    row: (e: Extract<PglogEvent, { kind: K }>) => Record<string, unknown>,
  ): Promise<void> => {
    for (const kind of kinds) assert.ok(ofKind(events, kind).length > 0, `the fixture has ${kind} events`);
    const ofKinds = events.filter((e): e is Extract<PglogEvent, { kind: K }> => (kinds as readonly string[]).includes(e.kind));
    const { rows } = await db.query(sql);
    assert.deepEqual(
      rows,
      ofKinds.map((e) => ({ ...common(e), ...row(e) })),
    );
  };

  await expectView(['checkpoint'], `SELECT * FROM pglog.checkpoints ORDER BY ts`, (e) => ({
    checkpoint_kind: e.checkpoint_kind,
    phase: e.phase,
    reason: e.reason,
    buffers_written: e.buffers_written === null ? null : String(e.buffers_written),
    buffers_pct: e.buffers_pct,
    wal_added: String(e.wal_added),
    wal_removed: String(e.wal_removed),
    wal_recycled: String(e.wal_recycled),
    write_s: e.write_s,
    sync_s: e.sync_s,
    total_s: e.total_s,
    sync_files: String(e.sync_files),
    longest_sync_s: e.longest_sync_s,
    average_sync_s: e.average_sync_s,
    distance_kb: String(e.distance_kb),
    estimate_kb: String(e.estimate_kb),
  }));

  await expectView(
    ['autovacuum'],
    `SELECT ts, target, instance, database, kind, relation, elapsed_s, buffer_hits, buffer_dirtied, write_rate_mbs,
      aggressive, wraparound, pages_remain, tuples_remain, wal_fpi, wal_bytes FROM pglog.maintenance ORDER BY ts`,
    (e) => ({
      database: e.database,
      kind: 'autovacuum',
      relation: e.table,
      elapsed_s: e.elapsed_s,
      buffer_hits: String(e.buffer_hits),
      buffer_dirtied: String(e.buffer_dirtied),
      write_rate_mbs: e.write_rate_mbs,
      aggressive: e.aggressive,
      wraparound: e.wraparound,
      pages_remain: String(e.pages_remain),
      tuples_remain: String(e.tuples_remain),
      wal_fpi: String(e.wal_fpi),
      wal_bytes: String(e.wal_bytes),
    }),
  );

  await expectView(['temp_file'], `SELECT * FROM pglog.temp_files ORDER BY ts`, (e) => ({
    database: e.database,
    username: e.user,
    pid: e.pid,
    path: e.path,
    size_bytes: String(e.size_bytes),
    statement: e.statement,
    fingerprint: e.fingerprint,
  }));

  await expectView(['connection', 'disconnection'], `SELECT * FROM pglog.sessions ORDER BY ts, event, phase DESC`, (e) => ({
    database: e.database,
    event: e.kind,
    phase: e.kind === 'connection' ? e.phase : null,
    username: e.user,
    application: e.application,
    pid: e.pid,
    session_id: e.session_id,
    host: e.host,
    port: e.port,
    identity: e.kind === 'connection' ? e.identity : null,
    method: e.kind === 'connection' ? e.method : null,
    session_ms: e.kind === 'disconnection' ? e.session_ms : null,
  }));

  await expectView(['plan'], `SELECT * FROM pglog.plans ORDER BY ts`, (e) => ({
    database: e.database,
    username: e.user,
    pid: e.pid,
    duration_ms: e.duration_ms,
    format: e.format,
    fingerprint: e.fingerprint,
    query: e.query,
    plan: e.plan,
  }));

  await expectView(['deadlock'], `SELECT * FROM pglog.deadlocks ORDER BY ts`, (e) => ({
    database: e.database,
    pid: e.pid,
    message: e.message,
    processes: e.processes,
    statement: e.statement,
  }));
});

test('migration 4 views: a JSON null or a number written as 1e3 never makes a view fail', TIMEOUT, async () => {
  const { db } = await fixture.freshStore();
  await db.query(`INSERT INTO pglog.other_events (ts, target, instance, kind, payload, file, file_offset) VALUES
    ('2026-11-21T10:00:00Z', 't', 'main', 'checkpoint', '{"phase": "complete", "buffers_written": 1e3, "wal_added": null}', 'f', 1),
    ('2026-11-21T10:00:01Z', 't', 'main', 'autoanalyze', '{"table": "app.public.t", "elapsed_s": 0.5}', 'f', 2)`);
  const cp = await db.query(`SELECT buffers_written, wal_added FROM pglog.checkpoints`);
  assert.deepEqual(cp.rows, [{ buffers_written: '1000', wal_added: null }]);
  const mt = await db.query(`SELECT database, kind, relation, elapsed_s, aggressive FROM pglog.maintenance`);
  assert.deepEqual(mt.rows, [{ database: 'app', kind: 'autoanalyze', relation: 'app.public.t', elapsed_s: 0.5, aggressive: false }]);
});
