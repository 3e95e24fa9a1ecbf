/**
 * LogRecord → typed event. A pure function of one record: nothing is carried from one record
 * to the next, so the collector can resume at any entry boundary and get the same events.
 *
 * Cheap by construction: the message's first bytes are checked on the Buffer to pick the one
 * parser that can apply; each text field is decoded once, with the encoding of the record's
 * database. Numbers are parsed defensively: a malformed message becomes an `other` event
 * (never NaN, never a throw).
 *
 * Decisions:
 * - only executions are `statement` events (simple `statement:`, extended `execute`), so the
 *   statement count is the number of executed statements; `parse`/`bind` steps and a bare
 *   `duration:` are `other` events with a subtype and the duration;
 * - ERROR, FATAL, PANIC and WARNING are `error` events, except `deadlock detected` (SQLSTATE
 *   40P01 or that message), which is a `deadlock` event with the processes of its DETAIL;
 * - the lock messages "avoided deadlock", "detected deadlock while waiting" and "failed to
 *   acquire" are `lock_wait` events with their own states (see LockWaitState in events.ts).
 */
import { type Decoder, plainAsciiSpan } from './decode.ts';
import type { EventCommon, EventKind, OtherEvent, PglogEvent, StatementEvent, SummaryItem } from './events.ts';
import { classify, isErrorSeverity, maintenanceDatabase, MAX_STRUCTURED_MESSAGE_BYTES } from './message-kind.ts';
import { parseCheckpoint } from './messages/checkpoint.ts';
import { parseConnection, parseDisconnection } from './messages/connection.ts';
import { parseDeadlockDetail, parseLockQueue, parseLockWait } from './messages/locks.ts';
import { parseAutoanalyze, parseAutovacuum } from './messages/maintenance.ts';
import { parsePlan } from './messages/plan.ts';
import { parseStatementMessage, SCAN_BIND, SCAN_NONE, SCAN_PARSE, SCAN_STATEMENT, scanStatement, StatementSpans } from './messages/statement.ts';
import { startsWithBytes } from './messages/text.ts';
import { TemplateCache } from './normalize/normalize.ts';
import type { LogRecord } from './record.ts';
import { type ScannedStatement, scannedStatement, type StatementSink } from './statement-sink.ts';
import { toIsoTimestamp } from './timestamp.ts';

export interface EventParserOptions {
  decoder: Decoder;
  /** Shared across parsers so each template is hashed once; a private one by default. */
  templates?: TemplateCache | undefined;
}

const B_DEADLOCK = Buffer.from('deadlock detected');
const B_PARAMETERS = Buffer.from('parameters: ');
const EMPTY_SQL = Buffer.alloc(0);
const TEMP_FILE = /^temporary file: path "(.*)", size (\d+)$/;

export class EventParser {
  private readonly decoder: Decoder;
  private readonly templates: TemplateCache;
  /** The database of the record being parsed (set first thing in `parse`): its text fields decode with its encoding. */
  private database: Buffer | null = null;
  /** The decoded message of the record being parsed, once decoded (each text is decoded once: decoding counts). */
  private message: string | null = null;
  private readonly spans = new StatementSpans();
  /** Where the record being parsed goes if it is a statement (parseInto), else null. */
  private sink: StatementSink | null = null;
  /** What a statement taken from its bytes is handed to the sink in (reused). */
  private readonly scanned: ScannedStatement = scannedStatement();
  /** Messages longer than MAX_STRUCTURED_MESSAGE_BYTES for their kind, made `other` events unparsed. */
  oversized = 0;

  constructor(options: EventParserOptions) {
    this.decoder = options.decoder;
    this.templates = options.templates ?? new TemplateCache();
  }

  /** The event of one record. Never throws. */
  parse(record: LogRecord): PglogEvent {
    // Without a sink, classified() makes an event of every record.
    return this.parseWith(record, null) as PglogEvent;
  }

  /**
   * parse(), except that a statement goes to `sink` (statement-sink.ts), in log order, and
   * null is returned for it. Never throws unless the sink does.
   */
  parseInto(record: LogRecord, sink: StatementSink): PglogEvent | null {
    const event = this.parseWith(record, sink);
    if (event === null) return null;
    if (event.kind !== 'statement') return event;
    sink.event(event);
    return null;
  }

