/**
 * One measured run of the ingest benchmark at one offered rate: a fresh set of log files and
 * a fresh `pglog collect` process (the real CLI) against the shared fleet and store.
 *
 *   start collector ─> all targets connected ─> start writer ─> warm-up ─> [window] ─>
 *   stop writer ─> drain (everything written is read and stored) ─> latency query ─> SIGTERM
 *
 * Everything about the collector is measured from outside it: CPU from /proc/PID/stat (and
 * prom-client's process_cpu_seconds_total as a cross-check), peak RSS from VmHWM, bytes read
 * and event-loop delay from its /metrics, latency from the store's commit timestamps.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';

import { type CollectorProcess, startCollector, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import type { WriterTotals } from '@pglog/test-support/fleet-sim/log-writer.ts';
import { type LogWriter, spawnLogWriter } from '@pglog/test-support/fleet-sim/writer-client.ts';
import type { TestSshServer } from '@pglog/test-support/sshd.ts';
import { freePort, sleep } from '@pglog/test-support/wait.ts';
import pg from 'pg';

import { pinCollector } from '../transport/pinning.ts';
import { type CpuProfile, type ProfileSplit, splitProfile } from './cpu-profile.ts';
import { countEqual, type Sample, scrape, sum, value } from './metrics-scrape.ts';
import {
  cpuByCommand,
  cpuDelta,
  forksSinceBoot,
  machineCpu,
  processCpuSeconds,
  processMemory,
  type ThreadCpu,
  threadCpu,
  threadCpuDelta,
} from './proc-stats.ts';
import { createServerLogs } from './servers.ts';
import { type Latency, latencyOfRowsCommitted, statementRows } from './store.ts';

export interface RunOptions {
  /** Directory of this run (log files, targets file, collector output). */
  dir: string;
  servers: readonly TestSshServer[];
  /** Instance name of this run (distinct per run, so no run resumes another's positions). */
  instance: string;
  storeUrl: string;
  bytesPerSec: number;
  warmupSeconds: number;
  measureSeconds: number;
  /** Extra `pglog collect` arguments. */
  collectorArgs: readonly string[];
  /** Progress lines (stderr). */
  say: (line: string) => void;
  /** A progress line every second while writing. */
  verbose: boolean;
  /** Registers cleanup for a failure or an interrupt (runs in reverse order). */
  onCleanup: (fn: () => Promise<void> | void) => void;
  /** Run the collector under V8's sampling profiler (`--cpu-prof` into this directory) and split the window's samples by stage. */
  profileDir?: string;
  /** Node and V8 settings of the collector, as the operator's tuning sets them in a pod (default: Node's own). */
  tuning?: { nodeOptions: string; uvThreadpoolSize?: number; label: string; launcherFlags?: string; env?: Record<string, string> };
  /** The collector alone on `core` (every thread), its descendants on `others` (bench/transport/pinning.ts). */
  pin?: { core: number; others: string };
  /** The launcher of another checkout to run instead of this tree's (a baseline). */
  pglog?: string;
}

/** Memory figures in bytes: of one 1 s sample, or the largest of each over a window (RunResult.memory). */
export interface MemoryFigures {
  heapTotal: number;
  newSpace: number;
  heapUsed: number;
  external: number;
  pending: number;
  rssAnon: number;
  rssFile: number;
}

