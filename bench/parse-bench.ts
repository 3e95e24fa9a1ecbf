/**
 * `make bench` (parser part): line splitting and full parsing throughput on one large real
 * stderr log, every contender in one run, side by side, with ratios.
 *
 *   node bench/parse-bench.ts --log FILE [--out docs/benchmarks.md] [--runs N] [--prefix P]
 *                             [--baseline DIR]
 *
 * --baseline DIR adds `pglog parse` of another checkout of pglog (e.g. `git worktree add DIR
 * main`, with its node_modules) as a contender of its own, run in turns with this one, so a
 * change to the parser is measured against what it replaces in the same run.
 *
 * Each contender runs as its own process under GNU time, so its peak RSS is its own; the
 * file is read once first so every contender starts from the page cache. The median of
 * --runs runs counts (pgBadger, the slowest by far, runs once).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    log: { type: 'string' },
    out: { type: 'string' },
    runs: { type: 'string', default: '3' },
    prefix: { type: 'string', default: '%m [%p] %q%u@%d ' },
    baseline: { type: 'string' },
  },
});
if (values.log === undefined) throw new Error('usage: parse-bench.ts --log FILE [--out FILE] [--runs N]');
const log = values.log;
const runs = Number(values.runs);
const prefix = values.prefix;
const root = new URL('..', import.meta.url).pathname;
const node = process.execPath;
const bytes = statSync(log).size;
const work = mkdtempSync(join(tmpdir(), 'pglog-bench-'));

interface Contender {
  name: string;
  what: string;
  command: string[];
  runs: number;
  /** Lines or entries the contender reports, from its own output; `seconds` when it times itself. */
  count: (stdout: string) => { lines?: number; entries?: number; seconds?: number };
}

/** A script of bench/contenders run on the log; it prints its count (and `seconds` when it times itself) as JSON. */
const scriptContender = (name: string, what: string, script: string): Contender => ({
  name,
  what,
  command: [node, join(root, 'bench/contenders', script), log],
  runs,
  count: (s) => JSON.parse(s) as { lines: number; seconds?: number },
});
const pglogParse = (name: string, what: string, checkout: string): Contender => ({
  name,
  what,
  command: [
    join(checkout, existsSync(join(checkout, 'cli/bin/pglog')) ? 'cli/bin/pglog' : 'collector/bin/pglog'),
    'parse',
    '--summary',
    '--format',
    'stderr',
    '--prefix',
    prefix,
    log,
  ],
  runs,
  count: (s) => {
    const j = JSON.parse(s) as { lines: number; entries: number };
    return { lines: j.lines, entries: j.entries };
  },
});
const baseline = values.baseline;
const contenders: Contender[] = [
  { name: 'wc -l', what: 'memchr line counting (upper bound)', command: ['wc', '-l', log], runs, count: (s) => ({ lines: Number(s.trim().split(/\s+/)[0]) }) },
  scriptContender('readline', 'Node readline, a string per line', 'readline.ts'),
  scriptContender('split2', 'split2 transform, a string per line', 'split2.ts'),
  scriptContender('pglog LineSplitter', 'Buffer lines, no decoding (reading as pglog parse does)', 'line-splitter.ts'),
  scriptContender('LineSplitter, in memory', 'the same, file already in memory: splitting alone, self-timed', 'line-splitter-memory.ts'),
  pglogParse('pglog parse', 'split, assemble, parse, decode, normalize, summarize', root),
  ...(baseline === undefined ? [] : [pglogParse('pglog parse, baseline', `the same, by the checkout in ${baseline}`, baseline)]),
  {
    name: 'pgbadger -j 1',
    what: 'pgBadger (Debian), one process, text report',
    // Its own pid file: pgBadger refuses to start (exit 3) while another one's is in /tmp.
    command: ['pgbadger', '-j', '1', '-f', 'stderr', '-p', prefix, '-x', 'text', '-o', join(work, 'pgbadger.txt'), '--pid-dir', work, '--quiet', log],
    runs: 1,
    count: () => ({}),
  },
];

interface Result {
  name: string;
  what: string;
  seconds: number;
  cpuSeconds: number;
  rssMb: number;
  lines: number | null;
  entries: number | null;
}

