/**
 * Statements taken as rows without an event (issue 15). Executed statements are most of a
 * busy log's entries, and the collector only stores them: an event object, its SQL decoded to
 * a string and encoded back to UTF-8, and a timestamp made ISO text to be parsed again were a
 * third of what it allocated. With a StatementSink, the parser hands over a statement whose
 * SQL is ASCII without NUL (so its bytes are its UTF-8, in every supported encoding) as the
 * pieces its row is made of, in one object reused for every entry; any other statement still
 * becomes an event, which the sink takes too, in its place in the log. Everything else is
 * unchanged: events of other kinds are made and handed on as before.
 */
import type { StatementEvent } from './events.ts';

/**
 * A statement entry taken apart on its bytes. Reused: valid only during StatementSink.scanned.
 * Its fields have the names of the StatementEvent fields they stand for, so that one function
 * fills a row from either (store/event-rows.ts).
 */
export interface ScannedStatement {
  /** Stream offset of the entry's first byte, and just past its end. */
  offset: number;
  end: number;
  pid: number | null;
  database: string | null;
  user: string | null;
  application: string | null;
  duration_ms: number | null;
  protocol: 'simple' | 'extended';
  parameters: string | null;
  normalized: string;
  fingerprint: string;
  /** The SQL: `sql[sqlStart, sqlEnd)`, ASCII without NUL. */
  sql: Buffer;
  sqlStart: number;
  sqlEnd: number;
}

/** Where statements go instead of becoming events of the parser's output. */
export interface StatementSink {
  /**
   * Whether a statement logged at `time` (as logged, null without one) with `sqlBytes` bytes
   * of SQL can be taken from its bytes: asked first, with nothing done yet. After a yes,
   * scanned() follows at once, unless the SQL turns out not to be ASCII without NUL; either a
   * no or that makes the statement an event, which event() takes.
   */
  accepts(time: string | null, sqlBytes: number): boolean;
  /** The statement accepts() said yes to. */
  scanned(s: ScannedStatement): void;
  /** A statement made an event the usual way. */
  event(e: StatementEvent): void;
}

/** An empty ScannedStatement, to be filled again and again. */
export function scannedStatement(): ScannedStatement {
  return {
    offset: 0,
    end: 0,
    pid: null,
    database: null,
    user: null,
    application: null,
    duration_ms: null,
    protocol: 'simple',
    parameters: null,
    normalized: '',
    fingerprint: '',
    sql: EMPTY,
    sqlStart: 0,
    sqlEnd: 0,
  };
}
const EMPTY = Buffer.alloc(0);
