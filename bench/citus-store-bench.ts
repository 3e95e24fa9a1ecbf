/**
 * One logical store on Citus beside one plain PostgreSQL 15 store, on the same machine and the
 * same rows (docs/decisions/0029-one-logical-store-or-several.md).
 *
 *   node bench/citus-store-bench.ts --citus-bin DIR [--shards 32] [--streams 50] [--rows 8000]
 *                                   [--connections 4] [--runs 2] [--report-rows 3000000] [--durable] [--out FILE.md]
 *
 * DIR is the bin directory of a PostgreSQL 15 whose installation has the citus extension (its
 * pg_config's sharedir holds extension/citus.control); as root the servers run as the
 * unprivileged server user, who must be able to read DIR. Without --citus-bin, or when DIR has
 * no citus, it says why and exits 0: Citus is built by hand, never by the project.
 *
 * Starts four throwaway clusters: a plain store (/usr/lib/postgresql/15/bin) and a Citus
 * coordinator with two workers (DIR, shared_preload_libraries = citus, TCP on 127.0.0.1 for the
 * nodes' own connections). Clients reach both stores on their Unix sockets. Every cluster has the
 * same settings (fsync off, as the other store benchmarks; --durable: on). The schema is the collector's
 * (StoreWriter.open: migrations and partitions); on Citus the tables with a `target` are then
 * distributed by it, colocated, and query_templates made a reference table.
 *
 * 1. Probes: what of the collector's store code works unchanged on Citus (claims, commits with
 *    fencing, a refused row bisected into quarantine, snapshots, partitions and retention,
 *    the stable views, the reads of `pglog report` and its --html, locks and activity), each OK
 *    or the server's error.
 * 2. Commits: S streams hand R statement events each to the Batcher and StoreWriter as in
 *    bench/commit-bench.ts (1 and N connections), runs alternating between the stores; rows/s
 *    and the CPU of every server process of the store (every node) per row.
 * 3. The report: --report-rows statements over one day (64 targets, 40 templates, the same
 *    deterministic rows in both stores) filled with INSERT ... SELECT, then `pglog report`'s
 *    statements query (collector/src/report/query.ts) over the day and for one target, its
 *    results compared between the stores. --report-rows 0 leaves it out.
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setImmediate as yieldNow } from 'node:timers/promises';
import { parseArgs, promisify } from 'node:util';

import { Batcher, DEFAULT_BATCHER_OPTIONS } from '@pglog/collector/collect/batcher.ts';
import type { StatementEvent } from '@pglog/collector/logformat/events.ts';
import { fetchReport } from '@pglog/collector/report/fetch.ts';
import { fetchHtmlReport } from '@pglog/collector/report/html/fetch.ts';
import { statementsQuery } from '@pglog/collector/report/query.ts';
import { fetchActivityReport, fetchLocksReport } from '@pglog/collector/report/snapshot-fetch.ts';
import type { SourceRef } from '@pglog/collector/store/store-writer.ts';
import { StoreWriter, streamKeyOf } from '@pglog/collector/store/store-writer.ts';
import { isRoot, serverUser } from '@pglog/test-support/server-user.ts';
import { freePort } from '@pglog/test-support/wait.ts';
import pg from 'pg';

import { cpuDelta, descendantsNamed, processCpuSeconds } from './ingest/proc-stats.ts';
import { createCleanup } from './lib/cleanup.ts';
import { emitReport } from './lib/emit-report.ts';
import { generateLog, parseEvents } from './lib/statement-events.ts';

const execFileP = promisify(execFile);
const { values } = parseArgs({
  options: {
    'citus-bin': { type: 'string' },
    shards: { type: 'string', default: '32' },
    streams: { type: 'string', default: '50' },
    rows: { type: 'string', default: '8000' },
    handover: { type: 'string', default: '200' },
    connections: { type: 'string', default: '4' },
    runs: { type: 'string', default: '2' },
    'report-rows': { type: 'string', default: '3000000' },
    durable: { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});
const say = (line: string): void => {
  process.stderr.write(`citus-store-bench: ${line}\n`);
};
const num = (name: 'shards' | 'streams' | 'rows' | 'handover' | 'connections' | 'runs' | 'report-rows'): number => Number(values[name]);
const [SHARDS, STREAMS, ROWS, HANDOVER, POOL, RUNS] = [num('shards'), num('streams'), num('rows'), num('handover'), num('connections'), num('runs')] as const;
const REPORT_ROWS = num('report-rows');
const PLAIN_BIN = '/usr/lib/postgresql/15/bin';
const TARGETS = 64;
const DAY = '2026-11-20';
// ---- skip cleanly without a Citus build -----------------------------------------------------------

async function citusAt(bin: string): Promise<string | null> {
  if (!existsSync(join(bin, 'pg_config'))) return `${bin} has no pg_config`;
  const [sharedir = '', version = ''] = (await execFileP(join(bin, 'pg_config'), ['--sharedir', '--version'])).stdout.trim().split('\n');
  if (!/ 15\./.test(version)) return `${bin} is ${version}, not PostgreSQL 15`;
  const control = join(sharedir, 'extension', 'citus.control');
  return existsSync(control) ? null : `${control} does not exist: that PostgreSQL has no citus extension`;
}

const citusBin = values['citus-bin'];
const missing = citusBin === undefined ? 'no --citus-bin given' : await citusAt(citusBin);
if (missing !== null || citusBin === undefined) {
  say(`skipped: ${missing ?? ''} (a PostgreSQL 15 bin directory with Citus in its installation: docs/decisions/0029-one-logical-store-or-several.md)`);
  process.exit(0);
}

// ---- throwaway clusters ---------------------------------------------------------------------------

type Node = { url: string; port: number; postmaster: number };
type Store = { name: string; url: string; nodes: Node[]; admin: pg.Client; citus: boolean };

const DURABLE = values.durable === true;
/** fsync off as the other store benchmarks; --durable: fsync, synchronous_commit and full_page_writes on (a production store, whose 2PC PREPAREs flush too). */
const COMMON = [
  ...(DURABLE ? [] : ['fsync = off', 'synchronous_commit = off', 'full_page_writes = off']),
  'shared_buffers = 256MB',
  'work_mem = 64MB',
  'max_wal_size = 4GB',
];
const owner = isRoot() ? serverUser() : null;
const cleanup = createCleanup(say);

