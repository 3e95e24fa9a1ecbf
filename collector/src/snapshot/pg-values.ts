/**
 * Reading the values `pg` hands back from the snapshot queries. pg returns int8 and numeric as
 * strings (they may not fit a double), int4/oid as numbers, timestamptz as Date and arrays of
 * int4 as number arrays; these helpers check that and fail loudly on anything else, so a
 * changed column type shows up as an error here and not as NaN in the store.
 */

export type Row = Record<string, unknown>;

function fail(column: string, expected: string, v: unknown): never {
  throw new TypeError(`snapshot query: column ${column} is not ${expected}: ${typeof v} ${String(v)}`);
}

/** An int8 column (a decimal string from pg; a number is accepted for counts computed in SQL). */
export function bigintOf(row: Row, column: string): bigint {
  const v = row[column];
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  if (typeof v === 'bigint') return v;
  return fail(column, 'an integer', v);
}

/** A float8 or numeric column (float8 arrives as a number, numeric as a string). */
export function floatOf(row: Row, column: string): number {
  const v = row[column];
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return fail(column, 'a number', v);
}

export function intOf(row: Row, column: string): number {
  const v = row[column];
  if (typeof v === 'number' && Number.isInteger(v)) return v;
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return Number(v);
  return fail(column, 'an integer', v);
}

/** The reader of a nullable column: null for NULL (or a column the row lacks), else what `of` reads. */
function orNull<T>(of: (row: Row, column: string) => T): (row: Row, column: string) => T | null {
  return (row, column) => (row[column] === null || row[column] === undefined ? null : of(row, column));
}

export const intOrNull = orNull(intOf);

export function textOf(row: Row, column: string): string {
  const v = row[column];
  if (typeof v === 'string') return v;
  return fail(column, 'text', v);
}

export const textOrNull = orNull(textOf);

export function boolOf(row: Row, column: string): boolean {
  const v = row[column];
  if (typeof v === 'boolean') return v;
  return fail(column, 'a boolean', v);
}

export function dateOf(row: Row, column: string): Date {
  const v = row[column];
  if (v instanceof Date) return v;
  // Should the caller's session parse timestamps as text, still accept them.
  if (typeof v === 'string' && !Number.isNaN(Date.parse(v))) return new Date(v);
  return fail(column, 'a timestamp', v);
}

export const dateOrNull = orNull(dateOf);

/** An int4[] column (pg parses it into numbers); NULL counts as empty. */
export function intArrayOf(row: Row, column: string): number[] {
  const v = row[column];
  if (v === null || v === undefined) return [];
  if (Array.isArray(v)) {
    return v.map((x: unknown) => (typeof x === 'number' && Number.isInteger(x) ? x : fail(column, 'an integer array', v)));
  }
  return fail(column, 'an integer array', v);
}
