/**
 * Events held for the store as the COPY BINARY rows they become (pure: no I/O).
 *
 * A stream's events are mapped to rows (event-rows.ts) and encoded (copy-binary.ts) when they
 * are handed over, not when their batch commits: what waits for the store is then one Buffer of
 * encoded rows per table, about the size of the log text, instead of an object and its strings
 * per event (about three times that, and old-generation garbage once it was promoted while it
 * waited; issue 15, docs/benchmarks.md). Everything else a commit needs is derived here too:
 * the query templates, the rows the encoder refused (as quarantine records), the text repairs;
 * the statement rollup is read from the encoded rows at commit (StatementRollup.addEncoded). Committing is then sending the Buffers; a row is
 * decoded again (copy-binary-decode.ts) only when the server refuses a COPY and the bad row
 * must be found and quarantined.
 */
import { isPglogError } from '@pglog/common/errors.ts';

import type { PglogEvent } from '../logformat/events.ts';
import { stringHeapBytes } from '../logformat/heap-bytes.ts';
import { CopyBinaryEncoder } from './copy-binary.ts';
import { decodeRow } from './copy-binary-decode.ts';
import { clearRowScratch, mapEvent, type MappedRow, rowContext, rowScratch, type TemplateSet } from './event-rows.ts';
import { EVENT_TABLES, type EventTable, TABLES } from './event-tables.ts';
import { encoderReason, quarantineRecord } from './quarantine.ts';
import { type Slab, SlabPool } from './slab-pool.ts';
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
}

/** One handover's events, ready to be committed. */
export interface EncodedRows {
  source: SourceRef;
  /** Rows per event table; a table without rows is absent. */
  tables: Partial<Record<EventTable, EncodedTable>>;
  templates: TemplateSet;
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

/** Maps and encodes handovers; one per store writer (the encoders' scratch buffers and the slabs are reused). */
export class RowEncoder {
  private readonly encoders: Readonly<Record<EventTable, CopyBinaryEncoder>>;
  private readonly maxTextBytes: number;
  /** The row each statement is mapped into: encoded before the next is mapped. */
  private readonly scratch = rowScratch();
  readonly slabs = new SlabPool();

  constructor(maxTextBytes: number) {
    this.maxTextBytes = maxTextBytes;
    const encoders = {} as Record<EventTable, CopyBinaryEncoder>;
    for (const t of EVENT_TABLES) encoders[t] = new CopyBinaryEncoder(TABLES[t].types);
    this.encoders = encoders;
  }

  /**
   * The rows of `events`, read from `source` at `readAt` (ms since 1970), in memory of the
   * batcher's `lane` (slab-pool.ts: rows that commit together share slabs).
   */
  encode(source: SourceRef, events: readonly PglogEvent[], readAt: number, lane = 0): EncodedRows {
    const ctx = rowContext(this.maxTextBytes);
    const refused: EncodedRows['refused'] = [];
    const ends = new Map<EventTable, number[]>();
    for (const event of events) {
      const row = mapEvent(source, event, readAt, ctx, this.scratch);
      const encoder = this.encoders[row.table];
      let tableEnds = ends.get(row.table);
      if (tableEnds === undefined) {
        encoder.startRows();
        tableEnds = [];
        ends.set(row.table, tableEnds);
      }
      try {
        tableEnds.push(encoder.appendRow(row.values));
      } catch (e) {
        if (!isPglogError(e) || e.code !== 'STORE_ENCODING') throw e;
        refused.push({ table: row.table, record: quarantineRecord(row, `STORE_ENCODING: ${encoderReason(row, e.message)}`) });
      }
    }
    clearRowScratch(this.scratch);
    const tables: EncodedRows['tables'] = {};
    let cost = HANDOVER_OVERHEAD_BYTES + ENTRY_OVERHEAD_BYTES * ctx.templates.size;
    // Encoders are per table, so every table's block is still open here: each is copied out once.
    for (const [table, tableEnds] of ends) {
      if (tableEnds.length === 0) continue;
      const encoder = this.encoders[table];
      const { buf: data, slab } = this.slabs.take(encoder.blockLength, lane);
      encoder.copyBlockTo(data);
      tables[table] = { data, ends: Uint32Array.from(tableEnds), slab };
      cost += data.length + 4 * tableEnds.length;
    }
    for (const r of refused) cost += ENTRY_OVERHEAD_BYTES + stringHeapBytes(r.record.row);
    return {
      source,
      tables,
      templates: ctx.templates,
      refused,
      repairs: ctx.repairs,
      readTimeUsed: ctx.readTimeUsed,
      newestMs: newestLogMs(events),
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
