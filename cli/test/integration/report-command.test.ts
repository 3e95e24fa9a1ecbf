// `pglog report` against a real PostgreSQL 15: the store schema from migrate(), known rows
// inserted with SQL, and the report's numbers checked exactly in JSON and in the tables.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';

import { parseReportArgs, runReport } from '@pglog/cli/report-command.ts';
import { migrate } from '@pglog/collector/store/migrate.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import pg from 'pg';

let server: TestPostgres;
let storeUrl: string;
let emptyUrl: string;

/** Every test's waits are bounded (a hung store must fail the test, not stall the run). */
const BOUNDED = { timeout: 60_000 };

const SINCE = '2024-05-01T10:00:00Z';
const UNTIL = '2024-05-01T11:00:00Z';

/** percentile_cont as PostgreSQL computes it (linear interpolation between closest ranks). */
function percentileCont(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const pos = p * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] ?? Number.NaN;
  const b = sorted[hi] ?? Number.NaN;
  return lo === hi ? a : a + (b - a) * (pos - lo);
}

const ORDERS = [10, 20, 30, 40, 50];
/** The message of the error group logged most (three times in the window). */
const DUPLICATE_KEY = 'duplicate key value violates unique constraint "orders_pkey"';

before(
  async () => {
    server = await startPostgres();
    const admin = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres', database: 'postgres' });
    await admin.connect();
    try {
      await admin.query('CREATE DATABASE store');
      await admin.query('CREATE DATABASE empty');
    } finally {
      await admin.end();
    }
    storeUrl = server.url.replace('/postgres?', '/store?');
    emptyUrl = server.url.replace('/postgres?', '/empty?');
    const client = new pg.Client({ connectionString: storeUrl });
    await client.connect();
    try {
      await migrate(client);
      const stmt = (ts: string, target: string, database: string | null, ms: number | null, fp: string, query: string): Promise<unknown> =>
        client.query(
          `INSERT INTO pglog.statement_events (ts, target, instance, database, duration_ms, fingerprint, query, file, file_offset)
                    VALUES ($1, $2, 'main', $3, $4, $5, $6, 'postgresql.log', 0)`,
          [ts, target, database, ms, fp, query],
        );
      for (const [i, ms] of ORDERS.entries()) {
        await stmt(`2024-05-01T10:0${i}:00Z`, 'db1', 'app', ms, 'aaaa000000000000', `SELECT * FROM orders WHERE id = ${i}`);
      }
      await stmt('2024-05-01T10:30:00Z', 'db1', 'app', 100, 'bbbb000000000000', 'UPDATE stock SET n = n - 1');
      await stmt('2024-05-01T10:31:00Z', 'db1', 'other', 1000, 'cccc000000000000', 'VACUUM big');
      await stmt('2024-05-01T10:32:00Z', 'db2', 'app', 5, 'aaaa000000000000', 'SELECT * FROM orders WHERE id = 99');
      // Outside the window [since, until), and a statement logged without a duration: not counted.
      await stmt('2024-05-01T09:59:59.999Z', 'db1', 'app', 100_000, 'aaaa000000000000', 'SELECT * FROM orders WHERE id = 0');
      await stmt(UNTIL, 'db1', 'app', 100_000, 'aaaa000000000000', 'SELECT * FROM orders WHERE id = 0');
      await stmt('2024-05-01T10:40:00Z', 'db1', 'app', null, 'aaaa000000000000', 'SELECT * FROM orders WHERE id = 7');

      const err = (ts: string, target: string, severity: string, sqlstate: string, message: string): Promise<unknown> =>
        client.query(
          `INSERT INTO pglog.error_events (ts, target, instance, database, severity, sqlstate, message, file, file_offset)
                    VALUES ($1, $2, 'main', 'app', $3, $4, $5, 'postgresql.log', 0)`,
          [ts, target, severity, sqlstate, message],
        );
      await err('2024-05-01T10:01:00Z', 'db1', 'ERROR', '23505', DUPLICATE_KEY);
      await err('2024-05-01T10:30:00Z', 'db1', 'ERROR', '23505', DUPLICATE_KEY);
      await err('2024-05-01T10:59:00Z', 'db1', 'ERROR', '23505', DUPLICATE_KEY);
      await err('2024-05-01T10:20:00Z', 'db1', 'FATAL', '28P01', 'password authentication failed for user "app"');
      await err('2024-05-01T10:10:00Z', 'db2', 'ERROR', '42P01', 'relation "nope" does not exist');
      await err('2024-05-01T10:11:00Z', 'db2', 'ERROR', '42P01', 'relation "nope" does not exist');
      await err('2024-05-01T11:30:00Z', 'db1', 'ERROR', '23505', DUPLICATE_KEY); // outside

      const lock = (ts: string, state: string, type: string, ms: number): Promise<unknown> =>
        client.query(
          `INSERT INTO pglog.lock_wait_events (ts, target, instance, database, pid, state, lock_type, lock_mode, lock_object, wait_ms, file, file_offset)
                    VALUES ($1, 'db1', 'main', 'app', 42, $2, $3, 'ShareLock', 'x', $4, 'postgresql.log', 0)`,
          [ts, state, type, ms],
        );
      await lock('2024-05-01T10:05:00Z', 'waiting', 'transaction', 1000);
      await lock('2024-05-01T10:05:04Z', 'acquired', 'transaction', 5200.5);
      await lock('2024-05-01T10:06:00Z', 'waiting', 'transaction', 1000);
      await lock('2024-05-01T10:06:01Z', 'acquired', 'transaction', 1800);
      await lock('2024-05-01T10:07:00Z', 'waiting', 'relation', 1000);
      await lock('2024-05-01T10:07:01Z', 'deadlock_detected', 'relation', 1000.25);
    } finally {
      await client.end();
    }
  },
  { timeout: 180_000 },
);

