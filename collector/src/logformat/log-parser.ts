/**
 * The whole parsing path of one log stream, without I/O: bytes in, typed events out.
 *
 *   bytes ─> LineSplitter ─> EntryAssembler (per format) ─> EventParser (decode, classify,
 *   normalize) ─> onEvent
 *
 * Push-based and synchronous, so the caller (the CLI, the collector's stream, a benchmark)
 * owns reading and backpressure. Resuming at an entry boundary: construct a new parser with
 * `startOffset` set to an event's `end` and push the bytes from there.
 *
 * Each entry has a time budget (entryBudgetMs): what its assembling and parsing took, from
 * the injected clock, is compared with it and an entry over it is counted (`slow`) and handed
 * to `onSlowEntry`. The parsers are linear, so a slow entry means a parser did not keep that
 * promise on some input: the count makes it visible instead of the collector just stalling.
 * One clock reading per entry: the events of a push (or of flushIdle, end) are handed to
 * `onEvent` when the parsing of that push is done, so the caller's time is never between two
 * readings (a second reading per entry, after the handler, cost 3 % of `pglog parse`).
 */
import { createAssembler } from './assembler.ts';
import { Decoder, type EncodingConfig, plainAscii } from './decode.ts';
import { EventParser } from './event-parser.ts';
import type { PglogEvent, SummaryItem } from './events.ts';
import { DEFAULT_MAX_ENTRY_BYTES, LineSplitter } from './line-splitter.ts';
import { TemplateCache } from './normalize/normalize.ts';
import type { EntryAssembler, LogFormat, LogRecord } from './record.ts';
import type { StatementSink } from './statement-sink.ts';

export interface LogParserOptions {
  format: LogFormat;
  /** log_line_prefix for stderr and syslog; ignored by csvlog and jsonlog. */
  prefix?: string | undefined;
  encodings: EncodingConfig;
  maxEntryBytes?: number | undefined;
  /** Stream offset of the first byte that will be pushed. */
  startOffset?: number | undefined;
  /** Shared across parsers of one process so each template is hashed once. */
  templates?: TemplateCache | undefined;
  /** Milliseconds, monotonic (performance.now by default): times each entry against its budget. */
  clock?: (() => number) | undefined;
  /** Milliseconds one entry may take besides ENTRY_BUDGET_MS_PER_KIB (default DEFAULT_ENTRY_BUDGET_MS). */
  entryBudgetMs?: number | undefined;
  /** Called for each entry over its budget, after it was parsed. */
  onSlowEntry?: ((entry: SlowEntry) => void) | undefined;
  /**
   * Where statements go instead of the events handed on (statement-sink.ts: the collector's
   * rows from entry bytes); every other entry is an event as without it. Not for a summary.
   */
  statements?: StatementSink | undefined;
}

/** An entry that took longer than its budget. */
export interface SlowEntry {
  /** Stream offsets of its first byte and of the byte after it. */
  offset: number;
  end: number;
  ms: number;
  budgetMs: number;
}

/** The fixed part of one entry's time budget. */
export const DEFAULT_ENTRY_BUDGET_MS = 100;
/**
 * The budget's part per KiB of the entry: about a hundred times what parsing takes (some
 * 10 µs per KiB), so a long SQL text at the entry cap stays within it, and a parser that is
 * quadratic on some input is over it long before it stalls the process for seconds.
 */
export const ENTRY_BUDGET_MS_PER_KIB = 1;

export interface ParseCounters {
  bytes: number;
  lines: number;
  entries: number;
  truncated: number;
  malformed: number;
  replacements: number;
  nulRemoved: number;
  /** Messages too long for their kind, kept as `other` events without parsing their fields. */
  oversized: number;
  /** Entries that took longer than their time budget. */
  slow: number;
}

export type EventHandler = (event: PglogEvent) => void;

/**
 * Takes the events of each push (or flush) as one array, in log order, which it may keep: the
 * parser makes a new array for every push. Cheaper than an EventHandler for a caller that
 * gathers them anyway (the collector's streams: a second array per push was 3 % of what the
 * collector allocated, issue 15).
 */
export interface EventBatchSink<T> {
  events(batch: T[]): void;
}

/**
 * A LogParser for a summary (`pglog parse --summary`): what it hands on are SummaryItems
 * (EventParser.summarize), which cost less than events; its counters are the same.
 */
export function summaryParser(options: LogParserOptions, onItem: (item: SummaryItem) => void): LogParser<SummaryItem> {
  return new LogParser<SummaryItem>(options, onItem, true);
}

export class LogParser<T extends SummaryItem = PglogEvent> {
  private readonly splitter: LineSplitter;
  private readonly assembler: EntryAssembler;
  private readonly decoder: Decoder;
  private readonly events: EventParser;
  private readonly format: LogFormat;
  private truncatedEntries = 0;
  private readonly clock: () => number;
  /** When the work toward the next entry began: the last push or the last entry parsed. */
  private since = 0;
  private slowEntries = 0;
  private readonly onEvent: ((event: T) => void) | EventBatchSink<T>;
  /**
   * The events of the push being parsed, handed on when it is done (deliver()); null between
   * pushes. Made by the push's first event rather than left waiting for the next push: a
   * waiting array reaches V8's old generation, and once dropped it keeps the events it held
   * alive through every scavenge until the next mark-compact (issue 15, docs/benchmarks.md).
   */
  private parsed: T[] | null = null;
  /** Checking that every byte pushed is ASCII without NUL, for Decoder.plainInput (see push()). */
  private checkPlain: boolean;

