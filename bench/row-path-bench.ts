/**
 * The collector's CPU path from log bytes to COPY data, without I/O (issue 15 point 2): the
 * ingest benchmark's own log mix (bench/ingest/statements.ts: pgbench TPC-B, 10 % extended
 * protocol, 8 % ORM-style queries) parsed by LogParser, mapped to store rows (mapEvent) and
 * encoded as COPY BINARY (CopyBinaryEncoder, 20,000-row batches as the collector's default),
 * in three cumulative stages, as CPU milliseconds per MB of log; then the path the collector
 * takes since ADR 0019: each 64 KiB slice's events encoded into the rows the batcher holds
 * (RowEncoder), and the statement rollup read from those rows as a commit does.
 *
 *   node bench/row-path-bench.ts [--baseline DIR] [--mb 60] [--rounds 5] [--out FILE.md]
 *
 * Each measurement is a child process of its own (so one checkout's JIT state and heap never
 * reach the other's) that reads the log once into memory and then runs the stage twice, the
 * second time timed by its own CPU clock (user + system): on a machine shared with other work
 * that still measures the code rather than the machine. With --baseline DIR (another
 * checkout of pglog, e.g. `git worktree add DIR main` with its node_modules) the two
 * checkouts alternate round by round and the minimum of each is reported side by side.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import type { PglogEvent } from '@pglog/collector/logformat/events.ts';
import type * as ParserModule from '@pglog/collector/logformat/log-parser.ts';
import type * as NormalizeModule from '@pglog/collector/logformat/normalize/normalize.ts';
import type * as CopyModule from '@pglog/collector/store/copy-binary.ts';
import type * as EncodedRowsModule from '@pglog/collector/store/encoded-rows.ts';
import type * as RowsModule from '@pglog/collector/store/event-rows.ts';
import type * as TablesModule from '@pglog/collector/store/event-tables.ts';
import type * as RollupModule from '@pglog/collector/store/rollup.ts';

import { writeSection } from './lib/doc-section.ts';

const STAGES = ['parse', 'map', 'encode', 'held', 'rollup', 'sunk'] as const;
type Stage = (typeof STAGES)[number];
const STAGE_LABEL: Record<Stage, string> = {
  parse: 'parse (split, assemble, decode, classify, normalize)',
  map: '… and map to rows (mapEvent, text cleaning, timestamps)',
  encode: '… and encode COPY BINARY (CopyBinaryEncoder)',
  held: "parse, and each 64 KiB slice's events encoded as the collector holds them (RowEncoder, ADR 0019)",
  rollup: '… and at commit the statement rollup and the templates (StatementRollup.addTable, or addEncoded from the rows before ADR 0024)',
  sunk: 'parse with statements taken as rows from their bytes (the RowEncoder as StatementSink), each slice encoded as held, and the rollup',
};
/** The collector's slice (instance-stream.ts SLICE_BYTES): one handover to the batcher each. */
const SLICE_BYTES = 64 * 1024;

const { values } = parseArgs({
  options: {
    baseline: { type: 'string' },
    mb: { type: 'string', default: '60' },
    rounds: { type: 'string', default: '5' },
    out: { type: 'string' },
    child: { type: 'string' },
    stage: { type: 'string' },
    log: { type: 'string' },
  },
});

if (values.child !== undefined) {
  process.stdout.write(`${JSON.stringify(await child(values.child, values.stage as Stage, values.log!))}\n`);
} else {
  await main();
}

