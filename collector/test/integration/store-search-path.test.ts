// The store is immune to search_path hijacking (security review R1, docs/store.md "Store roles
// and search_path"), on a real PostgreSQL: schema public is made writable by every role, as
// on PostgreSQL 13 and 14 (and 15+ upgraded from them), and the dashboards' role that
// docs/install.md creates plants in it functions and operators that match pglog's calls more
// exactly than pg_catalog's (the review's four, and the others duration_bin's body had), each
// recording who ran it. The store owner then does everything pglog does: a collector's start
// (migrations, partitions), commits of statements (with their rollup) and temporary files,
// maintenance (partitions and the rollup's compaction), and the reports over two days (text
// and HTML, in-process and through `pglog report`, which reads the rollup for such a window);
// and a session of the owner on the default path calls the store's functions. Nothing planted
// may run: public.pwned stays empty, and nothing fails.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { runPglog } from '@pglog/test-support/cli.ts';
import pg from 'pg';

import type { PglogEvent, TempFileEvent } from '../../src/logformat/events.ts';
import { fetchReport } from '../../src/report/fetch.ts';
import { fetchHtmlReport } from '../../src/report/html/fetch.ts';
import type { ReportFilter } from '../../src/report/types.ts';
import { connectStore, storeClient } from '../../src/store/store-connection.ts';
import { type SourceRef, type StoreBatch, StoreWriter, streamKeyOf } from '../../src/store/store-writer.ts';
import { statementEvent } from '../helpers/events.ts';
import { StoreFixture } from '../helpers/store-fixture.ts';

const TIMEOUT = { timeout: 300_000 };
const fixture = new StoreFixture({ prefix: 'searchpath', password: 'search-path-secret', applicationName: 'pglog-test-search-path' });
let work: string;
before(async () => {
  await fixture.start();
  work = mkdtempSync(join(tmpdir(), 'pglog-search-path-'));
});
after(async () => {
  await fixture.stop();
  rmSync(work, { recursive: true, force: true });
});

const ROLE = 'grafana_pglog';
const SRC: SourceRef = { target: 'db1', instance: 'main', file: 'log/postgresql.log' };
const EPOCHS = new Map([[streamKeyOf(SRC.target, SRC.instance), 1]]);

/** As the role: a table every role may write, and each planted object records current_user and itself there. */
const PLANT = `
CREATE TABLE public.pwned (who text, what text);
GRANT INSERT ON public.pwned TO PUBLIC;
CREATE FUNCTION public.pwn(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.pwned VALUES (current_user, what);
EXCEPTION WHEN read_only_sql_transaction THEN
  RAISE EXCEPTION 'planted code ran as % (%)', current_user, what;
END $$;
CREATE FUNCTION public.to_char(date, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN PERFORM public.pwn('to_char(date,text)'); RETURN pg_catalog.to_char($1::timestamptz, $2); END $$;
CREATE FUNCTION public.ln(int4) RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.pwn('ln(int4)'); RETURN pg_catalog.ln($1::float8); END $$;
CREATE FUNCTION public.le_f8_num(float8, numeric) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN PERFORM public.pwn('<=(float8,numeric)'); RETURN $1 OPERATOR(pg_catalog.<=) $2::float8; END $$;
CREATE OPERATOR public.<= (LEFTARG = float8, RIGHTARG = numeric, FUNCTION = public.le_f8_num);
CREATE FUNCTION public.div_i8_num(int8, numeric) RETURNS numeric LANGUAGE plpgsql AS $$
BEGIN PERFORM public.pwn('/(int8,numeric)'); RETURN $1::numeric OPERATOR(pg_catalog./) $2; END $$;
CREATE OPERATOR public./ (LEFTARG = int8, RIGHTARG = numeric, FUNCTION = public.div_i8_num);
CREATE FUNCTION public.div_f8_num(float8, numeric) RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.pwn('/(float8,numeric)'); RETURN $1 OPERATOR(pg_catalog./) $2::float8; END $$;
CREATE OPERATOR public./ (LEFTARG = float8, RIGHTARG = numeric, FUNCTION = public.div_f8_num);
CREATE FUNCTION public.minus_i4_num(int4, numeric) RETURNS numeric LANGUAGE plpgsql AS $$
BEGIN PERFORM public.pwn('-(int4,numeric)'); RETURN $1::numeric OPERATOR(pg_catalog.-) $2; END $$;
CREATE OPERATOR public.- (LEFTARG = int4, RIGHTARG = numeric, FUNCTION = public.minus_i4_num);
CREATE FUNCTION public.times_i4_f8(int4, float8) RETURNS float8 LANGUAGE plpgsql AS $$
BEGIN PERFORM public.pwn('*(int4,float8)'); RETURN $1::float8 OPERATOR(pg_catalog.*) $2; END $$;
CREATE OPERATOR public.* (LEFTARG = int4, RIGHTARG = float8, FUNCTION = public.times_i4_f8);
`;
const PLANTED = ['to_char(date,text)', 'ln(int4)', '<=(float8,numeric)', '/(int8,numeric)', '/(float8,numeric)', '-(int4,numeric)', '*(int4,float8)'];

