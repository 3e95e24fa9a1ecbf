/**
 * The collector's Prometheus metrics (docs/metrics.md): one registry per process,
 * prefix `pglog_`, Node.js runtime metrics (event-loop delay, GC by kind, heap, RSS) plus the
 * collector's own.
 *
 * Callers never spell a metric or label name: each metric has a typed method taking the
 * label values as arguments. Per target and instance the label values used are remembered,
 * so `forgetTarget` can remove every series of a target that left the shard (prom-client
 * removes a series only by its full label set).
 */
import type { ErrorLabel } from '@pglog/common/errors.ts';
import { collectDefaultMetrics, type Counter, type Gauge, type Histogram, Registry } from 'prom-client';

import type { EventKind } from '../logformat/events.ts';
import { EVENT_TABLES } from '../store/event-tables.ts';
import { Exposition } from './exposition.ts';
import {
  createInstruments,
  type Instruments,
  type ParseProblem,
  registerTemplateCacheMetrics,
  type TemplateCacheReading,
  type Transport,
  TRANSPORTS,
} from './instruments.ts';
import { MetricFactory } from './metric-factory.ts';
import { InstanceSeries, TargetSeries } from './metric-series.ts';
import { SnapshotMetrics } from './snapshot-metrics.ts';
import type { SqlstateClass } from './sqlstate-class.ts';

export const METRIC_PREFIX = 'pglog_';

export const BATCH_OUTCOMES = ['committed', 'retried', 'fenced'] as const;
export type BatchOutcome = (typeof BATCH_OUTCOMES)[number];

export interface CollectorMetricsOptions {
  /** Sampling resolution of the event-loop delay histogram, ms (default 10). */
  eventLoopMonitoringPrecision?: number;
  /** Collect the Node.js runtime metrics (default true). */
  defaultMetrics?: boolean;
  /** Clock for `pglog_lag_seconds`, ms since the epoch (default Date.now). */
  now?: () => number;
}

// COPY of one batch: from a millisecond (a few rows on a local store) to ten seconds (a store
// under pressure); the retry and fencing paths are counted separately.
const COPY_SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
// Read → committed spans batching delay plus COPY, and minutes while the store is down.
const COMMIT_LATENCY_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const BATCH_ROWS_BUCKETS = [1, 10, 50, 100, 500, 1000, 5000, 10_000, 50_000, 100_000];
const BATCH_BYTES_BUCKETS = [1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216, 67_108_864];
// GC pauses of a Node.js process: mostly sub-millisecond scavenges, rarely 100 ms+ mark-compacts.
const GC_SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

export class CollectorMetrics {
  readonly registry: Registry;
  private readonly exposition = new Exposition();
  /** The SQL snapshots' metrics (snapshot-metrics.ts), in the same registry. */
  readonly snapshots: SnapshotMetrics;
  private readonly m: Instruments;
  private readonly instances = new Map<string, Map<string, InstanceSeries>>();
  private readonly targets = new Map<string, TargetSeries>();
  private readonly quarantinedRows: Counter<'table'>;
  private readonly pausedStreamsGauge: Gauge;
  private readonly sidecarUpGauge: Gauge;
  private readonly sidecarRestartsProcess: Counter;
  private readonly storeErrors: Counter<'code'>;
  private readonly batches: Counter<'outcome'>;
  private readonly batchRows: Histogram;
  private readonly batchBytes: Histogram;
  private readonly copyDuration: Histogram;
  private readonly commitLatency: Histogram;
  /** The process's template cache, read at scrape time (watchTemplateCache). */
  private templateCache: TemplateCacheReading | null = null;

