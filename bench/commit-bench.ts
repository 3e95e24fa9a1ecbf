/**
 * Commits into one store from one collector: the Batcher and the StoreWriter as `pglog collect`
 * runs them, with one store connection (every batch after the one before, as before
 * --store-connections) against a pool (batches of different streams side by side), in one
 * run, on the same rows (docs/store.md "Parallel commits").
 *
 *   node bench/commit-bench.ts [--out FILE.md] [--streams S] [--rows R] [--handover H]
 *                              [--connections N] [--runs K]
 *
 * S streams (one target each, like S servers) hand over real statement events from the
 * parser (bench/lib/statement-events.ts), H at a time with the position after them, as fast
 * as the batcher lets them (each waits for room in the memory budgets, as a stream does): the
 * store is the only limit. R events per stream. Two throwaway PostgreSQL 15 stores
 * (test-support/src/pg-cluster.ts), one after the other: `fast` (fsync off, as the
 * other benchmarks and the tests) and `durable` (fsync, synchronous_commit and
 * full_page_writes on: a production store, whose every COMMIT waits for its WAL to reach the
 * disk). Each configuration runs K times, round robin, tables truncated before each run; the
 * best run counts, and every run is checked: every row once, every stream's position at its
 * last event.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { setImmediate as yieldNow } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { DEFAULT_STORE_CONNECTIONS } from '@pglog/cli/collect-config.ts';
import { Batcher, DEFAULT_BATCHER_OPTIONS } from '@pglog/collector/collect/batcher.ts';
import type { StatementEvent } from '@pglog/collector/logformat/events.ts';
import type { SourceRef } from '@pglog/collector/store/store-writer.ts';
import { StoreWriter } from '@pglog/collector/store/store-writer.ts';
import { startCluster } from '@pglog/test-support/pg-cluster.ts';
import pg from 'pg';

import { cpuDelta, descendantsNamed, machineCpu, processCpuSeconds } from './ingest/proc-stats.ts';
import { generateLog, parseEvents } from './lib/statement-events.ts';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    streams: { type: 'string', default: '50' },
    rows: { type: 'string', default: '16000' },
    handover: { type: 'string', default: '200' },
    connections: { type: 'string', default: String(DEFAULT_STORE_CONNECTIONS) },
    runs: { type: 'string', default: '3' },
  },
});
const STREAMS = Number(values.streams);
const ROWS = Number(values.rows);
const HANDOVER = Number(values.handover);
const POOL = Number(values.connections);
const RUNS = Number(values.runs);
const TARGET_ROWS = 150_000;

interface Run {
  seconds: number;
  /** The benchmark process's CPU (the collector's side). */
  cpuSeconds: number;
  /** The store's: the postmaster and every process under it (backends, WAL writer, checkpointer). */
  serverCpuSeconds: number;
  /** Busy share of all the machine's cores over the run (other work on the machine included). */
  machineBusy: number;
  batches: number;
  maxInFlight: number;
}

/** CPU seconds of the store's processes, by pid. */
function serverCpu(postmaster: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of [postmaster, ...descendantsNamed(postmaster, ['postgres'])]) {
    const s = processCpuSeconds(pid);
    if (s !== null) out.set(pid, s);
  }
  return out;
}