/** One stage of one checkout over the log: CPU ms of the second (warm) pass. */
async function child(checkout: string, stage: Stage, logPath: string): Promise<{ cpuMs: number; events: number; bytes: number }> {
  const { LogParser } = (await import(join(checkout, 'collector/src/logformat/log-parser.ts'))) as typeof ParserModule;
  const { mapEvent, rowContext } = (await import(join(checkout, 'collector/src/store/event-rows.ts'))) as typeof RowsModule;
  const { CopyBinaryEncoder } = (await import(join(checkout, 'collector/src/store/copy-binary.ts'))) as typeof CopyModule;
  const { TABLES, EVENT_TABLES } = (await import(join(checkout, 'collector/src/store/event-tables.ts'))) as typeof TablesModule;
  const { TemplateCache } = (await import(join(checkout, 'collector/src/logformat/normalize/normalize.ts'))) as typeof NormalizeModule;
  const data = readFileSync(logPath);
  const templates = new TemplateCache();
  const source = { target: 'bench', instance: 'bench-0', file: 'postgresql.log' };
  const encoders = Object.fromEntries(EVENT_TABLES.map((t) => [t, new CopyBinaryEncoder(TABLES[t].types, { initialSize: 1 << 20 })]));
  let events = 0;
  if (stage === 'held' || stage === 'rollup' || stage === 'sunk') {
    const { RowEncoder } = (await import(join(checkout, 'collector/src/store/encoded-rows.ts'))) as typeof EncodedRowsModule;
    const { StatementRollup } = (await import(join(checkout, 'collector/src/store/rollup.ts'))) as typeof RollupModule;
    const { TemplateSet } = (await import(join(checkout, 'collector/src/store/event-rows.ts'))) as typeof RowsModule;
    /** The collector's path: each slice's events encoded into held rows, and at commit the rows summed into the batch's rollup. */
    const heldPass = (): number => {
      const started = process.cpuUsage();
      const rowEncoder = new RowEncoder(1024 * 1024);
      // A checkout from before the StatementSink (no open()) takes the events path: its figure is `rollup`'s.
      const sink = stage === 'sunk' && 'open' in rowEncoder ? rowEncoder : undefined;
      let rollup = new StatementRollup();
      let batchTemplates = new TemplateSet();
      let rows = 0;
      let slice: PglogEvent[] = [];
      const handOver = (): void => {
        const taken = sink === undefined ? 0 : sink.taken;
        const encoded = rowEncoder.encode(source, slice, 0);
        const block = encoded.tables.statement_events;
        if (stage !== 'held') {
          // A checkout from before the statement keys (no addTable) reads the rollup from the bytes.
          if (block !== undefined) {
            if ('addTable' in rollup) rollup.addTable(block, 0, block.ends.length);
            else (rollup as InstanceType<typeof StatementRollup>).addEncoded(block.data, block.ends, 0, block.ends.length);
          }
          batchTemplates.merge(encoded.templates);
          if ('addKeys' in batchTemplates) batchTemplates.addKeys(encoded.statementKeys);
        }
        rowEncoder.recycle(encoded);
        rows += slice.length + taken;
        events += taken;
        slice = [];
        // A batch commits at 20,000 rows: its rollup goes with it.
        if (rows >= 20_000) {
          rows = 0;
          rollup = new StatementRollup();
          batchTemplates = new TemplateSet();
        }
      };
      events = 0;
      const parser = new LogParser(
        { format: 'stderr', prefix: '%m [%p] %q%u@%d ', encodings: { defaultEncoding: 'UTF8', databases: {} }, templates, statements: sink },
        (event) => {
          events++;
          slice.push(event);
        },
      );
      for (let i = 0; i < data.length; i += SLICE_BYTES) {
        sink?.open(source, 0);
        parser.push(data.subarray(i, Math.min(data.length, i + SLICE_BYTES)));
        handOver();
      }
      sink?.open(source, 0);
      parser.end();
      handOver();
      const used = process.cpuUsage(started);
      return (used.user + used.system) / 1000;
    };
    heldPass();
    return { cpuMs: heldPass(), events, bytes: data.length };
  }
  const pass = (): number => {
    const started = process.cpuUsage();
    let ctx = rowContext(1024 * 1024);
    let batch = new Map<string, unknown[][]>();
    let rows = 0;
    const flush = (): void => {
      for (const [table, values] of batch) encoders[table]!.encodeRows(values);
      batch = new Map();
      ctx = rowContext(1024 * 1024);
    };
    events = 0;
    const parser = new LogParser(
      { format: 'stderr', prefix: '%m [%p] %q%u@%d ', encodings: { defaultEncoding: 'UTF8', databases: {} }, templates },
      (event) => {
        events++;
        if (stage === 'parse') return;
        const row = mapEvent(source, event, 0, ctx);
        if (stage === 'map') return;
        let list = batch.get(row.table);
        if (list === undefined) batch.set(row.table, (list = []));
        list.push(row.values);
        if (++rows % 20_000 === 0) flush();
      },
    );
    for (let i = 0; i < data.length; i += 256 * 1024) parser.push(data.subarray(i, Math.min(data.length, i + 256 * 1024)));
    parser.end();
    if (stage === 'encode') flush();
    const used = process.cpuUsage(started);
    return (used.user + used.system) / 1000;
  };
  pass();
  return { cpuMs: pass(), events, bytes: data.length };
}