  /** `onEvent`: each event, or each push's events (EventBatchSink). `summary`: make SummaryItems (summaryParser()); T must then be SummaryItem. */
  constructor(options: LogParserOptions, onEvent: ((event: T) => void) | EventBatchSink<T>, summary = false) {
    const maxEntryBytes = options.maxEntryBytes ?? DEFAULT_MAX_ENTRY_BYTES;
    this.format = options.format;
    this.decoder = new Decoder(options.encodings);
    // Only a summary has the checks to save, and jsonlog's escapes (\u0000) make bytes of their own.
    this.checkPlain = summary && options.format !== 'jsonlog';
    this.decoder.plainInput = this.checkPlain;
    this.events = new EventParser({ decoder: this.decoder, templates: options.templates ?? new TemplateCache() });
    // The folder's one clock (a named exception to its purity rule): the per-entry budget's, which callers may inject.
    // eslint-disable-next-line no-restricted-globals
    const clock = options.clock ?? performance.now.bind(performance);
    this.clock = clock;
    const budgetMs = options.entryBudgetMs ?? DEFAULT_ENTRY_BUDGET_MS;
    const onSlowEntry = options.onSlowEntry;
    this.onEvent = onEvent;
    const events = this.events;
    // What T is follows from `summary` (see summaryParser), which the types cannot say.
    const sink = summary ? undefined : options.statements;
    const parse =
      sink !== undefined
        ? (record: LogRecord): T | null => events.parseInto(record, sink) as unknown as T | null
        : summary
          ? (record: LogRecord): T => events.summarize(record) as T
          : (record: LogRecord): T => events.parse(record) as unknown as T;
    const onRecord = (record: LogRecord): void => {
      if (record.truncated) this.truncatedEntries++;
      const parsed = parse(record);
      if (parsed !== null) (this.parsed ??= []).push(parsed);
      const now = clock();
      const ms = now - this.since;
      this.since = now;
      const entryBudgetMs = budgetMs + ((record.end - record.start) / 1024) * ENTRY_BUDGET_MS_PER_KIB;
      if (ms > entryBudgetMs) {
        this.slowEntries++;
        onSlowEntry?.({ offset: record.start, end: record.end, ms, budgetMs: entryBudgetMs });
      }
    };
    // The summary never reads an entry's time (SummaryItem has none).
    // onRecord is done with a record when it returns: the assembler may hand it the same one again.
    this.assembler = createAssembler(options.format, onRecord, { prefix: options.prefix, maxEntryBytes, withoutTime: summary, reuseRecords: true });
    const assembler = this.assembler;
    this.splitter = new LineSplitter(
      (bytes, from, to, offset, next, truncated) => assembler.pushLine(bytes, from, to, offset, next, truncated),
      { maxEntryBytes },
      options.startOffset ?? 0,
    );
  }

  push(chunk: Buffer): void {
    this.since = this.clock();
    // Once per chunk instead of once per field: while the input is all ASCII without NUL, so is
    // every record's text (stderr, syslog and csvlog records are made of the input's bytes and
    // of tabs and newlines), and the decoder need not check it (Decoder.plainInput).
    if (this.checkPlain && !plainAscii(chunk)) {
      this.checkPlain = false;
      this.decoder.plainInput = false;
    }
    this.splitter.push(chunk);
    this.assembler.release(chunk.buffer);
    this.deliver();
  }

  /** Hands the events parsed since the last delivery to onEvent, in log order. */
  private deliver(): void {
    const events = this.parsed;
    if (events === null) return;
    this.parsed = null;
    const onEvent = this.onEvent;
    if (typeof onEvent !== 'function') onEvent.events(events);
    else for (let i = 0; i < events.length; i++) onEvent(events[i]!);
  }

  /**
   * The stream went idle (a followed log stopped growing): emits the entry still being
   * assembled when it can only be complete. A stderr or syslog entry ends only when the next
   * entry's first line arrives, so without this the newest entry of a quiet server would wait
   * for the next one; PostgreSQL's logging collector writes each message with one write, so a
   * whole line followed by silence is a whole entry. csvlog and jsonlog records end at their
   * own line end and are never held back; a line still missing its terminator is never flushed.
   */
  flushIdle(): void {
    if (this.format === 'csvlog' || this.format === 'jsonlog') return;
    if (this.splitter.pendingBytes > 0) return;
    this.since = this.clock();
    this.assembler.flush();
    this.deliver();
  }

  /** End of input: emits the last line and the entry still being assembled. */
  end(): void {
    this.since = this.clock();
    this.splitter.end();
    this.assembler.flush();
    this.deliver();
  }

  get counters(): ParseCounters {
    return {
      bytes: this.splitter.bytes,
      lines: this.splitter.lines,
      entries: this.assembler.stats.entries,
      truncated: this.truncatedEntries,
      malformed: this.assembler.stats.malformed,
      replacements: this.decoder.replacements,
      nulRemoved: this.decoder.nulRemoved,
      oversized: this.events.oversized,
      slow: this.slowEntries,
    };
  }
}

/** Adds counters of several inputs (one `pglog parse` run over many files). */
export function addCounters(a: ParseCounters, b: ParseCounters): ParseCounters {
  return {
    bytes: a.bytes + b.bytes,
    lines: a.lines + b.lines,
    entries: a.entries + b.entries,
    truncated: a.truncated + b.truncated,
    malformed: a.malformed + b.malformed,
    replacements: a.replacements + b.replacements,
    nulRemoved: a.nulRemoved + b.nulRemoved,
    oversized: a.oversized + b.oversized,
    slow: a.slow + b.slow,
  };
}

export const ZERO_COUNTERS: ParseCounters = Object.freeze({
  bytes: 0,
  lines: 0,
  entries: 0,
  truncated: 0,
  malformed: 0,
  replacements: 0,
  nulRemoved: 0,
  oversized: 0,
  slow: 0,
});
