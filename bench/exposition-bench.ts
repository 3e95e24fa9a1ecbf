/**
 * `make bench` (exposition part): what one `/metrics` answer costs the collector, its own
 * exposition (collector/src/observability/exposition.ts) against prom-client's
 * Registry#metrics() over the same registry, side by side in one run, at 50, 200 and 1000
 * followed instances. The event loop is held for all of it: a Prometheus scrape of a collector
 * with 1000 targets is that long a pause for every stream.
 *
 *   node bench/exposition-bench.ts [--targets 50,200,1000] [--scrapes 50] [--out FILE.md]
 *
 * Each target gets the series a followed instance has (bytes, lines, every event kind, lag,
 * newest committed entry, connection and transport gauges), plus the runtime's default metrics.
 * Each contender is warmed up, then timed by CPU time (user + system) over --scrapes answers,
 * alternating between the two, with the heap's growth over the same answers (what the GC must
 * then collect, measured with the GC's own accounting: bytes allocated in the new space).
 */
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { getHeapSpaceStatistics } from 'node:v8';

import { type CollectorMetrics, createCollectorMetrics } from '@pglog/collector/observability/metrics.ts';

import { emitReport } from './lib/emit-report.ts';

const { values } = parseArgs({
  options: {
    targets: { type: 'string', default: '50,200,1000' },
    scrapes: { type: 'string', default: '50' },
    out: { type: 'string' },
  },
});
const scrapes = Number(values.scrapes);

/** A collector's metrics with `n` followed instances' series. */
function populated(n: number, defaultMetrics = true): CollectorMetrics {
  // Without the runtime metrics, a fixed clock (lag_seconds is read at scrape time): two reads give the same text.
  const m = createCollectorMetrics(defaultMetrics ? {} : { defaultMetrics, now: () => 1_800_000_000_000 });
  for (let i = 0; i < n; i++) {
    const target = `db-${String(i).padStart(4, '0')}.example.internal`;
    m.readBytes(target, 'main', 1_000_000 + i);
    m.readLines(target, 'main', 10_000 + i);
    m.events(target, 'main', 'statement', 5_000 + i);
    m.lagBytes(target, 'main', i);
    m.newestCommittedEntry(target, 'main', Date.now() - i);
    m.targetConnected(target, true);
    m.targetTransport(target, 'inproc');
    m.pendingBytes(target, i);
  }
  return m;
}

interface Measured {
  cpuMs: number;
  allocatedKb: number;
}

/** New-space bytes V8 has handed out so far (its used size only falls at a scavenge, which this cannot see: a lower bound). */
function newSpaceUsed(): number {
  return getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_used_size ?? 0;
}

async function measure(answer: () => Promise<string>): Promise<Measured> {
  const started = process.cpuUsage();
  let allocated = 0;
  for (let i = 0; i < scrapes; i++) {
    const before = newSpaceUsed();
    await answer();
    allocated += Math.max(0, newSpaceUsed() - before);
  }
  const used = process.cpuUsage(started);
  return { cpuMs: (used.user + used.system) / 1000 / scrapes, allocatedKb: allocated / 1024 / scrapes };
}

const rows: string[] = [];
for (const n of values.targets.split(',').map(Number)) {
  const m = populated(n);
  const text = await m.metricsText();
  // The runtime's values move between two reads: the same bytes are checked without them.
  const still = populated(n, false);
  if ((await still.metricsText()) !== (await still.registry.metrics())) throw new Error(`${n} targets: the two expositions differ`);
  const series = text.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
  for (let i = 0; i < 20; i++) {
    await m.metricsText();
    await m.registry.metrics();
  }
  const ours: Measured[] = [];
  const theirs: Measured[] = [];
  for (let round = 0; round < 5; round++) {
    ours.push(await measure(() => m.metricsText()));
    theirs.push(await measure(() => m.registry.metrics()));
  }
  const best = (list: Measured[]): Measured => list.reduce((a, b) => (b.cpuMs < a.cpuMs ? b : a));
  const o = best(ours);
  const t = best(theirs);
  rows.push(
    `| ${n} | ${series.toLocaleString('en-US')} | ${(text.length / 1024).toFixed(0)} | ${o.cpuMs.toFixed(2)} | ${t.cpuMs.toFixed(2)} | ${(t.cpuMs / o.cpuMs).toFixed(2)} | ${o.allocatedKb.toFixed(0)} | ${t.allocatedKb.toFixed(0)} |`,
  );
  process.stderr.write(`exposition-bench: ${n} targets: ${o.cpuMs.toFixed(2)} against ${t.cpuMs.toFixed(2)} ms\n`);
}

const report = [
  '<!-- exposition-bench:start -->',
  '## `/metrics`: the collector’s exposition against prom-client’s (bench/exposition-bench.ts)',
  '',
  `One collector's metrics registry with every followed instance's series and the runtime's default metrics; each answer is the whole text, the same bytes from both (checked). CPU time per answer, the best of 5 rounds of ${scrapes} answers each, the two alternating; new-space allocation per answer as V8's accounting shows it between answers (a lower bound: a scavenge in the middle hides what it freed). Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'unknown CPU'}, Node ${process.version}. Command: \`node bench/exposition-bench.ts --targets ${values.targets} --scrapes ${scrapes}\`. Measured ${new Date().toISOString().slice(0, 10)}.`,
  '',
  '| targets | series | text, KiB | pglog, CPU ms per answer | prom-client Registry#metrics(), CPU ms per answer | prom-client / pglog | pglog, KiB allocated per answer | prom-client, KiB allocated per answer |',
  '|---:|---:|---:|---:|---:|---:|---:|---:|',
  ...rows,
  '<!-- exposition-bench:end -->',
].join('\n');
emitReport(report, values.out);
