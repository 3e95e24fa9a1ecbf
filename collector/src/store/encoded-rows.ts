/**
 * Events held for the store as the COPY BINARY rows they become (pure: no I/O).
 *
 * A stream's events are mapped to rows (event-rows.ts) and encoded (copy-binary.ts) when they
 * are handed over, not when their batch commits: what waits for the store is then one Buffer of
 * encoded rows per table, about the size of the log text, instead of an object and its strings
 * per event (about three times that, and old-generation garbage once it was promoted while it
 * waited; issue 15, docs/benchmarks.md). Everything else a commit needs is derived here too:
 * the query templates, the rows the encoder refused (as quarantine records), the text repairs,
 * and what each statement row is summed by in the rollup (statement-keys.ts), which the commit
 * reads for the rows the server took (StatementRollup.addTable). Committing is then sending the Buffers; a row is
 * decoded again (copy-binary-decode.ts) only when the server refuses a COPY and the bad row
 * must be found and quarantined.
 */
import { isPglogError, PglogError } from '@pglog/common/errors.ts';

import type { PglogEvent, StatementEvent } from '../logformat/events.ts';
import { stringHeapBytes } from '../logformat/heap-bytes.ts';
import type { ScannedStatement, StatementSink } from '../logformat/statement-sink.ts';
import { toIsoTimestamp } from '../logformat/timestamp.ts';
import { CopyBinaryEncoder } from './copy-binary.ts';
import { decodeRow } from './copy-binary-decode.ts';
import {
  clearRowScratch,
  mapEvent,
  type MappedRow,
  mapScannedStatement,
  type RowContext,
  rowContext,
  rowScratch,
  STATEMENT_QUERY_COLUMN,
  TemplateSet,
} from './event-rows.ts';
import { EVENT_TABLES, type EventTable, TABLES } from './event-tables.ts';
import { logTimeMicros, type Micros } from './iso-time.ts';
import { encoderReason, quarantineRecord } from './quarantine.ts';
import { type Slab, SlabPool } from './slab-pool.ts';
import { KEY_LOG_KEY_BYTES, KEY_LOG_STRIDE, type StatementKeyLog, StatementKeyRecorder, StatementKeys } from './statement-keys.ts';
import { appendStatementRow } from './statement-row.ts';
import type { QuarantineRecord } from './store-sql.ts';
import type { BatchItem, SourceRef, StorePosition } from './store-types.ts';
import type { TextRepairs } from './text-clean.ts';

/** What a commit takes: events (encoded by the writer first) or handovers already encoded, and the read positions they reach. */
export interface StoreBatch {
  /** Events to map and encode at commit time. */
  items: BatchItem[];
  /** Events already encoded when they were handed over (StoreWriter.encode), committed before `items`. */
  encoded?: EncodedRows[];
  /** The new read offsets, at most one per (target, instance). */
  positions: StorePosition[];
}

/** The encoded rows of one table: the rows back to back, and where each one ends. */
export interface EncodedTable {
  data: Buffer;
  /** ends[i]: the byte just past row i in `data` (row i starts at ends[i - 1], or 0). */
  ends: Uint32Array;
  /** The slab `data` is a view of, until recycle() gives it back (null: a Buffer of its own). */
  slab: Slab | null;
  /** statement_events only: what each row is summed by in the rollup (its rows in row order), or null (read from the bytes). */
  keys?: StatementKeyLog | null;
}

/** One handover's events, ready to be committed. */
export interface EncodedRows {
  source: SourceRef;
  /** Rows per event table; a table without rows is absent. */
  tables: Partial<Record<EventTable, EncodedTable>>;
  /** Templates of the handover's other events (plans) and of statements whose key is not kept; the rest are in `statementKeys`. */
  templates: TemplateSet;
  /** The keys and templates of its statements (statement-keys.ts), or null. */
  statementKeys: StatementKeyLog | null;
  /** Rows the encoder refused: quarantined with the batch, never sent. */
  refused: Array<{ table: EventTable; record: QuarantineRecord }>;
  repairs: TextRepairs;
  readTimeUsed: number;
  /** Log time (ms) of the last event that has one, or null. */
  newestMs: number | null;
  /** Memory it holds, in bytes: what the batcher's budget counts. */
  cost: number;
}

/** Fixed part of what a handover holds: its objects, maps and arrays. */
const HANDOVER_OVERHEAD_BYTES = 1024;
/** A template or a refused row beside the encoded rows: its object and map entry. */
const ENTRY_OVERHEAD_BYTES = 160;

/**
 * The handover being encoded: its context, and the rows of each table so far. Open from
 * RowEncoder.open() (or encode()) to the end of encode().
 */
