/**
 * Events → rows of the event tables (pure). Each value array follows its table's column
 * order in event-tables.ts. Text is cleaned on the way (text-clean.ts): no NULs, valid UTF-16,
 * at most `maxTextBytes` of UTF-8 per value. The row's ts is the event's logged instant, to the
 * microsecond; when the event has none (no timestamp, or one whose zone could not be
 * converted), ts is the time the collector read the entry and `ts_logged` keeps the text.
 */
import type { PglogEvent } from '../protocol/events.ts';
import { isoToMicros, msToMicros } from './iso-time.ts';
import type { EventTable } from './event-tables.ts';
import type { SourceRef } from './store-types.ts';
import { cleanText } from './text-clean.ts';
import type { TextRepairs } from './text-clean.ts';

export interface MappedRow {
  table: EventTable;
  /** Column values in the table's order (event-tables.ts). */
  values: unknown[];
  /** Rough size of the encoded row in bytes, to cut COPY data into chunks of about equal size. */
  size: number;
  source: SourceRef;
  /** Stream offset of the entry (the file_offset column). */
  offset: number;
  kind: PglogEvent['kind'];
}

/** A query template seen in a batch, for pglog.query_templates. */
export interface TemplateSighting {
  fingerprint: string;
  normalized: string;
  /** Microseconds since 1970. */
  at: bigint;
}

export interface RowMapping {
  row: MappedRow;
  template: TemplateSighting | null;
  /** The row's ts is the read time, not the logged time. */
  readTimeUsed: boolean;
}

/** The table an event kind goes to. */
export function tableOf(kind: PglogEvent['kind']): EventTable {
  switch (kind) {
    case 'statement': return 'statement_events';
    case 'error': return 'error_events';
    case 'lock_wait': return 'lock_wait_events';
    case 'plan': case 'deadlock': case 'checkpoint': case 'autovacuum': case 'autoanalyze':
    case 'temp_file': case 'connection': case 'disconnection': case 'other':
      return 'other_events';
  }
}

/** Fields of an event that are columns of other_events (or the row's ts): left out of the payload. */
const OTHER_COLUMN_FIELDS: ReadonlySet<string> = new Set(['kind', 'severity', 'database', 'message', 'offset', 'ts']);

/** Fixed per-field overhead of the binary format (length word) plus a number's bytes. */
const FIELD_OVERHEAD = 8;

export function mapEvent(source: SourceRef, event: PglogEvent, readAt: number, maxTextBytes: number, repairs: TextRepairs): RowMapping {
  let size = 0;
  const text = (s: string | null): string | null => {
    if (s === null) return null;
    const out = cleanText(s, maxTextBytes, repairs);
    size += out.length + FIELD_OVERHEAD;
    return out;
  };
  const parsed = event.ts === null ? null : isoToMicros(event.ts);
  const ts = parsed ?? msToMicros(readAt);
  const tsLogged = parsed !== null ? null : text(event.ts ?? '');
  const target = text(source.target);
  const instance = text(source.instance);
  const file = text(source.file);
  const database = text(event.database);
  const base = { source, offset: event.offset, kind: event.kind };
  const fixed = FIELD_OVERHEAD * 6;

  switch (event.kind) {
    case 'statement': {
      const values = [
        ts, target, instance, database, text(event.user), text(event.application), event.pid,
        event.duration_ms, text(event.fingerprint), text(event.query), event.protocol, text(event.parameters),
        file, event.offset, tsLogged,
      ];
      return {
        row: { table: 'statement_events', values, size: size + fixed, ...base },
        template: sighting(event.fingerprint, event.normalized, ts, maxTextBytes, repairs),
        readTimeUsed: parsed === null,
      };
    }
    case 'error': {
      const values = [
        ts, target, instance, database, text(event.user), text(event.severity), text(event.sqlstate),
        text(event.message), text(event.detail), text(event.hint), text(event.context), text(event.statement),
        text(event.fingerprint), file, event.offset, tsLogged,
      ];
      return { row: { table: 'error_events', values, size: size + fixed, ...base }, template: null, readTimeUsed: parsed === null };
    }
    case 'lock_wait': {
      const values = [
        ts, target, instance, database, event.waiting_pid, event.state, text(event.lock_type),
        text(event.lock_mode), text(event.lock_object), event.wait_ms, file, event.offset, tsLogged,
      ];
      return { row: { table: 'lock_wait_events', values, size: size + fixed, ...base }, template: null, readTimeUsed: parsed === null };
    }
    case 'plan': case 'deadlock': case 'checkpoint': case 'autovacuum': case 'autoanalyze':
    case 'temp_file': case 'connection': case 'disconnection': case 'other': {
      const message = event.kind === 'other' || event.kind === 'deadlock' ? text(event.message) : null;
      const payload = JSON.stringify(payloadOf(event, maxTextBytes, repairs));
      size += payload.length + FIELD_OVERHEAD;
      const values = [
        ts, target, instance, event.kind, text(event.severity), database, message, payload,
        file, event.offset, tsLogged,
      ];
      const template = event.kind === 'plan' ? sighting(event.fingerprint, event.normalized, ts, maxTextBytes, repairs) : null;
      return { row: { table: 'other_events', values, size: size + fixed, ...base }, template, readTimeUsed: parsed === null };
    }
  }
}

function sighting(fingerprint: string, normalized: string, at: bigint, maxTextBytes: number, repairs: TextRepairs): TemplateSighting | null {
  if (fingerprint === '') return null;
  return { fingerprint: cleanText(fingerprint, maxTextBytes, repairs), normalized: cleanText(normalized, maxTextBytes, repairs), at };
}

/** The event without the fields that are other_events columns, every string cleaned. */
function payloadOf(event: PglogEvent, maxTextBytes: number, repairs: TextRepairs): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(event)) {
    if (!OTHER_COLUMN_FIELDS.has(k)) out[k] = cleanJson(v, maxTextBytes, repairs);
  }
  return out;
}

/** A JSON value with every string cleaned (so the jsonb text holds no NUL and no lone surrogate). */
export function cleanJson(v: unknown, maxTextBytes: number, repairs: TextRepairs): unknown {
  if (typeof v === 'string') return cleanText(v, maxTextBytes, repairs);
  if (Array.isArray(v)) return v.map((x) => cleanJson(x, maxTextBytes, repairs));
  if (v !== null && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[cleanText(k, maxTextBytes, repairs)] = cleanJson(x, maxTextBytes, repairs);
    return out;
  }
  if (typeof v === 'bigint') return v.toString();
  return v;
}

/** Sightings of one batch merged per fingerprint (first and last time seen), sorted by fingerprint. */
export function mergeTemplates(sightings: Iterable<TemplateSighting>): Array<{ fingerprint: string; normalized: string; first: bigint; last: bigint }> {
  const by = new Map<string, { fingerprint: string; normalized: string; first: bigint; last: bigint }>();
  for (const s of sightings) {
    const t = by.get(s.fingerprint);
    if (t === undefined) by.set(s.fingerprint, { fingerprint: s.fingerprint, normalized: s.normalized, first: s.at, last: s.at });
    else {
      if (s.at < t.first) t.first = s.at;
      if (s.at > t.last) t.last = s.at;
    }
  }
  // Sorted so that concurrent collectors upsert shared templates in the same order (no deadlock).
  return [...by.values()].sort((a, b) => (a.fingerprint < b.fingerprint ? -1 : a.fingerprint > b.fingerprint ? 1 : 0));
}