export interface RunResult {
  /** What this run's collector ran with, when not Node's defaults. */
  variant?: string;
  servers: number;
  targetMBps: number;
  windowSeconds: number;
  offeredMBps: number;
  ingestedMBps: number;
  rowsCommittedPerSec: number;
  writerLateTicks: number;
  collectorCpuSeconds: number;
  collectorCpuPerMB: number;
  collectorCpuPercent: number;
  /** The window's collector CPU seconds by thread group (main thread, V8's GC and compiler workers, libuv's pool). */
  collectorThreadCpu: ThreadCpu;
  promCpuSeconds: number;
  /** Event-loop delay samples in the window; slowestScrapeMs: the longest GET /metrics (a blocked loop answers late). */
  eventLoop: { p99Median: number; p99Max: number; max: number; samples: number; slowestScrapeMs: number; failedScrapes: number };
  peakRssBytes: number;
  peakRssAfterDrainBytes: number;
  /**
   * Where the memory is: the largest of each figure over the window's 1 s scrapes: V8 heap
   * committed (of it the young generation, "new" space) and used, external (Buffers: SSH
   * channels, socket and COPY buffers), the bytes held for the store (the budget's count), and
   * the process's resident pages read from /proc at the same moment: anonymous, and file-backed
   * (mostly the Node binary's own pages, shared with every process that runs it).
   */
  memory: MemoryFigures;
  latency: Latency;
  backlogBytesAtEnd: number;
  lagBytesGaugeAtEnd: number;
  pausedStreamsMax: number;
  drain: { seconds: number; complete: boolean; readBytes: number; writtenBytes: number; rows: number; statements: number };
  errors: { collector: number; store: number; retriedBatches: number; parseProblems: number };
  /** CPU over the window in percent of one core (the machine's busy time is over all cores). */
  machine: { busyPercent: number; cores: number; writerPercent: number; storePercent: number; sshdPercent: number; forksPerSec: number };
  /** ms: SIGTERM to process exit; stoppedLogMs: SIGTERM to its 'pglog collect stopped' log line. */
  stop: { code: number | null; signal: string | null; ms: number; stoppedLogMs: number; withinTimeout: boolean };
  connectSeconds: number;
  /** Garbage collection in the window, from prom-client's gc histogram (main-thread pauses). */
  gc: { scavengesPerSec: number; majorsPerSec: number; pauseMsPerSec: number };
  /** With profileDir: the window's CPU by stage. */
  profile?: ProfileSplit;
}

interface Snapshot {
  at: number;
  /** Monotonic microseconds (the clock of V8's CPU profiles). */
  monoUs: number;
  gc: { minor: number; major: number; seconds: number };
  cpu: number;
  /** The collector's CPU seconds so far by thread (/proc/PID/task). */
  threads: ThreadCpu;
  promCpu: number;
  readBytes: number;
  lagBytes: number;
  writer: WriterTotals;
  machine: { busy: number; total: number };
  postgres: Map<number, number>;
  sshd: Map<number, number>;
  writerCpu: number;
  forks: number;
}

interface ElSample {
  at: number;
  p99: number;
  max: number;
  paused: number;
  scrapeMs: number;
  memory: MemoryFigures;
}

/** The CPU profile V8 wrote for process `pid` in `dir` (`CPU.<date>.<time>.<pid>.<tid>.<seq>.cpuprofile`). */
function readProfile(dir: string, pid: number): CpuProfile {
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile') && f.split('.')[3] === String(pid));
  if (file === undefined) throw new Error(`no CPU profile of pid ${pid} in ${dir}`);
  return JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
}

function sshdCpu(): Map<number, number> {
  return new Map([...cpuByCommand('sshd'), ...cpuByCommand('sshd-session')]);
}