  constructor(options: CollectorMetricsOptions = {}) {
    const registry = new Registry();
    this.registry = registry;
    const now = options.now ?? Date.now;
    if (options.defaultMetrics !== false) {
      collectDefaultMetrics({
        register: registry,
        prefix: METRIC_PREFIX,
        eventLoopMonitoringPrecision: options.eventLoopMonitoringPrecision ?? 10,
        gcDurationBuckets: GC_SECONDS_BUCKETS,
      });
    }
    const m = new MetricFactory([registry], METRIC_PREFIX);
    const allInstances = (): InstanceSeries[] => [...this.instances.values()].flatMap((byName) => [...byName.values()]);
    const allTargets = (): TargetSeries[] => [...this.targets.values()];
    this.m = createInstruments(m, () => {
      const t = now();
      for (const i of allInstances()) i.updateLagSeconds(t);
    });
    this.sidecarUpGauge = m.gauge('sidecar_up', '1 while the sshproxy sidecar reports a fresh status, else 0.');
    // Absent until the collector has a sidecar to watch (none with --sshproxy off), not a 0 that
    // would read as "the sidecar is down".
    this.sidecarUpGauge.remove();
    this.sidecarRestartsProcess = m.counter('sidecar_restarts_total', 'Times the collector started its sshproxy child again after it ended (standalone mode).');
    m.scrapedGauge('pending_bytes', 'Bytes held in memory for the store, all targets.', () => allTargets().reduce((sum, t) => sum + t.pendingBytes, 0));
    this.pausedStreamsGauge = m.gauge('paused_streams', 'Streams paused by backpressure (the store is slower than the logs).');
    this.quarantinedRows = m.counter('quarantined_rows_total', 'Rows the store refused, kept in pglog.quarantine, by table.', ['table']);
    this.storeErrors = m.counter('store_errors_total', 'Store errors by PglogError code.', ['code']);
    this.batches = m.counter('batches_total', 'Batches by outcome: committed, retried, fenced (a newer owner holds the position).', ['outcome']);
    this.batchRows = m.histogram('batch_rows', 'Rows per committed batch.', BATCH_ROWS_BUCKETS);
    this.batchBytes = m.histogram('batch_bytes', 'Log bytes per committed batch.', BATCH_BYTES_BUCKETS);
    this.copyDuration = m.histogram('copy_duration_seconds', 'Duration of one batch COPY and commit.', COPY_SECONDS_BUCKETS);
    this.commitLatency = m.histogram('commit_latency_seconds', 'Time from reading a log entry to committing it to the store.', COMMIT_LATENCY_BUCKETS);
    for (const outcome of BATCH_OUTCOMES) this.batches.inc({ outcome }, 0); // every outcome visible from the start
    // Every table from zero, so increase() sees the first quarantined rows (alerts on them).
    for (const table of EVENT_TABLES) this.quarantinedRows.inc({ table }, 0);
    this.snapshots = new SnapshotMetrics(registry, METRIC_PREFIX);
    registerTemplateCacheMetrics(m, () => this.templateCache);
  }

  private instance(target: string, instance: string): InstanceSeries {
    let byName = this.instances.get(target);
    if (byName === undefined) {
      byName = new Map();
      this.instances.set(target, byName);
    }
    let series = byName.get(instance);
    if (series === undefined) {
      series = new InstanceSeries(this.m, target, instance);
      byName.set(instance, series);
    }
    return series;
  }

  private target(target: string): TargetSeries {
    let series = this.targets.get(target);
    if (series === undefined) {
      series = new TargetSeries(this.m, target);
      this.targets.set(target, series);
    }
    return series;
  }

  // ---------------------------------------------------------------- per instance

  readBytes(target: string, instance: string, bytes: number): void {
    this.m.readBytes.inc(this.instance(target, instance).labels, bytes);
  }

  readLines(target: string, instance: string, lines: number): void {
    this.m.readLines.inc(this.instance(target, instance).labels, lines);
  }

  events(target: string, instance: string, kind: EventKind, count = 1): void {
    this.m.events.inc(this.instance(target, instance).kind(kind), count);
  }

  /** ERROR, FATAL and PANIC entries of the instance's log, by SQLSTATE class (sqlstateClassOf). */
  logErrors(target: string, instance: string, cls: SqlstateClass, count = 1): void {
    this.m.logErrors.inc(this.instance(target, instance).sqlstateClass(cls), count);
  }

  parseProblems(target: string, instance: string, problem: ParseProblem, count = 1): void {
    this.m.parseProblems.inc(this.instance(target, instance).problem(problem), count);
  }

  /** Log entries over their parse time budget (LogParser's `slow`). */
  slowEntries(target: string, instance: string, count = 1): void {
    this.m.slowEntries.inc(this.instance(target, instance).labels, count);
  }

  /** Bytes of the log that will never be read (the committed position was lost). */
  skippedBytes(target: string, instance: string, bytes: number): void {
    this.m.skippedBytes.inc(this.instance(target, instance).labels, bytes);
  }

  /** End of the log file minus the committed offset. */
  lagBytes(target: string, instance: string, bytes: number): void {
    this.m.lagBytes.set(this.instance(target, instance).labels, bytes);
  }