interface OpenHandover {
  source: SourceRef;
  readAt: number;
  ctx: RowContext;
  refused: EncodedRows['refused'];
  /** Rows so far per table (their ends are in RowEncoder.ends); a table is started (startRows) with its first row. */
  rows: Record<EventTable, number>;
  /** Statements taken through the StatementSink, and the end offset of the last. */
  statements: number;
  lastEnd: number;
  /**
   * The timestamp and end offset of the last statement taken that has one: as the event's ts
   * would be (ISO), or, for a statement taken from its bytes, as logged (newestTsAsLogged).
   */
  newestTs: string | null;
  newestTsAsLogged: boolean;
  newestTsEnd: number;
}

/**
 * The StatementSink a stream parses into (statement-sink.ts): what it takes goes into the
 * rows of the stream's next handover, in log order.
 */
export interface StatementRows extends StatementSink {
  /**
   * Starts the rows of `source`'s next handover, read at `readAt`. Call before each push into
   * a parser with this sink, and hand over (encode) before anything else opens: the
   * collector's streams parse and hand over in one synchronous step. What was opened before
   * and never handed over is dropped: its stream failed while parsing, and reads those
   * entries again from its committed position.
   */
  open(source: SourceRef, readAt: number): void;
  /** Statements taken since open(), and the end offset of the last (0 with none). */
  readonly taken: number;
  readonly lastEnd: number;
}

/** Maps and encodes handovers; one per store writer (the encoders' scratch buffers and the slabs are reused). */
export class RowEncoder implements StatementRows {
  private readonly encoders: Readonly<Record<EventTable, CopyBinaryEncoder>>;
  private readonly maxTextBytes: number;
  /** The row each statement is mapped into: encoded before the next is mapped. */
  private readonly scratch = rowScratch();
  readonly slabs = new SlabPool();
  /** Statement keys, kept between handovers, and the open handover's (statement-keys.ts). */
  private readonly keys = new StatementKeys();
  private readonly keyRecorder = new StatementKeyRecorder();
  private handover: OpenHandover | null = null;
  /** Each table's row ends in the open handover: like the encoders' blocks, they hold one handover at a time. */
  private readonly ends: Record<EventTable, Uint32Array> = {
    statement_events: new Uint32Array(1024),
    error_events: new Uint32Array(64),
    lock_wait_events: new Uint32Array(64),
    other_events: new Uint32Array(256),
  };
  /** The timestamp accepts() converted last, for the scanned() that follows it. */
  private acceptedTs: Micros = 0;
  private acceptedTime = '';

  constructor(maxTextBytes: number) {
    this.maxTextBytes = maxTextBytes;
    const encoders = {} as Record<EventTable, CopyBinaryEncoder>;
    for (const t of EVENT_TABLES) encoders[t] = new CopyBinaryEncoder(TABLES[t].types);
    this.encoders = encoders;
  }

  open(source: SourceRef, readAt: number): void {
    this.handover = this.newHandover(source, readAt);
  }

  private newHandover(source: SourceRef, readAt: number): OpenHandover {
    this.keyRecorder.open();
    return {
      source,
      readAt,
      ctx: rowContext(this.maxTextBytes, this.keys, this.keyRecorder),
      refused: [],
      rows: noRows(),
      statements: 0,
      lastEnd: 0,
      newestTs: null,
      newestTsAsLogged: false,
      newestTsEnd: -1,
    };
  }

  get taken(): number {
    return this.handover?.statements ?? 0;
  }

  get lastEnd(): number {
    return this.handover?.lastEnd ?? 0;
  }

  accepts(time: string | null, sqlBytes: number): boolean {
    if (time === null || sqlBytes > this.maxTextBytes) return false;
    const ts = logTimeMicros(time);
    if (ts === null) return false;
    this.acceptedTs = ts;
    this.acceptedTime = time;
    return true;
  }

  scanned(s: ScannedStatement): void {
    const h = this.opened();
    const row = mapScannedStatement(h.source, s, this.acceptedTs, h.ctx, this.scratch);
    const encoder = this.encoders.statement_events;
    const n = h.rows.statement_events;
    if (n === 0) encoder.startRows();
    const end = appendStatementRow(encoder, row.values, s.sql, s.sqlStart, s.sqlEnd);
    if (end >= 0) {
      this.appended(h, 'statement_events', n, end);
    } else {
      // A value its column cannot take: appendRow refuses the row with the reason.
      encoder.stageUtf8(STATEMENT_QUERY_COLUMN, s.sql, s.sqlStart, s.sqlEnd);
      this.append(h, row, s);
    }
    h.statements++;
    h.lastEnd = s.end;
    h.newestTs = this.acceptedTime;
    h.newestTsAsLogged = true;
    h.newestTsEnd = s.end;
  }