/** The checkout's commit (short), or its directory when it is not a git checkout. */
function revisionOf(dir: string): string {
  try {
    return execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return dir;
  }
}

async function main(): Promise<void> {
  const { StatementLog, formatLogTime } = await import('@pglog/test-support/statement-log.ts');
  const root = new URL('..', import.meta.url).pathname;
  const checkouts: Array<{ name: string; dir: string }> = [{ name: 'this tree', dir: root }];
  if (values.baseline !== undefined) checkouts.push({ name: `baseline (${revisionOf(values.baseline)})`, dir: values.baseline });
  const rounds = Number(values.rounds);
  const work = mkdtempSync(join(tmpdir(), 'pglog-row-path-'));
  try {
    const logPath = join(work, 'postgresql.log');
    const gen = new StatementLog(42);
    const parts: string[] = [];
    let n = 0;
    for (let t = Date.parse('2026-11-26T08:00:00Z'); n < Number(values.mb) * 1e6; t++) {
      const s = gen.entries(formatLogTime(t), 1500);
      parts.push(s);
      n += s.length;
    }
    writeFileSync(logPath, parts.join(''), 'latin1');
    const load = loadavg()[0]!;
    const best = new Map<string, number>();
    let events = 0;
    for (let r = 0; r < rounds; r++) {
      for (const stage of STAGES) {
        for (const c of r % 2 === 0 ? checkouts : [...checkouts].reverse()) {
          const out = execFileSync(process.execPath, [new URL(import.meta.url).pathname, '--child', c.dir, '--stage', stage, '--log', logPath], {
            encoding: 'utf8',
            maxBuffer: 1 << 20,
          });
          const res = JSON.parse(out) as { cpuMs: number; events: number; bytes: number };
          events = res.events;
          const msPerMb = res.cpuMs / (res.bytes / 1e6);
          const key = `${c.name}\t${stage}`;
          best.set(key, Math.min(best.get(key) ?? Infinity, msPerMb));
          process.stderr.write(`row-path-bench: round ${r + 1}/${rounds} ${stage.padEnd(6)} ${c.name}: ${msPerMb.toFixed(2)} ms/MB\n`);
        }
      }
    }
    const msOf = (c: { name: string }, s: Stage): number => best.get(`${c.name}\t${s}`)!;
    const head = `| stage (cumulative) | ${checkouts.map((c) => `${c.name}: CPU ms per MB`).join(' | ')} |${checkouts.length > 1 ? ' this tree / baseline |' : ''}`;
    const rule = `|---|${checkouts.map(() => '---:|').join('')}${checkouts.length > 1 ? '---:|' : ''}`;
    const lines = STAGES.map(
      (s) =>
        `| ${STAGE_LABEL[s]} | ${checkouts.map((c) => msOf(c, s).toFixed(2)).join(' | ')} |${checkouts.length > 1 ? ` ${(msOf(checkouts[0]!, s) / msOf(checkouts[1]!, s)).toFixed(2)} |` : ''}`,
    );
    const section = [
      "## The collector's row path without I/O (bench/row-path-bench.ts)",
      '',
      `The ingest benchmark's log mix, ${(n / 1e6).toFixed(0)} MB, ${events.toLocaleString('en-US')} entries, in memory; each figure the lowest of ${rounds} rounds, each round a fresh process per checkout and stage timing its second pass by its own CPU clock; the checkouts alternate. Load average at the start ${load.toFixed(1)} on ${cpus().length} cores. Command: \`node bench/row-path-bench.ts${values.baseline === undefined ? '' : ' --baseline DIR'} --mb ${values.mb} --rounds ${rounds}\`. Measured ${new Date().toISOString().slice(0, 10)}.`,
      '',
      head,
      rule,
      ...lines,
      '',
    ].join('\n');
    process.stdout.write(`${section}\n`);
    if (values.out !== undefined) writeSection(values.out, 'row-path-bench', section);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
