/**
 * One collector session of the transport benchmark: fresh logs for every server, a log writer
 * with a rate per file (hot and cold servers), the real `pglog collect` with a transport per
 * target (pinned `inproc` / `proxy`, or `auto`) and its standalone sshproxy child, measured
 * from outside:
 *
 *   open: logs + prefill ─> collector ─> every target reading ─> startWriting() ─>
 *         snapshot()/eld() at the window's edges ─> finish(): stop the
 *         writer ─> drain (everything written read and stored, once) ─> SIGTERM
 *
 * Event-loop delay comes from the 1 ms probe preloaded into the collector (eld-probe.ts), with
 * the collector's own /metrics histogram (10 ms timer, scraped every second) as a cross-check;
 * CPU from /proc, split into the collector, its sidecar, the sidecar's ssh clients and the
 * servers' side (proc-cpu.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

import { type CollectorProcess, startCollector, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import type { WriterTotals } from '@pglog/test-support/fleet-sim/log-writer.ts';
import { type LogWriter, spawnLogWriter } from '@pglog/test-support/fleet-sim/writer-client.ts';
import type { TestSshServer } from '@pglog/test-support/sshd.ts';
import { freePort, sleep } from '@pglog/test-support/wait.ts';
import pg from 'pg';

import { type Sample, scrape, sum, value } from '../ingest/metrics-scrape.ts';
import { machineCpu, processCpuSeconds } from '../ingest/proc-stats.ts';
import { createServerLogs } from '../ingest/servers.ts';
import type { EldLine } from './eld-probe.ts';
import { pinCollector } from './pinning.ts';
import { type CpuSplit, cpuSplit, fleetRoots, runQueueWaitSeconds, treeCpuSeconds } from './proc-cpu.ts';

export type Transport = 'auto' | 'inproc' | 'proxy';

export interface SessionOptions {
  /** Directory of this session (logs, targets file, collector output, probe file). */
  dir: string;
  servers: readonly TestSshServer[];
  /** Instance name (distinct per session: no session resumes another's positions). */
  instance: string;
  storeUrl: string;
  /** The store's postmaster: its process tree is the store's CPU. */
  storePid: number;
  /** spec.transport of each server's target, in server order. */
  transports: readonly Transport[];
  /** Initial bytes per second of each server's log, in server order. */
  rates: readonly number[];
  collectorArgs: readonly string[];
  say: (line: string) => void;
  verbose: boolean;
  /** Registers cleanup for a failure or an interrupt. */
  onCleanup: (fn: () => Promise<void> | void) => void;
  /** The collector alone on `core`, its sidecar and everything else on `others` (pinning.ts). */
  pin?: { core: number; others: string };
}

export interface Snapshot {
  at: number;
  writer: WriterTotals;
  /** pglog_read_bytes_total per target. */
  readByTarget: Map<string, number>;
  fifoBytes: number;
  /** The transport each target reads through now (pglog_target_transport == 1). */
  transportByTarget: Map<string, string>;
  promotions: Map<string, number>;
  demotions: Map<string, number>;
  paused: number;
  cpu: CpuSplit;
  /** Seconds the collector's main thread waited for a CPU so far. */
  collectorRunQueue: number;
  fleetCpu: number;
  writerCpu: number;
  storeCpu: number;
  /** This benchmark process itself (scrapes, /proc walks). */
  benchCpu: number;
  machine: { busy: number; total: number };
}

/** One /metrics scrape a second: the collector's own event-loop histogram (10 ms timer). */
export interface MetricsSample {
  at: number;
  p50: number;
  p99: number;
  max: number;
  paused: number;
  scrapeMs: number;
}

export interface DrainResult {
  seconds: number;
  complete: boolean;
  readBytes: number;
  writtenBytes: number;
  rows: number;
  distinctRows: number;
  statements: number;
  /** Collector errors by code: all, and those counted before the writer started (start-up). */
  errors: { collector: number; beforeWriting: number; byCode: Record<string, number>; store: number; parseProblems: number };
  stop: { code: number | null; signal: string | null; ms: number };
}

const labelled = (samples: readonly Sample[], name: string, label: string): Map<string, number> => {
  const out = new Map<string, number>();
  for (const s of samples) if (s.name === name) out.set(s.labels[label] ?? '', (out.get(s.labels[label] ?? '') ?? 0) + s.value);
  return out;
};