  private parseWith(record: LogRecord, sink: StatementSink | null): PglogEvent | null {
    this.database = record.database ?? maintenanceDatabase(record.message);
    this.message = null;
    this.sink = sink;
    try {
      return this.classified(record);
    } catch {
      // Not expected (every parser is defensive); an entry is never lost to a parser bug.
      return this.other(record, this.message ?? this.text(record.message) ?? '', null, null);
    } finally {
      this.sink = null;
    }
  }

  /**
   * What the summary reads of parse(record) (SummaryItem), with the same counters
   * (replacements, removed NULs, oversized) and templates, for less work: the common entries
   * (executed statements, parse/bind steps and bare durations, messages of no parsed kind) are
   * not made into events, and the text the summary does not read is only accounted for
   * (Decoder.account), not decoded. Any other entry is parse(record)'s event, cut down to the
   * same shape: every item has one hidden class, which keeps the summary's reads of them
   * monomorphic (events of a dozen shapes made them megamorphic).
   */
  summarize(record: LogRecord): SummaryItem {
    this.database = record.database ?? maintenanceDatabase(record.message);
    this.message = null;
    try {
      // No sink here (parseWith sets one only while it runs): classified() makes an event.
      return this.summarized(record) ?? itemOf(this.classified(record) as PglogEvent);
    } catch {
      return itemOf(this.other(record, this.message ?? this.text(record.message) ?? '', null, null));
    }
  }

  /**
   * summarize() for the entries classified() makes a statement from scannedStatement() or an
   * `other` event of; null, having counted nothing, for the rest.
   */
  private summarized(r: LogRecord): SummaryItem | null {
    if (isErrorSeverity(r.severity)) return null;
    const m = r.message;
    const kind = classify(m);
    const d = this.decoder;
    const db = this.database;
    if (kind === 'statement') {
      const sp = this.spans;
      const scan = scanStatement(m, sp);
      if (scan === SCAN_STATEMENT) {
        // What scanStatement read besides the name and the SQL is ASCII: when they are too
        // (without NUL), they decode to themselves, and the SQL's template needs no string.
        let t = sp.nameStart < 0 || plainAsciiSpan(m, sp.nameStart, sp.nameEnd) ? this.templates.templateOfPlain(m, sp.queryStart, sp.queryEnd) : null;
        if (t === null) {
          // scannedStatement() goes on only when the name and the SQL decode cleanly.
          if (sp.nameStart >= 0 && d.decodeClean(m, sp.nameStart, sp.nameEnd, db) === null) return null;
          const query = d.decodeClean(m, sp.queryStart, sp.queryEnd, db);
          if (query === null) return null;
          t = this.templates.templateOfUtf8(query, m, sp.queryStart, sp.queryEnd);
        }
        // The `parameters` of an extended-protocol execution are its DETAIL, decoded.
        if (sp.nameStart >= 0) d.account(r.detail, db);
        const database = this.names(r);
        return item('statement', r.severity, database, sp.duration, t.normalized, t.fingerprint);
      }
      // A step or a bare duration is an `other` event when its message decodes with nothing counted.
      if (scan === SCAN_NONE || !d.isPlain(m)) return null;
    } else if (kind === 'none') {
      d.account(m, db);
    } else {
      return null;
    }
    // What other() decodes besides the message.
    const database = this.names(r);
    d.account(r.detail, db);
    d.account(r.hint, db);
    d.account(r.context, db);
    d.account(r.statement, db);
    return item('other', r.severity, database, null, '', '');
  }

  /** Decodes the names an event carries, as base() does (they count what they replace); returns the database's. */
  private names(r: LogRecord): string | null {
    return this.decoder.decodeNames(this.database, r.user, r.application);
  }

  private text(bytes: Buffer | null): string | null {
    return this.decoder.decode(bytes, this.database);
  }

