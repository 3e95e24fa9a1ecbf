/**
 * `pglog report --store URL [--since 1h] [--until T] [--target T] [--database D] [--limit N] [--json]`
 * `pglog report ... --html FILE` / `--format html`: the same window as one self-contained HTML page
 * `pglog report locks|activity ...` (the same options; activity also --min-duration)
 *
 * Top query templates, errors and lock waits from the store's stable views over a time
 * window; with `locks`, the blocking trees and episodes from the SQL snapshots; with
 * `activity`, sessions by state and long-running ones. As terminal text or one JSON object.
 * Options are validated here, once; the window is resolved against the clock when the
 * command runs.
 */
import { writeFile } from 'node:fs/promises';
import type { Writable } from 'node:stream';

import { formatActivityJson, formatActivityText } from '@pglog/collector/report/activity-format.ts';
import { fetchReport } from '@pglog/collector/report/fetch.ts';
import { formatReportJson, formatReportText } from '@pglog/collector/report/format.ts';
import { loadAssets } from '@pglog/collector/report/html/assets.ts';
import { fetchHtmlReport } from '@pglog/collector/report/html/fetch.ts';
import { type Assets, renderHtml } from '@pglog/collector/report/html/render.ts';
import { formatLocksJson, formatLocksText } from '@pglog/collector/report/locks-format.ts';
import { parseDuration, parseTimeBound, resolveWindow, type TimeBound } from '@pglog/collector/report/since.ts';
import { fetchActivityReport, fetchLocksReport } from '@pglog/collector/report/snapshot-fetch.ts';
import type { SnapshotFilter } from '@pglog/collector/report/snapshot-types.ts';
import type { ReportFilter } from '@pglog/collector/report/types.ts';
import { storeUrlPasswords } from '@pglog/collector/store/store-url.ts';
import { isPglogError, PglogError } from '@pglog/common/errors.ts';
import { describePostgresUrl, scrubText, SecretScrubber } from '@pglog/common/observability/redact.ts';
import pg from 'pg';

import { parseCommandArgs } from './command-args.ts';
import { BufferedOutput } from './output.ts';

export const REPORT_USAGE = `usage: pglog report --store URL [--since DURATION|TIME] [--until DURATION|TIME]
                    [--target NAME] [--database NAME] [--limit N]
                    [--json | --format text|json|html | --html FILE]
       pglog report locks ...      blocking trees from the SQL snapshots (see pglog report locks --help)
       pglog report activity ...   sessions by state, long-running ones (pglog report activity --help)
  --store     PostgreSQL URL of the pglog store, e.g. postgres://user:pw@host/pglog
              (default: the environment variable PGLOG_STORE_URL, which keeps a
              password out of the process list)
  --since     start of the window: a duration before now (30s, 15m, 1h, 2d, 1w) or an
              ISO timestamp (2024-05-01T10:00:00Z; UTC when no offset is given); default 1h
  --until     end of the window, the same forms; default now
  --target    only this server (PostgresTarget name)
  --database  only this database
  --limit     rows per section (default 20)
  --json      one JSON object instead of tables (= --format json)
  --format    text (default), json, or html: one self-contained HTML page with charts
  --html      write the HTML page to FILE (prints nothing else)`;

const SNAPSHOT_OPTIONS_HELP = `  --store     PostgreSQL URL of the pglog store (default: PGLOG_STORE_URL)
  --since     start of the window: a duration before now (30s, 15m, 1h, 2d, 1w) or an
              ISO timestamp (UTC when no offset is given); default 1h
  --until     end of the window, the same forms; default now. The newest snapshot of
              each server in the window is its "current" one
  --target    only this server (PostgresTarget name)
  --database  only this database`;

export const LOCKS_USAGE = `usage: pglog report locks --store URL [--since DURATION|TIME] [--until DURATION|TIME]
                          [--target NAME] [--database NAME] [--limit N] [--json]
Per server instance: the blocking tree of the newest snapshot (roots block others and wait
for nobody; children wait for their parent), a failed newest snapshot run, and the blocking
episodes of the window (one per root session and transaction), newest first.
${SNAPSHOT_OPTIONS_HELP} (trees and episodes involving a session of it)
  --limit     episodes shown (default 20)
  --json      one JSON document instead of text (fields: docs/report.md)`;

export const ACTIVITY_USAGE = `usage: pglog report activity --store URL [--since DURATION|TIME] [--until DURATION|TIME]
                             [--target NAME] [--database NAME] [--min-duration DURATION]
                             [--limit N] [--json]
Per server instance: the sessions of the newest snapshot by state, a failed newest snapshot
run, and the long-running sessions (active or idle in transaction, transaction at least
--min-duration old), longest first.
${SNAPSHOT_OPTIONS_HELP} (sessions of it)
  --min-duration  the least transaction age to list a session (default 30s)
  --limit     long-running sessions shown (default 20)
  --json      one JSON document instead of text (fields: docs/report.md)`;