export class Session {
  readonly o: SessionOptions;
  readonly names: string[];
  readonly collector: CollectorProcess;
  readonly metricsSamples: MetricsSample[] = [];
  private readonly writer: LogWriter;
  private readonly metricsUrl: string;
  private readonly eldFile: string;
  private exited = false;
  private sampling = true;
  private sampler: Promise<void> = Promise.resolve();
  private readonly scrapeFailures: string[] = [];
  writingSince = 0;
  private errorsBeforeWriting = 0;

  private constructor(o: SessionOptions, names: string[], writer: LogWriter, collector: CollectorProcess, metricsUrl: string, eldFile: string) {
    this.o = o;
    this.names = names;
    this.writer = writer;
    this.collector = collector;
    this.metricsUrl = metricsUrl;
    this.eldFile = eldFile;
    void collector.exited.then(() => {
      this.exited = true;
    });
  }

  static async open(o: SessionOptions): Promise<Session> {
    const logs = createServerLogs(o.dir, o.servers, o.instance);
    const targets = logs.targets.map((t, i) => ({ ...t, transport: o.transports[i] ?? 'inproc' }));
    const targetsFile = writeTargetsFile(o.dir, targets);
    const writer = spawnLogWriter({ files: logs.files, bytesPerSec: o.rates.reduce((a, b) => a + b, 0), rates: [...o.rates], tickMs: 10 });
    o.onCleanup(() => writer.kill());
    await writer.prefill(4096);
    const port = await freePort();
    const eldFile = join(o.dir, 'eld.jsonl');
    // The probe goes into the collector's environment only (the sidecar child inherits it and
    // ignores it); startCollector copies process.env when it spawns.
    const saved = { options: process.env.NODE_OPTIONS, file: process.env.PGLOG_BENCH_ELD_FILE };
    process.env.NODE_OPTIONS = `${saved.options ?? ''} --import=${pathToFileURL(new URL('./eld-probe.ts', import.meta.url).pathname).href}`.trim();
    process.env.PGLOG_BENCH_ELD_FILE = eldFile;
    let collector: CollectorProcess;
    try {
      collector = startCollector({
        targetsFile,
        storeUrl: o.storeUrl,
        args: ['--listen', `127.0.0.1:${port}`, '--log-level', 'info', ...o.collectorArgs],
        outputFile: join(o.dir, 'collector.log'),
      });
    } finally {
      if (saved.options === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved.options;
      if (saved.file === undefined) delete process.env.PGLOG_BENCH_ELD_FILE;
      else process.env.PGLOG_BENCH_ELD_FILE = saved.file;
    }
    const session = new Session(
      o,
      targets.map((t) => t.name),
      writer,
      collector,
      `http://127.0.0.1:${port}/metrics`,
      eldFile,
    );
    o.onCleanup(() => {
      if (!session.exited) collector.kill('SIGKILL');
    });
    if (o.pin !== undefined) {
      const unpin = await pinCollector(collector.pid, o.pin.core, o.pin.others);
      o.onCleanup(unpin);
    }
    await session.waitReading();
    session.sampler = session.sample();
    return session;
  }

  private tail(): string {
    return this.collector.output().split('\n').slice(-30).join('\n');
  }

  alive(): void {
    if (this.exited) throw new Error(`pglog collect exited early; its last output:\n${this.tail()}`);
  }

  /** Every target reading its log through the transport it should start on. */
  private async waitReading(): Promise<void> {
    const started = Date.now();
    const n = this.names.length;
    for (;;) {
      this.alive();
      let samples: Sample[] | null = null;
      try {
        samples = await scrape(this.metricsUrl, 2_000);
      } catch {
        /* not listening yet */
      }
      const reading = new Set(
        this.collector
          .logRecords()
          .filter((r) => typeof r.msg === 'string' && r.msg.includes(': reading ') && r.file !== undefined)
          .map((r) => r.target),
      ).size;
      const pinned =
        samples === null
          ? 0
          : this.o.transports.filter(
              (t, i) =>
                t === 'auto' ||
                value(
                  samples.filter((s) => s.labels.target === this.names[i] && s.labels.transport === t),
                  'pglog_target_transport',
                ) === 1,
            ).length;
      if (reading >= n && pinned >= n) break;
      if (Date.now() - started > 90_000) {
        throw new Error(
          `after 90 s: ${samples === null ? 'no /metrics' : `${pinned} of ${n} targets on their pinned transport`}, ${reading} streams reading; collector output:\n${this.tail()}`,
        );
      }
      await sleep(250);
    }
    this.o.say(`  collector pid ${this.collector.pid}: ${n} targets reading in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  private async sample(): Promise<void> {
    let previous: { at: number; read: number } | null = null;
    while (this.sampling) {
      await sleep(1_000);
      const begun = Date.now();
      try {
        const s = await scrape(this.metricsUrl, 10_000);
        const at = Date.now();
        const m: MetricsSample = {
          at,
          p50: value(s, 'pglog_nodejs_eventloop_lag_p50_seconds'),
          p99: value(s, 'pglog_nodejs_eventloop_lag_p99_seconds'),
          max: value(s, 'pglog_nodejs_eventloop_lag_max_seconds'),
          paused: value(s, 'pglog_paused_streams'),
          scrapeMs: at - begun,
        };
        this.metricsSamples.push(m);
        const read = sum(s, 'pglog_read_bytes_total');
        if (this.o.verbose && previous !== null) {
          this.o.say(
            `    read ${((read - previous.read) / 1e6 / ((at - previous.at) / 1000)).toFixed(1).padStart(5)} MB/s (fifo ${(sum(s, 'pglog_fifo_read_bytes_total') / 1e6).toFixed(0)} MB total)  /metrics loop p99 ${(m.p99 * 1000).toFixed(0).padStart(4)} ms max ${(m.max * 1000).toFixed(0).padStart(5)} ms  paused ${m.paused}  pending ${(value(s, 'pglog_pending_bytes') / 1e6).toFixed(0)} MB`,
          );
        }
        previous = { at, read };
      } catch (e) {
        if (this.sampling) this.scrapeFailures.push(`${new Date(begun).toISOString()}: ${(e as Error).message}`);
      }
    }
  }

  /** A scrape that may wait for a busy collector (up to 30 s). */
  async scrapeHard(): Promise<Sample[]> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      this.alive();
      try {
        return await scrape(this.metricsUrl, 10_000);
      } catch (e) {
        this.scrapeFailures.push(`${new Date().toISOString()}: ${(e as Error).message}`);
        if (Date.now() > deadline) throw new Error(`the collector's GET /metrics did not answer for 30 s (${(e as Error).message})`, { cause: e });
      }
    }
  }

