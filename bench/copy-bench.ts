/**
 * Writing statement events into the store, four ways, side by side on the same rows and the
 * same table (pglog.statement_events, 15 columns):
 *
 *   INSERT        multi-row INSERT ... VALUES with parameters, 1,000 rows per statement
 *   COPY text     COPY ... FROM STDIN (text format), values escaped, through pg-copy-streams
 *   COPY BINARY   the CopyBinaryEncoder on rows mapped beforehand: encoding and sending only
 *   StoreWriter   pglog's writer on the event objects: mapping, text cleaning, encoding,
 *                 claims, templates and read positions, one transaction per batch
 *
 *   node bench/copy-bench.ts [--out FILE.md] [--rows N] [--runs R] [--batch B]
 *
 * The events come from the real parser (LogParser) reading generated stderr log text of a
 * pgbench-like load (the TPC-B script in the simple protocol, about 10 % extended-protocol
 * executes with parameters). A throwaway PostgreSQL 15 is started for the run
 * (test-support/src/postgres.ts). Every method runs --runs times; the table is
 * truncated before each run and the best run counts.
 */
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';

import { DEFAULT_BATCHER_OPTIONS } from '@pglog/collector/collect/batcher.ts';
import { CopyBinaryEncoder } from '@pglog/collector/store/copy-binary.ts';
import { CHUNK_BYTES, copyIn, estimatedRowBytes } from '@pglog/collector/store/copy-stream.ts';
import { mapEvent, rowContext } from '@pglog/collector/store/event-rows.ts';
import { STATEMENT_TABLE } from '@pglog/collector/store/event-tables.ts';
import { type Micros, microsToIso } from '@pglog/collector/store/iso-time.ts';
import type { BatchItem, SourceRef } from '@pglog/collector/store/store-writer.ts';
import { StoreWriter, streamKeyOf } from '@pglog/collector/store/store-writer.ts';
import { DEFAULT_MAX_TEXT_BYTES } from '@pglog/collector/store/text-clean.ts';
import { startPostgres } from '@pglog/test-support/postgres.ts';
import pg from 'pg';

import { generateLog, parseEvents } from './lib/statement-events.ts';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    rows: { type: 'string', default: '200000' },
    runs: { type: 'string', default: '3' },
    // The collector's own default batch size, so the writer is measured as it runs.
    batch: { type: 'string', default: String(DEFAULT_BATCHER_OPTIONS.maxRows) },
  },
});
const N = Number(values.rows);
const RUNS = Number(values.runs);
const WRITER_BATCH = Number(values.batch);
const INSERT_BATCH = 1000;

// ---- the contenders ---------------------------------------------------------------------------

const SOURCE: SourceRef = { target: 'bench-db', instance: 'main', file: 'log/postgresql.log' };
const COLUMNS = STATEMENT_TABLE.columns;
const COLUMN_LIST = COLUMNS.join(', ');
/** The event time's column: microseconds in the mapped rows (a number, or a bigint far from now). */
const TS_COLUMN = COLUMNS.indexOf('ts');

/**
 * Chunks of rows of about CHUNK_BYTES (the writer's size), by their estimated size. Both COPY
 * contenders send them through the writer's copyIn (pg-copy-streams, one chunk written while
 * the next is made), so the comparison with the writer measures what the writer adds.
 */
function* chunksOf<T>(rows: readonly T[], sizeOf: (row: T) => number): Generator<T[]> {
  let chunk: T[] = [];
  let size = 0;
  for (const row of rows) {
    chunk.push(row);
    size += sizeOf(row);
    if (size >= CHUNK_BYTES) {
      yield chunk;
      chunk = [];
      size = 0;
    }
  }
  if (chunk.length > 0) yield chunk;
}

interface Prepared {
  values: unknown[];
  size: number;
}

async function insertRows(client: pg.Client, rows: readonly Prepared[]): Promise<void> {
  const placeholders = (n: number): string =>
    Array.from({ length: n }, (_, r) => `(${COLUMNS.map((_c, c) => `$${r * COLUMNS.length + c + 1}`).join(', ')})`).join(', ');
  const full = `INSERT INTO pglog.statement_events (${COLUMN_LIST}) VALUES ${placeholders(INSERT_BATCH)}`;
  await client.query('BEGIN');
  for (let i = 0; i < rows.length; i += INSERT_BATCH) {
    const part = rows.slice(i, i + INSERT_BATCH);
    const params: unknown[] = [];
    for (const row of part) {
      row.values.forEach((v, c) => params.push(c === TS_COLUMN ? microsToIso(v as Micros) : v));
    }
    await client.query(part.length === INSERT_BATCH ? full : `INSERT INTO pglog.statement_events (${COLUMN_LIST}) VALUES ${placeholders(part.length)}`, params);
  }
  await client.query('COMMIT');
}