after(async () => {
  await server?.stop();
});

function capture(): { stream: Writable; text: () => string } {
  const chunks: Buffer[] = [];
  return {
    stream: new Writable({
      write(c: Buffer, _e, done): void {
        chunks.push(c);
        done();
      },
    }),
    text: () => Buffer.concat(chunks).toString('utf8'),
  };
}

async function report(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = capture();
  const stderr = capture();
  const code = await runReport(parseReportArgs(args), { stdout: stdout.stream, stderr: stderr.stream });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

interface JsonReport {
  window: { since: string; until: string };
  statements: Record<string, unknown>[];
  errors: Record<string, unknown>[];
  lock_waits: Record<string, unknown>[];
  groups: Record<string, number>;
}

test('JSON: templates by total time with exact calls, totals, mean, stddev, min, max and p95', BOUNDED, async () => {
  const r = await report(['--store', storeUrl, '--since', SINCE, '--until', UNTIL, '--json']);
  assert.equal(r.stderr, '');
  assert.equal(r.code, 0);
  const json = JSON.parse(r.stdout) as JsonReport;
  assert.deepEqual(json.window, { since: '2024-05-01T10:00:00.000Z', until: '2024-05-01T11:00:00.000Z' });
  assert.deepEqual(
    json.statements.map((s) => [s.target, s.database, s.fingerprint, s.calls, s.total_ms]),
    [
      ['db1', 'other', 'cccc000000000000', 1, 1000],
      ['db1', 'app', 'aaaa000000000000', 5, 150],
      ['db1', 'app', 'bbbb000000000000', 1, 100],
      ['db2', 'app', 'aaaa000000000000', 1, 5],
    ],
  );
  const orders = json.statements[1];
  assert.deepEqual(orders, {
    target: 'db1',
    database: 'app',
    fingerprint: 'aaaa000000000000',
    query: 'SELECT * FROM orders WHERE id = 0',
    calls: 5,
    total_ms: 150,
    mean_ms: 30,
    stddev_ms: Math.sqrt(200),
    min_ms: 10,
    max_ms: 50,
    p95_ms: percentileCont(ORDERS, 0.95),
  });
  assert.equal(percentileCont(ORDERS, 0.95).toFixed(6), '48.000000'); // the helper agrees with the textbook value
  assert.deepEqual(json.statements[0]?.stddev_ms, 0);
  assert.equal(json.groups.statements, 4);
});

test('JSON: errors by SQLSTATE and message with counts and first/last seen; lock waits counted once', BOUNDED, async () => {
  const json = JSON.parse((await report(['--store', storeUrl, '--since', SINCE, '--until', UNTIL, '--json'])).stdout) as JsonReport;
  assert.deepEqual(json.errors, [
    {
      target: 'db1',
      database: 'app',
      severity: 'ERROR',
      sqlstate: '23505',
      message: DUPLICATE_KEY,
      count: 3,
      first_seen: '2024-05-01T10:01:00.000Z',
      last_seen: '2024-05-01T10:59:00.000Z',
    },
    {
      target: 'db2',
      database: 'app',
      severity: 'ERROR',
      sqlstate: '42P01',
      message: 'relation "nope" does not exist',
      count: 2,
      first_seen: '2024-05-01T10:10:00.000Z',
      last_seen: '2024-05-01T10:11:00.000Z',
    },
    {
      target: 'db1',
      database: 'app',
      severity: 'FATAL',
      sqlstate: '28P01',
      message: 'password authentication failed for user "app"',
      count: 1,
      first_seen: '2024-05-01T10:20:00.000Z',
      last_seen: '2024-05-01T10:20:00.000Z',
    },
  ]);
  assert.deepEqual(json.lock_waits, [
    { target: 'db1', database: 'app', lock_type: 'transaction', count: 4, acquired: 2, total_wait_ms: 7000.5, max_wait_ms: 5200.5 },
    { target: 'db1', database: 'app', lock_type: 'relation', count: 2, acquired: 0, total_wait_ms: 0, max_wait_ms: 1000.25 },
  ]);
  assert.deepEqual(json.groups, { statements: 4, errors: 3, lock_waits: 2 });
});

test('filters: --target and --database narrow every section; --limit keeps the top rows and the group count', BOUNDED, async () => {
  const json = JSON.parse(
    (await report(['--store', storeUrl, '--since', SINCE, '--until', UNTIL, '--target', 'db1', '--database', 'app', '--json'])).stdout,
  ) as JsonReport;
  assert.deepEqual(
    json.statements.map((s) => s.fingerprint),
    ['aaaa000000000000', 'bbbb000000000000'],
  );
  assert.deepEqual(
    json.errors.map((e) => e.sqlstate),
    ['23505', '28P01'],
  );
  assert.equal(json.lock_waits.length, 2);
  const limited = JSON.parse((await report(['--store', storeUrl, '--since', SINCE, '--until', UNTIL, '--limit', '1', '--json'])).stdout) as JsonReport;
  assert.deepEqual(
    limited.statements.map((s) => s.fingerprint),
    ['cccc000000000000'],
  );
  assert.deepEqual(limited.groups, { statements: 4, errors: 3, lock_waits: 2 });
  const none = JSON.parse((await report(['--store', storeUrl, '--since', SINCE, '--until', UNTIL, '--target', 'nobody', '--json'])).stdout) as JsonReport;
  assert.deepEqual([none.statements, none.errors, none.lock_waits], [[], [], []]);
});

test('tables: the same numbers, formatted and aligned', BOUNDED, async () => {
  const r = await report(['--store', storeUrl, '--since', SINCE, '--until', UNTIL]);
  assert.equal(r.code, 0);
  const lines = r.stdout.split('\n');
  assert.equal(lines[0], 'pglog report  2024-05-01 10:00:00 .. 2024-05-01 11:00:00 UTC');
  assert.ok(lines.includes('Top query templates by total time (4 of 4)'));
  const orders = lines.find((l) => l.includes('aaaa000000000000') && l.startsWith('db1'));
  assert.match(
    orders ?? '',
    /^db1 +app +5 +150\.0 ms +30\.0 ms +14\.1 ms +10\.0 ms +50\.0 ms +48\.0 ms +aaaa000000000000 +SELECT \* FROM orders WHERE id = 0$/,
  );
  assert.match(lines.find((l) => l.includes('cccc000000000000')) ?? '', /^db1 +other +1 +1\.00 s /);
  assert.match(
    lines.find((l) => l.includes('23505')) ?? '',
    /^db1 +app +ERROR +23505 +3 +2024-05-01 10:01:00 +2024-05-01 10:59:00 +duplicate key value violates/,
  );
  assert.match(lines.find((l) => l.includes('transaction')) ?? '', /^db1 +app +transaction +4 +2 +7\.00 s +5\.20 s$/);
  assert.match(lines.find((l) => /^db1 +app +relation/.test(l)) ?? '', /^db1 +app +relation +2 +0 +0\.000 ms +1\.00 s$/);
});

test('an empty window says so in every section', BOUNDED, async () => {
  const r = await report(['--store', storeUrl, '--since', '2020-01-01', '--until', '2020-01-02']);
  assert.equal(r.code, 0);
  for (const s of ['Top query templates by total time', 'Errors by SQLSTATE and message', 'Lock waits by lock type']) {
    assert.ok(r.stdout.includes(`${s}: none in this window`), s);
  }
});

test('an unreachable store: exit 1, a message naming host and database, never the password', BOUNDED, async () => {
  const url = `postgresql://pglog:CANARYPW@/pglogstore?host=${encodeURIComponent(`${server.socketDir}-missing`)}&port=5432`;
  const r = await report(['--store', url, '--since', '1h']);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /^pglog report: cannot connect to the store \(host .*-missing, port 5432, database pglogstore, user pglog\): /);
  assert.doesNotMatch(r.stderr, /CANARYPW/);
});

