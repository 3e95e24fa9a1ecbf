// `pglog report` over several stores against real PostgreSQL 15 databases: stores A and B hold
// a fleet split by target, store U holds all of it, and the report of A and B is the report of
// U (JSON and tables, every section, --limit, the group counts; report locks and activity too).
// The stores use an ICU collation (en-US), under which 'db_3' < 'db-2' < 'db1' < 'DB6': the
// order must still be the one the merge computes (COLLATE "C"). Rows tied to the millisecond
// but not the microsecond order the same way in both. A target in both stores (it moved between
// pools) keeps a row per store, each labelled. A store that fails: exit 1 naming it, never its
// password; with --partial the others are reported and the exit status is 3.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';

import { parseReportArgs, runReport } from '@pglog/cli/report-command.ts';
import { migrate } from '@pglog/collector/store/migrate.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import pg from 'pg';

let server: TestPostgres;
const url: Record<'a' | 'b' | 'u', string> = { a: '', b: '', u: '' };
const BOUNDED = { timeout: 60_000 };
const WINDOW = ['--since', '2024-05-01T10:00:00Z', '--until', '2024-05-01T11:00:00Z'];
/** Where the moved target's rows are (and nothing else). */
const MOVED_WINDOW = ['--since', '2024-05-01T12:00:00Z', '--until', '2024-05-01T13:00:00Z'];
const PASSWORD = 'STORES-PW-7c1';

/** Rows of one store, inserted into it and into the union store. */
type Insert = (c: pg.Client) => Promise<unknown>;

const stmt =
  (ts: string, target: string, database: string | null, ms: number, fp: string): Insert =>
  (c) =>
    c.query(
      `INSERT INTO pglog.statement_events (ts, target, instance, database, duration_ms, fingerprint, query, file, file_offset)
            VALUES ($1, $2, 'main', $3, $4, $5, $6, 'postgresql.log', 0)`,
      [ts, target, database, ms, fp, `SELECT /* ${fp} */ 1`],
    );
const err =
  (ts: string, target: string, sqlstate: string, message: string): Insert =>
  (c) =>
    c.query(
      `INSERT INTO pglog.error_events (ts, target, instance, database, severity, sqlstate, message, file, file_offset)
            VALUES ($1, $2, 'main', 'app', 'ERROR', $3, $4, 'postgresql.log', 0)`,
      [ts, target, sqlstate, message],
    );
const lock =
  (ts: string, target: string, type: string, ms: number): Insert =>
  (c) =>
    c.query(
      `INSERT INTO pglog.lock_wait_events (ts, target, instance, database, pid, state, lock_type, lock_mode, lock_object, wait_ms, file, file_offset)
            VALUES ($1, $2, 'main', 'app', 42, 'acquired', $3, 'ShareLock', 'x', $4, 'postgresql.log', 0)`,
      [ts, target, type, ms],
    );
/** An activity snapshot of `target`: a long transaction `pid` blocking `pid + 1`. */
const snapshot =
  (ts: string, target: string, pid: number, xactStart: string): Insert =>
  async (c) => {
    await c.query(`INSERT INTO pglog.snapshot_runs (ts, target, instance, kind, duration_ms, sessions, blocked) VALUES ($1, $2, 'main', 'activity', 5, 2, 1)`, [
      ts,
      target,
    ]);
    for (const [p, state] of [
      [pid, 'idle in transaction'],
      [pid + 1, 'active'],
    ] as const) {
      await c.query(
        `INSERT INTO pglog.activity_samples (ts, target, instance, pid, database, username, application, backend_type, state, xact_start, query_start, fingerprint, query)
              VALUES ($1, $2, 'main', $3, 'app', 'u', 'web', 'client backend', $4, $5, $5, 'fp', 'UPDATE t SET n = 1')`,
        [ts, target, p, state, xactStart],
      );
    }
    await c.query(
      `INSERT INTO pglog.blocking_samples (ts, target, instance, database, pid, blocking_pid, lock_type, wait_mode, held_mode, relation, wait_ms)
            VALUES ($1, $2, 'main', 'app', $3, $4, 'relation', 'ShareLock', 'RowExclusiveLock', 'public.t', 1000)`,
      [ts, target, pid + 1, pid],
    );
  };