/** The role's grants as docs/install.md gives them (SELECT on the views). */
const VIEWS =
  'pglog.statements, pglog.errors, pglog.lock_waits, pglog.read_positions, pglog.activity, pglog.blocking, pglog.statement_stats, ' +
  'pglog.database_stats, pglog.checkpoints, pglog.maintenance, pglog.temp_files, pglog.sessions, pglog.deadlocks, pglog.plans, ' +
  'pglog.templates, pglog.snapshot_runs';

/** A 5 MiB temporary file: the HTML report's size classes divide its size (int8) by 65536.0. */
function tempFile(ts: string, offset: number): TempFileEvent {
  const {
    kind: _kind,
    duration_ms: _d,
    protocol: _p,
    statement_name: _s,
    query: _q,
    parameters: _a,
    normalized: _n,
    fingerprint: _f,
    ...common
  } = statementEvent({
    ts,
    offset,
    end: offset + 100,
  });
  return { ...common, kind: 'temp_file', path: `base/pgsql_tmp/pgsql_tmp42.${offset}`, size_bytes: 5 * 1024 * 1024, statement: null, fingerprint: null };
}

/** Timed statements (one at most 1 µs, bin 0) and a temporary file at `at`, the stream's bytes from `offset`. */
function batchAt(at: number, offset: number): StoreBatch {
  const events: PglogEvent[] = [0.0005, 0.8, 1.5, 250].map((duration_ms, k) =>
    statementEvent({ ts: new Date(at + k * 100).toISOString(), offset: offset + k * 100, end: offset + k * 100 + 100, duration_ms }),
  );
  events.push(tempFile(new Date(at + 500).toISOString(), offset + 400));
  return { items: events.map((event) => ({ source: SRC, event, readAt: at + 1000 })), positions: [{ ...SRC, identity: 'inode:7', offset: offset + 500 }] };
}

/** A collector's start on the store: its writer, and the codes of the warnings it logged. */
async function collectorStart(url: string): Promise<{ writer: StoreWriter; warnings: unknown[] }> {
  const warnings: unknown[] = [];
  const writer = await StoreWriter.open({
    url,
    applicationName: 'pglog-test-search-path',
    log: (level, _msg, fields) => {
      if (level === 'warn') warnings.push((fields as { code?: unknown } | undefined)?.code);
    },
  });
  return { writer, warnings };
}

/** Runs a step; its error is kept, so that every step runs and the test reports all of them. */
async function step(failures: string[], what: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    failures.push(`${what}: ${(e as Error).message}`);
  }
}