/** One run: every stream hands over all its events; resolves once all are committed. */
async function runOnce(url: string, postmaster: number, connections: number, events: readonly StatementEvent[]): Promise<Run> {
  const writer = await StoreWriter.open({ url, applicationName: `commit-bench ${connections}`, connections });
  const sources: SourceRef[] = Array.from({ length: STREAMS }, (_, i) => ({
    target: `db${String(i).padStart(3, '0')}`,
    instance: 'main',
    file: 'log/postgresql.log',
  }));
  const epochs = await Promise.all(sources.map(async (s) => (await writer.claim(s.target, s.instance)).epoch));
  let batches = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const counting = {
    async commit(...args: Parameters<StoreWriter['commit']>): ReturnType<StoreWriter['commit']> {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        return await writer.commit(...args);
      } finally {
        inFlight--;
        batches++;
      }
    },
  };
  const batcher = new Batcher(counting, { ...DEFAULT_BATCHER_OPTIONS, lanes: connections });
  const cpu0 = process.cpuUsage();
  const server0 = serverCpu(postmaster);
  const machine0 = machineCpu();
  const t0 = performance.now();
  await Promise.all(
    sources.map(async (source, s) => {
      const readAt = Date.now();
      for (let i = 0; i < events.length; i += HANDOVER) {
        await batcher.waitForRoom(source.target);
        const part = events.slice(i, i + HANDOVER);
        batcher.add(source, part, { ...source, identity: 'inode:1', offset: (part.at(-1) as StatementEvent).end }, epochs[s] as number, readAt);
        // A stream parses its next read in a later turn of the event loop.
        await yieldNow();
      }
    }),
  );
  await batcher.flush();
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const serverCpuSeconds = cpuDelta(server0, serverCpu(postmaster));
  const machine1 = machineCpu();
  const machineBusy = (machine1.busy - machine0.busy) / (machine1.total - machine0.total);
  await batcher.stop(Date.now() + 10_000);
  await writer.close();
  return { seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6, serverCpuSeconds, machineBusy, batches, maxInFlight };
}

/** Settings of both stores (as the ingest benchmark's), then each one's own. */
const COMMON = ['shared_buffers = 256MB', 'max_wal_size = 4GB'];
const STORES = [
  { name: 'fast', settings: COMMON, what: 'fsync off' },
  {
    name: 'durable',
    settings: [...COMMON, 'fsync = on', 'synchronous_commit = on', 'full_page_writes = on'],
    what: 'fsync, synchronous_commit, full_page_writes on',
  },
] as const;

process.stderr.write(`generating and parsing ${ROWS} statements ...\n`);
const events = parseEvents(generateLog(ROWS));
const total = events.length * STREAMS;
const lastOffset = (events.at(-1) as StatementEvent).end;
const configs = [1, POOL];
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
let version = '?';

