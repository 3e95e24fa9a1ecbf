/**
 * Events → rows of the event tables (pure). Each value array follows its table's column
 * order in event-tables.ts. Text is cleaned on the way (text-clean.ts): no NULs, valid UTF-16,
 * at most `maxTextBytes` of UTF-8 per value. The row's ts is the event's logged instant, to the
 * microsecond; when the event has none (no timestamp, or one whose zone could not be
 * converted), ts is the time the collector read the entry and `ts_logged` keeps the text.
 */
import type { ErrorEvent, LockWaitEvent, PglogEvent, StatementEvent } from '../logformat/events.ts';
import type { ScannedStatement } from '../logformat/statement-sink.ts';
import { type EventTable, STATEMENT_TABLE } from './event-tables.ts';
import { isoToMicros, type Micros, msToMicros } from './iso-time.ts';
import type { StatementKey, StatementKeyLog, StatementKeyRecorder, StatementKeys } from './statement-keys.ts';
import type { SourceRef } from './store-types.ts';
import type { TextRepairs } from './text-clean.ts';
import { cleanText, noRepairs } from './text-clean.ts';

export interface MappedRow {
  table: EventTable;
  /** Column values in the table's order (event-tables.ts). */
  values: unknown[];
  source: SourceRef;
  /** Stream offset of the entry (the file_offset column). */
  offset: number;
  kind: PglogEvent['kind'];
}

/** A query template with the first and last time its statements were logged (µs since 1970). */
interface Template {
  fingerprint: string;
  normalized: string;
  first: Micros;
  last: Micros;
}

/**
 * The query templates seen in a batch, merged per fingerprint (first and last time seen), for
 * pglog.query_templates. A template's text is cleaned once, when first seen.
 */
export class TemplateSet {
  /** Made with the first template: a handover's set is mostly empty (statements' templates are in its StatementKeyLog). */
  private byFingerprint: Map<string, Template> | null = null;

  see(fingerprint: string, normalized: string, at: Micros, maxTextBytes: number, repairs: TextRepairs): void {
    if (fingerprint === '') return;
    const t = this.byFingerprint?.get(fingerprint);
    if (t === undefined) {
      this.add(cleanText(fingerprint, maxTextBytes, repairs), cleanText(normalized, maxTextBytes, repairs), at, at, fingerprint);
    } else if (at < t.first) t.first = at;
    else if (at > t.last) t.last = at;
  }

  /** Adds templates another set holds (already cleaned), keeping the earliest and latest times. */
  merge(other: TemplateSet): void {
    if (other.byFingerprint === null) return;
    for (const [fingerprint, o] of other.byFingerprint) this.add(o.fingerprint, o.normalized, o.first, o.last, fingerprint);
  }

  /** Adds the templates of a handover's statement rows (statement-keys.ts: already cleaned). */
  addKeys(log: StatementKeyLog | null | undefined): void {
    if (log === null || log === undefined) return;
    for (let slot = 0; slot < log.keys.length; slot++) {
      const key = log.keys[slot] as StatementKey;
      if (key.templateFingerprint === null) continue;
      this.add(key.templateFingerprint, key.templateNormalized, log.times[2 * slot] as number, log.times[2 * slot + 1] as number, key.templateFingerprint);
    }
  }

  /** A template already cleaned, seen from `first` to `last`, under `fingerprint` as see() was given it. */
  private add(cleanFingerprint: string, normalized: string, first: Micros, last: Micros, fingerprint: string): void {
    const map = (this.byFingerprint ??= new Map<string, Template>());
    const t = map.get(fingerprint);
    if (t === undefined) map.set(fingerprint, { fingerprint: cleanFingerprint, normalized, first, last });
    else {
      if (first < t.first) t.first = first;
      if (last > t.last) t.last = last;
    }
  }

  get size(): number {
    return this.byFingerprint?.size ?? 0;
  }

  /** Sorted by fingerprint, so concurrent collectors upsert shared templates in the same order (no deadlock). */
  sorted(): Template[] {
    if (this.byFingerprint === null) return [];
    return [...this.byFingerprint.values()].sort((a, b) => (a.fingerprint < b.fingerprint ? -1 : a.fingerprint > b.fingerprint ? 1 : 0));
  }
}

