/**
 * `pglog report --html` over a large store, side by side with pgBadger on the same log.
 *
 * Fills a PostgreSQL 15 store with --rows statement rows (default 10 million) over one UTC
 * day, generated in SQL (generate_series: 40 realistic templates over 4 targets, durations
 * spread around each template's typical time), plus errors, lock waits, checkpoints,
 * autovacuum, temporary files and sessions in proportion; writes the same statements and
 * errors as a stderr log; then times `pglog report --html` over the whole day (twice: the
 * first run reads from disk as much as the page cache lets it) and `pgbadger` making its HTML
 * report from the log, and states both files' sizes.
 *
 *   node bench/report-bench.ts [--rows 10000000] [--pgbadger-jobs 2] [--out FILE.md]
 *   (--pgbadger-jobs 0 leaves pgBadger out: for looking at the report's queries alone;
 *    --pgbadger-rows K gives pgBadger the log of the day's first K statements, and times
 *    pglog on that same window as well, when the whole log would take pgBadger too long)
 */
import { execFile } from 'node:child_process';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs, promisify } from 'node:util';

import { fetchHtmlReport, type QueryTimings } from '@pglog/collector/report/html/fetch.ts';
import { PGLOG } from '@pglog/test-support/cli.ts';
import { migrateStore, startPostgres } from '@pglog/test-support/postgres.ts';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';

import { createCleanup } from './lib/cleanup.ts';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '10000000' },
    'pgbadger-rows': { type: 'string' },
    'pgbadger-jobs': { type: 'string', default: '2' },
    out: { type: 'string' },
  },
});
const ROWS = Number(values.rows);
/** pgBadger reads the log of the first PART of the day (its statements and errors); pglog is timed on the same window too. */
const PART = Math.min(ROWS, Number(values['pgbadger-rows'] ?? ROWS)) / ROWS;
const JOBS = Number(values['pgbadger-jobs']);
const DAY = '2026-11-20';
const NEXT_DAY = '2026-11-21T00:00:00Z';
const PREFIX = '%m [%p] %q%u@%d ';
const say = (line: string): void => {
  process.stderr.write(`report-bench: ${line}\n`);
};
const cleanup = createCleanup(say);

/** 40 templates: (typical ms, weight in calls, text with $1 for a literal). */
const TEMPLATES: Array<[number, number, string]> = [
  [0.08, 30, 'SELECT abalance FROM pgbench_accounts WHERE aid = $1'],
  [0.15, 20, 'UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid = $1'],
  [0.12, 15, 'INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (3, 1, $1, 7, CURRENT_TIMESTAMP)'],
  [0.3, 10, 'SELECT o.id, o.total, c.name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = $1'],
  [2.5, 6, 'SELECT * FROM orders WHERE customer_id = $1 ORDER BY created_at DESC LIMIT 50'],
  [25, 2, "SELECT date_trunc('hour', created_at), count(*), sum(total) FROM orders WHERE created_at > now() - interval '1 day' AND shop_id = $1 GROUP BY 1"],
  [400, 0.2, 'SELECT c.id, count(o.id) FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE c.region = $1 GROUP BY c.id ORDER BY 2 DESC'],
  [1500, 0.05, 'REFRESH MATERIALIZED VIEW CONCURRENTLY sales_summary_$1'],
  ...Array.from({ length: 32 }, (_, i): [number, number, string] => [
    0.05 + (i % 7) * 0.4,
    1 + (i % 5),
    `SELECT id, status, updated_at FROM table_${i} WHERE key = $1 AND tenant = ${i}`,
  ]),
];

