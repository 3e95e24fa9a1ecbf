/**
 * Typed errors with stable codes. The code is what metrics use as a label and what the
 * operator puts into condition reasons, so codes never change meaning once released; the
 * message is for people and says what was wrong and where.
 */
export const ERROR_CODES = [
  'PREFIX_UNSUPPORTED', // a log_line_prefix escape or shape pglog cannot parse
  'PREFIX_UNDETECTED', // no --prefix given and none of the known prefixes fits the log
  'FORMAT_UNDETECTED', // no --format given and the first bytes fit no log format
  'ENCODING_UNSUPPORTED', // an encoding name PostgreSQL or iconv-lite does not know
  'INPUT_UNREADABLE', // a file that cannot be opened, decompressed or read
  'USAGE', // bad command line
  'CONFIG_INVALID', // a targets file (or other configuration) that fails validation
  'STORE_ENCODING', // a value the COPY BINARY encoder cannot encode for its column type
  'STORE_MIGRATION', // a store schema migration that cannot be applied, was edited after release, or is older than the store
  'STORE_VERSION_UNSUPPORTED', // the store's PostgreSQL is older than the store's minimum (14): refused before any migration, not retried
  'STORE_UNAVAILABLE', // the store cannot be reached or a transaction failed for a reason other than the rows (retried)
  'STORE_FENCED', // a newer owner (higher assignment epoch) holds the read position: this collector must stop that stream
  'STORE_REJECTED', // the store refused a row (quarantined with the reason; the rest of the batch commits)
  'SSH_CONNECT_FAILED', // TCP connect, key exchange or the connection itself failed (retried with backoff)
  'SSH_HOST_KEY_UNKNOWN', // the server's host key is not in known_hosts (refused: fail closed)
  'SSH_HOST_KEY_CHANGED', // known_hosts holds a different key for the server (refused: fail closed)
  'SSH_AUTH_FAILED', // the server refused the private key
  'SSH_KEY_INVALID', // the private key file cannot be read or parsed
  'SSH_TIMEOUT', // the server stopped answering (keepalive or connect timeout)
  'SSH_CHANNEL_FAILED', // the server refused to open a session channel or to run a command
  'SSH_WINDOW_EXCEEDED', // the server sent more than the SSH window allowed on a channel (broken or hostile): the connection was cut
  'REMOTE_COMMAND_FAILED', // a command on the server exited with an error (e.g. the log directory cannot be read)
  'SIDECAR_UNAVAILABLE', // the sshproxy sidecar is not running, its status is stale, or it restarted under a stream
  'SQL_CONNECT_FAILED', // the SQL session could not be opened: the socket forward was refused (PostgreSQL down, wrong socket) or the session was lost
  'SQL_AUTH_FAILED', // PostgreSQL refused the role or database of spec.instances[].sql
  'SQL_TIMEOUT', // opening the SQL session or a snapshot query took longer than sql.timeoutSeconds
  'SQL_QUERY_FAILED', // a snapshot query failed for another reason (e.g. pg_stat_statements not installed, permission denied)
  'SQL_ROLE_SUPERUSER', // the SQL role is a superuser and the instance does not set sql.allowSuperuser: refused before any snapshot query
  'LOG_POSITION_LOST', // the committed log file is gone and no copy of it was found: bytes were skipped
  'KUBE_UNAVAILABLE', // the Kubernetes API server cannot be reached, timed out or answered 5xx (retried)
  'KUBE_FORBIDDEN', // the API server refused the credentials or RBAC denies the request (401/403)
  'KUBE_NOT_FOUND', // a referenced object (Secret, shard, pool) does not exist
  'KUBE_CONFLICT', // the object changed since it was read (409); read again and retry
  'KUBE_GONE', // a watch's resourceVersion is too old (410); list again
  'KUBE_INVALID', // the API server rejected an object as invalid (400/422)
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

export class PglogError extends Error {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PglogError';
    this.code = code;
  }
}

export function isPglogError(e: unknown): e is PglogError {
  return e instanceof PglogError;
}

/** The `code` label of error counters: a PglogError code, or UNKNOWN for any other error. */
export type ErrorLabel = ErrorCode | 'UNKNOWN';

/** The SQLSTATE of an error a PostgreSQL server sent (pg's DatabaseError carries it as `code`), else null. */
export function sqlStateOf(e: unknown): string | null {
  if (typeof e !== 'object' || e === null) return null;
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}

/**
 * SSH failures that retrying soon cannot fix (ssh2's in the collector, OpenSSH's in the
 * sidecar): the caller waits the full backoff cap before the next attempt instead of
 * hammering a server that refuses it.
 */
export function isLastingSshFailure(code: ErrorCode): boolean {
  return code === 'SSH_HOST_KEY_CHANGED' || code === 'SSH_HOST_KEY_UNKNOWN' || code === 'SSH_AUTH_FAILED' || code === 'SSH_KEY_INVALID';
}
