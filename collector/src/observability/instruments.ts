/**
 * The collector's per-target and per-instance metric objects and its template-cache gauges,
 * declared in one place (names, help texts, labels, buckets: docs/metrics.md) apart from
 * metrics.ts, whose typed methods are the only writers.
 */
import type { Counter, Gauge } from 'prom-client';

import type { MetricFactory } from './metric-factory.ts';

export const PARSE_PROBLEMS = ['malformed', 'truncated', 'replacement', 'nul_removed', 'oversized'] as const;
/** malformed entry, entry truncated at the size cap, invalid bytes replaced while decoding, NUL bytes removed, message too long for its kind's fields (kept as `other`). */
export type ParseProblem = (typeof PARSE_PROBLEMS)[number];
export const TRANSPORTS = ['inproc', 'proxy'] as const;
export type Transport = (typeof TRANSPORTS)[number];

/** The metric objects; the handles write to them. */
export interface Instruments {
  readBytes: Counter<'target' | 'instance'>;
  readLines: Counter<'target' | 'instance'>;
  events: Counter<'target' | 'instance' | 'kind'>;
  logErrors: Counter<'target' | 'instance' | 'sqlstate_class'>;
  parseProblems: Counter<'target' | 'instance' | 'problem'>;
  slowEntries: Counter<'target' | 'instance'>;
  skippedBytes: Counter<'target' | 'instance'>;
  lagBytes: Gauge<'target' | 'instance'>;
  lagSeconds: Gauge<'target' | 'instance'>;
  connected: Gauge<'target'>;
  transport: Gauge<'target' | 'transport'>;
  pendingBytesTarget: Gauge<'target'>;
  reconnects: Counter<'target'>;
  errors: Counter<'target' | 'code'>;
  fifoBytes: Counter<'target' | 'instance'>;
  rate: Gauge<'target'>;
  promotions: Counter<'target'>;
  demotions: Counter<'target'>;
  sidecarRestarts: Counter<'target'>;
}

/** The metric objects written through per-target and per-instance series; `onLagScrape` refreshes `lag_seconds` at each scrape. */
export function createInstruments(m: MetricFactory, onLagScrape: () => void): Instruments {
  return {
    readBytes: m.counter('read_bytes_total', 'Bytes read from the log, per target and instance.', ['target', 'instance']),
    readLines: m.counter('read_lines_total', 'Lines read from the log, per target and instance.', ['target', 'instance']),
    events: m.counter('events_total', 'Log entries parsed, by event kind.', ['target', 'instance', 'kind']),
    logErrors: m.counter(
      'log_errors_total',
      'ERROR, FATAL and PANIC entries the server logged, by SQLSTATE class (a known two-character class, other, or unknown when none was logged).',
      ['target', 'instance', 'sqlstate_class'],
    ),
    parseProblems: m.counter(
      'parse_problems_total',
      'Parse problems: malformed entries, entries truncated at the size cap, invalid bytes replaced, NUL bytes removed, messages too long for their kind kept unparsed.',
      ['target', 'instance', 'problem'],
    ),
    slowEntries: m.counter('parse_slow_entries_total', 'Log entries that took the parser longer than their time budget.', ['target', 'instance']),
    skippedBytes: m.counter('skipped_bytes_total', 'Log bytes never read because the committed position was lost.', ['target', 'instance']),
    lagBytes: m.gauge('lag_bytes', 'End of the log file minus the committed offset.', ['target', 'instance']),
    lagSeconds: m.gauge('lag_seconds', 'Now minus the time of the newest committed log entry.', ['target', 'instance'], onLagScrape),
    connected: m.gauge('target_connected', '1 while the SSH connection to the target is up, else 0.', ['target']),
    transport: m.gauge('target_transport', '1 for the transport the target is read through (inproc or proxy), 0 for the others.', ['target', 'transport']),
    pendingBytesTarget: m.gauge('pending_bytes_target', 'Bytes held in memory for the store, per target.', ['target']),
    reconnects: m.counter('reconnects_total', 'SSH reconnections per target.', ['target']),
    errors: m.counter('errors_total', 'Errors per target by PglogError code.', ['target', 'code']),
    fifoBytes: m.counter('fifo_read_bytes_total', "Log bytes read through the sshproxy sidecar's FIFOs (the proxy transport), per target and instance.", [
      'target',
      'instance',
    ]),
    rate: m.gauge('target_rate_bits_per_second', 'Smoothed log read rate per target: what promotion to the sidecar and demotion back are decided on.', [
      'target',
    ]),
    promotions: m.counter('transport_promotions_total', 'Moves of a target from the in-process SSH client to the sshproxy sidecar.', ['target']),
    demotions: m.counter('transport_demotions_total', 'Moves of a target from the sshproxy sidecar back to the in-process SSH client.', ['target']),
    sidecarRestarts: m.counter(
      'sidecar_stream_restarts_total',
      'Streams of a target started again through the sidecar after one failed or the sidecar went away.',
      ['target'],
    ),
  };
}

/** What the metrics read of a TemplateCache. */
export interface TemplateCacheReading {
  readonly bytes: number;
  readonly size: number;
  readonly evictions: number;
  readonly uncached: number;
}

/** The template cache's gauges and counters, read from `cache()` at scrape time (null: no cache yet). */
export function registerTemplateCacheMetrics(m: MetricFactory, cache: () => TemplateCacheReading | null): void {
  m.scrapedGauge(
    'template_cache_bytes',
    'Bytes held by the query template cache (its own accounting; bounded by --template-cache-bytes).',
    () => cache()?.bytes ?? 0,
  );
  m.scrapedGauge('template_cache_entries', 'Distinct query templates held by the template cache.', () => cache()?.size ?? 0);
  // Totals kept by the cache: counters that advance by what the cache counted since the last scrape.
  m.scrapedTotal('template_cache_evictions_total', 'Templates evicted from the template cache to stay within its bytes.', () => cache()?.evictions);
  m.scrapedTotal(
    'template_cache_uncached_total',
    'Templates too long to be cached (normalized text over 4 KiB), made afresh each time.',
    () => cache()?.uncached,
  );
}