export async function measureRun(o: RunOptions): Promise<RunResult> {
  const logs = createServerLogs(o.dir, o.servers, o.instance);
  const targetsFile = writeTargetsFile(o.dir, logs.targets);
  const writer: LogWriter = spawnLogWriter({ files: logs.files, bytesPerSec: o.bytesPerSec, tickMs: 10 });
  o.onCleanup(() => writer.kill());
  // A few entries in every log first, as a server's start-up leaves them (the follower waits
  // for an empty log to grow, probing once a second).
  await writer.prefill(4096);
  const port = await freePort();
  const metricsUrl = `http://127.0.0.1:${port}/metrics`;
  const collector: CollectorProcess = startCollector({
    targetsFile,
    storeUrl: o.storeUrl,
    args: ['--listen', `127.0.0.1:${port}`, '--log-level', 'info', ...o.collectorArgs],
    outputFile: join(o.dir, 'collector.log'),
    ...(o.pglog === undefined ? {} : { pglog: o.pglog }),
    env: {
      NODE_OPTIONS: [o.tuning?.nodeOptions ?? '', o.profileDir === undefined ? '' : `--cpu-prof --cpu-prof-dir=${o.profileDir}`].join(' ').trim(),
      ...(o.tuning?.uvThreadpoolSize === undefined ? {} : { UV_THREADPOOL_SIZE: String(o.tuning.uvThreadpoolSize) }),
      // The launcher's V8 flags for a collector (cli/bin/pglog): its own unless a column replaces them.
      ...(o.tuning?.launcherFlags === undefined ? {} : { PGLOG_NODE_FLAGS: o.tuning.launcherFlags }),
      // A column's own environment (e.g. glibc malloc's tunables, --collector-env).
      ...o.tuning?.env,
    },
  });
  // The launcher execs node: the pid is the collector's own process.
  if (o.pin !== undefined) o.onCleanup(await pinCollector(collector.pid, o.pin.core, o.pin.others));
  let collectorExited = false;
  void collector.exited.then(() => {
    collectorExited = true;
  });
  o.onCleanup(() => {
    if (!collectorExited) collector.kill('SIGKILL');
  });
  const tail = (): string => collector.output().split('\n').slice(-30).join('\n');
  const alive = (): void => {
    if (collectorExited) throw new Error(`pglog collect exited early; its last output:\n${tail()}`);
  };

  // Every stream reading its log before the writer starts, so the window measures steady
  // state rather than fifty probes racing a loaded machine.
  const connectStart = Date.now();
  const reading = (): number =>
    new Set(
      collector
        .logRecords()
        .filter((r) => typeof r.msg === 'string' && r.msg.includes(': reading ') && r.file !== undefined)
        .map((r) => r.target),
    ).size;
  for (;;) {
    alive();
    let samples: Sample[] | null = null;
    try {
      samples = await scrape(metricsUrl, 2_000);
    } catch {
      /* not listening yet */
    }
    const connected = samples === null ? 0 : countEqual(samples, 'pglog_target_connected', 1);
    const streams = reading();
    if (connected >= o.servers.length && streams >= o.servers.length) break;
    if (Date.now() - connectStart > 90_000) {
      throw new Error(
        `after 90 s: ${samples === null ? 'no /metrics' : `${connected} of ${o.servers.length} targets connected`}, ${streams} streams reading; collector output:\n${tail()}`,
      );
    }
    await sleep(250);
  }
  const connectSeconds = (Date.now() - connectStart) / 1000;
  o.say(`  collector pid ${collector.pid}: ${o.servers.length} targets connected and reading in ${connectSeconds.toFixed(1)} s`);

  const elSamples: ElSample[] = [];
  let sampling = true;
  const scrapeFailures: string[] = [];
  const sampler = (async () => {
    let previous: { at: number; read: number } | null = null;
    while (sampling) {
      await sleep(1_000);
      const begun = Date.now();
      try {
        const s = await scrape(metricsUrl, 10_000);
        const at = Date.now();
        const resident = processMemory(collector.pid);
        const sample = {
          at,
          p99: value(s, 'pglog_nodejs_eventloop_lag_p99_seconds'),
          max: value(s, 'pglog_nodejs_eventloop_lag_max_seconds'),
          paused: value(s, 'pglog_paused_streams'),
          scrapeMs: at - begun,
          memory: {
            heapTotal: value(s, 'pglog_nodejs_heap_size_total_bytes'),
            newSpace: s.find((x) => x.name === 'pglog_nodejs_heap_space_size_total_bytes' && x.labels.space === 'new')?.value ?? NaN,
            heapUsed: value(s, 'pglog_nodejs_heap_size_used_bytes'),
            external: value(s, 'pglog_nodejs_external_memory_bytes'),
            pending: value(s, 'pglog_pending_bytes'),
            rssAnon: resident?.rssAnon ?? NaN,
            rssFile: resident?.rssFile ?? NaN,
          },
        };
        elSamples.push(sample);
        const read = sum(s, 'pglog_read_bytes_total');
        if (o.verbose && previous !== null) {
          o.say(
            `    read ${((read - previous.read) / 1e6 / ((at - previous.at) / 1000)).toFixed(1).padStart(5)} MB/s  event loop p99 ${(sample.p99 * 1000).toFixed(0).padStart(4)} ms max ${(sample.max * 1000).toFixed(0).padStart(5)} ms  /metrics ${String(sample.scrapeMs).padStart(4)} ms  paused ${sample.paused}  pending ${(value(s, 'pglog_pending_bytes') / 1e6).toFixed(0)} MB  rss ${(value(s, 'pglog_process_resident_memory_bytes') / 1e6).toFixed(0)} MB (heap used ${(value(s, 'pglog_nodejs_heap_size_used_bytes') / 1e6).toFixed(0)} of ${(value(s, 'pglog_nodejs_heap_size_total_bytes') / 1e6).toFixed(0)}, external ${(value(s, 'pglog_nodejs_external_memory_bytes') / 1e6).toFixed(0)})`,
          );
        }
        previous = { at, read };
      } catch (e) {
        if (sampling) scrapeFailures.push(`${new Date(begun).toISOString()}: ${(e as Error).message}`);
      }
    }
  })();

  /** A scrape that may have to wait for a busy collector (up to 30 s). */
  const scrapeHard = async (): Promise<Sample[]> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      alive();
      try {
        return await scrape(metricsUrl, 10_000);
      } catch (e) {
        scrapeFailures.push(`${new Date().toISOString()}: ${(e as Error).message}`);
        if (Date.now() > deadline)
          throw new Error(`the collector's GET /metrics did not answer for 30 s (${(e as Error).message}); the collector's event loop was blocked or starved`, {
            cause: e,
          });
      }
    }
  };

  const snapshot = async (): Promise<Snapshot> => {
    const [writerTotals, samples] = await Promise.all([writer.snapshot(), scrapeHard()]);
    const cpu = processCpuSeconds(collector.pid);
    if (cpu === null) alive();
    const threads = threadCpu(collector.pid);
    const gcCount = (kind: string): number =>
      samples.filter((x) => x.name === 'pglog_nodejs_gc_duration_seconds_count' && x.labels['kind'] === kind).reduce((t, x) => t + x.value, 0);
    return {
      at: Date.now(),
      monoUs: Number(process.hrtime.bigint() / 1000n),
      gc: { minor: gcCount('minor'), major: gcCount('major'), seconds: sum(samples, 'pglog_nodejs_gc_duration_seconds_sum') },
      cpu: cpu ?? NaN,
      threads,
      promCpu: value(samples, 'pglog_process_cpu_seconds_total'),
      readBytes: sum(samples, 'pglog_read_bytes_total'),
      lagBytes: sum(samples, 'pglog_lag_bytes'),
      writer: writerTotals,
      machine: machineCpu(),
      postgres: cpuByCommand('postgres'),
      sshd: sshdCpu(),
      writerCpu: processCpuSeconds(writer.pid) ?? NaN,
      forks: forksSinceBoot(),
    };
  };

  let a: Snapshot;
  let b: Snapshot;
  let finalSamples: Sample[];
  try {
    writer.start();
    o.say(`  writing ${(o.bytesPerSec / 1e6).toFixed(1)} MB/s to ${logs.files.length} logs; warm-up ${o.warmupSeconds} s`);
    await sleep(o.warmupSeconds * 1000);
    alive();
    a = await snapshot();
    o.say(`  measuring ${o.measureSeconds} s`);
    await sleep(o.measureSeconds * 1000);
    alive();
    b = await snapshot();
  } finally {
    sampling = false;
    await sampler;
  }
  if (scrapeFailures.length > 0) o.say(`  warning: ${scrapeFailures.length} /metrics scrapes failed, first: ${scrapeFailures[0]}`);
  const peakRssBytes = processMemory(collector.pid)?.peakRss ?? NaN;

  // Drain: the writer stops; the collector must read and store everything it wrote.
  const written = await writer.stop();
  o.say(`  writer stopped: ${(written.bytes / 1e6).toFixed(0)} MB, ${written.statements.toLocaleString('en-US')} entries; draining`);
  const client = new pg.Client({ connectionString: o.storeUrl });
  await client.connect();
  try {
    const drainStart = Date.now();
    let readBytes = 0;
    let rows = 0;
    for (;;) {
      alive();
      finalSamples = await scrapeHard();
      readBytes = sum(finalSamples, 'pglog_read_bytes_total');
      const timedOut = Date.now() - drainStart > 30_000;
      if (readBytes >= written.bytes || timedOut) rows = await statementRows(client);
      if ((readBytes >= written.bytes && rows >= written.statements) || timedOut) break;
      await sleep(1_000);
    }
    const drainSeconds = (Date.now() - drainStart) / 1000;
    const complete = readBytes >= written.bytes && rows >= written.statements;
    o.say(
      `  drain ${complete ? 'complete' : 'INCOMPLETE'} after ${drainSeconds.toFixed(1)} s: read ${readBytes} of ${written.bytes} bytes, ${rows} of ${written.statements} rows`,
    );
    const latency = await latencyOfRowsCommitted(client, a.at, b.at);
    const peakRssAfterDrainBytes = processMemory(collector.pid)?.peakRss ?? NaN;

    const stopStart = Date.now();
    collector.kill('SIGTERM');
    const exit = await Promise.race([collector.exited, sleep(15_000).then(() => null)]);
    const stopMs = Date.now() - stopStart;
    if (exit === null) collector.kill('SIGKILL');
    // When the collector said it had stopped (its last log line), as opposed to when the process ended.
    const stoppedLine = collector.logRecords().find((r) => r.msg === 'pglog collect stopped');
    const stoppedLogMs = typeof stoppedLine?.time === 'string' ? Date.parse(stoppedLine.time) - stopStart : NaN;
    o.say(
      `  SIGTERM: ${exit === null ? 'no exit within 15 s, killed' : `exited ${exit.code ?? exit.signal} after ${stopMs} ms`} ('pglog collect stopped' logged after ${stoppedLogMs} ms)`,
    );

    const secs = (b.at - a.at) / 1000;
    const readMB = (b.readBytes - a.readBytes) / 1e6;
    // The profile is written as the process exits.
    const profile = exit === null || o.profileDir === undefined ? undefined : splitProfile(readProfile(o.profileDir, collector.pid), a.monoUs, b.monoUs);
    const inWindow = elSamples.filter((s) => s.at > a.at && s.at <= b.at);
    const p99s = inWindow.map((s) => s.p99).sort((x, y) => x - y);
    return {
      ...(o.tuning === undefined ? {} : { variant: o.tuning.label }),
      servers: o.servers.length,
      targetMBps: o.bytesPerSec / 1e6,
      windowSeconds: secs,
      offeredMBps: (b.writer.bytes - a.writer.bytes) / 1e6 / secs,
      ingestedMBps: readMB / secs,
      rowsCommittedPerSec: latency.rows / secs,
      writerLateTicks: b.writer.lateTicks - a.writer.lateTicks,
      collectorCpuSeconds: b.cpu - a.cpu,
      collectorCpuPerMB: (b.cpu - a.cpu) / readMB,
      collectorCpuPercent: ((b.cpu - a.cpu) / secs) * 100,
      collectorThreadCpu: threadCpuDelta(a.threads, b.threads),
      promCpuSeconds: b.promCpu - a.promCpu,
      eventLoop: {
        p99Median: p99s[Math.floor(p99s.length / 2)] ?? NaN,
        p99Max: p99s[p99s.length - 1] ?? NaN,
        max: Math.max(...inWindow.map((s) => s.max)),
        samples: inWindow.length,
        slowestScrapeMs: Math.max(0, ...inWindow.map((s) => s.scrapeMs)),
        failedScrapes: scrapeFailures.length,
      },
      peakRssBytes,
      peakRssAfterDrainBytes,
      memory: {
        heapTotal: Math.max(0, ...inWindow.map((s) => s.memory.heapTotal)),
        newSpace: Math.max(0, ...inWindow.map((s) => s.memory.newSpace)),
        heapUsed: Math.max(0, ...inWindow.map((s) => s.memory.heapUsed)),
        external: Math.max(0, ...inWindow.map((s) => s.memory.external)),
        pending: Math.max(0, ...inWindow.map((s) => s.memory.pending)),
        rssAnon: Math.max(0, ...inWindow.map((s) => s.memory.rssAnon)),
        rssFile: Math.max(0, ...inWindow.map((s) => s.memory.rssFile)),
      },
      latency,
      backlogBytesAtEnd: b.writer.bytes - b.readBytes,
      lagBytesGaugeAtEnd: b.lagBytes,
      pausedStreamsMax: Math.max(0, ...inWindow.map((s) => s.paused)),
      drain: { seconds: drainSeconds, complete, readBytes, writtenBytes: written.bytes, rows, statements: written.statements },
      errors: {
        collector: sum(finalSamples, 'pglog_errors_total'),
        store: sum(finalSamples, 'pglog_store_errors_total'),
        retriedBatches: finalSamples.filter((s) => s.name === 'pglog_batches_total' && s.labels.outcome === 'retried').reduce((x, s) => x + s.value, 0),
        parseProblems: sum(finalSamples, 'pglog_parse_problems_total'),
      },
      machine: {
        busyPercent: ((b.machine.busy - a.machine.busy) / secs) * 100,
        cores: cpus().length,
        writerPercent: ((b.writerCpu - a.writerCpu) / secs) * 100,
        storePercent: (cpuDelta(a.postgres, b.postgres) / secs) * 100,
        sshdPercent: (cpuDelta(a.sshd, b.sshd) / secs) * 100,
        forksPerSec: (b.forks - a.forks) / secs,
      },
      stop: { code: exit?.code ?? null, signal: exit?.signal ?? null, ms: stopMs, stoppedLogMs, withinTimeout: exit !== null && stopMs <= 10_000 },
      connectSeconds,
      gc: {
        scavengesPerSec: (b.gc.minor - a.gc.minor) / secs,
        majorsPerSec: (b.gc.major - a.gc.major) / secs,
        pauseMsPerSec: ((b.gc.seconds - a.gc.seconds) * 1000) / secs,
      },
      ...(profile === undefined ? {} : { profile }),
    };
  } finally {
    await client.end();
  }
}
