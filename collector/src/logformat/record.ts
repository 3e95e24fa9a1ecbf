/**
 * One assembled log entry: one `ereport()` of the server, in any log format.
 *
 * Text fields stay undecoded Buffers here: one server's log interleaves databases in
 * different encodings, and only the event stage knows which database (and so which
 * encoding) an entry belongs to. Fields a format or prefix does not carry are `null`.
 *
 * For `stderr` and `syslog`, the DETAIL/HINT/CONTEXT/STATEMENT/QUERY/LOCATION lines that the
 * server writes with their own prefix belong to the same entry and land in the fields below,
 * so that one entry means the same thing in every format.
 */
export interface LogRecord {
  /** Stream offset of the entry's first byte. */
  start: number;
  /** Stream offset just past the entry's last line terminator: where to resume after it. */
  end: number;
  /** The timestamp as logged (%m, %t, %n, csv log_time, json timestamp), not yet interpreted. */
  time: string | null;
  pid: number | null;
  user: Buffer | null;
  database: Buffer | null;
  application: Buffer | null;
  remoteHost: string | null;
  remotePort: string | null;
  sessionId: string | null;
  sessionLine: number | null;
  commandTag: string | null;
  sessionStart: string | null;
  vxid: string | null;
  txid: string | null;
  backendType: string | null;
  leaderPid: number | null;
  queryId: string | null;
  /** Severity word as logged: LOG, ERROR, FATAL, PANIC, WARNING, NOTICE, INFO, DEBUG1..5. */
  severity: string;
  /** SQLSTATE when the prefix (%e) or the format (csvlog, jsonlog) carries it. */
  sqlstate: string | null;
  /** Primary message; continuation lines joined with "\n", the tab the server added removed. */
  message: Buffer;
  detail: Buffer | null;
  hint: Buffer | null;
  context: Buffer | null;
  /** The client statement (STATEMENT: line, csv `query`, json `statement`). */
  statement: Buffer | null;
  /** Internal query (QUERY: line, csv `internal_query`). */
  internalQuery: Buffer | null;
  /**
   * Character position of the error in `statement` (csv `query_pos`, json `cursor_position`;
   * in stderr and syslog the ` at character N` the server appends to the message).
   */
  cursorPosition: number | null;
  /** Character position in `internalQuery` (csv `internal_query_pos`, json `internal_position`). */
  internalPosition: number | null;
  /** Source location (LOCATION: line with log_error_verbosity=verbose). */
  location: string | null;
  /** True when the entry was cut at the entry cap; the rest of it was skipped, not kept. */
  truncated: boolean;
}

/** A record with every optional field null: assemblers fill in what their format carries. */
export function emptyRecord(start: number, end: number, severity: string, message: Buffer): LogRecord {
  return {
    start,
    end,
    time: null,
    pid: null,
    user: null,
    database: null,
    application: null,
    remoteHost: null,
    remotePort: null,
    sessionId: null,
    sessionLine: null,
    commandTag: null,
    sessionStart: null,
    vxid: null,
    txid: null,
    backendType: null,
    leaderPid: null,
    queryId: null,
    severity,
    sqlstate: null,
    message,
    detail: null,
    hint: null,
    context: null,
    statement: null,
    internalQuery: null,
    cursorPosition: null,
    internalPosition: null,
    location: null,
    truncated: false,
  };
}

/**
 * `rec` made empty again, as emptyRecord would make it: for an assembler that hands its sink
 * one record object over and over (AssemblerOptions.reuseRecords).
 */
export function resetRecord(rec: LogRecord, start: number, end: number, severity: string, message: Buffer): LogRecord {
  rec.start = start;
  rec.end = end;
  rec.time = null;
  rec.pid = null;
  rec.user = null;
  rec.database = null;
  rec.application = null;
  rec.remoteHost = null;
  rec.remotePort = null;
  rec.sessionId = null;
  rec.sessionLine = null;
  rec.commandTag = null;
  rec.sessionStart = null;
  rec.vxid = null;
  rec.txid = null;
  rec.backendType = null;
  rec.leaderPid = null;
  rec.queryId = null;
  rec.severity = severity;
  rec.sqlstate = null;
  rec.message = message;
  rec.detail = null;
  rec.hint = null;
  rec.context = null;
  rec.statement = null;
  rec.internalQuery = null;
  rec.cursorPosition = null;
  rec.internalPosition = null;
  rec.location = null;
  rec.truncated = false;
  return rec;
}

/** Receives assembled records in stream order. */
export type RecordSink = (record: LogRecord) => void;

/** What an assembler reports besides records, for counters and error reporting. */
export interface AssemblerStats {
  /** Entries emitted. */
  entries: number;
  /** Entries cut at the entry cap. */
  truncated: number;
  /** Lines that could not be read as (part of) an entry; kept as `other` records, not dropped. */
  malformed: number;
}

/**
 * Turns complete lines into records. Streaming and pure: no I/O, no timers.
 * Lines arrive without their terminator. `offset` is the stream offset of the line's first
 * byte and `next` the offset just past its terminator.
 */
export interface EntryAssembler {
  pushLine(bytes: Buffer, from: number, to: number, offset: number, next: number, truncated: boolean): void;
  /** Emit the entry still being assembled (end of input, or the stream went idle). */
  flush(): void;
  /**
   * The lines of `chunk` have all been pushed: keep no view of it that is worth a copy
   * instead (piece-list.ts worthCopying), so that the chunk can go before the entry ends.
   */
  release(chunk: ArrayBufferLike): void;
  readonly stats: AssemblerStats;
}

export type LogFormat = 'stderr' | 'csvlog' | 'jsonlog' | 'syslog';
export const LOG_FORMATS: readonly LogFormat[] = ['stderr', 'csvlog', 'jsonlog', 'syslog'];
