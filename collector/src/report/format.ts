/**
 * The report as text for a terminal (fixed-width tables) or as one JSON object for machines.
 * Pure: a Report in, a string out. Text from the store reaches a terminal escaped
 * (terminal-safe.ts): in cells by renderTable, in lines where they are built, and once more
 * over every line in linesText; JSON escapes control characters itself.
 */
import { escapeControls, escapeLines } from './terminal-safe.ts';
import { type Column, DATABASE_COLUMN, flexColumn, numberColumns, oneLine, renderTable, TARGET_COLUMN, textColumns } from './text-table.ts';
import type { ErrorStats, FromStore, LockWaitStats, Report, ReportSection, StatementStats, StoresRead } from './types.ts';

/** A duration in milliseconds for people: `0.250 ms`, `12.3 ms`, `4.57 s`, `12m 05s`, `3h 07m`. */
export function formatMs(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '-';
  if (ms < 1) return `${ms.toFixed(3)} ms`;
  if (ms.toFixed(1) !== '1000.0' && ms < 1000) return `${ms.toFixed(1)} ms`;
  const s = ms / 1000;
  if (s.toFixed(2) !== '60.00' && s < 60) return `${s.toFixed(2)} s`;
  const wholeSeconds = Math.round(s);
  if (wholeSeconds < 3600) return `${Math.floor(wholeSeconds / 60)}m ${String(wholeSeconds % 60).padStart(2, '0')}s`;
  const wholeMinutes = Math.round(s / 60);
  return `${Math.floor(wholeMinutes / 60)}h ${String(wholeMinutes % 60).padStart(2, '0')}m`;
}

/** An integer with thousands separators: `1,234,567`. */
export function formatCount(n: number): string {
  const [int = '', frac] = String(Math.trunc(n) === n ? n : n.toFixed(1)).split('.');
  // eslint-disable-next-line regexp/no-super-linear-move -- String(n) of a number has at most 21 integer digits
  const grouped = int.replace(/\B(?=(?:\d{3})+(?!\d))/g, ',');
  return frac === undefined ? grouped : `${grouped}.${frac}`;
}

/** `2024-05-01 10:00:00` (UTC; the report's header says so). */
export function formatTime(d: Date): string {
  return d.toISOString().slice(0, 19).replace('T', ' ');
}

/** What a cell shows for a missing value. */
export const NONE = '-';

/**
 * The first line of every report: `pglog report[ NAME]  <since> .. <until> UTC`, then the
 * filters in use and anything `extra`.
 */
export function reportHeader(
  title: string,
  f: { since: Date; until: Date; target: string | null; database: string | null },
  extra: readonly string[] = [],
): string {
  const parts = [`${title}  ${formatTime(f.since)} .. ${formatTime(f.until)} UTC`];
  if (f.target !== null) parts.push(`target ${escapeControls(f.target)}`);
  if (f.database !== null) parts.push(`database ${escapeControls(f.database)}`);
  return [...parts, ...extra].join('  ');
}

/**
 * With several stores, the lines under the header: the stores read, then each store that could
 * not be read (--partial) and why. Nothing for one store.
 */
export function storesLines(stores: StoresRead | undefined): string[] {
  if (stores === undefined) return [];
  const out = [`stores  ${stores.names.map(oneLine).join('  ')}`];
  for (const f of stores.failed) out.push(`!  store ${oneLine(f.store)} not read (--partial): ${oneLine(f.error)}`);
  return out;
}

/** The column naming a row's store (several stores, the same group from two of them): never cut, names often differ only at their end. */
const STORE_COLUMN: Readonly<Column> = { header: 'store', align: 'left' };

/**
 * A table of `rows`: with a first column naming each row's store when a row has one (the other
 * rows show `-` there), else just the columns.
 */
export function storeTable<T extends FromStore>(columns: readonly Column[], rows: readonly T[], cells: (r: T) => string[], width: number): string {
  if (!rows.some((r) => r.store !== undefined)) return renderTable(columns, rows.map(cells), width);
  return renderTable(
    [STORE_COLUMN, ...columns],
    rows.map((r) => [r.store === undefined ? NONE : oneLine(r.store), ...cells(r)]),
    width,
  );
}

/** The JSON fields of several stores (none for one): every store's name, and those not read with why. */
export function storesJson(stores: StoresRead | undefined, failedName: 'failed_stores' | 'failedStores'): object {
  return stores === undefined ? {} : { stores: stores.names, [failedName]: stores.failed };
}

/**
 * A table's title: `NAME: <none>` when there is nothing, else `NAME<order> (shown of total)`
 * (the table is cut at --limit).
 */
