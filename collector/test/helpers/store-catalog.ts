/**
 * What the store tests read of a store's catalog and tables: applied migrations, a table's
 * partitions and columns, the row count of a query, and a stream's committed read position;
 * and the names of the stable views the migrations create.
 */
import type pg from 'pg';

/** The stable views of docs/store.md that the migrations create (pglog.<name>). */
export const STABLE_VIEWS = [
  'statements',
  'errors',
  'lock_waits',
  'read_positions',
  'activity',
  'blocking',
  'statement_stats',
  'database_stats',
  'checkpoints',
  'maintenance',
  'temp_files',
  'sessions',
  'plans',
  'deadlocks',
  'templates',
] as const;

/** The migration versions applied (pglog.schema_migrations), in order. */
export async function versions(c: pg.ClientBase): Promise<number[]> {
  const r = await c.query<{ version: number }>('SELECT version FROM pglog.schema_migrations ORDER BY version');
  return r.rows.map((x) => x.version);
}

/** The partitions of `parent`, by name. */
export async function partitions(c: pg.ClientBase, parent: string): Promise<string[]> {
  const r = await c.query<{ relname: string }>(
    'SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass ORDER BY c.relname',
    [parent],
  );
  return r.rows.map((x) => x.relname);
}

/** The rows `sql` returns (-1 when the count itself returns none). */
export async function count(c: pg.ClientBase, sql: string, params: unknown[] = []): Promise<number> {
  const r = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM (${sql}) x`, params);
  return r.rows[0]?.n ?? -1;
}

/** The columns of `rel`, in their order. */
export async function columns(c: pg.ClientBase, rel: string): Promise<string[]> {
  const r = await c.query<{ attname: string }>(
    'SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum',
    [rel],
  );
  return r.rows.map((x) => x.attname);
}

/** The committed read offset of a target's instance, or null when none is stored. */
export async function positionOf(c: pg.ClientBase, source: { target: string; instance: string }): Promise<number | null> {
  const r = await c.query<{ offset: string }>('SELECT "offset"::text AS offset FROM pglog.read_positions WHERE target = $1 AND instance = $2', [
    source.target,
    source.instance,
  ]);
  return r.rows[0] === undefined ? null : Number(r.rows[0].offset);
}
