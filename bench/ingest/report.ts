/**
 * The ingest benchmark's markdown: one table (a column per offered rate) with the targets of
 * issue 3, and the section written between its markers into an output file, replacing an
 * earlier run's section (the notes around it stay as written by hand).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';

import { type CpuModel, cpuPerMBAt, fitCpuModel, rateForTarget } from './cpu-model.ts';
import { STAGES } from './cpu-profile.ts';
import type { ThreadGroup } from './proc-stats.ts';
import type { RunResult } from './run.ts';
import { STORE_SETTINGS } from './store.ts';

const START = '<!-- ingest-bench:start -->';
const END = '<!-- ingest-bench:end -->';

const f = (n: number, digits = 1): string => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');

/** CPU seconds of the window as milliseconds per MB the collector read in it. */
const msPerMB = (r: RunResult, seconds: number): number => (seconds / (r.ingestedMBps * r.windowSeconds)) * 1000;
/** User + kernel seconds of one thread group in the window. */
const groupSeconds = (r: RunResult, g: ThreadGroup): number => r.collectorThreadCpu[g].user + r.collectorThreadCpu[g].system;
const ms = (seconds: number): string => f(seconds * 1000, 1);
const mb = (bytes: number): string => f(bytes / 1e6, 1);
const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');

export interface ReportContext {
  collectorArgs: readonly string[];
  warmupSeconds: number;
  measureSeconds: number;
  fleetNice: number;
  servers: number;
  /** The collector alone on `core`, everything else on `others` (--pin-collector). */
  pin?: { core: number; others: string };
}