test('a wrong database or a database without the pglog views: exit 1 with the reason', BOUNDED, async () => {
  const missing = await report(['--store', server.url.replace('/postgres?', '/nosuchdb?'), '--since', '1h']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /cannot connect to the store \(.*database nosuchdb.*\): database "nosuchdb" does not exist/);
  const empty = await report(['--store', emptyUrl, '--since', '1h']);
  assert.equal(empty.code, 1);
  assert.match(empty.stderr, /the store \(.*database empty.*\) has no pglog views/);
});

test('arguments: defaults, PGLOG_STORE_URL, and usage errors before any connection', BOUNDED, () => {
  const a = parseReportArgs(['--store', 'postgres://h/db']);
  assert.deepEqual(a, {
    stores: [{ url: 'postgres://h/db', name: 'h:5432/db' }],
    partial: false,
    since: { agoMs: 3_600_000 },
    until: { agoMs: 0 },
    target: null,
    database: null,
    limit: 20,
    json: false,
  });
  const urls = (args: ReturnType<typeof parseReportArgs>): string[] => args.stores.map((s) => s.url);
  assert.deepEqual(urls(parseReportArgs([], { PGLOG_STORE_URL: 'postgres://env/db' })), ['postgres://env/db']);
  assert.deepEqual(urls(parseReportArgs(['--store', 'postgres://flag/db'], { PGLOG_STORE_URL: 'postgres://env/db' })), ['postgres://flag/db']);
  const usage =
    (re: RegExp) =>
    (e: unknown): boolean =>
      isPglogError(e) && e.code === 'USAGE' && re.test(e.message);
  assert.throws(() => parseReportArgs([]), usage(/no store: give --store URL or set PGLOG_STORE_URL/));
  assert.throws(() => parseReportArgs(['--store', 'x', '--limit', '0']), usage(/--limit 0: expected an integer from 1 to 10000/));
  assert.throws(() => parseReportArgs(['--store', 'x', '--since', 'soon']), usage(/--since soon/));
  assert.throws(() => parseReportArgs(['--store', 'x', '--since', '2024-05-02', '--until', '2024-05-01']), usage(/is not before --until/));
  assert.throws(() => parseReportArgs(['--store', 'x', '--bogus']), usage(/bogus/));
  assert.throws(() => parseReportArgs(['--store', 'x', 'positional']), usage(/positional/));
});