export function sectionTitle(name: string, shown: number, total: number, options: { order?: string; none?: string } = {}): string {
  if (total === 0) return `${name}: ${options.none ?? 'none in this window'}`;
  return `${name}${options.order ?? ''} (${shown} of ${formatCount(total)})`;
}

function title(name: string, section: ReportSection<unknown>): string {
  return sectionTitle(name, section.rows.length, section.groups);
}

const STATEMENT_COLUMNS: Column[] = [
  TARGET_COLUMN,
  DATABASE_COLUMN,
  ...numberColumns('calls', 'total', 'mean', 'stddev', 'min', 'max', 'p95'),
  ...textColumns('fingerprint'),
  flexColumn('query'),
];

function statementCells(r: StatementStats): string[] {
  const durations = [r.total_ms, r.mean_ms, r.stddev_ms, r.min_ms, r.max_ms, r.p95_ms].map(formatMs);
  return [r.target, r.database ?? NONE, formatCount(r.calls), ...durations, r.fingerprint ?? NONE, oneLine(r.query)];
}

const ERROR_COLUMNS: Column[] = [
  TARGET_COLUMN,
  DATABASE_COLUMN,
  ...textColumns('severity', 'sqlstate'),
  ...numberColumns('count'),
  ...textColumns('first seen', 'last seen'),
  flexColumn('message'),
];

function errorCells(r: ErrorStats): string[] {
  return [
    r.target,
    r.database ?? NONE,
    r.severity,
    r.sqlstate ?? NONE,
    formatCount(r.count),
    formatTime(r.first_seen),
    formatTime(r.last_seen),
    oneLine(r.message),
  ];
}

const LOCK_COLUMNS: Column[] = [
  TARGET_COLUMN,
  DATABASE_COLUMN,
  ...textColumns('lock type'),
  ...numberColumns('messages', 'acquired', 'total wait', 'max wait'),
];

function lockCells(r: LockWaitStats): string[] {
  return [r.target, r.database ?? NONE, r.lock_type ?? NONE, formatCount(r.count), formatCount(r.acquired), formatMs(r.total_wait_ms), formatMs(r.max_wait_ms)];
}

/** A section's title, then its table unless it has no rows. */
function sectionLines<T extends FromStore>(name: string, section: ReportSection<T>, columns: Column[], cells: (r: T) => string[], width: number): string[] {
  const out = [title(name, section)];
  if (section.rows.length > 0) out.push(storeTable(columns, section.rows, cells, width));
  return out;
}

/** Readable fixed-width tables, `width` characters wide where the columns allow. */
export function formatReportText(report: Report, width: number): string {
  return linesText([
    reportHeader('pglog report', report.filter),
    ...storesLines(report.stores),
    '',
    ...sectionLines('Top query templates by total time', report.statements, STATEMENT_COLUMNS, statementCells, width),
    '',
    ...sectionLines('Errors by SQLSTATE and message', report.errors, ERROR_COLUMNS, errorCells, width),
    '',
    ...sectionLines('Lock waits by lock type', report.lockWaits, LOCK_COLUMNS, lockCells, width),
  ]);
}

/**
 * A text report's lines as one string, each line ended. Every text report ends here, so the
 * whole text is escaped once more (idempotent on what its builders escaped): a field a line
 * builder missed still cannot send a terminal a control sequence. Only the newlines are kept,
 * since a line may be a whole table; line builders escape their fields, so no raw newline of
 * a field reaches this point to fake a line.
 */
export function linesText(lines: readonly string[]): string {
  return `${escapeLines(lines.join('\n'))}\n`;
}

const JSON_UNSAFE = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * A JSON document as the reports print it: indented, ended by a newline. JSON.stringify escapes
 * only C0; DEL, C1 (U+009B is CSI) and bidi controls are written as `\uXXXX` too, which parses
 * back to the same text, so `--json` printed on a terminal sends it no control either.
 */
export function jsonText(doc: object): string {
  return `${JSON.stringify(doc, null, 2).replace(JSON_UNSAFE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}\n`;
}

/** The report as one JSON document (`--json`): the window, the filters, the three sections. */
export function reportToJson(report: Report): object {
  const f = report.filter;
  return {
    window: { since: f.since.toISOString(), until: f.until.toISOString() },
    filters: { target: f.target, database: f.database, limit: f.limit },
    statements: report.statements.rows,
    errors: report.errors.rows.map((r) => ({ ...r, first_seen: r.first_seen.toISOString(), last_seen: r.last_seen.toISOString() })),
    lock_waits: report.lockWaits.rows,
    groups: { statements: report.statements.groups, errors: report.errors.groups, lock_waits: report.lockWaits.groups },
    ...storesJson(report.stores, 'failed_stores'),
  };
}

export function formatReportJson(report: Report): string {
  return jsonText(reportToJson(report));
}