/** Store A: db1 and db_3; store B: db-2 and DB6. Equal totals and counts, so the targets' order decides. */
const A: Insert[] = [
  stmt('2024-05-01T10:01:00Z', 'db1', 'app', 30, 'f1'),
  stmt('2024-05-01T10:02:00Z', 'db_3', 'app', 30, 'f1'),
  stmt('2024-05-01T10:03:00Z', 'db1', null, 7.5, 'f2'),
  err('2024-05-01T10:30:00.000100Z', 'db1', '23505', 'duplicate key'),
  err('2024-05-01T10:31:00Z', 'db_3', '42P01', 'relation "nope" does not exist'),
  lock('2024-05-01T10:05:00Z', 'db1', 'transaction', 500),
  snapshot('2024-05-01T10:40:00.000250Z', 'db1', 100, '2024-05-01T10:00:00Z'),
];
const B: Insert[] = [
  stmt('2024-05-01T10:04:00Z', 'db-2', 'app', 30, 'f1'),
  stmt('2024-05-01T10:05:00Z', 'DB6', 'shop', 30, 'f1'),
  stmt('2024-05-01T10:06:00Z', 'db-2', 'app', 100, 'f3'),
  err('2024-05-01T10:30:00.000900Z', 'db-2', '23505', 'duplicate key'),
  lock('2024-05-01T10:06:00Z', 'DB6', 'relation', 500),
  snapshot('2024-05-01T10:40:00.000750Z', 'db-2', 200, '2024-05-01T10:10:00Z'),
];
/** The target that moved from the pool of A to the pool of B, in a later hour. */
const MOVED_A: Insert[] = [stmt('2024-05-01T12:01:00Z', 'moved', 'app', 10, 'f9'), snapshot('2024-05-01T12:10:00Z', 'moved', 300, '2024-05-01T12:00:00Z')];
const MOVED_B: Insert[] = [stmt('2024-05-01T12:31:00Z', 'moved', 'app', 20, 'f9'), snapshot('2024-05-01T12:40:00Z', 'moved', 400, '2024-05-01T12:30:00Z')];

