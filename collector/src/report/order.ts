/**
 * The order of a report's rows, written once and used twice: as the SQL ORDER BY each store
 * sorts by, and as the comparator that sorts rows from several stores into the same order
 * (merge.ts). Pure.
 *
 * So that both agree whatever the store: text keys sort with COLLATE "C" (byte order of UTF-8,
 * which is code point order; a store's default collation such as en_US would ignore
 * punctuation and could not be reproduced here), timestamps at millisecond precision (what a
 * JavaScript Date holds; PostgreSQL keeps microseconds), and NULLs where PostgreSQL puts them
 * (last ascending, first descending, unless said otherwise).
 */

export type SortValue = string | number | Date | null;

export interface SortKey<T> {
  /** The SQL expression sorted on: an output column's name, or an expression of the query's input columns. */
  readonly sql: string;
  /** How the value compares: text in code point order (COLLATE "C"), numbers, timestamps to the millisecond. */
  readonly kind: 'text' | 'number' | 'time';
  /** The same value on a decoded row. */
  readonly value: (row: T) => SortValue;
  readonly desc?: boolean;
  /** Only where it differs from PostgreSQL's default (ASC: NULLS LAST, DESC: NULLS FIRST). */
  readonly nulls?: 'first' | 'last';
}

/** A text sort key on the column of the same name (or `sql`). */
export function textKey<T>(value: (row: T) => string | null, sql: string, options: Pick<SortKey<T>, 'desc' | 'nulls'> = {}): SortKey<T> {
  return { sql, kind: 'text', value, ...options };
}

/** A numeric sort key. */
export function numberKey<T>(value: (row: T) => number | null, sql: string, options: Pick<SortKey<T>, 'desc' | 'nulls'> = {}): SortKey<T> {
  return { sql, kind: 'number', value, ...options };
}

/** A timestamp sort key (compared to the millisecond on both sides). */
export function timeKey<T>(value: (row: T) => Date | null, sql: string, options: Pick<SortKey<T>, 'desc' | 'nulls'> = {}): SortKey<T> {
  return { sql, kind: 'time', value, ...options };
}

function keySql(k: SortKey<unknown>): string {
  const expr = k.kind === 'text' ? `${k.sql} COLLATE "C"` : k.kind === 'time' ? `date_trunc('milliseconds', ${k.sql})` : k.sql;
  const dir = k.desc === true ? ' DESC' : '';
  const nulls = k.nulls === undefined ? '' : ` NULLS ${k.nulls.toUpperCase()}`;
  return `${expr}${dir}${nulls}`;
}

/** `ORDER BY ...` for the keys. */
export function orderBySql(keys: readonly SortKey<never>[]): string {
  return `ORDER BY ${keys.map((k) => keySql(k as SortKey<unknown>)).join(', ')}`;
}

/**
 * A UTF-16 code unit moved so that comparing units compares code points: surrogates (U+D800
 * to U+DFFF, halves of characters above U+FFFF) go above U+E000..U+FFFF.
 */
function fixup(unit: number): number {
  if (unit >= 0xe000) return unit - 0x800;
  if (unit >= 0xd800) return unit + 0x2000;
  return unit;
}

/** Compares two strings by code point, as PostgreSQL's "C" collation compares UTF-8 bytes. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return fixup(x) - fixup(y);
  }
  return a.length - b.length;
}

function compareValues(kind: SortKey<unknown>['kind'], a: NonNullable<SortValue>, b: NonNullable<SortValue>): number {
  if (kind === 'text') return compareCodePoints(String(a), String(b));
  const x = a instanceof Date ? a.getTime() : Number(a);
  const y = b instanceof Date ? b.getTime() : Number(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The comparator of the keys' order: negative when `a` comes first. */
export function comparator<T>(keys: readonly SortKey<T>[]): (a: T, b: T) => number {
  return (a, b) => {
    for (const k of keys) {
      const x = k.value(a);
      const y = k.value(b);
      const desc = k.desc === true;
      if (x === null || y === null) {
        if (x === y) continue;
        // Where NULL goes: PostgreSQL's default is "NULL is larger than any value".
        const nullsFirst = (k.nulls ?? (desc ? 'first' : 'last')) === 'first';
        return (x === null) === nullsFirst ? -1 : 1;
      }
      const c = compareValues(k.kind, x, y);
      if (c !== 0) return desc ? -c : c;
    }
    return 0;
  };
}