  /** Starts the writer (after noting the errors the collector counted while starting up). */
  async startWriting(): Promise<void> {
    this.errorsBeforeWriting = sum(await this.scrapeHard(), 'pglog_errors_total');
    this.writer.start();
    this.writingSince = Date.now();
  }

  async snapshot(): Promise<Snapshot> {
    const [writer, samples] = await Promise.all([this.writer.snapshot(), this.scrapeHard()]);
    const cpu = cpuSplit(this.collector.pid);
    if (!Number.isFinite(cpu.collector)) this.alive();
    const transportByTarget = new Map<string, string>();
    for (const s of samples) if (s.name === 'pglog_target_transport' && s.value === 1) transportByTarget.set(s.labels.target ?? '', s.labels.transport ?? '');
    return {
      at: Date.now(),
      writer,
      readByTarget: labelled(samples, 'pglog_read_bytes_total', 'target'),
      fifoBytes: sum(samples, 'pglog_fifo_read_bytes_total'),
      transportByTarget,
      promotions: labelled(samples, 'pglog_transport_promotions_total', 'target'),
      demotions: labelled(samples, 'pglog_transport_demotions_total', 'target'),
      paused: value(samples, 'pglog_paused_streams'),
      cpu,
      collectorRunQueue: runQueueWaitSeconds(this.collector.pid),
      fleetCpu: fleetRoots().reduce((s, pid) => s + treeCpuSeconds(pid), 0),
      writerCpu: processCpuSeconds(this.writer.pid) ?? NaN,
      storeCpu: treeCpuSeconds(this.o.storePid),
      benchCpu: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
      machine: machineCpu(),
    };
  }