  /**
   * The fields every event carries, with its kind first. Rare events are built as
   * `{ ...this.base(r, kind), ...fields }` (a spread in first position is V8's fast object
   * clone); the frequent ones (statement, other) spell out every field in one literal, which
   * allocates once and is twice as fast again. Both give the same property order.
   */
  private base<K extends EventKind>(r: LogRecord, kind: K): EventCommon & { kind: K } {
    const d = this.decoder;
    return {
      kind,
      offset: r.start,
      end: r.end,
      ts: r.time === null ? null : toIsoTimestamp(r.time),
      pid: r.pid,
      database: d.decodeName(this.database, this.database),
      user: d.decodeName(r.user, this.database),
      application: d.decodeName(r.application, this.database),
      remote_host: r.remoteHost,
      session_id: r.sessionId,
      session_line: r.sessionLine,
      backend_type: r.backendType,
      query_id: r.queryId,
      severity: r.severity,
      sqlstate: r.sqlstate,
      truncated: r.truncated,
    };
  }

  private fingerprintOf(sql: string | null): string | null {
    return sql === null ? null : this.templates.template(sql).fingerprint;
  }

  private other(r: LogRecord, message: string, subtype: string | null, duration: number | null): OtherEvent {
    const d = this.decoder;
    const db = this.database;
    return {
      kind: 'other',
      offset: r.start,
      end: r.end,
      ts: r.time === null ? null : toIsoTimestamp(r.time),
      pid: r.pid,
      database: d.decodeName(db, db),
      user: d.decodeName(r.user, db),
      application: d.decodeName(r.application, db),
      remote_host: r.remoteHost,
      session_id: r.sessionId,
      session_line: r.sessionLine,
      backend_type: r.backendType,
      query_id: r.queryId,
      severity: r.severity,
      sqlstate: r.sqlstate,
      truncated: r.truncated,
      message,
      detail: this.text(r.detail),
      hint: this.text(r.hint),
      context: this.text(r.context),
      statement: this.text(r.statement),
      subtype,
      duration_ms: duration,
    };
  }

  /** The event of a record; null when the sink took it (only with one). */
  private classified(r: LogRecord): PglogEvent | null {
    let kind = isErrorSeverity(r.severity) ? 'error' : classify(r.message);
    if (kind !== 'error' && kind !== 'none' && kind !== 'statement' && r.message.length > MAX_STRUCTURED_MESSAGE_BYTES[kind]) {
      this.oversized++;
      kind = 'none';
    }
    const scan = kind === 'statement' ? scanStatement(r.message, this.spans) : SCAN_NONE;
    if (scan === SCAN_STATEMENT) {
      if (this.sink !== null && this.sunk(r, this.spans, this.sink)) return null;
      const event = this.scannedStatement(r, this.spans);
      if (event !== null) return event;
    }
    const d = this.decoder;
    const lost = d.nulRemoved + d.replacements;
    const message = this.text(r.message) ?? '';
    this.message = message;
    if (scan > SCAN_STATEMENT && d.nulRemoved + d.replacements === lost) {
      // A step or a bare duration: an `other` event with the full message. Decoded exactly (no
      // byte removed or replaced), its text has the structure scanStatement read on the bytes.
      return this.other(r, message, scan === SCAN_PARSE ? 'parse' : scan === SCAN_BIND ? 'bind' : 'duration', this.spans.duration);
    }
    switch (kind) {
      case 'error':
        return this.error(r, message);
      case 'none':
        return this.other(r, message, null, null);
      case 'statement':
        return this.statement(r, message);
      case 'lock':
        return this.lockWait(r, message);
      case 'checkpoint': {
        const k = parseCheckpoint(message);
        if (k === null) return this.other(r, message, null, null);
        const { kind, ...fields } = k;
        return { ...this.base(r, 'checkpoint'), checkpoint_kind: kind, ...fields };
      }
      case 'connection': {
        const k = parseConnection(message);
        if (k === null) return this.other(r, message, null, null);
        return {
          ...this.base(r, 'connection'),
          phase: k.phase,
          host: k.host ?? r.remoteHost,
          port: k.port ?? r.remotePort,
          identity: k.identity,
          method: k.method,
          details: k.details,
        };
      }
      case 'disconnection': {
        const k = parseDisconnection(message);
        if (k === null) return this.other(r, message, null, null);
        return { ...this.base(r, 'disconnection'), session_ms: k.sessionMs, host: k.host ?? r.remoteHost, port: k.port ?? r.remotePort };
      }
      case 'maintenance': {
        const v = parseAutovacuum(message);
        if (v !== null) return { ...this.base(r, 'autovacuum'), ...v };
        const a = parseAutoanalyze(message);
        if (a !== null) return { ...this.base(r, 'autoanalyze'), ...a };
        return this.other(r, message, null, null);
      }
      case 'temp_file': {
        const t = TEMP_FILE.exec(message);
        const size = t === null ? NaN : Number(t[2]);
        if (t === null || !Number.isSafeInteger(size)) return this.other(r, message, null, null);
        const statement = this.text(r.statement);
        return { ...this.base(r, 'temp_file'), path: t[1] ?? '', size_bytes: size, statement, fingerprint: this.fingerprintOf(statement) };
      }
    }
  }