/** What mapping needs besides the event, and what it tells back. */
export interface RowContext {
  maxTextBytes: number;
  repairs: TextRepairs;
  templates: TemplateSet;
  /** Rows whose ts is the read time, not the logged time (counted up). */
  readTimeUsed: number;
  /**
   * With both, a statement's key and template go to the recorder (statement-keys.ts), which
   * the caller tells of each statement row it encodes; without, templates go to `templates`.
   */
  keys: StatementKeys | null;
  keyRecorder: StatementKeyRecorder | null;
}

export function rowContext(maxTextBytes: number, keys: StatementKeys | null = null, keyRecorder: StatementKeyRecorder | null = null): RowContext {
  return { maxTextBytes, repairs: noRepairs(), templates: new TemplateSet(), readTimeUsed: 0, keys, keyRecorder };
}

/** The table an event kind goes to. */
export function tableOf(kind: PglogEvent['kind']): EventTable {
  switch (kind) {
    case 'statement':
      return 'statement_events';
    case 'error':
      return 'error_events';
    case 'lock_wait':
      return 'lock_wait_events';
    case 'plan':
    case 'deadlock':
    case 'checkpoint':
    case 'autovacuum':
    case 'autoanalyze':
    case 'temp_file':
    case 'connection':
    case 'disconnection':
    case 'other':
      return 'other_events';
  }
}

/** Fields of an event that are columns of other_events (or the row's ts): left out of the payload. */
const OTHER_COLUMN_FIELDS: ReadonlySet<string> = new Set(['kind', 'severity', 'database', 'message', 'offset', 'ts']);

// The source's three texts are the same for every event of a stream: cleaned once per source.
let lastSource: SourceRef | null = null;
let lastSourceMax = 0;
let lastSourceText: [string, string, string] = ['', '', ''];

function sourceText(source: SourceRef, ctx: RowContext): [string, string, string] {
  if (source !== lastSource || ctx.maxTextBytes !== lastSourceMax) {
    lastSourceText = [
      cleanText(source.target, ctx.maxTextBytes, ctx.repairs),
      cleanText(source.instance, ctx.maxTextBytes, ctx.repairs),
      cleanText(source.file, ctx.maxTextBytes, ctx.repairs),
    ];
    lastSource = source;
    lastSourceMax = ctx.maxTextBytes;
  }
  return lastSourceText;
}

function orNull(s: string | null, ctx: RowContext): string | null {
  return s === null ? null : cleanText(s, ctx.maxTextBytes, ctx.repairs);
}

/**
 * Short texts of one field found clean lately (names, severities, fingerprints: the parser
 * hands out the same few strings again and again), compared by identity first: a hit skips
 * cleanText's scans. One per field, the slot of the last hit looked at first, so a stream's
 * database is one comparison, and many fingerprints do not push its names out. Only texts
 * cleanText returned unchanged are kept, so a hit counts no repair, as cleanText would not have
 * either.
 */
class CleanNames {
  private readonly seen: string[];
  private last = 0;
  private next = 0;
  private maxTextBytes = -1;

  constructor(slots: number) {
    this.seen = Array.from({ length: slots }, () => '');
  }

  clean(s: string | null, ctx: RowContext): string | null {
    if (s === null) return null;
    const seen = this.seen;
    if (ctx.maxTextBytes !== this.maxTextBytes) {
      seen.fill('');
      this.maxTextBytes = ctx.maxTextBytes;
    }
    if (seen[this.last] === s) return s;
    for (let k = 0; k < seen.length; k++) {
      if (seen[k] === s) {
        this.last = k;
        return s;
      }
    }
    const out = cleanText(s, ctx.maxTextBytes, ctx.repairs);
    if (out === s && s.length <= CLEAN_MAX_CHARS && s !== '') {
      seen[this.next] = s;
      this.last = this.next;
      this.next = this.next + 1 === seen.length ? 0 : this.next + 1;
    }
    return out;
  }
}
const CLEAN_MAX_CHARS = 64;
const DATABASES = new CleanNames(8);
const USERS = new CleanNames(8);
const APPLICATIONS = new CleanNames(8);
const FINGERPRINTS = new CleanNames(16);
/** Severities, SQLSTATEs and event kinds' other names. */
const OTHER_NAMES = new CleanNames(8);