/** Wall-clock seconds, CPU seconds (user + system, from GNU time), peak RSS and output of one run. */
function runOnce(c: Contender): { seconds: number; cpuSeconds: number; rssMb: number; stdout: string } {
  const timeFile = join(work, 'time.txt');
  const started = process.hrtime.bigint();
  const child = spawnSync('/usr/bin/time', ['-f', '%M %U %S', '-o', timeFile, ...c.command], { maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' });
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (child.status !== 0) throw new Error(`${c.name} failed (${child.status}): ${child.stderr}`);
  const [rssKb, user, system] = readFileSync(timeFile, 'utf8').trim().split('\n').pop()!.split(' ').map(Number) as [number, number, number];
  return { seconds, cpuSeconds: user + system, rssMb: rssKb / 1024, stdout: child.stdout };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

process.stderr.write(`parse-bench: ${log} (${(bytes / 1e6).toFixed(0)} MB), warming the page cache\n`);
execFileSync('cat', [log], { stdio: ['ignore', 'ignore', 'inherit'] });
const results: Result[] = [];
let entries: number | null = null;
/** Runs of each contender; pglog parse and its baseline alternate, so both see the same machine. */
const runsOf = new Map<Contender, ReturnType<typeof runOnce>[]>();
const paired = contenders.filter((c) => c.name.startsWith('pglog parse'));
for (let i = 0; i < runs; i++) for (const c of paired) runsOf.set(c, [...(runsOf.get(c) ?? []), runOnce(c)]);
for (const c of contenders) {
  const samples = (runsOf.get(c) ?? Array.from({ length: c.runs }, () => runOnce(c))).map((s) => ({ ...s, seconds: c.count(s.stdout).seconds ?? s.seconds }));
  const seconds = median(samples.map((s) => s.seconds));
  const cpuSeconds = median(samples.map((s) => s.cpuSeconds));
  const rssMb = Math.max(...samples.map((s) => s.rssMb));
  const counted = c.count(samples[0]!.stdout);
  if (counted.entries !== undefined) entries = counted.entries;
  results.push({ name: c.name, what: c.what, seconds, cpuSeconds, rssMb, lines: counted.lines ?? null, entries: counted.entries ?? null });
  process.stderr.write(
    `  ${c.name.padEnd(20)} ${(bytes / 1e6 / seconds).toFixed(1).padStart(8)} MB/s  ${rssMb.toFixed(0).padStart(5)} MB RSS  (${seconds.toFixed(2)} s, ${cpuSeconds.toFixed(2)} s CPU)\n`,
  );
}
rmSync(work, { recursive: true, force: true });

const by = (name: string): Result => results.find((r) => r.name === name)!;
const rate = (r: Result): number => bytes / 1e6 / r.seconds;
const ratio = (a: string, b: string): string => (rate(by(a)) / rate(by(b))).toFixed(2);
/** The same ratio by CPU time (user + system): what a run on a machine busy with other work still measures. */
const cpuRatio = (a: string, b: string): string => (by(b).cpuSeconds / by(a).cpuSeconds).toFixed(2);
const lineCounts = new Set(results.filter((r) => r.lines !== null).map((r) => r.lines));
const table = [
  '| contender | what it does | MB/s | entries/s | peak RSS (MB) | seconds | CPU seconds |',
  '|---|---|---:|---:|---:|---:|---:|',
  ...results.map(
    (r) =>
      `| ${r.name} | ${r.what} | ${rate(r).toFixed(1)} | ${entries === null || !['pglog parse', 'pglog parse, baseline', 'pgbadger -j 1'].includes(r.name) ? '' : Math.round(entries / r.seconds).toLocaleString('en-US')} | ${r.rssMb.toFixed(0)} | ${r.seconds.toFixed(2)} | ${r.cpuSeconds.toFixed(2)} |`,
  ),
];
const ratios = [
  `| LineSplitter / wc -l | ${ratio('pglog LineSplitter', 'wc -l')} | target ≥ 0.25 |`,
  `| LineSplitter / readline | ${ratio('pglog LineSplitter', 'readline')} | target ≥ 4 |`,
  `| LineSplitter / split2 | ${ratio('pglog LineSplitter', 'split2')} | |`,
  `| LineSplitter in memory / wc -l | ${ratio('LineSplitter, in memory', 'wc -l')} | splitting alone |`,
  `| pglog parse / pgbadger -j 1 | ${ratio('pglog parse', 'pgbadger -j 1')} (by CPU time: ${cpuRatio('pglog parse', 'pgbadger -j 1')}) | target ≥ 50 (issue 15) |`,
  ...(baseline === undefined
    ? []
    : [
        `| baseline pglog parse / pgbadger -j 1 | ${ratio('pglog parse, baseline', 'pgbadger -j 1')} (by CPU time: ${cpuRatio('pglog parse, baseline', 'pgbadger -j 1')}) | |`,
        `| pglog parse / its baseline | ${ratio('pglog parse', 'pglog parse, baseline')} (by CPU time: ${cpuRatio('pglog parse', 'pglog parse, baseline')}) | |`,
      ]),
  `| pglog parse peak RSS | ${by('pglog parse').rssMb.toFixed(0)} MB | target < 200 MB |`,
];
const section = [
  '<!-- parse-bench:start -->',
  '## Log parsing (`make bench`: bench/parse-bench.ts)',
  '',
  `Input: a real PostgreSQL 15 stderr log generated by scripts/loggen (pgbench load, every statement logged, plans, errors), ${(bytes / 1e6).toFixed(0)} MB, ${by('wc -l').lines?.toLocaleString('en-US')} lines, ${entries?.toLocaleString('en-US')} entries; page cache warm; median of ${runs} runs (pgBadger: 1). Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}. Measured ${new Date().toISOString().slice(0, 10)}.`,
  '',
  ...table,
  '',
  '| ratio | value | |',
  '|---|---:|---|',
  ...ratios,
  '',
  lineCounts.size === 1 ? 'Every line counter agreed on the number of lines.' : `Line counts differ between contenders: ${[...lineCounts].join(', ')}.`,
  '<!-- parse-bench:end -->',
].join('\n');
process.stdout.write(`${section}\n`);
if (values.out !== undefined) {
  let doc = '';
  try {
    doc = readFileSync(values.out, 'utf8');
  } catch {
    doc = '# Benchmarks\n\nMeasured by `make bench`; each section is rewritten by its benchmark.\n';
  }
  const re = /<!-- parse-bench:start -->[\s\S]*<!-- parse-bench:end -->/;
  writeFileSync(values.out, re.test(doc) ? doc.replace(re, section) : `${doc.trimEnd()}\n\n${section}\n`);
  process.stderr.write(`parse-bench: wrote ${values.out}\n`);
}
