/**
 * What went wrong with an SQL session or snapshot query, as a PglogError with a stable code
 * (the `code` label of pglog_snapshot_failures_total) and a message that says where: the
 * target, the instance and the socket it was reached through. Pure: no I/O.
 *
 *   SQL_AUTH_FAILED     PostgreSQL refused the role or the database (28xxx, 3D000)
 *   SQL_TIMEOUT         statement_timeout or lock_timeout fired (57014, 55P03), or pg's own
 *                       connect/query timeout (a stopped or overloaded server never answers)
 *   SQL_CONNECT_FAILED  the session could not be opened or was lost: nothing listens on the
 *                       socket, the server is shutting down or starting (57P0x), the stream closed
 *   SQL_QUERY_FAILED    anything else a query ran into (permission denied, missing extension)
 * A PglogError from the transport (SSH_*, SIDECAR_UNAVAILABLE, or an SQL_* already classified)
 * keeps its code: it says better what failed.
 */
import { type ErrorCode, isPglogError, PglogError, sqlStateOf } from '@pglog/common/errors.ts';

/** Where the session goes, for messages: `db1/main (/var/run/postgresql/.s.PGSQL.5432 via 10.0.0.5:22)`. */
export type SessionPlace = string;

const AUTH_SQLSTATES = new Set(['28000', '28P01', '3D000']);
const TIMEOUT_SQLSTATES = new Set(['57014', '55P03']);
/** admin_shutdown, crash_shutdown, cannot_connect_now (starting up, shutting down, recovery). */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03']);

/** Messages pg gives its own timeouts (connectionTimeoutMillis, query_timeout). */
const PG_TIMEOUT_MESSAGES = [/timeout expired/i, /Query read timeout/i, /Connection terminated due to connection timeout/i];
/** Messages (and errno codes) of a stream that went away under the session. */
const PG_LOST_MESSAGES = [/Connection terminated/i, /ECONNRESET|EPIPE|ECONNREFUSED|ENOENT/, /socket hang up/i, /Client was closed/i];

function codeFor(e: unknown, message: string): ErrorCode {
  const state = sqlStateOf(e);
  if (state !== null) {
    if (AUTH_SQLSTATES.has(state)) return 'SQL_AUTH_FAILED';
    if (TIMEOUT_SQLSTATES.has(state)) return 'SQL_TIMEOUT';
    if (UNAVAILABLE_SQLSTATES.has(state)) return 'SQL_CONNECT_FAILED';
    return 'SQL_QUERY_FAILED';
  }
  const errno = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  const text = `${message} ${typeof errno === 'string' ? errno : ''}`;
  if (PG_TIMEOUT_MESSAGES.some((re) => re.test(text))) return 'SQL_TIMEOUT';
  if (PG_LOST_MESSAGES.some((re) => re.test(text))) return 'SQL_CONNECT_FAILED';
  return 'SQL_QUERY_FAILED';
}

/**
 * Classifies an error of opening the session (`while` = 'connecting') or of a query
 * (`while` = 'activity snapshot', ...) at `place`.
 */
export function toSqlError(e: unknown, place: SessionPlace, during: string): PglogError {
  if (isPglogError(e)) return e;
  const message = e instanceof Error ? e.message : String(e);
  const code = codeFor(e, message);
  const state = sqlStateOf(e);
  const hint =
    code === 'SQL_AUTH_FAILED'
      ? ' (check spec.instances[].sql.user and database, and pg_hba.conf for local connections of that role)'
      : code === 'SQL_TIMEOUT'
        ? ' (the server did not answer within sql.timeoutSeconds: overloaded, or stopped)'
        : code === 'SQL_CONNECT_FAILED'
          ? ' (the session ended: is PostgreSQL running and listening on that socket?)'
          : '';
  return new PglogError(code, `${place}: ${during} failed: ${message}${state === null ? '' : ` [SQLSTATE ${state}]`}${hint}`, { cause: e });
}