/** COPY text format: backslash, newline, carriage return and tab escaped; NULL as \N. The event time (microseconds) as ISO text. */
function textValue(v: unknown, column: number): string {
  if (v === null || v === undefined) return '\\N';
  if (column === TS_COLUMN) return microsToIso(v as Micros);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v !== 'string') throw new Error(`no text form for ${typeof v}`);
  if (!/[\\\n\r\t]/.test(v)) return v;
  return v.replace(/[\\\n\r\t]/g, (c) => (c === '\\' ? '\\\\' : c === '\n' ? '\\n' : c === '\r' ? '\\r' : '\\t'));
}

async function copyText(client: pg.Client, rows: readonly Prepared[]): Promise<void> {
  function* data(): Generator<Buffer> {
    for (const chunk of chunksOf(rows, (r) => r.size)) {
      let s = '';
      for (const row of chunk) s += row.values.map(textValue).join('\t') + '\n';
      yield Buffer.from(s, 'utf8');
    }
  }
  await client.query('BEGIN');
  await copyIn(client, `COPY pglog.statement_events (${COLUMN_LIST}) FROM STDIN`, data());
  await client.query('COMMIT');
}

const bareEncoder = new CopyBinaryEncoder(STATEMENT_TABLE.types, { initialSize: 2 * CHUNK_BYTES });
async function copyBinary(client: pg.Client, rows: readonly Prepared[]): Promise<void> {
  function* data(): Generator<Buffer> {
    yield bareEncoder.header();
    for (const chunk of chunksOf(rows, (r) => r.size)) yield bareEncoder.encodeRows(chunk.map((r) => r.values));
    yield bareEncoder.trailer();
  }
  await client.query('BEGIN');
  await copyIn(client, STATEMENT_TABLE.copySql, data());
  await client.query('COMMIT');
}

async function writerCommit(writer: StoreWriter, items: readonly BatchItem[], batch: number): Promise<void> {
  const { epoch } = await writer.claim(SOURCE.target, SOURCE.instance);
  const epochs = new Map([[streamKeyOf(SOURCE.target, SOURCE.instance), epoch]]);
  for (let i = 0; i < items.length; i += batch) {
    const part = items.slice(i, i + batch);
    const last = part.at(-1) as BatchItem;
    const res = await writer.commit({ items: part, positions: [{ ...SOURCE, identity: 'inode:1', offset: last.event.end }] }, epochs);
    if (res.rows.statement_events !== part.length) throw new Error(`writer committed ${res.rows.statement_events} of ${part.length}`);
  }
}

// ---- the run -------------------------------------------------------------------------------