export function renderSection(runs: readonly RunResult[], failures: readonly string[], ctx: ReportContext, profiled: readonly RunResult[] = []): string {
  const head = `| | ${runs.map((r) => `${f(r.targetMBps)} MB/s offered${r.variant === undefined ? '' : `, ${r.variant}`}`).join(' | ')} |`;
  const rule = `|---|${runs.map(() => '---:').join('|')}|`;
  const row = (label: string, cell: (r: RunResult) => string): string => `| ${label} | ${runs.map(cell).join(' | ')} |`;
  const rows = [
    row('servers (sshd, one log each)', (r) => String(r.servers)),
    row('written by the log writer, MB/s', (r) => f(r.offeredMBps, 2)),
    row('read by the collector, MB/s', (r) => f(r.ingestedMBps, 2)),
    row('statement rows committed per second', (r) => int(r.rowsCommittedPerSec)),
    row('**collector CPU, ms per MB read**', (r) => f(r.collectorCpuPerMB * 1000, 1)),
    row('collector CPU, % of one core', (r) => f(r.collectorCpuPercent, 0)),
    row(
      '… by thread, ms per MB: main (of it in the kernel) / V8 workers / libuv workers and other',
      (r) =>
        `${f(msPerMB(r, groupSeconds(r, 'main')))} (${f(msPerMB(r, r.collectorThreadCpu.main.system))}) / ${f(msPerMB(r, groupSeconds(r, 'v8 workers')))} / ${f(
          msPerMB(r, groupSeconds(r, 'libuv workers') + groupSeconds(r, 'other')),
        )}`,
    ),
    row('… prom-client process_cpu_seconds_total, s (check)', (r) => `${f(r.promCpuSeconds, 1)} vs ${f(r.collectorCpuSeconds, 1)} from /proc`),
    row('**event-loop delay p99, ms** (median / worst 1 s sample)', (r) => `${ms(r.eventLoop.p99Median)} / ${ms(r.eventLoop.p99Max)}`),
    row('event-loop delay max, ms', (r) => ms(r.eventLoop.max)),
    row('slowest GET /metrics answer in the window, ms (failed scrapes)', (r) => `${r.eventLoop.slowestScrapeMs} (${r.eventLoop.failedScrapes})`),
    row('**peak RSS, MB** (VmHWM at the window end / after the drain)', (r) => `${mb(r.peakRssBytes)} / ${mb(r.peakRssAfterDrainBytes)}`),
    row(
      '… largest in the window, MB: V8 heap committed (young generation) / used, external (Buffers), held for the store',
      (r) => `${mb(r.memory.heapTotal)} (${mb(r.memory.newSpace)}) / ${mb(r.memory.heapUsed)}, ${mb(r.memory.external)}, ${mb(r.memory.pending)}`,
    ),
    row(
      "… resident, largest in the window, MB: anonymous / file-backed (the Node binary's own pages, shared by every process running it)",
      (r) => `${mb(r.memory.rssAnon)} / ${mb(r.memory.rssFile)}`,
    ),
    row('**end-to-end latency p50 / p99, ms** (log write → committed row)', (r) => `${f(r.latency.p50Ms, 0)} / ${f(r.latency.p99Ms, 0)}`),
    row('end-to-end latency max, ms', (r) => f(r.latency.maxMs, 0)),
    row('kept up: unread backlog at the window end, MB', (r) => mb(r.backlogBytesAtEnd)),
    row('kept up: streams paused for the store (max)', (r) => String(r.pausedStreamsMax)),
    row('drain after the writer stopped', (r) => `${r.drain.complete ? 'complete' : '**incomplete**'} in ${f(r.drain.seconds, 1)} s`),
    row('rows in the store / statement entries written', (r) => `${int(r.drain.rows)} / ${int(r.drain.statements)}`),
    row(
      'errors: collector / store / retried batches / parse problems',
      (r) => `${r.errors.collector} / ${r.errors.store} / ${r.errors.retriedBatches} / ${r.errors.parseProblems}`,
    ),
    row(
      'SIGTERM → process exit (→ "pglog collect stopped" logged)',
      (r) =>
        `${r.stop.code === null && r.stop.signal === null ? 'no exit' : `code ${r.stop.code ?? r.stop.signal}`} in ${(r.stop.ms / 1000).toFixed(1)} s${r.stop.withinTimeout ? '' : ' (**over 10 s**)'} (${(r.stop.stoppedLogMs / 1000).toFixed(1)} s)`,
    ),
    row('machine CPU busy, % of one core (all cores)', (r) => `${f(r.machine.busyPercent, 0)} of ${r.machine.cores * 100}`),
    row(
      '… log writer / store (postgres) / sshd, % of one core',
      (r) => `${f(r.machine.writerPercent, 0)} / ${f(r.machine.storePercent, 0)} / ${f(r.machine.sshdPercent, 0)}`,
    ),
    row("… processes forked per second (the follower's remote loops)", (r) => int(r.machine.forksPerSec)),
    row('targets connected after, s', (r) => f(r.connectSeconds, 1)),
    row('GC: scavenges per second / mark-compacts per second', (r) => `${f(r.gc.scavengesPerSec, 1)} / ${f(r.gc.majorsPerSec, 2)}`),
    row('GC: main-thread pauses, ms per second of wall time', (r) => f(r.gc.pauseMsPerSec, 1)),
  ];
  const profileTable =
    profiled.length === 0
      ? []
      : [
          '',
          `### Where the collector's CPU goes (a separate run under \`--cpu-prof\`, ${profiled.map((r) => `${f(r.targetMBps)} MB/s offered`).join(', ')})`,
          '',
          'Each sample of the window is charged to the stage whose code was running: the sampled frame or, for a builtin or native frame ' +
            '(a Buffer write, a regex, a decipher), the nearest caller in a file the stage owns (bench/ingest/cpu-profile.ts). ' +
            "Shares of the busy (non-idle) samples, in ms per MB of the main thread's own CPU (/proc, user and kernel); " +
            "V8's worker threads (concurrent marking, sweeping, parallel scavenging, background compilation) are not sampled " +
            'and have their own row, from /proc. The profiler itself costs a few per cent.',
          '',
          `| stage | ${profiled.map((r) => `${f(r.targetMBps)} MB/s: ms per MB read`).join(' | ')} | share |`,
          `|---|${profiled.map(() => '---:').join('|')}|---:|`,
          ...STAGES.filter((st) => st !== 'idle').map((st) => {
            const cells = profiled.map((r) => {
              const x = r.profile!.stages.find((y) => y.stage === st)!;
              return f((x.ms / r.profile!.busyMs) * msPerMB(r, groupSeconds(r, 'main')), 1);
            });
            const shares = profiled.map((r) => `${f(r.profile!.stages.find((y) => y.stage === st)!.share * 100, 1)} %`);
            return `| ${st} | ${cells.join(' | ')} | ${shares.join(' / ')} |`;
          }),
          `| V8 worker threads (GC marking and sweeping, compilation), from /proc | ${profiled.map((r) => f(msPerMB(r, groupSeconds(r, 'v8 workers')))).join(' | ')} | |`,
          `| libuv and other threads, from /proc | ${profiled.map((r) => f(msPerMB(r, groupSeconds(r, 'libuv workers') + groupSeconds(r, 'other')))).join(' | ')} | |`,
          `| busy samples in the window, s (idle, s; the main thread's CPU from /proc, s) | ${profiled
            .map(
              (r) =>
                `${f(r.profile!.busyMs / 1000, 1)} (${f(r.profile!.stages.find((y) => y.stage === 'idle')!.ms / 1000, 1)}; ${f(groupSeconds(r, 'main'), 1)})`,
            )
            .join(' | ')} | |`,
        ];
  const settings = Object.entries(STORE_SETTINGS)
    .map(([k, v]) => `${k}=${v}`)
    .join(', ');
  const args = ctx.collectorArgs.length === 0 ? 'default options' : `\`${ctx.collectorArgs.join(' ')}\``;
  return [
    START,
    '## Collector ingest (bench/ingest-bench.ts)',
    '',
    `One \`pglog collect\` process (${args}, transport inproc) follows ${ctx.servers} logs, one per local OpenSSH server ` +
      `(127.0.0.2 and up${ctx.fleetNice === 0 ? '' : `, run at nice ${ctx.fleetNice} with everything they fork, standing in for the database servers' own CPU`}), while a separate log-writer process appends pgbench-like stderr entries (\`%m [%p] %q%u@%d \`, ` +
      'about 150 bytes each, 10 % extended protocol with parameters, 8 % longer queries with IN lists) to all of them ' +
      'in small writes every 10 ms, each entry stamped with the time of its write. ' +
      `Warm-up ${ctx.warmupSeconds} s, then a ${ctx.measureSeconds} s window. Store: PostgreSQL 15 on a Unix socket on the same machine ` +
      `(fsync off, ${settings}). Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}. ` +
      `Measured ${new Date().toISOString().slice(0, 10)}. MB = 10^6 bytes.`,
    '',
    head,
    rule,
    ...rows,
    ...cpuModelTable(runs),
    ...profileTable,
    '',
    '- CPU: utime + stime of the collector process from /proc over the window, divided by the log bytes it read in the window ' +
      `(\`pglog_read_bytes_total\`). ${
        ctx.pin === undefined
          ? 'Writer, sshd (with its per-connection processes) and the store run on the same cores.'
          : `The collector runs alone on CPU ${ctx.pin.core} (\`taskset\`, every thread); writer, sshd (with its per-connection processes) and the store on CPU ${ctx.pin.others}.`
      }`,
    "- Event-loop delay: prom-client's `pglog_nodejs_eventloop_lag_p99_seconds` / `_max_seconds`, scraped every second " +
      '(each scrape resets the histogram, so each sample covers one second). The histogram samples every 10 ms and its values ' +
      'include that interval: an idle process reads about 10.2 ms.',
    ...failures.map((f) => `- **Not measured** at ${f}`),
    "- GC: prom-client's `pglog_nodejs_gc_duration_seconds` (count by kind, sum) over the window: wall time of the main thread's " +
      "pauses (a busy machine stretches them); V8's concurrent marking and parallel scavenging threads work besides them. The " +
      "profile's GC row is CPU samples.",
    '- Latency: `pg_xact_commit_timestamp(xmin) - ts` (track_commit_timestamp) over the statement rows committed in the window; ' +
      "`ts` is the entry's own log time (millisecond precision), so a figure includes the follower's polling, SSH, parsing, " +
      'batching (`--batch-ms`) and COPY.',
    END,
  ].join('\n');
}

/** Issue 15's target for the collector's CPU, ms per MB read. */
const TARGET_MS_PER_MB = 20;

/**
 * The CPU of each configuration run at two loads or more, split into a cost per second and a
 * cost per MB (cpu-model.ts), and what that says about the target; nothing when none was.
 */
function cpuModelTable(runs: readonly RunResult[]): string[] {
  const byConfig = Map.groupBy(runs, (r) => r.variant ?? '');
  const fitted: Array<{ variant: string; model: CpuModel }> = [];
  for (const [variant, rs] of byConfig) {
    const model = fitCpuModel(rs.map((r) => ({ readMBps: r.ingestedMBps, cpuMsPerMB: r.collectorCpuPerMB * 1000 })));
    if (model !== null) fitted.push({ variant, model });
  }
  if (fitted.length === 0) return [];
  const cell = (fn: (m: CpuModel) => string): string => fitted.map((x) => fn(x.model)).join(' | ');
  return [
    '',
    `### The collector's CPU as a cost per second and a cost per MB (from the runs above at different loads)`,
    '',
    'A line through CPU ms per second against MB read per second, fitted over the runs of one configuration (least squares; ' +
      "with two loads, the line through both): what does not grow with the load (each stream's read rounds and handovers, " +
      'timers, commits, metrics) and what each MB adds. A figure in ms per MB is the second plus the first divided by the MB/s read.',
    '',
    `| | ${fitted.map((x) => (x.variant === '' ? 'this tree' : x.variant)).join(' | ')} |`,
    `|---|${fitted.map(() => '---:').join('|')}|`,
    `| fitted over reads of, MB/s | ${cell((m) => `${f(m.fromMBps, 2)} to ${f(m.toMBps, 2)}`)} |`,
    `| **cost per second whatever the load, CPU ms per s** | ${cell((m) => f(m.perSecondMs))} |`,
    `| **cost of each MB read, CPU ms** | ${cell((m) => f(m.perMBMs))} |`,
    `| CPU ms per MB this gives at 50 MB/s read | ${cell((m) => f(cpuPerMBAt(m, 50)))} |`,
    `| read rate from which it is at most ${TARGET_MS_PER_MB} ms per MB | ${cell((m) => {
      const rate = rateForTarget(m, TARGET_MS_PER_MB);
      return rate === null ? `none: each MB alone costs over ${TARGET_MS_PER_MB} ms` : `${f(rate, 1)} MB/s`;
    })} |`,
  ];
}

/** Writes `section` into `file`, replacing an earlier section between the markers. */
export function writeSection(file: string, section: string): void {
  let doc = '';
  try {
    doc = readFileSync(file, 'utf8');
  } catch {
    doc = '';
  }
  const re = new RegExp(`${START}[\\s\\S]*${END}`);
  writeFileSync(file, re.test(doc) ? doc.replace(re, section) : doc === '' ? `${section}\n` : `${doc.trimEnd()}\n\n${section}\n`);
}