  /** A lock wait with its queue (the DETAIL line), or an `other` event when the message is not one. */
  private lockWait(r: LogRecord, message: string): PglogEvent {
    const w = parseLockWait(message);
    if (w === null) return this.other(r, message, null, null);
    const queue = parseLockQueue(this.text(r.detail));
    return {
      ...this.base(r, 'lock_wait'),
      state: w.state,
      waiting_pid: w.pid,
      lock_mode: w.mode,
      lock_type: w.type,
      lock_object: w.object,
      wait_ms: w.waitMs,
      holder_pids: queue.holders,
      waiter_pids: queue.waiters,
      statement: this.text(r.statement),
    };
  }

  /**
   * A statement execution from the spans of scanStatement: only the name and the SQL are
   * decoded. Null (nothing decoded, nothing counted) when they do not decode cleanly; the
   * caller then decodes the whole message and parses that, which gives the same event.
   */
  private scannedStatement(r: LogRecord, sp: StatementSpans): StatementEvent | null {
    const m = r.message;
    const d = this.decoder;
    const query = d.decodeClean(m, sp.queryStart, sp.queryEnd, this.database);
    if (query === null) return null;
    let name: string | null = null;
    let parameters: string | null = null;
    if (sp.nameStart >= 0) {
      name = d.decodeClean(m, sp.nameStart, sp.nameEnd, this.database);
      if (name === null) return null;
      parameters = this.parametersOf(r.detail);
    }
    // The SQL's bytes are its UTF-8 (it decoded cleanly): the normalizer copies them.
    const t = this.templates.templateOfUtf8(query, m, sp.queryStart, sp.queryEnd);
    const db = this.database;
    return {
      kind: 'statement',
      offset: r.start,
      end: r.end,
      ts: r.time === null ? null : toIsoTimestamp(r.time),
      pid: r.pid,
      database: d.decodeName(db, db),
      user: d.decodeName(r.user, db),
      application: d.decodeName(r.application, db),
      remote_host: r.remoteHost,
      session_id: r.sessionId,
      session_line: r.sessionLine,
      backend_type: r.backendType,
      query_id: r.queryId,
      severity: r.severity,
      sqlstate: r.sqlstate,
      truncated: r.truncated,
      duration_ms: sp.duration,
      protocol: name === null ? 'simple' : 'extended',
      statement_name: name,
      query,
      parameters,
      normalized: t.normalized,
      fingerprint: t.fingerprint,
    };
  }

  /** The extended protocol's parameters, from the entry's DETAIL (`parameters: ...`), or null. */
  private parametersOf(detail: Buffer | null): string | null {
    if (detail === null) return null;
    let parameters: string | null = null;
    if (startsWithBytes(detail, B_PARAMETERS)) parameters = this.decoder.decodeClean(detail, B_PARAMETERS.length, detail.length, this.database);
    if (parameters === null) {
      const text = this.text(detail) ?? '';
      parameters = text.startsWith('parameters: ') ? text.slice(12) : null;
    }
    return parameters;
  }

