/**
 * The `pglog parse --summary` report: counters of the whole input, events by kind, entries
 * by severity and database, and the top query templates by total time. Pure: fed events
 * and the parser's counters, it holds no I/O and bounded memory: a byte budget for everything
 * it keeps (template texts, their histograms, database and severity names), whatever the
 * log says. Beyond it, new templates share one overflow entry, new names one overflow
 * name, and tracked templates' percentiles use the samples that fit (histogram.ts).
 */
import { EVENT_KINDS, type EventKind, type SummaryItem } from '../logformat/events.ts';
import { stringHeapBytes } from '../logformat/heap-bytes.ts';
import type { ParseCounters } from '../logformat/log-parser.ts';
import type { DurationSummary } from '../stats/duration-summary.ts';
import { DurationStats } from '../stats/histogram.ts';

export const TOP_TEMPLATES = 50;
/**
 * Distinct templates tracked one by one. Beyond this, statements of new templates share one
 * overflow entry, so a log of ever-different statements cannot grow the summary's memory
 * without bound (each tracked template costs a few hundred bytes).
 */
export const MAX_TRACKED_TEMPLATES = 100_000;
/** Bytes the summary may hold by default (its own accounting, see SummaryBuilder). */
export const DEFAULT_SUMMARY_BYTES = 64 * 1024 * 1024;
/** The overflow entry's fingerprint: no real fingerprint (16 hex digits) looks like it. */
export const OVERFLOW_FINGERPRINT = 'overflow';
/** The database or severity that names beyond the budget are counted under. */
export const OVERFLOW_NAME = '(others)';
/**
 * Heap of one tracked template besides its query text and histogram buckets: the accumulator,
 * its DurationStats and Map, the fingerprint and the entry in the templates Map (measured,
 * heapUsed after GC over 20,000 templates: about 350 bytes).
 */
const TEMPLATE_BYTES = 384;
/** Heap of one histogram bucket (a Map entry of two numbers, with the Map's spare room; measured: about 46). */
const BUCKET_BYTES = 56;
/** Heap of one name counted by a Tally besides the name itself (measured: about 85). */
const NAME_BYTES = 96;

export interface SummaryOptions {
  /** Distinct templates tracked one by one (default MAX_TRACKED_TEMPLATES). */
  maxTemplates?: number | undefined;
  /** Bytes the summary may hold (default DEFAULT_SUMMARY_BYTES). */
  maxBytes?: number | undefined;
}

/** The bytes a summary holds, shared by its parts. */
interface Budget {
  used: number;
  readonly max: number;
}

export interface TemplateSummary extends DurationSummary {
  fingerprint: string;
  query: string;
}

/** The parser's counters (snake_case, as the rest of the JSON) and what the events add. */
export interface ParseSummary extends Omit<ParseCounters, 'nulRemoved'> {
  nul_removed: number;
  events: Record<EventKind, number>;
  severities: Record<string, number>;
  databases: Record<string, number>;
  templates: TemplateSummary[];
}

interface TemplateAccumulator {
  query: string;
  /** Statements logged without a duration still count as calls. */
  calls: number;
  durations: DurationStats;
}

/** A count kept in a Map by reference, so that adding one is a single lookup (or none, see Tally). */
interface Count {
  n: number;
}

/**
 * Counts per key. Consecutive events mostly repeat the last key (one severity, one database,
 * the same string objects), so the last key's count is kept at hand. A new key that does not
 * fit in the budget is counted under OVERFLOW_NAME.
 */
class Tally {
  private readonly counts = new Map<string, Count>();
  private lastKey: string | null = null;
  private last: Count = { n: 0 };
  private readonly budget: Budget;

  constructor(budget: Budget) {
    this.budget = budget;
  }

  add(name: string): void {
    let key = name;
    if (key === this.lastKey) {
      this.last.n++;
      return;
    }
    let c = this.counts.get(key);
    if (c === undefined) {
      const cost = NAME_BYTES + stringHeapBytes(key);
      if (this.budget.used + cost > this.budget.max) key = OVERFLOW_NAME;
      c = this.counts.get(key);
    }
    if (c === undefined) {
      c = { n: 0 };
      this.counts.set(key, c);
      this.budget.used += NAME_BYTES + stringHeapBytes(key);
    }
    c.n++;
    this.lastKey = name;
    this.last = c;
  }

  entries(): [string, number][] {
    return [...this.counts].map(([k, c]) => [k, c.n]);
  }
}

/** Position of each kind in EVENT_KINDS. */
const KIND_INDEX: ReadonlyMap<string, number> = new Map(EVENT_KINDS.map((k, i) => [k, i]));