  /** The probe's histogram since the previous call (SIGUSR2 to the collector), then reset. */
  async eld(): Promise<EldLine> {
    const lines = (): string[] =>
      existsSync(this.eldFile)
        ? readFileSync(this.eldFile, 'utf8')
            .split('\n')
            .filter((l) => l !== '')
        : [];
    const before = lines().length;
    this.alive();
    this.collector.kill('SIGUSR2');
    const deadline = Date.now() + 15_000;
    for (;;) {
      const now = lines();
      if (now.length > before) return JSON.parse(now[now.length - 1]!) as EldLine;
      this.alive();
      if (Date.now() > deadline) throw new Error('the event-loop probe did not answer SIGUSR2 within 15 s (is it loaded? see NODE_OPTIONS in session.ts)');
      await sleep(20);
    }
  }

  /** The /metrics samples taken between two times. */
  metricsBetween(from: number, to: number): MetricsSample[] {
    return this.metricsSamples.filter((s) => s.at > from && s.at <= to);
  }

  get failedScrapes(): number {
    return this.scrapeFailures.length;
  }

  /**
   * Stops the writer, waits until everything written is read and stored (up to `timeoutMs`),
   * counts the rows of this session's instance (and how many distinct log positions they
   * hold: equal means nothing stored twice), then stops the collector with SIGTERM.
   */
  async finish(timeoutMs = 90_000): Promise<DrainResult> {
    this.sampling = false;
    await this.sampler;
    const written = await this.writer.stop();
    this.o.say(`  writer stopped: ${(written.bytes / 1e6).toFixed(0)} MB, ${written.statements.toLocaleString('en-US')} entries; draining`);
    const client = new pg.Client({ connectionString: this.o.storeUrl });
    await client.connect();
    try {
      const count = async (): Promise<number> =>
        Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM pglog.statement_events WHERE instance = $1', [this.o.instance])).rows[0]!.n);
      const drainStart = Date.now();
      let readBytes = 0;
      let rows = 0;
      let final: Sample[];
      for (;;) {
        this.alive();
        final = await this.scrapeHard();
        readBytes = sum(final, 'pglog_read_bytes_total');
        const timedOut = Date.now() - drainStart > timeoutMs;
        if (readBytes >= written.bytes || timedOut) rows = await count();
        if ((readBytes >= written.bytes && rows >= written.statements) || timedOut) break;
        await sleep(1_000);
      }
      const seconds = (Date.now() - drainStart) / 1000;
      const complete = readBytes >= written.bytes && rows >= written.statements;
      const distinctRows = Number(
        (
          await client.query<{ n: string }>(
            'SELECT count(*) AS n FROM (SELECT DISTINCT target, file, file_offset FROM pglog.statement_events WHERE instance = $1) d',
            [this.o.instance],
          )
        ).rows[0]!.n,
      );
      this.o.say(
        `  drain ${complete ? 'complete' : 'INCOMPLETE'} after ${seconds.toFixed(1)} s: read ${readBytes} of ${written.bytes} bytes, ${rows} rows (${distinctRows} distinct positions) of ${written.statements} entries`,
      );
      const stopStart = Date.now();
      this.collector.kill('SIGTERM');
      const exit = await Promise.race([this.collector.exited, sleep(15_000).then(() => null)]);
      const ms = Date.now() - stopStart;
      if (exit === null) this.collector.kill('SIGKILL');
      return {
        seconds,
        complete,
        readBytes,
        writtenBytes: written.bytes,
        rows,
        distinctRows,
        statements: written.statements,
        errors: {
          collector: sum(final, 'pglog_errors_total'),
          beforeWriting: this.errorsBeforeWriting,
          byCode: Object.fromEntries(labelled(final, 'pglog_errors_total', 'code')),
          store: sum(final, 'pglog_store_errors_total'),
          parseProblems: sum(final, 'pglog_parse_problems_total'),
        },
        stop: { code: exit?.code ?? null, signal: exit?.signal ?? null, ms },
      };
    } finally {
      await client.end();
    }
  }

  /** Collector log records (JSON lines), for the switch times of `auto` targets. */
  logRecords(): Array<Record<string, unknown>> {
    return this.collector.logRecords();
  }
}
