/**
 * `pglog report --store URL [--since 1h] [--until T] [--target T] [--database D] [--limit N] [--json]`
 *
 * Top query templates, errors and lock waits from the store's stable views over a time
 * window, as terminal tables or one JSON object. Options are validated here, once; the
 * window is resolved against the clock when the command runs.
 */
import type { Writable } from 'node:stream';
import { parseCommandArgs } from './command-args.ts';
import pg from 'pg';
import { isPglogError, PglogError } from '../errors.ts';
import { describePostgresUrl, scrubText, SecretScrubber } from '../observability/redact.ts';
import { fetchReport } from '../report/fetch.ts';
import { formatReportJson, formatReportText } from '../report/format.ts';
import { parseTimeBound, resolveWindow, type TimeBound } from '../report/since.ts';
import type { Report, ReportFilter } from '../report/types.ts';
import { BufferedOutput } from './output.ts';
import { storeUrlPasswords } from '../store/store-url.ts';

export const REPORT_USAGE = `usage: pglog report --store URL [--since DURATION|TIME] [--until DURATION|TIME]
                    [--target NAME] [--database NAME] [--limit N] [--json]
  --store     PostgreSQL URL of the pglog store, e.g. postgres://user:pw@host/pglog
              (default: the environment variable PGLOG_STORE_URL, which keeps a
              password out of the process list)
  --since     start of the window: a duration before now (30s, 15m, 1h, 2d, 1w) or an
              ISO timestamp (2024-05-01T10:00:00Z; UTC when no offset is given); default 1h
  --until     end of the window, the same forms; default now
  --target    only this server (PostgresTarget name)
  --database  only this database
  --limit     rows per section (default 20)
  --json      one JSON object instead of tables`;

export interface ReportArgs {
  storeUrl: string;
  since: TimeBound;
  until: TimeBound;
  target: string | null;
  database: string | null;
  limit: number;
  json: boolean;
}

export interface ReportIO {
  stdout: Writable;
  stderr: Writable;
}

const DEFAULT_LIMIT = 20;
const MAX_LIMIT = 10_000;
/** Table width when standard output is not a terminal (a pipe, a file, a test). */
const DEFAULT_WIDTH = 160;
/** An unreachable store fails the command within this time instead of hanging. */
const CONNECT_TIMEOUT_MS = 10_000;

/** `env` is the process environment, read only for PGLOG_STORE_URL (entry point passes it). */
export function parseReportArgs(argv: string[], env: Readonly<Record<string, string | undefined>> = {}): ReportArgs {
  const parsed = parseCommandArgs({
    args: argv,
    allowPositionals: false,
    options: {
      store: { type: 'string' },
      since: { type: 'string' },
      until: { type: 'string' },
      target: { type: 'string' },
      database: { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean' },
    },
  }, (message) => `${scrubText(message)}\n${REPORT_USAGE}`);
  const { values } = parsed;
  const storeUrl = values.store ?? env.PGLOG_STORE_URL;
  if (storeUrl === undefined || storeUrl === '') throw new PglogError('USAGE', `no store: give --store URL or set PGLOG_STORE_URL\n${REPORT_USAGE}`);
  const limit = values.limit === undefined ? DEFAULT_LIMIT : Number(values.limit);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw new PglogError('USAGE', `--limit ${values.limit}: expected an integer from 1 to ${MAX_LIMIT}`);
  }
  const since = parseTimeBound(values.since ?? '1h', '--since');
  const until = values.until === undefined ? { agoMs: 0 } : parseTimeBound(values.until, '--until');
  if ('at' in since && 'at' in until) resolveWindow(since, until, 0); // a reversed window is a usage error before connecting
  return {
    storeUrl,
    since,
    until,
    target: values.target ?? null,
    database: values.database ?? null,
    limit,
    json: values.json === true,
  };
}

/** Runs the report; resolves to the exit code (0, or 1 when the store cannot be queried). */
export async function runReport(args: ReportArgs, io: ReportIO): Promise<number> {
  const window = resolveWindow(args.since, args.until, Date.now());
  const filter: ReportFilter = { ...window, target: args.target, database: args.database, limit: args.limit };
  let report: Report;
  try {
    report = await queryStore(args.storeUrl, filter);
  } catch (e) {
    if (!isPglogError(e)) throw e;
    io.stderr.write(`pglog report: ${e.message}\n`);
    return 1;
  }
  const out = new BufferedOutput(io.stdout);
  out.append(args.json ? formatReportJson(report) : formatReportText(report, terminalWidth(io.stdout)));
  await out.flush();
  return 0;
}

function terminalWidth(stdout: Writable): number {
  const { isTTY, columns } = stdout as Writable & { isTTY?: boolean; columns?: number };
  return isTTY === true && typeof columns === 'number' && columns > 0 ? columns : DEFAULT_WIDTH;
}

async function queryStore(storeUrl: string, filter: ReportFilter): Promise<Report> {
  const where = describePostgresUrl(storeUrl);
  // The URL's own password is scrubbed from any server or driver message quoted below.
  const secrets = new SecretScrubber();
  for (const password of storeUrlPasswords(storeUrl)) secrets.register(password);
  const client = new pg.Client({ connectionString: storeUrl, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, application_name: 'pglog report' });
  // A connection lost between queries is reported through the failing query; this keeps it
  // from also surfacing as an unhandled 'error' event.
  client.on('error', () => { /* reported by the query in flight */ });
  try {
    await client.connect();
  } catch (e) {
    throw new PglogError('STORE_UNAVAILABLE', `cannot connect to the store (${where}): ${scrubText(messageOf(e), secrets)}`, { cause: e });
  }
  try {
    return await fetchReport(client, filter);
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === '42P01' || code === '3F000') {
      throw new PglogError('STORE_UNAVAILABLE', `the store (${where}) has no pglog views: is it a pglog store? (pglog collect creates the schema when it starts): ${scrubText(messageOf(e), secrets)}`, { cause: e });
    }
    throw new PglogError('STORE_UNAVAILABLE', `querying the store (${where}) failed: ${scrubText(messageOf(e), secrets)}`, { cause: e });
  } finally {
    await client.end().catch(() => { /* the report is done or has already failed */ });
  }
}

function messageOf(e: unknown): string {
  if (e instanceof AggregateError && e.errors.length > 0) return e.errors.map(messageOf).join('; ');
  if (e instanceof Error) return e.message === '' ? e.name : e.message;
  return String(e);
}
