/**
 * `pglog report --store URL [--store URL ...] [--partial] [--since 1h] [--until T] [--target T] [--database D] [--limit N] [--json]`
 * `pglog report ... --html FILE` / `--format html`: the same window as one self-contained HTML page
 * `pglog report locks|activity ...` (the same options; activity also --min-duration)
 *
 * Top query templates, errors and lock waits from the store's stable views over a time
 * window; with `locks`, the blocking trees and episodes from the SQL snapshots; with
 * `activity`, sessions by state and long-running ones. As terminal text or one JSON object.
 * Options are validated here, once; the window is resolved against the clock when the
 * command runs. With several stores (one per pool), each is read in its own snapshot, all at
 * once, and the reports are merged (collector/src/report/merge.ts); the HTML page reads one.
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
import { mergeActivityReports, mergeLocksReports, mergeReports, type StorePart } from '@pglog/collector/report/merge.ts';
import { parseDuration, parseTimeBound, resolveWindow, type TimeBound } from '@pglog/collector/report/since.ts';
import { fetchActivityReport, fetchLocksReport } from '@pglog/collector/report/snapshot-fetch.ts';
import type { SnapshotFilter } from '@pglog/collector/report/snapshot-types.ts';
import { escapeControls } from '@pglog/collector/report/terminal-safe.ts';
import type { ReportFilter, StoresRead } from '@pglog/collector/report/types.ts';
import { connectStore, storeClient } from '@pglog/collector/store/store-connection.ts';
import { describeStore, storeUrlPasswords } from '@pglog/collector/store/store-url.ts';
import { isPglogError, PglogError } from '@pglog/common/errors.ts';
import { describePostgresUrl, scrubText, SecretScrubber } from '@pglog/common/observability/redact.ts';
import type pg from 'pg';

import { parseCommandArgs } from './command-args.ts';
import { BufferedOutput } from './output.ts';

export const REPORT_USAGE = `usage: pglog report --store URL [--store URL ...] [--partial] [--since DURATION|TIME] [--until DURATION|TIME]
                    [--target NAME] [--database NAME] [--limit N]
                    [--json | --format text|json|html | --html FILE]
       pglog report locks ...      blocking trees from the SQL snapshots (see pglog report locks --help)
       pglog report activity ...   sessions by state, long-running ones (pglog report activity --help)
  --store     PostgreSQL URL of the pglog store, e.g. postgres://user:pw@host/pglog
              (default: the environment variable PGLOG_STORE_URL, which keeps a
              password out of the process list). Give it once per store to read
              several (pools writing different stores) as one report (not --html)
  --partial   with several stores: report the stores that answered when some fail
              (exit 3), instead of failing (exit 1)
  --since     start of the window: a duration before now (30s, 15m, 1h, 2d, 1w) or an
              ISO timestamp (2024-05-01T10:00:00Z; UTC when no offset is given); default 1h
  --until     end of the window, the same forms; default now
  --target    only this server (PostgresTarget name)
  --database  only this database
  --limit     rows per section (default 20)
  --json      one JSON object instead of tables (= --format json)
  --format    text (default), json, or html: one self-contained HTML page with charts
  --html      write the HTML page to FILE (prints nothing else)`;

const SNAPSHOT_OPTIONS_HELP = `  --store     PostgreSQL URL of the pglog store (default: PGLOG_STORE_URL); once per
              store to read several as one report
  --partial   with several stores: report those that answered when some fail (exit 3)
  --since     start of the window: a duration before now (30s, 15m, 1h, 2d, 1w) or an
              ISO timestamp (UTC when no offset is given); default 1h
  --until     end of the window, the same forms; default now. The newest snapshot of
              each server in the window is its "current" one
  --target    only this server (PostgresTarget name)
  --database  only this database`;

export const LOCKS_USAGE = `usage: pglog report locks --store URL [--store URL ...] [--partial] [--since DURATION|TIME] [--until DURATION|TIME]
                          [--target NAME] [--database NAME] [--limit N] [--json]
Per server instance: the blocking tree of the newest snapshot (roots block others and wait
for nobody; children wait for their parent), a failed newest snapshot run, and the blocking
episodes of the window (one per root session and transaction), newest first.
${SNAPSHOT_OPTIONS_HELP} (trees and episodes involving a session of it)
  --limit     episodes shown (default 20)
  --json      one JSON document instead of text (fields: docs/report.md)`;

export const ACTIVITY_USAGE = `usage: pglog report activity --store URL [--store URL ...] [--partial] [--since DURATION|TIME] [--until DURATION|TIME]
                             [--target NAME] [--database NAME] [--min-duration DURATION]
                             [--limit N] [--json]
Per server instance: the sessions of the newest snapshot by state, a failed newest snapshot
run, and the long-running sessions (active or idle in transaction, transaction at least
--min-duration old), longest first.
${SNAPSHOT_OPTIONS_HELP} (sessions of it)
  --min-duration  the least transaction age to list a session (default 30s)
  --limit     long-running sessions shown (default 20)
  --json      one JSON document instead of text (fields: docs/report.md)`;

/** A store to read: its URL (may hold a password) and its name in the output (never does). */
export interface StoreArg {
  url: string;
  /** `user@host:port/database` (describeStore), or `store N` when the URL cannot be named safely. */
  name: string;
}

