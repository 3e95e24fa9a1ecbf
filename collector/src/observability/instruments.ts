/**
 * The collector's per-target and per-instance metric objects and its template-cache gauges,
 * declared in one place (names, help texts, labels, buckets: docs/metrics.md) apart from
 * metrics.ts, whose typed methods are the only writers.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

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
export function createInstruments(registers: Registry[], p: string, onLagScrape: () => void): Instruments {
  return {
    readBytes: new Counter({
      name: `${p}read_bytes_total`,
      help: 'Bytes read from the log, per target and instance.',
      labelNames: ['target', 'instance'],
      registers,
    }),
    readLines: new Counter({
      name: `${p}read_lines_total`,
      help: 'Lines read from the log, per target and instance.',
      labelNames: ['target', 'instance'],
      registers,
    }),
    events: new Counter({ name: `${p}events_total`, help: 'Log entries parsed, by event kind.', labelNames: ['target', 'instance', 'kind'], registers }),
    logErrors: new Counter({
      name: `${p}log_errors_total`,
      help: 'ERROR, FATAL and PANIC entries the server logged, by SQLSTATE class (a known two-character class, other, or unknown when none was logged).',
      labelNames: ['target', 'instance', 'sqlstate_class'],
      registers,
    }),
    parseProblems: new Counter({
      name: `${p}parse_problems_total`,
      help: 'Parse problems: malformed entries, entries truncated at the size cap, invalid bytes replaced, NUL bytes removed, messages too long for their kind kept unparsed.',
      labelNames: ['target', 'instance', 'problem'],
      registers,
    }),
    slowEntries: new Counter({
      name: `${p}parse_slow_entries_total`,
      help: 'Log entries that took the parser longer than their time budget.',
      labelNames: ['target', 'instance'],
      registers,
    }),
    skippedBytes: new Counter({
      name: `${p}skipped_bytes_total`,
      help: 'Log bytes never read because the committed position was lost.',
      labelNames: ['target', 'instance'],
      registers,
    }),
    lagBytes: new Gauge({ name: `${p}lag_bytes`, help: 'End of the log file minus the committed offset.', labelNames: ['target', 'instance'], registers }),
    lagSeconds: new Gauge({
      name: `${p}lag_seconds`,
      help: 'Now minus the time of the newest committed log entry.',
      labelNames: ['target', 'instance'],
      registers,
      collect: onLagScrape,
    }),
    connected: new Gauge({ name: `${p}target_connected`, help: '1 while the SSH connection to the target is up, else 0.', labelNames: ['target'], registers }),
    transport: new Gauge({
      name: `${p}target_transport`,
      help: '1 for the transport the target is read through (inproc or proxy), 0 for the others.',
      labelNames: ['target', 'transport'],
      registers,
    }),
    pendingBytesTarget: new Gauge({
      name: `${p}pending_bytes_target`,
      help: 'Bytes held in memory for the store, per target.',
      labelNames: ['target'],
      registers,
    }),
    reconnects: new Counter({ name: `${p}reconnects_total`, help: 'SSH reconnections per target.', labelNames: ['target'], registers }),
    errors: new Counter({ name: `${p}errors_total`, help: 'Errors per target by PglogError code.', labelNames: ['target', 'code'], registers }),
    fifoBytes: new Counter({
      name: `${p}fifo_read_bytes_total`,
      help: "Log bytes read through the sshproxy sidecar's FIFOs (the proxy transport), per target and instance.",
      labelNames: ['target', 'instance'],
      registers,
    }),
    rate: new Gauge({
      name: `${p}target_rate_bits_per_second`,
      help: 'Smoothed log read rate per target: what promotion to the sidecar and demotion back are decided on.',
      labelNames: ['target'],
      registers,
    }),
    promotions: new Counter({
      name: `${p}transport_promotions_total`,
      help: 'Moves of a target from the in-process SSH client to the sshproxy sidecar.',
      labelNames: ['target'],
      registers,
    }),
    demotions: new Counter({
      name: `${p}transport_demotions_total`,
      help: 'Moves of a target from the sshproxy sidecar back to the in-process SSH client.',
      labelNames: ['target'],
      registers,
    }),
    sidecarRestarts: new Counter({
      name: `${p}sidecar_stream_restarts_total`,
      help: 'Streams of a target started again through the sidecar after one failed or the sidecar went away.',
      labelNames: ['target'],
      registers,
    }),
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
export function registerTemplateCacheMetrics(registers: Registry[], p: string, cache: () => TemplateCacheReading | null): void {
  new Gauge({
    name: `${p}template_cache_bytes`,
    help: 'Bytes held by the query template cache (its own accounting; bounded by --template-cache-bytes).',
    registers,
    collect() {
      this.set(cache()?.bytes ?? 0);
    },
  });
  new Gauge({
    name: `${p}template_cache_entries`,
    help: 'Distinct query templates held by the template cache.',
    registers,
    collect() {
      this.set(cache()?.size ?? 0);
    },
  });
  // Totals kept by the cache: counters that advance by what the cache counted since the last scrape.
  let evicted = 0;
  let uncached = 0;
  new Counter({
    name: `${p}template_cache_evictions_total`,
    help: 'Templates evicted from the template cache to stay within its bytes.',
    registers,
    collect() {
      const n = cache()?.evictions ?? evicted;
      if (n > evicted) this.inc(n - evicted);
      evicted = n;
    },
  });
  new Counter({
    name: `${p}template_cache_uncached_total`,
    help: 'Templates too long to be cached (normalized text over 4 KiB), made afresh each time.',
    registers,
    collect() {
      const n = cache()?.uncached ?? uncached;
      if (n > uncached) this.inc(n - uncached);
      uncached = n;
    },
  });
}