/**
 * A statement row that mapEvent fills in place of making one, for a caller that is done with
 * each row before it maps the next (RowEncoder: the encoder copies the values into the COPY
 * data at once). Statements are most rows, and their value arrays were a fifth of what the
 * collector allocated (issue 15, docs/benchmarks.md).
 */
export interface RowScratch {
  readonly statement: MappedRow;
}

/** Columns of statement_events (event-tables.ts), in the order mapEvent fills them. */
const STATEMENT_VALUES = STATEMENT_TABLE.columns.length;

export function rowScratch(): RowScratch {
  return { statement: { table: 'statement_events', values: new Array<unknown>(STATEMENT_VALUES).fill(null), source: NO_SOURCE, offset: 0, kind: 'statement' } };
}
const NO_SOURCE: SourceRef = { target: '', instance: '', file: '' };

/**
 * Lets the scratch row's values go once its caller is done with a batch of events: it is
 * long-lived, so it would otherwise keep the last statement's texts (a query of up to
 * maxTextBytes) alive until the next batch, through every scavenge.
 */
export function clearRowScratch(scratch: RowScratch): void {
  scratch.statement.values.fill(null);
  scratch.statement.source = NO_SOURCE;
}

/**
 * The row of one event. Templates of statements and plans are added to `ctx.templates`;
 * text repairs and rows stamped with the read time are counted in `ctx`. With `scratch`, a
 * statement's row is the scratch row, valid until the next call with it.
 */
export function mapEvent(source: SourceRef, event: PglogEvent, readAt: number, ctx: RowContext, scratch?: RowScratch): MappedRow {
  const parsed = event.ts === null ? null : isoToMicros(event.ts);
  let ts: Micros;
  let tsLogged: string | null = null;
  if (parsed !== null) ts = parsed;
  else {
    ts = msToMicros(readAt);
    tsLogged = cleanText(event.ts ?? '', ctx.maxTextBytes, ctx.repairs);
    ctx.readTimeUsed++;
  }
  if (event.kind === 'statement') {
    const row: MappedRow = scratch?.statement ?? {
      table: 'statement_events',
      values: new Array<unknown>(STATEMENT_VALUES),
      source,
      offset: 0,
      kind: 'statement',
    };
    return fillStatementRow(row, source, event, ts, cleanText(event.query, ctx.maxTextBytes, ctx.repairs), tsLogged, ctx);
  }
  const [target, instance, file] = sourceText(source, ctx);
  const database = DATABASES.clean(event.database, ctx);
  const max = ctx.maxTextBytes;

  switch (event.kind) {
    case 'error':
      return errorRow(event, [ts, target, instance, database], file, tsLogged, source, ctx);
    case 'lock_wait':
      return lockWaitRow(event, [ts, target, instance, database], file, tsLogged, source, ctx);
    case 'plan':
    case 'deadlock':
    case 'checkpoint':
    case 'autovacuum':
    case 'autoanalyze':
    case 'temp_file':
    case 'connection':
    case 'disconnection':
    case 'other': {
      const message = event.kind === 'other' || event.kind === 'deadlock' ? cleanText(event.message, max, ctx.repairs) : null;
      const payload = JSON.stringify(payloadOf(event, max, ctx.repairs));
      const values = [ts, target, instance, event.kind, OTHER_NAMES.clean(event.severity, ctx), database, message, payload, file, event.offset, tsLogged];
      if (event.kind === 'plan') ctx.templates.see(event.fingerprint, event.normalized, ts, max, ctx.repairs);
      return { table: 'other_events', values, source, offset: event.offset, kind: event.kind };
    }
  }
}