export interface ReportArgs {
  /** One or more (--store once per store); the first is PGLOG_STORE_URL when no --store is given. */
  stores: StoreArg[];
  /** With several stores: report those that answered when some fail. */
  partial: boolean;
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
  /** Always empty: help needs no store (the field is there so every variant has one). */
  stores: [];
}

export type ReportCommandArgs = ReportArgs | SnapshotReportArgs | ReportHelp;

/** Default --min-duration of `report activity`: long enough that ordinary OLTP work stays out of the list. */
const DEFAULT_MIN_DURATION_MS = 30_000;

const COMMON_OPTIONS = {
  store: { type: 'string', multiple: true },
  partial: { type: 'boolean' },
  since: { type: 'string' },
  until: { type: 'string' },
  target: { type: 'string' },
  database: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type CommonValues = {
  [K in Exclude<keyof typeof COMMON_OPTIONS, 'store'>]?: (typeof COMMON_OPTIONS)[K]['type'] extends 'boolean' ? boolean : string;
} & { store?: string[] };

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

/**
 * The stores of --store (each once), else PGLOG_STORE_URL, named for the output. Two URLs
 * that name the same store (the same user, host, port and database) are refused: its rows
 * would be counted twice.
 */
function storeArgs(values: CommonValues, env: Readonly<Record<string, string | undefined>>, usage: string): StoreArg[] {
  const urls = values.store ?? (env.PGLOG_STORE_URL === undefined ? [] : [env.PGLOG_STORE_URL]);
  if (urls.length === 0 || urls.some((u) => u === '')) throw new PglogError('USAGE', `no store: give --store URL or set PGLOG_STORE_URL\n${usage}`);
  const stores = urls.map((url, i) => {
    const described = describeStore(url);
    return { url, name: described.startsWith('store ') ? described.slice('store '.length) : `store ${i + 1}` };
  });
  const names = stores.map((s) => s.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) throw new PglogError('USAGE', `--store: ${twice} is given twice; give each store once\n${usage}`);
  return stores;
}

/** The options every report shares, validated; `usage` is appended to usage errors. */
function commonArgs(values: CommonValues, env: Readonly<Record<string, string | undefined>>, usage: string): ReportArgs {
  const stores = storeArgs(values, env, usage);
  const limit = values.limit === undefined ? DEFAULT_LIMIT : Number(values.limit);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw new PglogError('USAGE', `--limit ${values.limit}: expected an integer from 1 to ${MAX_LIMIT}`);
  }
  const since = parseTimeBound(values.since ?? '1h', '--since');
  const until = values.until === undefined ? { agoMs: 0 } : parseTimeBound(values.until, '--until');
  if ('at' in since && 'at' in until) resolveWindow(since, until, 0); // a reversed window is a usage error before connecting
  return {
    stores,
    partial: values.partial === true,
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
    if (values.help === true) return { help: LOCKS_USAGE, stores: [] };
    return { report: 'locks', ...commonArgs(values, env, LOCKS_USAGE), minDurationMs: 0 };
  }
  if (first === 'activity') {
    const { values } = parseCommandArgs(
      { args: rest, allowPositionals: false, options: { ...COMMON_OPTIONS, 'min-duration': { type: 'string' } } },
      (message) => `${scrubText(message)}\n${ACTIVITY_USAGE}`,
    );
    if (values.help === true) return { help: ACTIVITY_USAGE, stores: [] };
    const text = values['min-duration'];
    const minDurationMs = text === undefined ? DEFAULT_MIN_DURATION_MS : parseDuration(text);
    if (minDurationMs === null) throw new PglogError('USAGE', `--min-duration ${text}: expected a duration (500ms, 30s, 5m, 1h)\n${ACTIVITY_USAGE}`);
    return { report: 'activity', ...commonArgs(values, env, ACTIVITY_USAGE), minDurationMs };
  }
  const { values } = parseCommandArgs(
    { args: argv, allowPositionals: false, options: { ...COMMON_OPTIONS, format: { type: 'string' }, html: { type: 'string' } } },
    (message) => `${scrubText(message)}\n${REPORT_USAGE}`,
  );
  if (values.help === true) return { help: REPORT_USAGE, stores: [] };
  const args = { ...commonArgs(values, env, REPORT_USAGE), ...outputArgs(values) };
  if (args.html !== undefined && args.stores.length > 1) {
    throw new PglogError('USAGE', `the HTML report reads one store: give --store once (one page per store)\n${REPORT_USAGE}`);
  }
  return args;
}