test('objects planted in a schema PUBLIC may create in: none runs as the store owner (collector start, commits, maintenance, reports)', TIMEOUT, async () => {
  const name = await fixture.freshDatabase();
  const url = fixture.urlOf(name);
  // A store a collector made, and the dashboards' role as docs/install.md creates it.
  const made = await collectorStart(url);
  await made.writer.close();
  assert.deepEqual(made.warnings, [], 'PostgreSQL 15: PUBLIC may not create in public');
  const owner = await fixture.connect(name);
  await owner.query('GRANT CREATE ON SCHEMA public TO PUBLIC');
  await owner.query(`CREATE ROLE ${ROLE} LOGIN`);
  await owner.query(`GRANT USAGE ON SCHEMA pglog TO ${ROLE}`);
  await owner.query(`GRANT SELECT ON ${VIEWS} TO ${ROLE}`);
  const attacker = new pg.Client({ host: fixture.server.socketDir, port: fixture.server.port, user: ROLE, database: name });
  await attacker.connect();
  try {
    await attacker.query(PLANT);
  } finally {
    await attacker.end();
  }

  // The plants work: a session of the owner on the default search_path runs each of them.
  const probe = await fixture.connect(name);
  await probe.query(`SELECT to_char(current_date, 'YYYY'), ln(2), 1::float8 <= 0.5, 2::int8 / 1.0, 1::float8 / 0.5, 1 - 0.5, 4 * 1::float8`);
  const probed = await probe.query<{ who: string; what: string }>('SELECT who, what FROM public.pwned');
  assert.deepEqual(probed.rows.map((r) => r.what).sort(), [...PLANTED].sort());
  assert.ok(probed.rows.every((r) => r.who === 'postgres'));
  await owner.query('TRUNCATE public.pwned');

  const failures: string[] = [];
  const now = Date.now();
  // Not on a whole minute: the window's edge minutes are read from the rows, the rest from the rollup.
  const until = new Date(Math.floor(now / 60_000) * 60_000 + 40_000);
  const since = new Date(until.getTime() - 2 * 86_400_000);
  const filter: ReportFilter = { since, until, target: null, database: null, limit: 20 };

  // A collector's start (migrations, partitions; it warns about schema public), then its
  // commits and its maintenance round.
  await step(failures, 'collector start, commits, maintenance', async () => {
    const { writer, warnings } = await collectorStart(url);
    try {
      // Two batches of the same minutes (two rollup parts to compact), and one in the edge minute.
      await writer.commit(batchAt(until.getTime() - 30 * 60_000, 0), EPOCHS);
      await writer.commit(batchAt(until.getTime() - 30 * 60_000 + 2_000, 1_000), EPOCHS);
      await writer.commit(batchAt(until.getTime() - 30_000, 2_000), EPOCHS);
      const m = await writer.maintain(new Date(until.getTime() + 60_000));
      assert.equal(m.compaction, 'done');
      assert.ok(m.compacted > 0, `compacted ${m.compacted}`);
    } finally {
      await writer.close();
    }
    assert.deepEqual(warnings, ['STORE_PUBLIC_CREATE']);
  });

  // The store's functions (version 7) called by any session on the default path: the probe's.
  await step(failures, "the store's functions on the default search_path", async () => {
    await probe.query(`SELECT pglog.duration_bin(d), pglog.duration_of_bin(b) FROM (VALUES (0.0005::float8, 0), (2.5::float8, 7)) v(d, b)`);
    await probe.query(`SELECT pglog.ensure_partitions(current_date + 30, 1)`);
    await probe.query(`SELECT pglog.drop_partitions_before('2000-01-01'::date)`);
  });

  // The reports as `pglog report` reads them: a client of the store made the one way there is.
  await step(failures, 'fetchReport and fetchHtmlReport over two days', async () => {
    const client = storeClient(url, { application_name: 'pglog-test-search-path' });
    await connectStore(client);
    try {
      const text = await fetchReport(client, filter);
      assert.equal(
        text.statements.rows.reduce((n, r) => n + r.calls, 0),
        12,
      );
      const html = await fetchHtmlReport(client, filter, now);
      assert.equal(html.meta.percentiles, 'histogram', 'a two-day window reads the rollup');
    } finally {
      await client.end();
    }
  });
  for (const args of [['--json'], ['--html', join(work, 'report.html')]]) {
    await step(failures, `pglog report ${args[0]}`, async () => {
      const r = await runPglog(['report', '--store', url, '--since', since.toISOString(), '--until', until.toISOString(), ...args]);
      assert.equal(r.code, 0, r.stderr);
    });
  }

  const pwned = await owner.query<{ who: string; what: string }>('SELECT who, what FROM public.pwned');
  assert.deepEqual({ failures, pwned: pwned.rows }, { failures: [], pwned: [] });
});

test("a store session's search_path: pinned over ALTER DATABASE ... SET, and set again when the URL's own options replace pglog's", TIMEOUT, async () => {
  const name = await fixture.freshDatabase();
  const owner = await fixture.connect(name);
  await owner.query(`ALTER DATABASE ${name} SET search_path = public`);
  const settingsOf = async (url: string): Promise<{ path: string; workMem: string }> => {
    const client = storeClient(url);
    await connectStore(client);
    try {
      const r = await client.query<{ path: string; work_mem: string }>(
        `SELECT pg_catalog.current_setting('search_path') AS path, pg_catalog.current_setting('work_mem') AS work_mem`,
      );
      return { path: r.rows[0]!.path.replaceAll(' ', ''), workMem: r.rows[0]!.work_mem };
    } finally {
      await client.end();
    }
  };
  assert.equal((await settingsOf(fixture.urlOf(name))).path, 'pg_catalog,pg_temp');
  // node-postgres sends the URL's options instead of pglog's: they hold, and the path is set again.
  const withOptions = `${fixture.urlOf(name)}&options=${encodeURIComponent('-c search_path=public -c work_mem=8MB')}`;
  assert.deepEqual(await settingsOf(withOptions), { path: 'pg_catalog,pg_temp', workMem: '8MB' });
});