  event(e: StatementEvent): void {
    const h = this.opened();
    this.append(h, mapEvent(h.source, e, h.readAt, h.ctx, this.scratch), null);
    h.statements++;
    h.lastEnd = e.end;
    // As newestLogMs: a timestamp kept as logged (its zone unknown) is not a log time.
    if (e.ts !== null && !Number.isNaN(Date.parse(e.ts))) {
      h.newestTs = e.ts;
      h.newestTsAsLogged = false;
      h.newestTsEnd = e.end;
    }
  }

  private opened(): OpenHandover {
    if (this.handover === null) throw new PglogError('STORE_ENCODING', 'a statement reached the row encoder before its stream opened a handover');
    return this.handover;
  }

  /**
   * Encodes a mapped row into its table's block, or refuses it (quarantined with the batch).
   * `scanned`: the statement whose query the encoder was given as bytes (stageUtf8).
   */
  private append(h: OpenHandover, row: MappedRow, scanned: ScannedStatement | null): void {
    const table = row.table;
    const encoder = this.encoders[table];
    const n = h.rows[table];
    if (n === 0) encoder.startRows();
    try {
      this.appended(h, table, n, encoder.appendRow(row.values));
    } catch (e) {
      if (!isPglogError(e) || e.code !== 'STORE_ENCODING') throw e;
      const refused = scanned === null ? row : withQuery(row, scanned);
      h.refused.push({ table: row.table, record: quarantineRecord(refused, `STORE_ENCODING: ${encoderReason(refused, e.message)}`) });
    }
  }

  /** Row `n` of `table` in the open handover ends at `end` in its encoder's block. */
  private appended(h: OpenHandover, table: EventTable, n: number, end: number): void {
    let ends = this.ends[table];
    if (n === ends.length) {
      const more = new Uint32Array(2 * n);
      more.set(ends);
      this.ends[table] = ends = more;
    }
    ends[n] = end;
    h.rows[table] = n + 1;
    if (table === 'statement_events') this.keyRecorder.encoded();
  }

  /**
   * The rows of `events`, read from `source` at `readAt` (ms since 1970), in memory of the
   * batcher's `lane` (slab-pool.ts: rows that commit together share slabs), after the
   * statements the StatementSink took since `source` opened the handover (if it did).
   */
  encode(source: SourceRef, events: readonly PglogEvent[], readAt: number, lane = 0): EncodedRows {
    const open = this.handover;
    this.handover = null;
    const h: OpenHandover = open !== null && sameSource(open.source, source) ? open : this.newHandover(source, readAt);
    h.source = source;
    h.readAt = readAt;
    for (let i = 0; i < events.length; i++) this.append(h, mapEvent(source, events[i]!, readAt, h.ctx, this.scratch), null);
    clearRowScratch(this.scratch);
    const { ctx, refused } = h;
    const tables: EncodedRows['tables'] = {};
    let statementKeys: StatementKeyLog | null = null;
    let cost = HANDOVER_OVERHEAD_BYTES + ENTRY_OVERHEAD_BYTES * ctx.templates.size;
    // Encoders are per table, so every table's block is still open here: each is copied out
    // once, into one piece of a slab with its row ends (and the statements' key log) after it.
    // Typed arrays of their own would each be an ArrayBuffer that lives, promoted, until the
    // next mark-compact frees it: they raised peak RSS at 5 MB/s by 10 to 16 MB.
    for (const table of EVENT_TABLES) {
      const n = h.rows[table];
      if (n === 0) continue;
      const encoder = this.encoders[table];
      const dataBytes = encoder.blockLength;
      const endsAt = align(dataBytes, 4);
      const logAt = align(endsAt + 4 * n, 8);
      const keyRecorder = this.keyRecorder;
      const logDoubles = table === 'statement_events' ? keyRecorder.doubles : 0;
      // ALIGN_SLACK more, to start the piece at an 8-byte boundary of its ArrayBuffer.
      const { buf, slab } = this.slabs.take(logAt + 8 * logDoubles + ALIGN_SLACK, lane);
      const start = (8 - (buf.byteOffset & 7)) & 7;
      const data = buf.subarray(start, start + dataBytes);
      encoder.copyBlockTo(data);
      const ends = new Uint32Array(buf.buffer, buf.byteOffset + start + endsAt, n);
      const rowEnds = this.ends[table];
      for (let i = 0; i < n; i++) ends[i] = rowEnds[i] as number;
      if (logDoubles > 0) {
        const timesAt = buf.byteOffset + start + logAt;
        const timeCount = logDoubles - KEY_LOG_STRIDE * n;
        statementKeys = keyRecorder.finish(
          new Float64Array(buf.buffer, timesAt, timeCount),
          new Float64Array(buf.buffer, timesAt + 8 * timeCount, KEY_LOG_STRIDE * n),
        );
      }
      tables[table] = { data, ends, slab, ...(table === 'statement_events' ? { keys: statementKeys } : {}) };
      cost += data.length + 4 * n + 8 * logDoubles;
    }
    // Statements the encoder refused every row of: their templates still count.
    statementKeys ??= this.keyRecorder.finishApart();
    if (statementKeys !== null) cost += KEY_LOG_KEY_BYTES * statementKeys.keys.length;
    for (const r of refused) cost += ENTRY_OVERHEAD_BYTES + stringHeapBytes(r.record.row);
    return {
      source,
      tables,
      templates: ctx.templates,
      statementKeys,
      refused,
      repairs: ctx.repairs,
      readTimeUsed: ctx.readTimeUsed,
      newestMs: newestOf(events, h),
      cost,
    };
  }

