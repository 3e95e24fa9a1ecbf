// Event literals for tests that need an event without parsing a log: a statement and an `other`
// entry with every field spelled once here, so a test names only the fields it is about and a new
// field of EventCommon is added in one place.
import type { OtherEvent, StatementEvent } from '../../src/logformat/events.ts';

/** The fields a `%m [%p] %q%u@%d ` prefix does not log, at LOG severity and not cut. */
const UNLOGGED = {
  remote_host: null,
  session_id: null,
  session_line: null,
  backend_type: null,
  query_id: null,
  severity: 'LOG',
  sqlstate: null,
  truncated: false,
} as const;

/** An extended-protocol statement by alice in `app` with a duration; `over` replaces any field. */
export function statementEvent(over: Partial<StatementEvent> = {}): StatementEvent {
  return {
    kind: 'statement',
    offset: 100,
    end: 180,
    ts: '2026-11-21T13:29:33.120456Z',
    pid: 42,
    database: 'app',
    user: 'alice',
    application: 'psql',
    ...UNLOGGED,
    duration_ms: 1.25,
    protocol: 'extended',
    statement_name: 'S_1',
    query: 'SELECT $1',
    parameters: "$1 = '5'",
    normalized: 'select $1',
    fingerprint: 'abc123',
    ...over,
  };
}

/** An `other` entry with no prefix fields at all and the message `x`; `over` replaces any field. */
export function otherEvent(over: Partial<OtherEvent> = {}): OtherEvent {
  return {
    kind: 'other',
    offset: 0,
    end: 100,
    ts: null,
    pid: null,
    database: null,
    user: null,
    application: null,
    ...UNLOGGED,
    message: 'x',
    detail: null,
    hint: null,
    context: null,
    statement: null,
    subtype: null,
    duration_ms: null,
    ...over,
  };
}

/** The i-th statement of a pgbench stream: 100 bytes an entry, a microsecond apart, over seven backends. */
export function nthStatement(i: number, over: Partial<StatementEvent> = {}): StatementEvent {
  return statementEvent({
    offset: i * 100,
    end: i * 100 + 100,
    ts: `2026-11-21T13:29:33.${String(i % 1_000_000).padStart(6, '0')}Z`,
    pid: 4000 + (i % 7),
    application: 'pgbench',
    ...over,
  });
}