/** What one report does with a store, with several, and with its result. */
interface ReportKind<R> {
  /** `pglog report`, `pglog report locks`, ...: the prefix of messages. */
  name: string;
  /** Reads one store (in one read-only snapshot). */
  fetch: (client: pg.Client) => Promise<R>;
  /** Several stores' reports as one (parseReportArgs allows several stores only where there is one). */
  merge?: (parts: Array<StorePart<R>>, stores: StoresRead) => R;
  format: (report: R) => string;
  /** Write the text to this file instead of standard output. */
  file: string | null;
}

/**
 * Runs the report; resolves to the exit code: 0, 1 when a store cannot be queried (or, with
 * --partial, none could), 3 when --partial left out a store that could not be queried.
 */
export async function runReport(args: ReportCommandArgs, io: ReportIO): Promise<number> {
  if ('help' in args) {
    io.stdout.write(`${args.help}\n`);
    return 0;
  }
  const window = resolveWindow(args.since, args.until, Date.now());
  const width = terminalWidth(io.stdout);
  if ('report' in args) {
    const filter: SnapshotFilter = { ...window, target: args.target, database: args.database, limit: args.limit, minDurationMs: args.minDurationMs };
    const json = args.json;
    if (args.report === 'locks') {
      return runKind(args, io, {
        name: 'pglog report locks',
        fetch: (client) => fetchLocksReport(client, filter),
        merge: (parts, stores) => mergeLocksReports(filter, parts, stores),
        format: (r) => (json ? formatLocksJson(r) : formatLocksText(r, width)),
        file: null,
      });
    }
    return runKind(args, io, {
      name: 'pglog report activity',
      fetch: (client) => fetchActivityReport(client, filter),
      merge: (parts, stores) => mergeActivityReports(filter, parts, stores),
      format: (r) => (json ? formatActivityJson(r) : formatActivityText(r, width)),
      file: null,
    });
  }
  const filter: ReportFilter = { ...window, target: args.target, database: args.database, limit: args.limit };
  if (args.html !== undefined) {
    // Read before the store is queried, so a missing asset is not reported as a store failure.
    let assets: Assets;
    try {
      assets = await loadAssets();
    } catch (e) {
      if (!isPglogError(e)) throw e;
      io.stderr.write(`pglog report: ${e.message}\n`);
      return 1;
    }
    return runKind(args, io, {
      name: 'pglog report',
      fetch: (client) => fetchHtmlReport(client, filter),
      format: (r) => renderHtml(r, assets),
      file: args.html.file,
    });
  }
  const json = args.json;
  return runKind(args, io, {
    name: 'pglog report',
    fetch: (client) => fetchReport(client, filter),
    merge: (parts, stores) => mergeReports(filter, parts, stores),
    format: (r) => (json ? formatReportJson(r) : formatReportText(r, width)),
    file: null,
  });
}