  /**
   * The handover's rows are no longer needed (their batch committed, and the COMMIT's answer
   * means the server read every byte sent before it): their slabs may be reused. Only then:
   * data still to be sent, or retried, must stay as it is. Idempotent.
   */
  recycle(encoded: EncodedRows): void {
    for (const t of EVENT_TABLES) {
      const rows = encoded.tables[t];
      if (rows === undefined || rows.slab === null) continue;
      const slab = rows.slab;
      rows.slab = null;
      this.slabs.give(slab);
    }
  }
}

function noRows(): Record<EventTable, number> {
  return { statement_events: 0, error_events: 0, lock_wait_events: 0, other_events: 0 };
}

/** Every template of a handover: its other events' and its statements'. */
export function handoverTemplates(e: EncodedRows): TemplateSet {
  const templates = new TemplateSet();
  templates.merge(e.templates);
  templates.addKeys(e.statementKeys);
  return templates;
}

/** Bytes a piece of a slab may need to start at an 8-byte boundary. */
const ALIGN_SLACK = 7;

/** `n` rounded up to a multiple of `to` (a power of two). */
function align(n: number, to: number): number {
  return (n + to - 1) & -to;
}

/** Whether two handovers' sources are the same stream's same file. */
function sameSource(a: SourceRef, b: SourceRef): boolean {
  return a === b || (a.target === b.target && a.instance === b.instance && a.file === b.file);
}

/** The scratch row of a scanned statement with its query as text, for a quarantine record. */
function withQuery(row: MappedRow, s: ScannedStatement): MappedRow {
  const values = [...row.values];
  values[STATEMENT_QUERY_COLUMN] = s.sql.toString('latin1', s.sqlStart, s.sqlEnd);
  return { ...row, values };
}

/**
 * newestLogMs over a handover's entries: its events and the statements the sink took, of
 * which the one ending last with a log time counts (a scanned statement's timestamp is one
 * logTimeMicros read, so its ISO text, which Date.parse reads, is one too).
 */
function newestOf(events: readonly PglogEvent[], h: OpenHandover): number | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]!;
    if (e.end < h.newestTsEnd) break;
    const ms = e.ts === null ? NaN : Date.parse(e.ts);
    if (!Number.isNaN(ms)) return ms;
  }
  if (h.newestTs === null) return null;
  return Date.parse(h.newestTsAsLogged ? toIsoTimestamp(h.newestTs) : h.newestTs);
}

/** The log time (ms) of the last of a stream's events that has one, or null (entries arrive in log order). */
export function newestLogMs(events: readonly PglogEvent[]): number | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const ts = (events[i] as PglogEvent).ts;
    const ms = ts === null ? NaN : Date.parse(ts);
    if (!Number.isNaN(ms)) return ms;
  }
  return null;
}

/** The byte range of row `i` of an encoded table. */
export function rowRange(t: EncodedTable, i: number): [number, number] {
  return [i === 0 ? 0 : (t.ends[i - 1] as number), t.ends[i] as number];
}

/** Row `i` of an encoded table, decoded again, as the quarantine takes it. */
export function decodedRow(table: EventTable, t: EncodedTable, i: number, source: SourceRef): MappedRow {
  const def = TABLES[table];
  const values = decodeRow(def.types, t.data, rowRange(t, i)[0]);
  const offset = values[def.columns.indexOf('file_offset')];
  const kind = table === 'other_events' ? (values[def.columns.indexOf('kind')] as PglogEvent['kind']) : kindOfTable(table);
  return { table, values, source, offset: typeof offset === 'number' ? offset : NaN, kind };
}

function kindOfTable(table: Exclude<EventTable, 'other_events'>): PglogEvent['kind'] {
  switch (table) {
    case 'statement_events':
      return 'statement';
    case 'error_events':
      return 'error';
    case 'lock_wait_events':
      return 'lock_wait';
  }
}
