/**
 * Which server errors are about the rows (pure). A COPY the server refused because of a value
 * (SQLSTATE class 22 data exception, 23 integrity constraint violation, 54 program limit
 * exceeded, e.g. a row too big) is worth splitting: the other rows will go in. Anything else
 * (the connection, the server shutting down, a timeout, a deadlock, a missing table or
 * permission) says nothing about the rows: the whole transaction is rolled back and retried
 * later with the batch unchanged.
 */
import { sqlStateOf } from '@pglog/common/errors.ts';

const DATA_CLASSES: ReadonlySet<string> = new Set(['22', '23', '54']);

export function isDataRejection(e: unknown): boolean {
  const code = sqlStateOf(e);
  return code !== null && DATA_CLASSES.has(code.slice(0, 2));
}

/**
 * 0-based index of the row a COPY error stopped at, from the server's context
 * (`COPY statement_events, line 57` or `..., line 57, column query`): lines count tuples from 1.
 */
export function copyLineOf(e: unknown): number | null {
  if (typeof e !== 'object' || e === null) return null;
  const where = (e as { where?: unknown }).where;
  if (typeof where !== 'string') return null;
  const m = /COPY [^,]+, line (\d+)/.exec(where);
  if (m === null) return null;
  const line = Number(m[1]);
  return Number.isSafeInteger(line) && line >= 1 ? line - 1 : null;
}

/** Longest detail kept: a constraint violation's detail repeats the whole failing row. */
const MAX_DETAIL_CHARS = 500;

/** The server's message with its SQLSTATE and, when given, the start of its detail. */
export function describeServerError(e: unknown): string {
  const err = e as { message?: unknown; detail?: unknown };
  const message = typeof err?.message === 'string' ? err.message : String(e);
  const code = sqlStateOf(e);
  let detail = typeof err?.detail === 'string' ? err.detail : '';
  if (detail.length > MAX_DETAIL_CHARS) detail = `${detail.slice(0, MAX_DETAIL_CHARS)}...`;
  const tail = detail === '' ? '' : ` (${detail})`;
  return code === null ? `${message}${tail}` : `SQLSTATE ${code}: ${message}${tail}`;
}