  /**
   * Time of the newest committed log entry (ms since the epoch). `pglog_lag_seconds` is now
   * minus this, computed at scrape time; null (unknown) removes the series.
   */
  newestCommittedEntry(target: string, instance: string, timeMs: number | null): void {
    this.instance(target, instance).newestCommittedMs = timeMs;
  }

  // ---------------------------------------------------------------- per target

  targetConnected(target: string, connected: boolean): void {
    this.m.connected.set(this.target(target).labels, connected ? 1 : 0);
  }

  /** 1 for the active transport, 0 for the others (so a dashboard sees the switch). */
  targetTransport(target: string, active: Transport): void {
    this.target(target);
    for (const t of TRANSPORTS) this.m.transport.set({ target, transport: t }, t === active ? 1 : 0);
  }

  reconnect(target: string): void {
    this.m.reconnects.inc(this.target(target).labels);
  }

  /** Smoothed read rate, bits per second (what the transport policy sees). */
  targetRate(target: string, bitsPerSecond: number): void {
    this.m.rate.set(this.target(target).labels, bitsPerSecond);
  }

  /** A target moved between transports: to proxy is a promotion, to inproc a demotion. */
  transportSwitch(target: string, to: 'inproc' | 'proxy'): void {
    (to === 'proxy' ? this.m.promotions : this.m.demotions).inc(this.target(target).labels);
  }

  /** A proxy stream of the target was started again after a failure. */
  sidecarStreamRestart(target: string): void {
    this.m.sidecarRestarts.inc(this.target(target).labels);
  }

  fifoBytes(target: string, instance: string, bytes: number): void {
    this.m.fifoBytes.inc(this.instance(target, instance).labels, bytes);
  }

  sidecarUp(up: boolean): void {
    this.sidecarUpGauge.set(up ? 1 : 0);
  }

  sidecarProcessRestart(): void {
    this.sidecarRestartsProcess.inc();
  }

  error(target: string, code: ErrorLabel): void {
    this.m.errors.inc(this.target(target).code(code));
  }

  /** Bytes this target's streams hold in memory for the store; pglog_pending_bytes is their sum. */
  pendingBytes(target: string, bytes: number): void {
    const series = this.target(target);
    series.pendingBytes = bytes;
    this.m.pendingBytesTarget.set(series.labels, bytes);
  }

  /**
   * Removes every series labelled with this target (it left the shard). Stop its streams
   * first: a later call for the target starts its series again.
   */
  forgetTarget(target: string): void {
    for (const series of this.instances.get(target)?.values() ?? []) series.remove();
    this.instances.delete(target);
    this.targets.get(target)?.remove();
    this.targets.delete(target);
    this.snapshots.forgetTarget(target);
  }

  // ---------------------------------------------------------------- process-wide

  /** The template cache whose bytes, entries, evictions and uncached templates /metrics shows. */
  watchTemplateCache(cache: TemplateCacheReading): void {
    this.templateCache = cache;
  }

  /** +1 when a stream pauses for backpressure, -1 when it resumes. */
  pausedStreams(delta: number): void {
    this.pausedStreamsGauge.inc(delta);
  }

  quarantined(table: string, rows: number): void {
    this.quarantinedRows.inc({ table }, rows);
  }

  storeError(code: ErrorLabel): void {
    this.storeErrors.inc({ code });
  }

  /** A committed batch: its size, the COPY's duration, and read → committed latency of its oldest entry. */
  batchCommitted(rows: number, bytes: number, copySeconds: number, commitLatencySeconds: number): void {
    this.batches.inc({ outcome: 'committed' });
    this.batchRows.observe(rows);
    this.batchBytes.observe(bytes);
    this.copyDuration.observe(copySeconds);
    this.commitLatency.observe(Math.max(0, commitLatencySeconds));
  }

  batchRetried(): void {
    this.batches.inc({ outcome: 'retried' });
  }

  /** A batch refused because a newer owner (higher epoch) holds the read position. */
  batchFenced(): void {
    this.batches.inc({ outcome: 'fenced' });
  }

  /** The exposition text (what /metrics serves): the registry's, formatted by exposition.ts. */
  metricsText(): Promise<string> {
    return this.exposition.text(this.registry.getMetricsAsArray());
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

export function createCollectorMetrics(options?: CollectorMetricsOptions): CollectorMetrics {
  return new CollectorMetrics(options);
}
