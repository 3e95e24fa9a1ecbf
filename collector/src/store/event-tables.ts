/**
 * The event tables the store writer fills, as the writer sees them: the columns it sends, in
 * the order it sends them, with their COPY BINARY types. One definition serves the row mapping
 * (event-rows.ts builds value arrays in this order), the encoder (`types`) and the COPY
 * statement (`copySql`), so the three cannot drift apart. The schema itself is in
 * migrations/0001_initial.sql and 0002_stream_claims.sql (ts_logged).
 */
import type { ColumnType } from './copy-binary.ts';

export const EVENT_TABLES = ['statement_events', 'error_events', 'lock_wait_events', 'other_events'] as const;
export type EventTable = (typeof EVENT_TABLES)[number];

/** A table the writer COPYs into; `N` is the union of its tables' names (snapshot-tables.ts has its own). */
export interface TableDef<N extends string = EventTable> {
  readonly name: N;
  readonly columns: readonly string[];
  readonly types: readonly ColumnType[];
  /** `COPY pglog.<name> (<columns>) FROM STDIN WITH (FORMAT binary)`. */
  readonly copySql: string;
}

/** The definition of table `pglog.<name>` from its columns and their COPY BINARY types, in order. */
export function table<N extends string>(name: N, columns: readonly (readonly [string, ColumnType])[]): TableDef<N> {
  const names = columns.map(([n]) => n);
  return {
    name,
    columns: names,
    types: columns.map(([, t]) => t),
    copySql: `COPY pglog.${name} (${names.join(', ')}) FROM STDIN WITH (FORMAT binary)`,
  };
}

// Column positions are referred to by index in event-rows.ts: keep these lists and the value
// arrays built there in the same order (a unit test checks every row against its types).
export const STATEMENT_TABLE = table('statement_events', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['database', 'text'],
  ['username', 'text'],
  ['application', 'text'],
  ['pid', 'int4'],
  ['duration_ms', 'float8'],
  ['fingerprint', 'text'],
  ['query', 'text'],
  ['protocol', 'text'],
  ['parameters', 'text'],
  ['file', 'text'],
  ['file_offset', 'int8'],
  ['ts_logged', 'text'],
]);

export const ERROR_TABLE = table('error_events', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['database', 'text'],
  ['username', 'text'],
  ['severity', 'text'],
  ['sqlstate', 'text'],
  ['message', 'text'],
  ['detail', 'text'],
  ['hint', 'text'],
  ['context', 'text'],
  ['statement', 'text'],
  ['fingerprint', 'text'],
  ['file', 'text'],
  ['file_offset', 'int8'],
  ['ts_logged', 'text'],
]);

export const LOCK_WAIT_TABLE = table('lock_wait_events', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['database', 'text'],
  ['pid', 'int4'],
  ['state', 'text'],
  ['lock_type', 'text'],
  ['lock_mode', 'text'],
  ['lock_object', 'text'],
  ['wait_ms', 'float8'],
  ['file', 'text'],
  ['file_offset', 'int8'],
  ['ts_logged', 'text'],
]);

export const OTHER_TABLE = table('other_events', [
  ['ts', 'timestamptz'],
  ['target', 'text'],
  ['instance', 'text'],
  ['kind', 'text'],
  ['severity', 'text'],
  ['database', 'text'],
  ['message', 'text'],
  ['payload', 'jsonb'],
  ['file', 'text'],
  ['file_offset', 'int8'],
  ['ts_logged', 'text'],
]);

export const TABLES: Readonly<Record<EventTable, TableDef>> = {
  statement_events: STATEMENT_TABLE,
  error_events: ERROR_TABLE,
  lock_wait_events: LOCK_WAIT_TABLE,
  other_events: OTHER_TABLE,
};
