/**
 * Structured JSON logs (pino), one object per line, with secrets removed before anything is
 * written. See redact.ts for the three nets; here they are wired into pino:
 * - `redact` paths hide fields by name (URLs are rewritten by `redactUrl` instead of hidden,
 *   so a log still says which host and database it is about);
 * - the `err` serializer keeps what an operator needs from an error (type, code, message,
 *   stack, the `cause` chain) and scrubs every text of it;
 * - the `streamWrite` hook scrubs the finished line, so a secret copied into any message or
 *   field is replaced whatever path it took.
 */
import type { Writable } from 'node:stream';

import { type DestinationStream, type Logger as PinoLogger, pino } from 'pino';

import { PglogError } from '../errors.ts';
import { processSecrets, REDACTED, redactUrl, scrubText, type SecretScrubber } from './redact.ts';

// Callers that log also register secrets and redact URLs: one import for all of it.
export { describePostgresUrl, redactUrl, registerSecret, scrubText } from './redact.ts';

export type Logger = PinoLogger;
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
export const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
/** The levels a command's `--log-level` accepts. */
export const OPTION_LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;
export type OptionLogLevel = (typeof OPTION_LOG_LEVELS)[number];

/** `--log-level` of `command` (default info); anything else is a USAGE error naming the option. */
export function parseLogLevelOption(text: string | undefined, command: string): OptionLogLevel {
  const level = text ?? 'info';
  if (!(OPTION_LOG_LEVELS as readonly string[]).includes(level)) {
    throw new PglogError('USAGE', `${command}: --log-level must be one of ${OPTION_LOG_LEVELS.join(', ')}, got '${level}'`);
  }
  return level as OptionLogLevel;
}

export interface LoggerOptions {
  level: LogLevel;
  /** Where the lines go; default standard output (fd 1), written synchronously. */
  destination?: Writable;
  /** The secrets to scrub; default the process-wide scrubber that `registerSecret` fills. */
  secrets?: SecretScrubber;
}

/** Field names whose values are never logged. */
const SECRET_KEYS = [
  'password',
  'passphrase',
  'privateKey',
  'private_key',
  'key',
  'secret',
  'token',
  'authorization',
  'Authorization',
  'cookie',
  'connectionString',
];
/** Field names holding URLs: logged with the password removed. */
const URL_KEYS = ['url', 'storeUrl', 'connectionString'];
/**
 * Path nesting covered by the `redact` paths. pino's redaction needs explicit wildcard paths
 * per depth; deeper fields are still caught by the scrubber for registered secrets.
 */
const REDACT_DEPTH = 4;

function redactPaths(): string[] {
  const paths: string[] = [];
  for (const key of new Set([...SECRET_KEYS, ...URL_KEYS])) {
    for (let depth = 0; depth < REDACT_DEPTH; depth++) paths.push(`${'*.'.repeat(depth)}${key}`);
  }
  return paths;
}

function censor(value: unknown, path: readonly unknown[]): unknown {
  const key = path.at(-1);
  if (typeof key === 'string' && URL_KEYS.includes(key) && !SECRET_KEYS.includes(key) && typeof value === 'string') {
    return redactUrl(value);
  }
  return REDACTED;
}

export interface SerializedError {
  type: string;
  message: string;
  code?: string;
  stack?: string;
  cause?: SerializedError | string;
}

/** How deep a `cause` chain is followed (a cycle or a very long chain stops here). */
const MAX_CAUSE_DEPTH = 8;

/** An error as a plain object with every text scrubbed; non-errors become their scrubbed text. */
export function serializeError(e: unknown, secrets: SecretScrubber = processSecrets, depth = 0): SerializedError | string {
  if (!(e instanceof Error)) return scrubText(typeof e === 'string' ? e : safeString(e), secrets);
  const out: SerializedError = { type: e.name, message: scrubText(e.message, secrets) };
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string') out.code = code;
  if (typeof e.stack === 'string') out.stack = scrubText(e.stack, secrets);
  if (e.cause !== undefined && depth < MAX_CAUSE_DEPTH) out.cause = serializeError(e.cause, secrets, depth + 1);
  return out;
}

function safeString(v: unknown): string {
  try {
    if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
    return JSON.stringify(v) ?? typeof v;
  } catch {
    return Object.prototype.toString.call(v);
  }
}

export function createLogger(options: LoggerOptions): Logger {
  const secrets = options.secrets ?? processSecrets;
  // Synchronous writes to fd 1: a crash or process.exit() never loses the lines that explain
  // it. Log volume is low (events go to the store, not the log), so blocking writes are cheap.
  const destination: DestinationStream = options.destination ?? pino.destination({ dest: 1, sync: true });
  return pino(
    {
      level: options.level,
      timestamp: pino.stdTimeFunctions.isoTime,
      // Level names, not numbers: log pipelines and people read them without a lookup table.
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: redactPaths(), censor },
      serializers: { err: (e: unknown) => serializeError(e, secrets), error: (e: unknown) => serializeError(e, secrets) },
      hooks: {
        // The URL patterns stop at '"' and '\\', so they never cut into the JSON around a URL.
        streamWrite: (line: string) => scrubText(line, secrets),
      },
    },
    destination,
  );
}

/** A child logger whose lines name the target (and instance) they are about. */
export function childForTarget(log: Logger, target: string, instance?: string): Logger {
  return log.child(instance === undefined ? { target } : { target, instance });
}