export interface ReportArgs {
  storeUrl: string;
  since: TimeBound;
  until: TimeBound;
  target: string | null;
  database: string | null;
  limit: number;
  json: boolean;
  /** `--format html` (to stdout) or `--html FILE`: the HTML page; `htmlFile` null for stdout. */
  html?: { file: string | null };
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

/** `pglog report locks` / `pglog report activity`. */
export interface SnapshotReportArgs extends ReportArgs {
  report: 'locks' | 'activity';
  /** `activity` only (0 for locks). */
  minDurationMs: number;
}

/** `--help` (or `-h`) of `pglog report` or a subcommand: print `text`, exit 0. */
export interface ReportHelp {
  help: string;
  /** Always '': help needs no store (the field is there so every variant has one). */
  storeUrl: '';
}

export type ReportCommandArgs = ReportArgs | SnapshotReportArgs | ReportHelp;

/** Default --min-duration of `report activity`: long enough that ordinary OLTP work stays out of the list. */
const DEFAULT_MIN_DURATION_MS = 30_000;

const COMMON_OPTIONS = {
  store: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  target: { type: 'string' },
  database: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type CommonValues = { [K in keyof typeof COMMON_OPTIONS]?: (typeof COMMON_OPTIONS)[K]['type'] extends 'boolean' ? boolean : string };

/** `--json`, `--format` and `--html` of the classic report: at most one output, validated. */
function outputArgs(values: { json?: boolean; format?: string; html?: string }): Pick<ReportArgs, 'json' | 'html'> {
  const given = [values.json === true, values.format !== undefined, values.html !== undefined].filter(Boolean).length;
  if (given > 1) throw new PglogError('USAGE', `give one of --json, --format and --html\n${REPORT_USAGE}`);
  if (values.html !== undefined) {
    if (values.html === '') throw new PglogError('USAGE', `--html: expected a file name\n${REPORT_USAGE}`);
    return { json: false, html: { file: values.html } };
  }
  switch (values.format) {
    case undefined:
      return { json: values.json === true };
    case 'text':
      return { json: false };
    case 'json':
      return { json: true };
    case 'html':
      return { json: false, html: { file: null } };
    default:
      throw new PglogError('USAGE', `--format ${values.format}: expected text, json or html\n${REPORT_USAGE}`);
  }
}

/** The options every report shares, validated; `usage` is appended to usage errors. */
function commonArgs(values: CommonValues, env: Readonly<Record<string, string | undefined>>, usage: string): ReportArgs {
  const storeUrl = values.store ?? env.PGLOG_STORE_URL;
  if (storeUrl === undefined || storeUrl === '') throw new PglogError('USAGE', `no store: give --store URL or set PGLOG_STORE_URL\n${usage}`);
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

/**
 * `env` is the process environment, read only for PGLOG_STORE_URL (entry point passes it).
 * A first argument `locks` or `activity` selects that report; anything else is the classic one.
 */
export function parseReportArgs(argv: string[], env: Readonly<Record<string, string | undefined>> = {}): ReportCommandArgs {
  const [first, ...rest] = argv;
  if (first === 'locks') {
    const { values } = parseCommandArgs({ args: rest, allowPositionals: false, options: COMMON_OPTIONS }, (message) => `${scrubText(message)}\n${LOCKS_USAGE}`);
    if (values.help === true) return { help: LOCKS_USAGE, storeUrl: '' };
    return { report: 'locks', ...commonArgs(values, env, LOCKS_USAGE), minDurationMs: 0 };
  }
  if (first === 'activity') {
    const { values } = parseCommandArgs(
      { args: rest, allowPositionals: false, options: { ...COMMON_OPTIONS, 'min-duration': { type: 'string' } } },
      (message) => `${scrubText(message)}\n${ACTIVITY_USAGE}`,
    );
    if (values.help === true) return { help: ACTIVITY_USAGE, storeUrl: '' };
    const text = values['min-duration'];
    const minDurationMs = text === undefined ? DEFAULT_MIN_DURATION_MS : parseDuration(text);
    if (minDurationMs === null) throw new PglogError('USAGE', `--min-duration ${text}: expected a duration (500ms, 30s, 5m, 1h)\n${ACTIVITY_USAGE}`);
    return { report: 'activity', ...commonArgs(values, env, ACTIVITY_USAGE), minDurationMs };
  }
  const { values } = parseCommandArgs(
    { args: argv, allowPositionals: false, options: { ...COMMON_OPTIONS, format: { type: 'string' }, html: { type: 'string' } } },
    (message) => `${scrubText(message)}\n${REPORT_USAGE}`,
  );
  if (values.help === true) return { help: REPORT_USAGE, storeUrl: '' };
  return { ...commonArgs(values, env, REPORT_USAGE), ...outputArgs(values) };
}

/** Runs the report; resolves to the exit code (0, or 1 when the store cannot be queried). */
export async function runReport(args: ReportCommandArgs, io: ReportIO): Promise<number> {
  if ('help' in args) {
    io.stdout.write(`${args.help}\n`);
    return 0;
  }
  const window = resolveWindow(args.since, args.until, Date.now());
  const width = terminalWidth(io.stdout);
  let name = 'pglog report';
  let render: (client: pg.Client) => Promise<string>;
  if ('report' in args) {
    name = `pglog report ${args.report}`;
    const filter: SnapshotFilter = { ...window, target: args.target, database: args.database, limit: args.limit, minDurationMs: args.minDurationMs };
    const json = args.json;
    render =
      args.report === 'locks'
        ? async (client) => {
            const r = await fetchLocksReport(client, filter);
            return json ? formatLocksJson(r) : formatLocksText(r, width);
          }
        : async (client) => {
            const r = await fetchActivityReport(client, filter);
            return json ? formatActivityJson(r) : formatActivityText(r, width);
          };
  } else {
    const filter: ReportFilter = { ...window, target: args.target, database: args.database, limit: args.limit };
    const json = args.json;
    if (args.html !== undefined) {
      // Read before the store is queried, so a missing asset is not reported as a store failure.
      let assets: Assets;
      try {
        assets = await loadAssets();
      } catch (e) {
        if (!isPglogError(e)) throw e;
        io.stderr.write(`${name}: ${e.message}\n`);
        return 1;
      }
      render = async (client) => renderHtml(await fetchHtmlReport(client, filter), assets);
    } else {
      render = async (client) => {
        const r = await fetchReport(client, filter);
        return json ? formatReportJson(r) : formatReportText(r, width);
      };
    }
  }
  let text: string;
  try {
    text = await queryStore(args.storeUrl, render);
  } catch (e) {
    if (!isPglogError(e)) throw e;
    io.stderr.write(`${name}: ${e.message}\n`);
    return 1;
  }
  const htmlFile = 'html' in args ? (args.html?.file ?? null) : null;
  if (htmlFile !== null) {
    try {
      await writeFile(htmlFile, text);
    } catch (e) {
      io.stderr.write(`${name}: cannot write ${htmlFile}: ${messageOf(e)}\n`);
      return 1;
    }
    return 0;
  }
  const out = new BufferedOutput(io.stdout);
  out.append(text);
  await out.flush();
  return 0;
}

function terminalWidth(stdout: Writable): number {
  const { isTTY, columns } = stdout as Writable & { isTTY?: boolean; columns?: number };
  return isTTY === true && typeof columns === 'number' && columns > 0 ? columns : DEFAULT_WIDTH;
}

async function queryStore<T>(storeUrl: string, fetch: (client: pg.Client) => Promise<T>): Promise<T> {
  const where = describePostgresUrl(storeUrl);
  // The URL's own password is scrubbed from any server or driver message quoted below.
  const secrets = new SecretScrubber();
  for (const password of storeUrlPasswords(storeUrl)) secrets.register(password);
  const client = new pg.Client({ connectionString: storeUrl, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, application_name: 'pglog report' });
  // A connection lost between queries is reported through the failing query; this keeps it
  // from also surfacing as an unhandled 'error' event.
  client.on('error', () => {
    /* reported by the query in flight */
  });
  try {
    await client.connect();
  } catch (e) {
    throw new PglogError('STORE_UNAVAILABLE', `cannot connect to the store (${where}): ${scrubText(messageOf(e), secrets)}`, { cause: e });
  }
  try {
    return await fetch(client);
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code === '42P01' || code === '3F000') {
      throw new PglogError(
        'STORE_UNAVAILABLE',
        `the store (${where}) has no pglog views: is it a pglog store? (pglog collect creates the schema when it starts; the snapshot reports need schema version 3 or later): ${scrubText(messageOf(e), secrets)}`,
        { cause: e },
      );
    }
    throw new PglogError('STORE_UNAVAILABLE', `querying the store (${where}) failed: ${scrubText(messageOf(e), secrets)}`, { cause: e });
  } finally {
    await client.end().catch(() => {
      /* the report is done or has already failed */
    });
  }
}

function messageOf(e: unknown): string {
  if (e instanceof AggregateError && e.errors.length > 0) return e.errors.map(messageOf).join('; ');
  if (e instanceof Error) return e.message === '' ? e.name : e.message;
  return String(e);
}