/** Runs a server program as the server's owner; HOME is the cluster's directory (libpq on a node reads ~/.postgresql). */
async function runAs(argv: readonly string[], home: string): Promise<void> {
  const [file, ...args] = argv as [string, ...string[]];
  try {
    await execFileP(file, args, { timeout: 120_000, env: { ...process.env, HOME: home }, ...(owner === null ? {} : { uid: owner.uid, gid: owner.gid }) });
  } catch (e) {
    throw new Error(`${argv.join(' ')}: ${(e as Error).message}${(e as { stderr?: string }).stderr ?? ''}`, { cause: e });
  }
}

/** A fresh cluster of `bin` listening on 127.0.0.1 (a free port) and on a Unix socket in its directory; stopped and removed by the clean-up. */
async function startNode(bin: string, name: string, settings: readonly string[]): Promise<Node> {
  const dir = mkdtempSync(join(tmpdir(), `pglog-citus-bench-${name}-`));
  if (owner !== null) chownSync(dir, owner.uid, owner.gid);
  const data = join(dir, 'data');
  const port = await freePort('127.0.0.1');
  let started = false;
  cleanup.push(async () => {
    if (started) await runAs([join(bin, 'pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'], dir).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  await runAs([join(bin, 'initdb'), '-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'], dir);
  const conf = ["listen_addresses = '127.0.0.1'", `port = ${port}`, `unix_socket_directories = '${dir}'`, ...COMMON, ...settings];
  writeFileSync(join(data, 'postgresql.conf'), `${readFileSync(join(data, 'postgresql.conf'), 'utf8')}\n# citus-store-bench\n${conf.join('\n')}\n`);
  started = true;
  await runAs([join(bin, 'pg_ctl'), '-D', data, '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start'], dir);
  const postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return { url: `postgresql://postgres@/postgres?host=${encodeURIComponent(dir)}&port=${port}`, port, postmaster };
}

async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  cleanup.push(() => c.end());
  return c;
}

/** CPU seconds of every server process of a store (every node's postmaster and what runs under it), by pid. */
function serverCpu(store: Store): Map<number, number> {
  const pids = store.nodes.flatMap((n) => [n.postmaster, ...descendantsNamed(n.postmaster, ['postgres'])]);
  return new Map(pids.flatMap((pid) => ((s) => (s === null ? [] : [[pid, s] as const]))(processCpuSeconds(pid))));
}

const errorText = (e: unknown): string => {
  const err = e as Error & { cause?: Error };
  const text = err.cause !== undefined && !err.message.includes(err.cause.message) ? `${err.message}: ${err.cause.message}` : err.message;
  const flat = text.replace(/ on store \S+: /, ': ').replace(/\s+/g, ' ');
  return flat.replace(/\|/g, '/').slice(0, 200);
};

// ---- probes ---------------------------------------------------------------------------------------

const events = parseEvents(generateLog(ROWS));
const probes = new Map<string, Map<string, string>>();

async function probe(store: Store, name: string, fn: () => Promise<string>): Promise<void> {
  const result = await fn().then(
    (r) => (r === '' ? 'OK' : `OK: ${r}`),
    (e: unknown) => `**fails**: ${errorText(e)}`,
  );
  say(`${store.name}: ${name}: ${result}`);
  probes.set(name, (probes.get(name) ?? new Map<string, string>()).set(store.name, result));
}

async function withWriter<T>(store: Store, fn: (w: StoreWriter) => Promise<T>, retentionDays?: number): Promise<T> {
  const w = await StoreWriter.open({ url: store.url, connections: 2, ...(retentionDays === undefined ? {} : { retentionDays }) });
  try {
    return await fn(w);
  } finally {
    await w.close();
  }
}

/** A batch of `n` statement events of one stream, with its position. */
function batchOf(target: string, n: number): Parameters<StoreWriter['commit']>[0] {
  const source: SourceRef = { target, instance: 'main', file: 'log/postgresql.log' };
  const part = events.slice(0, n);
  const readAt = Date.now();
  return {
    items: part.map((event) => ({ source, event, readAt })),
    positions: [{ ...source, identity: 'inode:1', offset: (part.at(-1) as StatementEvent).end }],
  };
}

const epochOf = (target: string, epoch: number): Map<string, number> => new Map([[streamKeyOf(target, 'main'), epoch]]);

async function runProbes(store: Store): Promise<void> {
  const sql = async (text: string, params: unknown[] = []): Promise<string | undefined> => (await store.admin.query<{ v: string }>(text, params)).rows[0]?.v;
  await probe(store, 'claim() (standalone and with an assignment epoch: INSERT … ON CONFLICT DO UPDATE SET claimed_at = now())', () =>
    withWriter(store, async (w) => `epochs ${(await w.claim('probe-a', 'main')).epoch}, ${(await w.claim('probe-b', 'main', 5)).epoch}`),
  );
  // Claims made by SQL from here, as the writer's claim() may have failed above.
  const claim = (target: string, epoch: number): Promise<unknown> =>
    sql(
      "INSERT INTO pglog.stream_claims (target, instance, epoch) VALUES ($1, 'main', $2) ON CONFLICT (target, instance) DO UPDATE SET epoch = EXCLUDED.epoch",
      [target, epoch],
    );
  const commitProbe = async (target: string, epoch: number, batch = batchOf(target, 1000)): Promise<string> => {
    await claim(target, epoch);
    return withWriter(store, async (w) => {
      const r = await w.commit(batch, epochOf(target, 1));
      return `${r.rows.statement_events ?? 0} rows${r.fenced.length > 0 ? ', fenced' : ''}${r.quarantined > 0 ? `, ${r.quarantined} quarantined` : ''}`;
    });
  };
  await probe(store, 'commit() (claims locked FOR UPDATE, COPY BINARY, rollup COPY, templates and positions), stream_claims distributed by target', () =>
    commitProbe('probe-c', 1),
  );
  if (store.citus) {
    await sql("SELECT undistribute_table('pglog.stream_claims')");
    await sql("SELECT create_reference_table('pglog.stream_claims')");
  }
  await probe(store, 'commit(), stream_claims a reference table', () => commitProbe('probe-d', 1));
  await probe(store, 'storeStart(): the first position under the locked claim', async () => {
    await claim('probe-e', 1);
    const start = { target: 'probe-e', instance: 'main', file: 'log/postgresql.log', identity: 'inode:1', offset: 0 };
    return withWriter(store, async (w) => `offset ${(await w.storeStart(start, 1)).offset}`);
  });
  await probe(store, 'fencing: a commit of epoch 1 after a claim of epoch 2 leaves the stream out', () => commitProbe('probe-f', 2, batchOf('probe-f', 100)));
  await probe(store, 'a refused row: the COPYs again in savepoints, bisected, the row quarantined', async () => {
    await sql('ALTER TABLE pglog.statement_events ADD CONSTRAINT bench_refuse CHECK (pid IS DISTINCT FROM 424242)');
    const batch = batchOf('probe-g', 100);
    const item = batch.items[7];
    if (item !== undefined) batch.items[7] = { ...item, event: { ...(item.event as StatementEvent), pid: 424242 } };
    return commitProbe('probe-g', 1, batch).finally(() => sql('ALTER TABLE pglog.statement_events DROP CONSTRAINT bench_refuse'));
  });
  await probe(store, 'writeSnapshot(): one COPY per snapshot table in a transaction', () =>
    withWriter(store, async (w) => {
      const base = { target: 'probe-h', instance: 'main', ts: new Date(), durationMs: 3 };
      await w.writeSnapshot({ ...base, kind: 'activity', sessions: [], blocking: [], statements: [], databases: [], intervalSeconds: null });
      await w.writeSnapshot({ ...base, kind: 'statistics', code: 'SQL_TIMEOUT', message: 'probe' });
      return '';
    }),
  );
  await probe(store, 'ensure_partitions() over rows in the DEFAULT partition (moved into the new partition)', async () => {
    await sql(
      "INSERT INTO pglog.statement_events (ts, target, instance, query, file, file_offset) VALUES ('2026-10-02T12:00:00Z', 'probe-i', 'main', 'SELECT 1', 'f', 1)",
    );
    const made = await sql("SELECT count(*) AS v FROM pglog.ensure_partitions('2026-10-02', 1)");
    return `${made} partitions, ${await sql("SELECT count(*) AS v FROM pglog.statement_events_p20261002 WHERE target = 'probe-i'")} row moved`;
  });
  await probe(store, 'maintain() at open, retention 30 days: drop_partitions_before, rollup compaction', async () => {
    const part = "(date_trunc('minute', now()) - interval '1 hour', 'probe-j', 'main', 'app', 'fp', 1, 1, 1, 1, '{4}', '{1}')";
    await sql(`INSERT INTO pglog.statement_rollup_parts VALUES ${part}, ${part}`);
    await withWriter(store, () => Promise.resolve(), 30);
    const gone = await sql("SELECT (to_regclass('pglog.statement_events_p20261002') IS NULL)::text AS v");
    return `2026-10-02 partition dropped: ${gone}; rollup parts after compaction: ${await sql("SELECT count(*) AS v FROM pglog.statement_rollup_parts WHERE target = 'probe-j'")}`;
  });
  const views = (await store.admin.query<{ v: string }>("SELECT viewname AS v FROM pg_views WHERE schemaname = 'pglog' ORDER BY 1")).rows.map((r) => r.v);
  await probe(store, `the ${views.length} views (SELECT * … LIMIT 1); pglog report's reads: text/JSON, --html, locks, activity`, async () => {
    const failed: string[] = [];
    const f = { since: new Date(Date.now() - 3_600_000), until: new Date(), target: null, database: null, limit: 20, minDurationMs: 30_000 };
    const reads: Array<[string, () => Promise<unknown>]> = [
      ...views.map((v): [string, () => Promise<unknown>] => [v, () => sql(`SELECT * FROM pglog.${v} LIMIT 1`)]),
      ...([fetchReport, fetchHtmlReport, fetchLocksReport, fetchActivityReport] as const).map((fn): [string, () => Promise<unknown>] => [
        fn.name,
        () => fn(store.admin, f),
      ]),
    ];
    for (const [name, read] of reads) await read().catch((e: unknown) => failed.push(`${name}: ${errorText(e)}`));
    if (failed.length > 0) throw new Error(failed.join('; '));
    return '';
  });
}

// ---- commits --------------------------------------------------------------------------------------

type Run = { seconds: number; serverCpuSeconds: number };
const total = events.length * STREAMS;
const lastOffset = (events.at(-1) as StatementEvent).end;
const targets = Array.from({ length: STREAMS }, (_, i) => `db${String(i).padStart(3, '0')}`);

async function commitRun(store: Store, connections: number): Promise<Run> {
  const a = store.admin;
  await a.query('TRUNCATE pglog.statement_events, pglog.statement_rollup_parts, pglog.query_templates, pglog.read_position_state, pglog.stream_claims');
  await a.query("INSERT INTO pglog.stream_claims (target, instance, epoch) SELECT t, 'main', 1 FROM unnest($1::text[]) t", [targets]);
  await a.query('CHECKPOINT');
  if (store.citus) await a.query("SELECT run_command_on_workers('CHECKPOINT')");
  const writer = await StoreWriter.open({ url: store.url, applicationName: 'citus-store-bench', connections });
  const batcher = new Batcher(writer, { ...DEFAULT_BATCHER_OPTIONS, lanes: connections });
  const server0 = serverCpu(store);
  const t0 = performance.now();
  await Promise.all(
    targets.map(async (target) => {
      const source: SourceRef = { target, instance: 'main', file: 'log/postgresql.log' };
      const readAt = Date.now();
      for (let i = 0; i < events.length; i += HANDOVER) {
        await batcher.waitForRoom(target);
        const part = events.slice(i, i + HANDOVER);
        batcher.add(source, part, { ...source, identity: 'inode:1', offset: (part.at(-1) as StatementEvent).end }, 1, readAt);
        await yieldNow();
      }
    }),
  );
  await batcher.flush();
  const run = { seconds: (performance.now() - t0) / 1000, serverCpuSeconds: cpuDelta(server0, serverCpu(store)) };
  await batcher.stop(Date.now() + 10_000);
  await writer.close();
  const check = await a.query<{ n: string; d: string; p: string; r: string }>(
    `WITH e AS (SELECT count(*) AS n, count(DISTINCT (target, file_offset)) AS d FROM pglog.statement_events),
          p AS (SELECT count(*) AS p FROM pglog.read_position_state WHERE byte_offset = $1),
          r AS (SELECT coalesce(sum(calls), 0) AS r FROM pglog.statement_rollup)
     SELECT * FROM e, p, r`,
    [lastOffset],
  );
  const c = check.rows[0];
  if (c === undefined || Number(c.n) !== total || Number(c.d) !== total || Number(c.p) !== STREAMS || Number(c.r) !== total) {
    throw new Error(`${store.name}: ${JSON.stringify(c)} (rows, distinct, positions at the end, rollup calls); expected ${total} rows, ${STREAMS} positions`);
  }
  return run;
}

// ---- the report's statements query ------------------------------------------------------------------

/** Deterministic pseudo-random in [0, 1) from g (the same rows in both stores). */
const uniform = (mult: number): string => `(mod(g * ${mult}, 2147483647)::float8 / 2147483647)`;

async function fill(store: Store): Promise<number> {
  const a = store.admin;
  await a.query('TRUNCATE pglog.statement_events');
  await a.query(`SELECT pglog.ensure_partitions(DATE '${DAY}', 1)`);
  const t0 = performance.now();
  for (let from = 0; from < REPORT_ROWS; from += 500_000) {
    const to = Math.min(REPORT_ROWS, from + 500_000);
    await a.query(
      `INSERT INTO pglog.statement_events (ts, target, instance, database, username, application, pid, duration_ms, fingerprint, query, protocol, parameters, file, file_offset)
       SELECT TIMESTAMPTZ '${DAY}T00:00:00Z' + (g::float8 * 86400 / $2) * interval '1 second',
              'db' || lpad((g % ${TARGETS})::text, 3, '0'), 'main', CASE WHEN g % 3 = 0 THEN 'shop' ELSE 'app' END, 'app', 'web', 1000 + g % 300,
              round((0.05 * power(1.3, t) * exp((${uniform(48271)} + ${uniform(69621)} + ${uniform(16807)} - 1.5) * 1.2))::numeric, 3)::float8,
              'fp' || lpad(t::text, 14, '0'), 'SELECT id, status FROM table_' || t || ' WHERE key = ' || (g % 100003), 'simple', NULL, 'postgresql.log', g * 160
         FROM (SELECT g, mod(g * 7919, 40) AS t FROM generate_series($1::int8, $3::int8 - 1) g) s`,
      [from, REPORT_ROWS, to],
    );
  }
  const seconds = (performance.now() - t0) / 1000;
  await a.query('VACUUM ANALYZE pglog.statement_events');
  return seconds;
}

const QUERIES = [
  { name: 'statements query, the whole day, every target (top 20)', target: null },
  { name: 'statements query, the whole day, one target (top 20)', target: 'db007' },
] as const;

/** What must agree between the stores: the groups in order, their counts, and total and p95 to 1e-9 (sums are added in another order). */
const sameRows = (a: unknown[][] = [], b: unknown[][] = []): boolean =>
  a.length === b.length &&
  a.every((r, i) => r.every((v, j) => (j < 4 ? v === b[i]?.[j] : Math.abs((v as number) - (b[i]?.[j] as number)) <= 1e-9 * Math.abs(v as number))));

async function timeQuery(store: Store, target: string | null): Promise<{ ms: number; rows: unknown[][] }> {
  const since = new Date(`${DAY}T00:00:00Z`);
  const q = statementsQuery({ since, until: new Date(since.getTime() + 86_400_000), target, database: null, limit: 20 });
  const t0 = performance.now();
  const res = await store.admin.query<Record<string, unknown>>(q.text, q.values);
  const ms = performance.now() - t0;
  return { ms, rows: res.rows.map((r) => [r.target, r.fingerprint, r.calls, r.groups, Number(r.total_ms), Number(r.p95_ms)]) };
}

// ---- main -----------------------------------------------------------------------------------------

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
try {
  say('starting a plain store, a Citus coordinator and two workers');
  const plainNode = await startNode(PLAIN_BIN, 'plain', []);
  const citusSettings = ["shared_preload_libraries = 'citus'", 'max_prepared_transactions = 100'];
  const coordinator = await startNode(citusBin, 'coordinator', citusSettings);
  const workers = [await startNode(citusBin, 'worker1', citusSettings), await startNode(citusBin, 'worker2', citusSettings)];
  for (const n of [coordinator, ...workers]) await (await connect(n.url)).query('CREATE EXTENSION citus');
  const plain: Store = { name: 'plain', url: plainNode.url, nodes: [plainNode], admin: await connect(plainNode.url), citus: false };
  const citus: Store = { name: 'citus', url: coordinator.url, nodes: [coordinator, ...workers], admin: await connect(coordinator.url), citus: true };
  await citus.admin.query('SELECT citus_set_coordinator_host($1, $2)', ['127.0.0.1', coordinator.port]);
  for (const w of workers) await citus.admin.query('SELECT citus_add_node($1, $2)', ['127.0.0.1', w.port]);
  const citusVersion = (await citus.admin.query<{ v: string }>('SELECT citus_version() AS v')).rows[0]?.v.split(' on ')[0] ?? '?';
  const pgVersion = (await plain.admin.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? '?';

  // The collector's schema, then (Citus) distributed.
  for (const s of [plain, citus]) await (await StoreWriter.open({ url: s.url })).close();
  // Every table with a target column (partitions go with their parent), statement_events first, the others colocated with it.
  const tables = await citus.admin.query<{ t: string }>(
    `SELECT relname AS t FROM pg_class c WHERE relnamespace = 'pglog'::regnamespace AND relkind IN ('r', 'p') AND NOT relispartition
        AND EXISTS (SELECT FROM pg_attribute WHERE attrelid = c.oid AND attname = 'target') ORDER BY relname <> 'statement_events', relname`,
  );
  for (const [i, { t }] of tables.rows.entries()) {
    const colocate = i === 0 ? `shard_count => ${SHARDS}` : "colocate_with => 'pglog.statement_events'";
    await citus.admin.query(`SELECT create_distributed_table('pglog.${t}', 'target', ${colocate})`);
  }
  await citus.admin.query("SELECT create_reference_table('pglog.query_templates')");

  say('probes');
  for (const s of [plain, citus]) await runProbes(s);

  say(`commits: ${STREAMS} streams × ${events.length} statements`);
  const configs = [1, POOL];
  const runs = new Map<string, Run[]>();
  for (let i = 0; i < RUNS; i++) {
    for (const c of configs) {
      for (const s of [plain, citus]) {
        const r = await commitRun(s, c);
        runs.set(`${s.name} ${c}`, [...(runs.get(`${s.name} ${c}`) ?? []), r]);
        say(`run ${i + 1}, ${s.name}, ${c} connection(s): ${fmt(total / r.seconds)} rows/s`);
      }
    }
  }

  const fills = new Map<string, number>();
  const timings = new Map<string, number[]>();
  const results = new Map<string, unknown[][]>();
  if (REPORT_ROWS > 0) say(`report: ${REPORT_ROWS.toLocaleString('en-US')} statements into each store`);
  for (const s of REPORT_ROWS > 0 ? [plain, citus] : []) fills.set(s.name, await fill(s));
  for (let i = 0; i < (REPORT_ROWS > 0 ? 3 : 0); i++) {
    for (const q of QUERIES) {
      for (const s of [plain, citus]) {
        const r = await timeQuery(s, q.target);
        timings.set(`${s.name} ${q.name}`, [...(timings.get(`${s.name} ${q.name}`) ?? []), r.ms]);
        results.set(`${s.name} ${q.name}`, r.rows);
      }
    }
  }

  const best = (key: string): Run => (runs.get(key) ?? []).reduce((a, b) => (b.seconds < a.seconds ? b : a));
  const load = loadavg().map((x) => x.toFixed(1));
  const md = [
    '## One logical store on Citus beside a plain store (bench/citus-store-bench.ts)',
    '',
    `\`node bench/citus-store-bench.ts --citus-bin DIR --shards ${SHARDS} --streams ${STREAMS} --rows ${ROWS} --connections ${POOL} --runs ${RUNS} --report-rows ${REPORT_ROWS}${DURABLE ? ' --durable' : ''}\``,
    `PostgreSQL ${pgVersion}; ${citusVersion}, a coordinator and two workers on this machine (${SHARDS} shards per table), beside a plain store;`,
    `every cluster ${DURABLE ? 'fsync, synchronous_commit and full_page_writes on' : 'fsync off'}, shared_buffers 256MB. Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}: collector, store and every node`,
    `on the same cores. Load average ${load.join(' / ')} at the end. Measured ${new Date().toISOString().slice(0, 10)}.`,
    '',
    '### What of the store code works unchanged',
    '',
    '| probe | plain | citus |',
    '|---|---|---|',
    ...[...probes].map(([name, by]) => `| ${name} | ${by.get('plain') ?? ''} | ${by.get('citus') ?? ''} |`),
    '',
    '### Commits (Batcher and StoreWriter, as `pglog collect`; stream_claims a reference table on Citus)',
    '',
    `${STREAMS} streams (one target each) × ${fmt(events.length)} statement events = ${fmt(total)} rows a run, best of ${RUNS}, runs alternating between the stores.`,
    '',
    '| store | connections | rows/s (best) | runs, rows/s | store CPU µs/row (every node) |',
    '|---|---:|---:|---|---:|',
    ...[plain, citus].flatMap((s) =>
      configs.map((c) => {
        const all = (runs.get(`${s.name} ${c}`) ?? []).map((r) => fmt(total / r.seconds)).join(', ');
        const b = best(`${s.name} ${c}`);
        return `| ${s.name} | ${c} | ${fmt(total / b.seconds)} | ${all} | ${((b.serverCpuSeconds / total) * 1e6).toFixed(1)} |`;
      }),
    ),
    '',
    ...(REPORT_ROWS === 0
      ? []
      : [
          `### The report's statements query over ${fmt(REPORT_ROWS)} statements of one day (${TARGETS} targets, 40 templates)`,
          '',
          '| store | fill (INSERT … SELECT) s | fill rows/s | query | first ms | best of 3 ms | same rows as plain |',
          '|---|---:|---:|---|---:|---:|---|',
          ...[plain, citus].flatMap((s) =>
            QUERIES.map((q) => {
              const t = timings.get(`${s.name} ${q.name}`) ?? [];
              const same = s === plain ? '' : sameRows(results.get(`plain ${q.name}`), results.get(`${s.name} ${q.name}`)) ? 'yes' : '**no**';
              const f = fills.get(s.name) ?? 0;
              return `| ${s.name} | ${f.toFixed(1)} | ${fmt(REPORT_ROWS / f)} | ${q.name} | ${fmt(t[0] ?? 0)} | ${fmt(Math.min(...t))} | ${same} |`;
            }),
          ),
          '',
        ]),
  ].join('\n');
  emitReport(md, values.out);
} finally {
  await cleanup.run();
}