  /**
   * Hands the statement of scanStatement's spans to the sink without making its event, when
   * its SQL (and its name) are ASCII without NUL and the sink accepts it: true when it took
   * it. When false, nothing was decoded or counted, and scannedStatement() goes on as without
   * a sink. Decodes and counts what scannedStatement() would (the names, the parameters),
   * so the counters are the same either way.
   */
  private sunk(r: LogRecord, sp: StatementSpans, sink: StatementSink): boolean {
    const m = r.message;
    if (sp.nameStart >= 0 && !plainAsciiSpan(m, sp.nameStart, sp.nameEnd)) return false;
    if (!sink.accepts(r.time, sp.queryEnd - sp.queryStart)) return false;
    // Null, with nothing done, when the SQL is not ASCII without NUL (checked as it is copied):
    // then the statement is an event, which the sink's yes above does not concern.
    const t = this.templates.templateOfPlain(m, sp.queryStart, sp.queryEnd);
    if (t === null) return false;
    const s = this.scanned;
    s.parameters = sp.nameStart >= 0 ? this.parametersOf(r.detail) : null;
    const d = this.decoder;
    const db = this.database;
    s.offset = r.start;
    s.end = r.end;
    s.pid = r.pid;
    s.database = d.decodeName(db, db);
    s.user = d.decodeName(r.user, db);
    s.application = d.decodeName(r.application, db);
    s.duration_ms = sp.duration;
    s.protocol = sp.nameStart >= 0 ? 'extended' : 'simple';
    s.normalized = t.normalized;
    s.fingerprint = t.fingerprint;
    s.sql = m;
    s.sqlStart = sp.queryStart;
    s.sqlEnd = sp.queryEnd;
    try {
      sink.scanned(s);
    } finally {
      // Reused: holds no text or chunk of this entry once the sink has it.
      s.sql = EMPTY_SQL;
      s.parameters = null;
    }
    return true;
  }

  private statement(r: LogRecord, message: string): PglogEvent {
    const s = parseStatementMessage(message);
    if (s === null) return this.other(r, message, null, null);
    switch (s.type) {
      case 'statement': {
        const t = this.templates.template(s.query);
        const detail = s.protocol === 'extended' ? this.text(r.detail) : null;
        const parameters = detail !== null && detail.startsWith('parameters: ') ? detail.slice(12) : null;
        return {
          ...this.base(r, 'statement'),
          duration_ms: s.duration,
          protocol: s.protocol,
          statement_name: s.name,
          query: s.query,
          parameters,
          normalized: t.normalized,
          fingerprint: t.fingerprint,
        };
      }
      case 'step':
        return this.other(r, message, s.step, s.duration);
      case 'duration':
        return this.other(r, message, 'duration', s.duration);
      case 'plan': {
        const p = parsePlan(s.body);
        const query = p.query ?? this.text(r.statement) ?? '';
        const t = this.templates.template(query);
        return {
          ...this.base(r, 'plan'),
          duration_ms: s.duration,
          format: p.format,
          query,
          normalized: t.normalized,
          fingerprint: t.fingerprint,
          plan: s.body,
        };
      }
    }
  }

  private error(r: LogRecord, message: string): PglogEvent {
    const statement = this.text(r.statement);
    if (r.sqlstate === '40P01' || startsWithBytes(r.message, B_DEADLOCK)) {
      return { ...this.base(r, 'deadlock'), message, processes: parseDeadlockDetail(this.text(r.detail)), statement };
    }
    return {
      ...this.base(r, 'error'),
      message,
      detail: this.text(r.detail),
      hint: this.text(r.hint),
      context: this.text(r.context),
      statement,
      internal_query: this.text(r.internalQuery),
      cursor_position: r.cursorPosition,
      internal_position: r.internalPosition,
      fingerprint: this.fingerprintOf(statement),
    };
  }
}

/** A SummaryItem, always of this one shape (see summarize); `normalized` and `fingerprint` only mean something for a statement. */
function item(kind: EventKind, severity: string, database: string | null, duration: number | null, normalized: string, fingerprint: string): SummaryItem {
  return { kind, severity, database, duration_ms: duration, normalized, fingerprint };
}

function itemOf(e: PglogEvent): SummaryItem {
  return e.kind === 'statement'
    ? item(e.kind, e.severity, e.database, e.duration_ms, e.normalized, e.fingerprint)
    : item(e.kind, e.severity, e.database, null, '', '');
}