export class SummaryBuilder {
  /** Per kind (EVENT_KINDS order); the last kind's index kept at hand, as kinds alternate among a few. */
  private readonly events = new Float64Array(EVENT_KINDS.length);
  private lastKind = '';
  private lastKindIndex = 0;
  private readonly budget: Budget;
  private readonly severities: Tally;
  private readonly databases: Tally;
  private readonly templates = new Map<string, TemplateAccumulator>();
  private lastFingerprint = '';
  private lastTemplate: TemplateAccumulator | null = null;
  private readonly maxTemplates: number;

  constructor(options: SummaryOptions = {}) {
    this.maxTemplates = options.maxTemplates ?? MAX_TRACKED_TEMPLATES;
    this.budget = { used: 0, max: options.maxBytes ?? DEFAULT_SUMMARY_BYTES };
    this.severities = new Tally(this.budget);
    this.databases = new Tally(this.budget);
  }

  /** Bytes held, by the summary's own accounting (see the module comment). */
  get bytes(): number {
    return this.budget.used;
  }

  private overflow(): TemplateAccumulator {
    let t = this.templates.get(OVERFLOW_FINGERPRINT);
    if (t === undefined) {
      const query = `(statements of templates beyond the first ${this.templates.size} or the summary's ${this.budget.max} bytes)`;
      t = { query, calls: 0, durations: new DurationStats() };
      this.templates.set(OVERFLOW_FINGERPRINT, t);
      this.budget.used += TEMPLATE_BYTES + stringHeapBytes(query);
    }
    return t;
  }

  /** An event, or the SummaryItem a summaryParser makes instead (the same for the summary). */
  add(event: SummaryItem): void {
    const kind = event.kind;
    if (kind !== this.lastKind) {
      this.lastKind = kind;
      this.lastKindIndex = KIND_INDEX.get(kind) ?? 0;
    }
    this.events[this.lastKindIndex]! += 1;
    this.severities.add(event.severity);
    if (event.database !== null) this.databases.add(event.database);
    if (event.kind !== 'statement') return;
    let template = event.fingerprint === this.lastFingerprint ? this.lastTemplate : this.templates.get(event.fingerprint);
    if (template == null) {
      const cost = TEMPLATE_BYTES + stringHeapBytes(event.normalized);
      if (this.templates.size < this.maxTemplates && this.budget.used + cost <= this.budget.max) {
        template = { query: event.normalized, calls: 0, durations: new DurationStats() };
        this.templates.set(event.fingerprint, template);
        this.budget.used += cost;
      } else {
        template = this.overflow();
      }
    }
    this.lastFingerprint = event.fingerprint;
    this.lastTemplate = template;
    template.calls++;
    if (event.duration_ms !== null) {
      const d = template.durations;
      const buckets = d.bucketCount;
      d.add(event.duration_ms, this.budget.used + BUCKET_BYTES <= this.budget.max);
      this.budget.used += (d.bucketCount - buckets) * BUCKET_BYTES;
    }
  }

  build(counters: ParseCounters, top = TOP_TEMPLATES): ParseSummary {
    const templates = [...this.templates.entries()]
      .map(([fingerprint, t]) => templateSummary(fingerprint, t))
      .sort((a, b) => b.total_ms - a.total_ms || b.calls - a.calls || compare(a.fingerprint, b.fingerprint))
      .slice(0, top);
    return {
      bytes: counters.bytes,
      lines: counters.lines,
      entries: counters.entries,
      truncated: counters.truncated,
      malformed: counters.malformed,
      replacements: counters.replacements,
      nul_removed: counters.nulRemoved,
      oversized: counters.oversized,
      slow: counters.slow,
      events: eventCounts(this.events),
      severities: sortedObject(this.severities.entries()),
      databases: sortedObject(this.databases.entries()),
      templates,
    };
  }
}

function templateSummary(fingerprint: string, t: TemplateAccumulator): TemplateSummary {
  const d = t.durations;
  return {
    fingerprint,
    query: t.query,
    calls: t.calls,
    total_ms: round3(d.sum),
    mean_ms: round3(d.average),
    stddev_ms: round3(d.stddev),
    min_ms: d.count === 0 ? 0 : round3(d.min),
    max_ms: d.count === 0 ? 0 : round3(d.max),
    p95_ms: round3(d.quantile(0.95)),
  };
}

/** Every kind, in EVENT_KINDS order, with its count (0 when none was seen). */
function eventCounts(counts: Float64Array): Record<EventKind, number> {
  return Object.fromEntries(EVENT_KINDS.map((k, i) => [k, counts[i]!])) as Record<EventKind, number>;
}

function sortedObject(entries: [string, number][]): Record<string, number> {
  return Object.fromEntries(entries.sort(([a], [b]) => compare(a, b)));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Durations are logged with microsecond precision: three decimals of a millisecond. */
function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