async function fill(db: pg.Client): Promise<void> {
  await db.query(`SELECT pglog.ensure_partitions(DATE '${DAY}', 1)`);
  await db.query(`CREATE TEMP TABLE tpl (id int, fp text, base_ms float8, lo float8, hi float8, text text)`);
  const total = TEMPLATES.reduce((a, [, w]) => a + w, 0);
  let acc = 0;
  for (const [i, [ms, w, text]] of TEMPLATES.entries()) {
    await db.query('INSERT INTO tpl VALUES ($1, $2, $3, $4, $5, $6)', [i, `fp${String(i).padStart(14, '0')}`, ms, acc / total, (acc + w) / total, text]);
    acc += w;
  }
  await db.query(`INSERT INTO pglog.query_templates SELECT fp, lower(replace(text, '$1', '?')), '${DAY}', '${DAY}' FROM tpl`);
  const chunk = 1_000_000;
  for (let from = 0; from < ROWS; from += chunk) {
    const to = Math.min(ROWS, from + chunk);
    const started = performance.now();
    // Rows in time order (as collectors write them); a template drawn by weight; a duration
    // log-normally around the template's typical time.
    await db.query(
      `INSERT INTO pglog.statement_events (ts, target, instance, database, username, application, pid, duration_ms, fingerprint, query, protocol, parameters, file, file_offset)
      SELECT TIMESTAMPTZ '${DAY}T00:00:00Z' + (g::float8 * 86400 / $2) * interval '1 second',
             'db' || (g % 4 + 1), 'main', CASE WHEN g % 3 = 0 THEN 'shop' ELSE 'app' END, 'app', 'web', 1000 + g % 300,
             round((t.base_ms * exp((random() + random() + random() - 1.5) * 1.2))::numeric, 3)::float8,
             t.fp, replace(t.text, '$1', (g % 100003)::text), 'simple', NULL, 'postgresql.log', g::int8 * 160
        FROM (SELECT g, random() AS r FROM generate_series($1::int8, $3::int8 - 1) g) s
        JOIN tpl t ON s.r >= t.lo AND s.r < t.hi`,
      [from, ROWS, to],
    );
    say(`statements ${to.toLocaleString('en-US')} of ${ROWS.toLocaleString('en-US')} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
  }
  // The statement rollup the collector writes with each batch (docs/store.md), made for the
  // generated rows by the very statement migration 0006 fills it with from stored rows.
  const rollupStarted = performance.now();
  await db.query(backfillSql());
  rollupS = (performance.now() - rollupStarted) / 1000;
  say(`statement rollup made in ${rollupS.toFixed(1)} s`);
  const n = Math.max(1, Math.round(ROWS / 200));
  const at = (k: string, count: string | number): string => `TIMESTAMPTZ '${DAY}T00:00:00Z' + (${k}::float8 * 86400 / ${count}) * interval '1 second'`;
  await db.query(`INSERT INTO pglog.error_events (ts, target, instance, database, username, severity, sqlstate, message, statement, file, file_offset)
    SELECT ${at('g', n)}, 'db' || (g % 4 + 1), 'main', 'app', 'app', 'ERROR', (ARRAY['23505', '40001', '57014', '42P01'])[g % 4 + 1],
           (ARRAY['duplicate key value violates unique constraint "orders_pkey"', 'could not serialize access due to concurrent update',
                  'canceling statement due to statement timeout', 'relation "tmp_' || (g % 50) || '" does not exist'])[g % 4 + 1],
           'UPDATE orders SET status = 2 WHERE id = ' || g, 'postgresql.log', g FROM generate_series(1, ${n}) g`);
  await db.query(`INSERT INTO pglog.lock_wait_events (ts, target, instance, database, pid, state, lock_type, lock_mode, lock_object, wait_ms, file, file_offset)
    SELECT ${at('g', n / 10)}, 'db' || (g % 4 + 1), 'main', 'app', 2000 + g % 100, CASE WHEN g % 2 = 0 THEN 'waiting' ELSE 'acquired' END,
           'transaction', 'ShareLock', 'transaction ' || g, 1000 + (g % 50) * 100, 'postgresql.log', g FROM generate_series(1, ${Math.ceil(n / 10)}) g`);
  const other = (kind: string, count: number, payload: string, database = "'app'"): Promise<unknown> =>
    db.query(`INSERT INTO pglog.other_events (ts, target, instance, kind, severity, database, payload, file, file_offset)
    SELECT ${at('g', count)}, 'db' || (g % 4 + 1), 'main', '${kind}', 'LOG', ${database}, ${payload}, 'postgresql.log', g FROM generate_series(1, ${count}) g`);
  await other(
    'checkpoint',
    4 * 288,
    `jsonb_build_object('checkpoint_kind', 'checkpoint', 'phase', 'complete', 'reason', 'time', 'buffers_written', g % 5000, 'wal_added', 0, 'wal_removed', g % 3, 'wal_recycled', g % 5, 'write_s', (g % 270) / 1.0, 'sync_s', (g % 7) / 10.0, 'total_s', (g % 270) + 0.5, 'distance_kb', 10000 + g % 90000)`,
    'NULL',
  );
  await other(
    'autovacuum',
    2000,
    `jsonb_build_object('table', 'app.public.table_' || (g % 40), 'elapsed_s', (g % 30) / 3.0, 'tuples_removed', g % 10000, 'pages_removed', g % 100, 'wal_bytes', g * 100, 'aggressive', g % 50 = 0, 'wraparound', false)`,
  );
  await other('autoanalyze', 2000, `jsonb_build_object('table', 'app.public.table_' || (g % 40), 'elapsed_s', (g % 10) / 5.0)`);
  await other(
    'temp_file',
    Math.ceil(n / 10),
    `jsonb_build_object('path', 'base/pgsql_tmp/pgsql_tmp' || g, 'size_bytes', (g % 20 + 1) * 1048576, 'fingerprint', 'fp00000000000006', 'statement', 'SELECT c.id, count(o.id) FROM customers c ...', 'user', 'app', 'pid', 3000)`,
  );
  await other('connection', n, `jsonb_build_object('phase', 'authorized', 'user', 'app', 'application', 'web', 'pid', g % 5000)`);
  await other('disconnection', n, `jsonb_build_object('session_ms', (g % 600) * 1000, 'user', 'app', 'application', 'web', 'pid', g % 5000)`);
  say('analyze');
  await db.query('ANALYZE');
}

let rollupS = 0;

/** Migration 0006's backfill: the statement rollup of the statement rows stored. */
function backfillSql(): string {
  const sql = readFileSync(new URL('../collector/src/store/migrations/0006_statement_rollup.sql', import.meta.url), 'utf8');
  const m = /INSERT INTO pglog\.statement_rollup_parts[^;]*;/.exec(sql);
  if (m === null) throw new Error('migration 0006 has no backfill INSERT');
  return m[0];
}

/** The store's statements and errors as one stderr log, as PostgreSQL would have written it. */
async function writeLog(db: pg.Client, file: string, until: Date): Promise<void> {
  const sql = `COPY (SELECT line FROM (
      SELECT ts, file_offset, to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') || ' UTC [' || pid || '] ' || username || '@' || database
             || ' LOG:  duration: ' || to_char(duration_ms, 'FM999999990.000') || ' ms  statement: ' || query AS line
        FROM pglog.statement_events WHERE ts < '${until.toISOString()}'
      UNION ALL
      SELECT ts, file_offset, to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') || ' UTC [4000] ' || username || '@' || database || ' ERROR:  ' || message
             || E'\\n' || to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') || ' UTC [4000] ' || username || '@' || database || ' STATEMENT:  ' || statement
        FROM pglog.error_events WHERE ts < '${until.toISOString()}') x ORDER BY ts, file_offset) TO STDOUT`;
  await pipeline(db.query(copyTo(sql)), createWriteStream(file));
}

async function timed(what: string, args: string[], command = PGLOG): Promise<number> {
  const started = performance.now();
  await run(command, args, { maxBuffer: 64 * 1024 * 1024 });
  const s = (performance.now() - started) / 1000;
  say(`${what}: ${s.toFixed(1)} s`);
  return s;
}

const mb = (file: string): string => (statSync(file).size / 1e6).toFixed(1);
/** The 1-minute load average: what else the machine was running while a number was taken. */
const load = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ')[0] ?? '?';

try {
  const work = mkdtempSync(join(tmpdir(), 'pglog-report-bench-'));
  cleanup.push(() => {
    rmSync(work, { recursive: true, force: true });
  });
  // A store sized for its data, as any PostgreSQL holding tens of GB would be configured.
  const store = await startPostgres({
    settings: [
      "shared_buffers = '2GB'",
      "work_mem = '64MB'",
      "maintenance_work_mem = '512MB'",
      "max_wal_size = '8GB'",
      'max_parallel_workers_per_gather = 2',
      'synchronous_commit = off',
    ],
  });
  cleanup.push(() => store.stop());
  await migrateStore(store.url);
  const db = new pg.Client({ connectionString: store.url });
  await db.connect();
  cleanup.push(() => db.end());
  const loadStarted = performance.now();
  await fill(db);
  const loadS = (performance.now() - loadStarted) / 1000;
  const size =
    (
      await db.query<{ s: string }>(
        "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid))) AS s FROM pg_class c WHERE c.relnamespace = 'pglog'::regnamespace AND c.relkind = 'r'",
      )
    ).rows[0]?.s ?? '?';
  say(`store filled in ${loadS.toFixed(0)} s (${size})`);
  const log = join(work, 'postgresql.log');
  const partUntil = new Date(Date.parse(`${DAY}T00:00:00Z`) + Math.round(PART * 86_400_000));
  await writeLog(db, log, partUntil);
  const lines = Number((await run('wc', ['-l', log])).stdout.trim().split(' ')[0]);
  say(`log written: ${mb(log)} MB, ${lines.toLocaleString('en-US')} lines`);

  const html = join(work, 'pglog-report.html');
  const reportArgs = ['report', '--store', store.url, '--since', `${DAY}T00:00:00Z`, '--until', NEXT_DAY, '--html', html];
  const loadBefore = load();
  const first = await timed('pglog report --html (first run)', reportArgs);
  const second = await timed('pglog report --html (second run)', reportArgs);
  const partHtml = join(work, 'pglog-part.html');
  const part =
    PART === 1
      ? null
      : await timed("pglog report --html (pgBadger's window)", [
          'report',
          '--store',
          store.url,
          '--since',
          `${DAY}T00:00:00Z`,
          '--until',
          partUntil.toISOString(),
          '--html',
          partHtml,
        ]);
  // The same report in this process, for the time of each query.
  const timings: QueryTimings = [];
  await fetchHtmlReport(db, { since: new Date(`${DAY}T00:00:00Z`), until: new Date(NEXT_DAY), target: null, database: null, limit: 20 }, Date.now(), timings);
  for (const t of timings) say(`  ${t.query}: ${(t.ms / 1000).toFixed(2)} s`);
  // And from the statement rows instead of the rollup (exact percentiles): what it cost before.
  const rawTimings: QueryTimings = [];
  const rawStarted = performance.now();
  await fetchHtmlReport(
    db,
    { since: new Date(`${DAY}T00:00:00Z`), until: new Date(NEXT_DAY), target: null, database: null, limit: 20 },
    Date.now(),
    rawTimings,
    { rollup: false },
  );
  const rawS = (performance.now() - rawStarted) / 1000;
  const rollupRows = Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM pglog.statement_rollup')).rows[0]?.n);
  const loadAfter = load();
  const badgerHtml = join(work, 'pgbadger.html');
  const badger =
    JOBS === 0 ? null : await timed(`pgbadger -j ${JOBS}`, ['-j', String(JOBS), '-f', 'stderr', '-p', PREFIX, '-o', badgerHtml, '--quiet', log], 'pgbadger');

  const md = [
    '## The HTML report over a large store (bench/report-bench.ts)',
    '',
    `Command: \`make bench\` (this section: \`node bench/report-bench.ts --rows ${ROWS} --pgbadger-jobs ${JOBS}${PART === 1 ? '' : ` --pgbadger-rows ${Math.round(PART * ROWS)}`}\`).`,
    '',
    `A PostgreSQL 15 store (shared_buffers 2 GB, work_mem 64 MB, 2 parallel workers per query) holding ${ROWS.toLocaleString('en-US')} statement rows over one UTC day`,
    `(40 templates on 4 targets, generated in SQL), ${Math.round(ROWS / 200).toLocaleString('en-US')} errors and, in proportion, lock waits, checkpoints, autovacuum/autoanalyze, temporary files and sessions: ${size} with its indexes, loaded in ${loadS.toFixed(0)} s.`,
    `pgBadger reads the same statements and errors written as a stderr log (${mb(log)} MB, ${lines.toLocaleString('en-US')} lines). Machine: ${(await run('nproc', [])).stdout.trim()} cores, shared with other work (1-minute load average ${loadBefore} before the pglog runs, ${loadAfter} after them). Measured ${new Date().toISOString().slice(0, 10)}.`,
    '',
    '| what | input | seconds | HTML file |',
    '|---|---|---:|---:|',
    `| \`pglog report --html\`, whole day, first run | the store | ${first.toFixed(1)} | ${mb(html)} MB |`,
    `| \`pglog report --html\`, whole day, again | the store | ${second.toFixed(1)} | ${mb(html)} MB |`,
    `| the same report from the statement rows, not the rollup (in process, \`rollup: false\`: exact percentiles) | the store | ${rawS.toFixed(1)} | |`,
    ...(part === null
      ? []
      : [
          `| \`pglog report --html\`, pgBadger's window (${DAY} 00:00 .. ${partUntil.toISOString().slice(11, 19)} UTC, ${Math.round(PART * ROWS).toLocaleString('en-US')} statements) | the store | ${part.toFixed(1)} | ${mb(partHtml)} MB |`,
        ]),
    badger === null
      ? '| pgBadger | not run (--pgbadger-jobs 0) | | |'
      : `| \`pgbadger -j ${JOBS}\` (Debian 12.0), HTML | the log${PART === 1 ? '' : ' of that window'} | ${badger.toFixed(1)} | ${mb(badgerHtml)} MB |`,
    '',
    `The statement rollup (docs/store.md, version 6: ${rollupRows.toLocaleString('en-US')} rows, one per minute and template here; the collector writes it with each batch) was made for the generated rows by migration 0006's backfill statement in ${rollupS.toFixed(0)} s; the report reads it for the template ranking, the statement, target and template series (percentiles from its histogram, within 9.1 %), and the rows only for the partial minutes at the window's edges and the top templates' examples.`,
    '',
    `Where the report's time goes (one more run, in process): ${timings.map((t) => `${t.query} ${(t.ms / 1000).toFixed(2)} s`).join(', ')}.`,
    '',
    'What is compared: pglog reads a store the collectors have already filled (ingest is measured in the ingest and commit benchmarks above) and makes its page from binned, top-N aggregates; pgBadger parses the whole log each time it makes a report. So the pglog number is what a DBA waits for a report over any window of the store; the pgBadger number is what it costs to get one from the log.',
  ].join('\n');
  process.stdout.write(`${md}\n`);
  // make bench merges it into docs/benchmarks.md (bench/merge-section.ts).
  if (values.out !== undefined) writeFileSync(values.out, `${md}\n`);
} finally {
  await cleanup.run();
}