/** Queries every store at once, each in its own snapshot; merges, formats and writes the report. */
async function runKind<R>(args: ReportArgs, io: ReportIO, kind: ReportKind<R>): Promise<number> {
  // Every store's password is scrubbed from every message: one store's error never shows another's.
  const secrets = new SecretScrubber();
  for (const store of args.stores) for (const password of storeUrlPasswords(store.url)) secrets.register(password);
  const results = await Promise.allSettled(args.stores.map((store) => queryStore(store.url, kind.fetch, secrets)));
  const parts: Array<StorePart<R>> = [];
  const failed: StoresRead['failed'] = [];
  results.forEach((result, i) => {
    const store = args.stores[i]!.name;
    if (result.status === 'fulfilled') {
      parts.push({ store, report: result.value });
      return;
    }
    if (!isPglogError(result.reason)) throw result.reason;
    // Scrubbed once more as a whole: the store's description is part of it too. A store's
    // error can quote names a monitored server chose: escaped like the report's own text.
    const message = escapeControls(scrubText(result.reason.message, secrets));
    failed.push({ store, error: message });
    io.stderr.write(`${kind.name}: ${message}\n`);
  });
  if (failed.length > 0 && (!args.partial || parts.length === 0)) return 1;
  const only = args.stores.length === 1 ? parts[0] : undefined;
  const merged = only?.report ?? kind.merge?.(parts, { names: args.stores.map((s) => s.name), failed });
  if (merged === undefined) throw new Error(`${kind.name}: several stores reached a report that reads one`);
  const text = kind.format(merged);
  if (kind.file !== null) {
    try {
      await writeFile(kind.file, text);
    } catch (e) {
      io.stderr.write(`${kind.name}: cannot write ${kind.file}: ${messageOf(e)}\n`);
      return 1;
    }
  } else {
    const out = new BufferedOutput(io.stdout);
    out.append(text);
    await out.flush();
  }
  return failed.length > 0 ? 3 : 0;
}

function terminalWidth(stdout: Writable): number {
  const { isTTY, columns } = stdout as Writable & { isTTY?: boolean; columns?: number };
  return isTTY === true && typeof columns === 'number' && columns > 0 ? columns : DEFAULT_WIDTH;
}

/** Runs `fetch` on a connection to the store; a failure is STORE_UNAVAILABLE naming the store, `secrets` scrubbed from it. */
async function queryStore<T>(storeUrl: string, fetch: (client: pg.Client) => Promise<T>, secrets: SecretScrubber): Promise<T> {
  const where = describePostgresUrl(storeUrl);
  // On the store's pinned search_path (store-connection.ts): a function or operator another role
  // planted in schema public never runs as the reader.
  const client = storeClient(storeUrl, { connectionTimeoutMillis: CONNECT_TIMEOUT_MS, application_name: 'pglog report' });
  // A connection lost between queries is reported through the failing query; this keeps it
  // from also surfacing as an unhandled 'error' event.
  client.on('error', () => {
    /* reported by the query in flight */
  });
  try {
    await connectStore(client);
  } catch (e) {
    // Connected but the path could not be checked: the session must not stay open.
    await client.end().catch(() => {
      /* never connected, or already gone */
    });
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