const server = await startPostgres();
try {
  const url = server.url;
  const writer = await StoreWriter.open({ url, applicationName: 'copy-bench writer' });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const version = (await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]?.v ?? '?';

  process.stderr.write(`generating and parsing ${N} statements ...\n`);
  const events = parseEvents(generateLog(N));
  const readAt = Date.now();
  const items: BatchItem[] = events.map((event) => ({ source: SOURCE, event, readAt }));
  const prepared: Prepared[] = events.map((e) => {
    const row = mapEvent(SOURCE, e, readAt, rowContext(DEFAULT_MAX_TEXT_BYTES));
    return { values: row.values, size: estimatedRowBytes(row.values) };
  });
  const dataBytes = prepared.reduce((n, r) => n + r.size, 0);

  const truncate = async (): Promise<void> => {
    await client.query('TRUNCATE pglog.statement_events, pglog.query_templates, pglog.read_position_state, pglog.stream_claims');
    await client.query('CHECKPOINT');
  };
  const count = async (): Promise<number> => Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM pglog.statement_events')).rows[0]?.n);

  interface Contender {
    name: string;
    what: string;
    run: () => Promise<void>;
  }
  interface Result {
    name: string;
    what: string;
    best: number;
    all: number[];
    cpu: number[];
  }
  const contenders: Contender[] = [
    {
      name: 'INSERT',
      what: `multi-row INSERT, ${INSERT_BATCH} rows (${INSERT_BATCH * COLUMNS.length} parameters) per statement, one transaction`,
      run: () => insertRows(client, prepared),
    },
    {
      name: 'COPY text',
      what: `pg-copy-streams, text format, escaped, ${CHUNK_BYTES / 1024} KiB chunks, rows mapped beforehand`,
      run: () => copyText(client, prepared),
    },
    {
      name: 'COPY BINARY (bare)',
      what: `CopyBinaryEncoder, ${CHUNK_BYTES / 1024} KiB chunks, rows mapped beforehand, one COPY`,
      run: () => copyBinary(client, prepared),
    },
    {
      name: `StoreWriter.commit, ${WRITER_BATCH}-event batches`,
      what: 'events → rows, cleaning, COPY BINARY, templates, claims and positions, one transaction per batch',
      run: () => writerCommit(writer, items, WRITER_BATCH),
    },
    { name: 'StoreWriter.commit, one batch', what: 'the same, all events in one commit', run: () => writerCommit(writer, items, items.length) },
  ];
  const results: Result[] = contenders.map((c) => ({ name: c.name, what: c.what, best: Infinity, all: [], cpu: [] }));
  // Round robin (run 1 of each, then run 2 of each ...): a burst of load from elsewhere on the
  // machine then hits every contender alike instead of all runs of one.
  for (let i = 0; i < RUNS; i++) {
    for (const [k, c] of contenders.entries()) {
      const r = results[k] as Result;
      await truncate();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await c.run();
      const s = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      r.all.push(s);
      r.cpu.push((cpu.user + cpu.system) / 1e6);
      r.best = Math.min(r.best, s);
      const n = await count();
      if (n !== events.length) throw new Error(`${c.name}: ${n} rows in the table, expected ${events.length}`);
      process.stderr.write(`run ${i + 1}, ${c.name}: ${(events.length / s).toFixed(0)} rows/s\n`);
    }
  }
  const [insert, text, binary, writerBatched, writerOne] = results as [Result, Result, Result, Result, Result];

  await writer.close();
  await client.end();

  const rate = (r: Result): number => events.length / r.best;
  const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
  const ratio = (a: Result, b: Result): string => `${(rate(a) / rate(b)).toFixed(2)}×`;
  const md = [
    `## COPY benchmark (bench/copy-bench.ts)`,
    '',
    `${fmt(events.length)} statement events from the parser (pgbench TPC-B script, ~10 % extended protocol with parameters) into`,
    `\`pglog.statement_events\` (${COLUMNS.length} columns, ~${(dataBytes / events.length).toFixed(0)} bytes of data per row), PostgreSQL ${version}`,
    `(throwaway cluster on a Unix socket, fsync off), Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'CPU'}.`,
    `Best of ${RUNS} runs each (round robin), table truncated before every run; load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' / ')} at the end`,
    '(other work on the machine: rates vary with it, the ratios less).',
    '',
    "Client CPU is the benchmark process's own user + system time (the server works in parallel on the",
    'other core): it shows what each method costs the collector, whatever the load on the machine.',
    '',
    '| method | rows/s | best s | runs (s) | client CPU µs/row (min) | what |',
    '|---|---:|---:|---|---:|---|',
    ...results.map(
      (r) =>
        `| ${r.name} | ${fmt(rate(r))} | ${r.best.toFixed(3)} | ${r.all.map((s) => s.toFixed(2)).join(', ')} | ${((Math.min(...r.cpu) / events.length) * 1e6).toFixed(2)} | ${r.what} |`,
    ),
    '',
    '| ratio | value | reference / target |',
    '|---|---:|---|',
    `| COPY BINARY / INSERT | ${ratio(binary, insert)} | issue reference, 7-column row: 334k / 88k = 3.80× |`,
    `| COPY BINARY / COPY text | ${ratio(binary, text)} | issue reference: 334k / 167k = 2.00× |`,
    `| StoreWriter (${WRITER_BATCH}-event batches) / bare COPY BINARY | ${ratio(writerBatched, binary)} | target ≥ 0.80× |`,
    `| StoreWriter (one batch) / bare COPY BINARY | ${ratio(writerOne, binary)} | target ≥ 0.80× |`,
    '',
  ].join('\n');
  process.stdout.write(md);
  if (values.out !== undefined) writeFileSync(values.out, md);
} finally {
  await server.stop();
}
