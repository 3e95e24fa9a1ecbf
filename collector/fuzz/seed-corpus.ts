/**
 * Cuts the fuzz targets' seed corpus (corpus/<target>/) from the logs a real PostgreSQL 15
 * wrote (`make logs`, scripts/loggen): for each kind of entry (event kind, severity, SQLSTATE,
 * first words) the first one of each run, with the entry after it (so pairs such as an error
 * and its STATEMENT line, or a statement and its plan, stay together). Small seeds are what a
 * coverage-guided fuzzer mutates best.
 *
 *   node collector/fuzz/seed-corpus.ts --logs ~/.cache/pglog/logs/test
 *
 * stderr, csvlog and jsonlog seeds are cut from those files; syslog seeds are the stderr ones
 * as rsyslog writes PostgreSQL's syslog messages (`Mon dd hh:mm:ss host postgres[pid]: [N-M] `,
 * continuation tabs as `#011`); prefix seeds are the known prefixes (detect.ts) and the real
 * prefixes with real lines. Each log seed starts with the two header bytes of
 * log-properties.ts. The corpus is committed; this script rewrites it.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { KNOWN_PREFIXES } from '../src/logformat/detect.ts';
import type { PglogEvent } from '../src/logformat/events.ts';
import { LogParser } from '../src/logformat/log-parser.ts';
import type { LogFormat } from '../src/logformat/record.ts';
import { PREFIXES } from './log-properties.ts';
import { corpusDir } from './run.ts';

/** Largest seed kept: libFuzzer mutates small inputs far faster. */
const MAX_SEED_BYTES = 4096;
/** Seeds per format and run. */
const MAX_SEEDS = 24;
const ENCODINGS = { defaultEncoding: 'UTF8', databases: { cyr_win1251: 'WIN1251', cyr_koi8r: 'KOI8R' } };

interface Run {
  name: string;
  prefix: string;
  files: Partial<Record<LogFormat, string>>;
}

function readManifest(logs: string): Run[] {
  const manifest = JSON.parse(readFileSync(join(logs, 'manifest.json'), 'utf8')) as {
    runs: Record<string, { log_line_prefix: string; files: Partial<Record<LogFormat, string>> }>;
  };
  return Object.entries(manifest.runs).map(([name, r]) => ({ name, prefix: r.log_line_prefix, files: r.files }));
}

/** What tells entries apart for seeding: one seed per kind of entry. */
function kindOf(e: PglogEvent): string {
  const message = 'message' in e && typeof e.message === 'string' ? e.message : '';
  return [e.kind, e.severity, e.sqlstate ?? '', message.split(/[\s:]/, 2).join(' ')].join('|');
}

/** Byte ranges of the first entry of each kind, with the entry after it. */
function seedRanges(format: LogFormat, prefix: string, log: Buffer): Array<[number, number, PglogEvent]> {
  const events: PglogEvent[] = [];
  const parser = new LogParser({ format, prefix, encodings: ENCODINGS }, (e) => events.push(e));
  parser.push(log);
  parser.end();
  const seen = new Set<string>();
  const ranges: Array<[number, number, PglogEvent]> = [];
  for (let i = 0; i < events.length && ranges.length < MAX_SEEDS; i++) {
    const e = events[i]!;
    const key = kindOf(e);
    if (seen.has(key)) continue;
    const end = events[i + 1]?.end ?? e.end;
    if (end - e.offset > MAX_SEED_BYTES) continue;
    seen.add(key);
    ranges.push([e.offset, end, e]);
  }
  return ranges;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** stderr entries as rsyslog writes PostgreSQL's syslog messages (syslog_sequence_numbers on). */
function asSyslog(stderr: Buffer, events: PglogEvent[]): Buffer {
  const out: string[] = [];
  let sequence = 1;
  for (const e of events) {
    const d = new Date(e.ts ?? '2026-11-26T01:49:36Z');
    const time = `${MONTHS[d.getUTCMonth()]} ${String(d.getUTCDate()).padStart(2, ' ')} ${d.toISOString().slice(11, 19)}`;
    const lines = stderr.subarray(e.offset, e.end).toString('latin1').replace(/\n$/, '').split('\n');
    lines.forEach((line, k) => {
      out.push(`${time} dbhost postgres[${e.pid ?? 1}]: [${sequence}-${k + 1}] ${line.replaceAll('\t', '#011')}\n`);
    });
    sequence++;
  }
  return Buffer.from(out.join(''), 'latin1');
}

function writeSeeds(target: string, seeds: Array<[name: string, data: Buffer]>): void {
  const dir = corpusDir(target);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const [name, data] of seeds) {
    const hash = createHash('sha1').update(data).digest('hex').slice(0, 12);
    writeFileSync(join(dir, `${name}-${hash}`), data);
  }
  console.log(`seed-corpus: ${dir}: ${seeds.length} seeds, ${seeds.reduce((n, [, d]) => n + d.length, 0)} bytes`);
}

function main(): void {
  const { values } = parseArgs({ options: { logs: { type: 'string' } } });
  if (values.logs === undefined) throw new Error('--logs DIR is required: the generated logs (make logs writes ~/.cache/pglog/logs/test)');
  const runs = readManifest(values.logs);
  const seeds: Record<string, Array<[string, Buffer]>> = { stderr: [], csvlog: [], jsonlog: [], syslog: [], prefix: [] };

  for (const run of runs) {
    const prefixIndex = PREFIXES.indexOf(run.prefix);
    if (prefixIndex < 0) throw new Error(`run ${run.name}'s log_line_prefix ${JSON.stringify(run.prefix)} is not in PREFIXES (log-properties.ts)`);
    for (const format of ['stderr', 'csvlog', 'jsonlog'] as const) {
      const file = run.files[format];
      if (file === undefined) continue;
      const log = readFileSync(join(values.logs, file));
      seedRanges(format, run.prefix, log).forEach(([from, to, e], n) => {
        // Byte 1 varies the chunking and, every fourth seed, the entry cap (log-properties.ts).
        const header = Buffer.from([prefixIndex, (n * 37) & 0xff]);
        seeds[format]!.push([`${run.name}-${e.kind}`, Buffer.concat([header, log.subarray(from, to)])]);
        if (format !== 'stderr') return;
        const events: PglogEvent[] = [];
        const parser = new LogParser({ format, prefix: run.prefix, encodings: ENCODINGS }, (x) => events.push(x));
        parser.push(log.subarray(from, to));
        parser.end();
        seeds.syslog!.push([`${run.name}-${e.kind}`, Buffer.concat([header, asSyslog(log.subarray(from, to), events)])]);
        if (n < 6)
          seeds.prefix!.push([`${run.name}-line`, Buffer.concat([Buffer.from(run.prefix), Buffer.from([0]), log.subarray(from, log.indexOf(0x0a, from))])]);
      });
    }
  }
  for (const p of new Set([...KNOWN_PREFIXES, ...PREFIXES, '%-10u %5p %m %q%a '])) {
    seeds.prefix!.push(['known', Buffer.from(p)]);
  }
  for (const [target, list] of Object.entries(seeds)) writeSeeds(target, list);
  for (const target of Object.keys(seeds)) if (readdirSync(corpusDir(target)).length === 0) throw new Error(`no seeds for ${target}`);
}

if (import.meta.main) main();