/** The column of statement_events that holds the query (STATEMENT_TABLE order). */
export const STATEMENT_QUERY_COLUMN = 9;

/**
 * What a statement row is made of besides its time, source and query: fields a StatementEvent
 * and the parser's ScannedStatement both have, under the same names.
 */
type StatementPieces = Pick<
  StatementEvent,
  'database' | 'user' | 'application' | 'pid' | 'duration_ms' | 'protocol' | 'parameters' | 'normalized' | 'fingerprint' | 'offset'
>;

/**
 * The row mapEvent makes of the statement event `s` stands for, logged at `ts` (the value
 * mapEvent reads from the event's timestamp), except the query: its column is null here, and
 * the encoder takes it from the entry's bytes (CopyBinaryEncoder.stageUtf8), which are ASCII
 * without NUL and no longer than ctx.maxTextBytes (so cleanText would return it as it is).
 * Fills and returns scratch's statement row.
 */
export function mapScannedStatement(source: SourceRef, s: ScannedStatement, ts: Micros, ctx: RowContext, scratch: RowScratch): MappedRow {
  return fillStatementRow(scratch.statement, source, s, ts, null, null, ctx);
}

/** Fills a statement_events row (STATEMENT_TABLE order) and sees its template; `query` already cleaned. */
function fillStatementRow(
  row: MappedRow,
  source: SourceRef,
  p: StatementPieces,
  ts: Micros,
  query: string | null,
  tsLogged: string | null,
  ctx: RowContext,
): MappedRow {
  const [target, instance, file] = sourceText(source, ctx);
  const values = row.values;
  values[0] = ts;
  values[1] = target;
  values[2] = instance;
  values[3] = DATABASES.clean(p.database, ctx);
  values[4] = USERS.clean(p.user, ctx);
  values[5] = APPLICATIONS.clean(p.application, ctx);
  values[6] = p.pid;
  values[7] = p.duration_ms;
  values[8] = FINGERPRINTS.clean(p.fingerprint, ctx);
  values[STATEMENT_QUERY_COLUMN] = query;
  values[10] = p.protocol;
  values[11] = orNull(p.parameters, ctx);
  values[12] = file;
  values[13] = p.offset;
  values[14] = tsLogged;
  row.source = source;
  row.offset = p.offset;
  const recorder = ctx.keyRecorder;
  const key =
    ctx.keys === null
      ? null
      : ctx.keys.key(target, instance, values[3] as string | null, values[8] as string | null, p.fingerprint, p.normalized, ctx.maxTextBytes);
  if (recorder === null || !recorder.see(key, ts, p.duration_ms)) ctx.templates.see(p.fingerprint, p.normalized, ts, ctx.maxTextBytes, ctx.repairs);
  return row;
}

/** The columns every row of an event starts with: time, target, instance, database. */
type Leading = [Micros, string, string, string | null];

function errorRow(event: ErrorEvent, leading: Leading, file: string, tsLogged: string | null, source: SourceRef, ctx: RowContext): MappedRow {
  const values = [
    ...leading,
    USERS.clean(event.user, ctx),
    OTHER_NAMES.clean(event.severity, ctx),
    OTHER_NAMES.clean(event.sqlstate, ctx),
    orNull(event.message, ctx),
    orNull(event.detail, ctx),
    orNull(event.hint, ctx),
    orNull(event.context, ctx),
    orNull(event.statement, ctx),
    orNull(event.fingerprint, ctx),
    file,
    event.offset,
    tsLogged,
  ];
  return { table: 'error_events', values, source, offset: event.offset, kind: event.kind };
}

function lockWaitRow(event: LockWaitEvent, leading: Leading, file: string, tsLogged: string | null, source: SourceRef, ctx: RowContext): MappedRow {
  const values = [
    ...leading,
    event.waiting_pid,
    event.state,
    orNull(event.lock_type, ctx),
    orNull(event.lock_mode, ctx),
    orNull(event.lock_object, ctx),
    event.wait_ms,
    file,
    event.offset,
    tsLogged,
  ];
  return { table: 'lock_wait_events', values, source, offset: event.offset, kind: event.kind };
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