/** Runs of each configuration on one store. */
async function measureStore(settings: readonly string[]): Promise<Map<number, Run[]>> {
  const server = await startCluster({ dirPrefix: 'pglog-commit-bench-', settings: [...settings] });
  try {
    const url = server.url;
    const postmaster = Number(readFileSync(join(server.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    // Migrated by the first writer; the admin client checks and truncates.
    await (await StoreWriter.open({ url })).close();
    version = (await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? '?';
    const truncate = async (): Promise<void> => {
      await client.query(
        'TRUNCATE pglog.statement_events, pglog.statement_rollup_parts, pglog.query_templates, pglog.read_position_state, pglog.stream_claims',
      );
      await client.query('CHECKPOINT');
    };
    const check = async (name: string): Promise<void> => {
      const r = await client.query<{ n: string; d: string }>('SELECT count(*) AS n, count(DISTINCT (target, file_offset)) AS d FROM pglog.statement_events');
      const p = await client.query<{ n: string }>('SELECT count(*) AS n FROM pglog.read_position_state WHERE byte_offset = $1', [lastOffset]);
      // The statement rollup written with each batch (docs/store.md, version 6) counts each row once too.
      const rolled = await client.query<{ n: string }>('SELECT coalesce(sum(calls), 0) AS n FROM pglog.statement_rollup');
      if (Number(r.rows[0]?.n) !== total || Number(r.rows[0]?.d) !== total || Number(p.rows[0]?.n) !== STREAMS || Number(rolled.rows[0]?.n) !== total) {
        throw new Error(
          `${name}: ${r.rows[0]?.n} rows (${r.rows[0]?.d} distinct), ${rolled.rows[0]?.n} in the rollup, ${p.rows[0]?.n} positions at the end; expected ${total} rows, ${STREAMS} positions`,
        );
      }
    };
    const results = new Map<number, Run[]>(configs.map((c) => [c, []]));
    for (let i = 0; i < RUNS; i++) {
      for (const c of configs) {
        await truncate();
        const run = await runOnce(url, postmaster, c, events);
        await check(`${c} connection(s), run ${i + 1}`);
        results.get(c)?.push(run);
        process.stderr.write(
          `run ${i + 1}, ${c} connection(s): ${fmt(total / run.seconds)} rows/s, ${run.batches} batches, at most ${run.maxInFlight} in flight\n`,
        );
      }
    }
    await client.end();
    return results;
  } finally {
    await server.dispose();
  }
}

const measured: Array<{ store: (typeof STORES)[number]; results: Map<number, Run[]> }> = [];
for (const store of STORES) {
  process.stderr.write(`store: ${store.name} (${store.what})\n`);
  measured.push({ store, results: await measureStore(store.settings) });
}

{
  const best = (results: Map<number, Run[]>, c: number): Run => (results.get(c) ?? []).reduce((a, b) => (b.seconds < a.seconds ? b : a));
  const rate = (results: Map<number, Run[]>, c: number): number => total / best(results, c).seconds;
  const row = (name: string, results: Map<number, Run[]>, c: number): string => {
    const b = best(results, c);
    const runs = (results.get(c) ?? []).map((r) => fmt(total / r.seconds)).join(', ');
    const what =
      c === 1
        ? 'each batch commits after the one before (before `--store-connections`)'
        : `\`--store-connections ${c}\`: ${c} lanes of streams, a batch of each committing side by side`;
    const perRow = (sec: number): string => ((sec / total) * 1e6).toFixed(2);
    return `| ${name} | ${c} | ${fmt(rate(results, c))} | ${runs} | ${b.seconds.toFixed(2)} | ${b.batches} | ${b.maxInFlight} | ${perRow(b.cpuSeconds)} | ${perRow(b.serverCpuSeconds)} | ${(b.machineBusy * 100).toFixed(0)} | ${what} |`;
  };
  const md = [
    '## Parallel commits (bench/commit-bench.ts)',
    '',
    `\`node bench/commit-bench.ts --streams ${STREAMS} --rows ${ROWS} --handover ${HANDOVER} --connections ${POOL} --runs ${RUNS}\` (part of \`make bench\`).`,
    `${STREAMS} streams (one target each) hand over ${fmt(events.length)} statement events each from the parser (pgbench TPC-B script, ~10 % extended`,
    `protocol with parameters), ${HANDOVER} at a time, as fast as the batcher's memory budgets let them: ${fmt(total)} rows into`,
    `\`pglog.statement_events\` through the Batcher (default batch size ${DEFAULT_BATCHER_OPTIONS.maxRows} rows) and the StoreWriter, every`,
    'batch one transaction with its claims, templates, statement rollup and positions, as `pglog collect` commits. PostgreSQL',
    `${version}, a throwaway cluster on a Unix socket (shared_buffers 256MB, max_wal_size 4GB), Node ${process.version},`,
    `${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}, collector and store on the same cores. Two stores: ${STORES.map((st) => `${st.name} (${st.what})`).join('; ')}.`,
    `Best of ${RUNS} runs each (round robin), tables truncated before each; every run checked (each row once in the table and in the statement rollup, each`,
    `position at its stream's last event). Load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' / ')} at the end. Measured ${new Date().toISOString().slice(0, 10)}.`,
    '',
    '| store | connections | rows/s (best) | runs, rows/s | best s | batches | most in flight | collector CPU µs/row | store CPU µs/row | machine busy % | what |',
    '|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|',
    ...measured.flatMap(({ store, results }) => configs.map((c) => row(store.name, results, c))),
    '',
    'Collector CPU: the benchmark process (batcher, mapping, encoding, COPY); store CPU: the postmaster and every',
    'process under it (backends, WAL writer, checkpointer); machine busy: all cores, other work on the machine included',
    '(best run of each).',
    '',
    '| ratio | value | target |',
    '|---|---:|---|',
    ...measured.flatMap(({ store, results }) => [
      `| ${store.name}: ${POOL} connections / 1 connection | ${(rate(results, POOL) / rate(results, 1)).toFixed(2)}× | |`,
      `| ${store.name}: rows/s with ${POOL} connections | ${fmt(rate(results, POOL))} | ≥ ${fmt(TARGET_ROWS)} |`,
    ]),
    '',
  ].join('\n');
  process.stdout.write(md);
  if (values.out !== undefined) writeFileSync(values.out, md);
}
