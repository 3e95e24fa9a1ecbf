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