before(
  async () => {
    server = await startPostgres();
    const admin = new pg.Client({ host: server.socketDir, port: server.port, user: 'postgres', database: 'postgres' });
    await admin.connect();
    try {
      for (const name of ['a', 'b', 'u'] as const) {
        // A collation that orders text unlike byte order: the report must not depend on it.
        await admin.query(`CREATE DATABASE store_${name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.utf8'`);
        url[name] = `postgresql://postgres:${PASSWORD}@/store_${name}?host=${encodeURIComponent(server.socketDir)}&port=${server.port}`;
        const c = new pg.Client({ connectionString: url[name] });
        await c.connect();
        try {
          await migrate(c);
          const rows = name === 'a' ? [...A, ...MOVED_A] : name === 'b' ? [...B, ...MOVED_B] : [...A, ...B];
          for (const insert of rows) await insert(c);
        } finally {
          await c.end();
        }
      }
    } finally {
      await admin.end();
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

/** A JSON report without the fields only several stores have. */
function withoutStores(text: string): Record<string, unknown> {
  const { stores: _s, failed_stores: _f, failedStores: _g, ...rest } = JSON.parse(text) as Record<string, unknown>;
  return rest;
}

const both = (): string[] => ['--store', url.a, '--store', url.b];
/** The database of a store's name (`user@host:port/database`). */
const dbOf = (store: string | undefined): string | undefined => store?.slice(store.lastIndexOf('/') + 1);

test('JSON: the report of stores A and B is the report of the store holding both, for every section and limit', BOUNDED, async () => {
  for (const extra of [[], ['--limit', '1'], ['--limit', '2'], ['--target', 'db-2'], ['--database', 'app']]) {
    const merged = await report([...both(), ...WINDOW, ...extra, '--json']);
    const union = await report(['--store', url.u, ...WINDOW, ...extra, '--json']);
    assert.deepEqual([merged.code, merged.stderr, union.code], [0, '', 0], merged.stderr);
    assert.deepEqual(withoutStores(merged.stdout), withoutStores(union.stdout), extra.join(' '));
  }
  const json = JSON.parse((await report([...both(), ...WINDOW, '--json'])).stdout) as {
    statements: Array<{ target: string; store?: string }>;
    errors: Array<{ target: string }>;
    groups: Record<string, number>;
    stores: string[];
    failed_stores: unknown[];
  };
  // Byte order, not the stores' collation: 'DB6' < 'db-2' < 'db1' < 'db_3' at equal totals.
  assert.deepEqual(
    json.statements.map((s) => s.target),
    ['db-2', 'DB6', 'db-2', 'db1', 'db_3', 'db1'],
  );
  // The newest error first; two tied to the millisecond (10:30:00.000100 and .000900): the target decides.
  assert.deepEqual(
    json.errors.map((e) => e.target),
    ['db_3', 'db-2', 'db1'],
  );
  assert.deepEqual(json.groups, { statements: 6, errors: 3, lock_waits: 2 });
  assert.deepEqual(json.stores, ['postgres@' + new URL(url.a.replace('@/', '@h/')).searchParams.get('host') + `:${server.port}/store_a`, json.stores[1]]);
  assert.match(json.stores[1]!, /\/store_b$/);
  assert.deepEqual(json.failed_stores, []);
  assert.ok(
    json.statements.every((s) => s.store === undefined),
    'no target is in both stores: no row says its store',
  );
});

test('tables: the same rows as the store holding both, under a line naming the stores', BOUNDED, async () => {
  const merged = (await report([...both(), ...WINDOW])).stdout.split('\n');
  const union = (await report(['--store', url.u, ...WINDOW])).stdout.split('\n');
  assert.match(merged[1]!, /^stores {2}postgres@\S+\/store_a {2}postgres@\S+\/store_b$/);
  assert.deepEqual([merged[0], ...merged.slice(2)], union);
});

test('report locks and report activity of A and B are those of the store holding both', BOUNDED, async () => {
  for (const sub of ['locks', 'activity']) {
    const merged = await report([sub, ...both(), ...WINDOW, '--json']);
    const union = await report([sub, '--store', url.u, ...WINDOW, '--json']);
    assert.equal(merged.code, 0, merged.stderr);
    assert.deepEqual(withoutStores(merged.stdout), withoutStores(union.stdout), sub);
  }
  const locks = JSON.parse((await report(['locks', ...both(), ...WINDOW, '--json'])).stdout) as { servers: Array<{ target: string }>; episodesTotal: number };
  assert.deepEqual(
    locks.servers.map((s) => s.target),
    ['db-2', 'db1'],
  );
  assert.equal(locks.episodesTotal, 2);
});

test('a target in both stores (it moved between pools): a row per store, each naming its store', BOUNDED, async () => {
  const json = JSON.parse((await report([...both(), ...MOVED_WINDOW, '--json'])).stdout) as { statements: Array<{ total_ms: number; store?: string }> };
  assert.deepEqual(
    json.statements.map((s) => [s.total_ms, dbOf(s.store)]),
    [
      [20, 'store_b'],
      [10, 'store_a'],
    ],
  );
  const text = (await report([...both(), ...MOVED_WINDOW])).stdout;
  assert.match(text, /^store +target +database +calls/m);
  assert.match(text, /^postgres@\S+\/store_b +moved +app +1 +20\.0 ms/m);
  const activity = JSON.parse((await report(['activity', ...both(), ...MOVED_WINDOW, '--min-duration', '1s', '--json'])).stdout) as {
    servers: Array<{ target: string; store?: string }>;
    longRunning: Array<{ pid: number; store?: string }>;
  };
  assert.deepEqual(
    activity.servers.map((s) => dbOf(s.store)),
    ['store_a', 'store_b'],
  );
  assert.deepEqual(
    activity.longRunning.map((l) => [l.pid, dbOf(l.store)]),
    [
      [300, 'store_a'],
      [301, 'store_a'],
      [400, 'store_b'],
      [401, 'store_b'],
    ],
  );
});

test('a store that fails: exit 1 naming it; --partial reports the others (exit 3); never a password', BOUNDED, async () => {
  const bad = `postgresql://pglog:CANARY-PW-91@/pglogstore?host=${encodeURIComponent(`${server.socketDir}-missing`)}&port=5432`;
  const failed = await report(['--store', url.a, '--store', bad, ...WINDOW, '--json']);
  assert.equal(failed.code, 1);
  assert.equal(failed.stdout, '');
  assert.match(failed.stderr, /^pglog report: cannot connect to the store \(host .*-missing, port 5432, database pglogstore, user pglog\): .*\n$/);
  const partial = await report(['--store', url.a, '--store', bad, ...WINDOW, '--json', '--partial']);
  assert.equal(partial.code, 3);
  const json = JSON.parse(partial.stdout) as {
    statements: Array<{ target: string }>;
    stores: string[];
    failed_stores: Array<{ store: string; error: string }>;
  };
  assert.deepEqual(
    json.statements.map((s) => s.target),
    ['db1', 'db_3', 'db1'],
  );
  assert.equal(json.failed_stores.length, 1);
  assert.match(json.failed_stores[0]!.store, /^pglog@.*-missing:5432\/pglogstore$/);
  const text = await report(['locks', '--store', url.a, '--store', bad, ...WINDOW, '--partial']);
  assert.equal(text.code, 3);
  assert.match(text.stdout, /^! {2}store pglog@.*-missing:5432\/pglogstore not read \(--partial\): cannot connect/m);
  const none = await report(['--store', bad, '--store', `${bad}x`, ...WINDOW, '--partial']);
  assert.deepEqual([none.code, none.stdout], [1, ''], 'no store answered: nothing to report');
  for (const r of [failed, partial, text, none]) {
    for (const out of [r.stdout, r.stderr]) {
      assert.doesNotMatch(out, /CANARY-PW-91/);
      assert.doesNotMatch(out, new RegExp(PASSWORD));
    }
  }
});

test('arguments: --store repeated, PGLOG_STORE_URL for one; the same store twice or the HTML page of two are usage errors', BOUNDED, () => {
  const args = parseReportArgs(['--store', 'postgres://u:CANARY1@h1/db', '--store', 'postgres://u@h2:6432/db', '--partial']);
  assert.ok(!('help' in args));
  assert.deepEqual(
    args.stores.map((s) => s.name),
    ['u@h1:5432/db', 'u@h2:6432/db'],
  );
  assert.equal(args.partial, true);
  const usage =
    (re: RegExp) =>
    (e: unknown): boolean =>
      isPglogError(e) && e.code === 'USAGE' && re.test(e.message) && !/CANARY/.test(e.message);
  assert.throws(
    () => parseReportArgs(['--store', 'postgres://u:CANARY1@h/db', '--store', 'postgres://u:CANARY2@h:5432/db']),
    usage(/u@h:5432\/db is given twice/),
  );
  assert.throws(
    () => parseReportArgs(['--store', 'postgres://h1/db', '--store', 'postgres://h2/db', '--html', 'r.html']),
    usage(/the HTML report reads one store/),
  );
  assert.throws(() => parseReportArgs(['--store', 'postgres://h1/db', '--store', '']), usage(/no store/));
  for (const sub of ['locks', 'activity']) {
    const a = parseReportArgs([sub, '--store', 'postgres://h1/db', '--store', 'postgres://h2/db']);
    assert.ok(!('help' in a) && a.stores.length === 2, sub);
  }
});
