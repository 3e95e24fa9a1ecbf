/**
 * The report as text for a terminal (fixed-width tables) or as one JSON object for machines.
 * Pure: a Report in, a string out.
 */
import { type Column, DATABASE_COLUMN, oneLine, renderTable, TARGET_COLUMN } from './text-table.ts';
import type { Report, ReportSection } from './types.ts';

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
  if (f.target !== null) parts.push(`target ${f.target}`);
  if (f.database !== null) parts.push(`database ${f.database}`);
  return [...parts, ...extra].join('  ');
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
  { header: 'calls', align: 'right' },
  { header: 'total', align: 'right' },
  { header: 'mean', align: 'right' },
  { header: 'stddev', align: 'right' },
  { header: 'min', align: 'right' },
  { header: 'max', align: 'right' },
  { header: 'p95', align: 'right' },
  { header: 'fingerprint', align: 'left' },
  { header: 'query', align: 'left', flex: true },
];

const ERROR_COLUMNS: Column[] = [
  TARGET_COLUMN,
  DATABASE_COLUMN,
  { header: 'severity', align: 'left' },
  { header: 'sqlstate', align: 'left' },
  { header: 'count', align: 'right' },
  { header: 'first seen', align: 'left' },
  { header: 'last seen', align: 'left' },
  { header: 'message', align: 'left', flex: true },
];

const LOCK_COLUMNS: Column[] = [
  TARGET_COLUMN,
  DATABASE_COLUMN,
  { header: 'lock type', align: 'left' },
  { header: 'messages', align: 'right' },
  { header: 'acquired', align: 'right' },
  { header: 'total wait', align: 'right' },
  { header: 'max wait', align: 'right' },
];

/** Readable fixed-width tables, `width` characters wide where the columns allow. */
export function formatReportText(report: Report, width: number): string {
  const out: string[] = [reportHeader('pglog report', report.filter), ''];
  out.push(title('Top query templates by total time', report.statements));
  if (report.statements.rows.length > 0) {
    out.push(
      renderTable(
        STATEMENT_COLUMNS,
        report.statements.rows.map((r) => [
          r.target,
          r.database ?? NONE,
          formatCount(r.calls),
          formatMs(r.total_ms),
          formatMs(r.mean_ms),
          formatMs(r.stddev_ms),
          formatMs(r.min_ms),
          formatMs(r.max_ms),
          formatMs(r.p95_ms),
          r.fingerprint ?? NONE,
          oneLine(r.query),
        ]),
        width,
      ),
    );
  }
  out.push('', title('Errors by SQLSTATE and message', report.errors));
  if (report.errors.rows.length > 0) {
    out.push(
      renderTable(
        ERROR_COLUMNS,
        report.errors.rows.map((r) => [
          r.target,
          r.database ?? NONE,
          r.severity,
          r.sqlstate ?? NONE,
          formatCount(r.count),
          formatTime(r.first_seen),
          formatTime(r.last_seen),
          oneLine(r.message),
        ]),
        width,
      ),
    );
  }
  out.push('', title('Lock waits by lock type', report.lockWaits));
  if (report.lockWaits.rows.length > 0) {
    out.push(
      renderTable(
        LOCK_COLUMNS,
        report.lockWaits.rows.map((r) => [
          r.target,
          r.database ?? NONE,
          r.lock_type ?? NONE,
          formatCount(r.count),
          formatCount(r.acquired),
          formatMs(r.total_wait_ms),
          formatMs(r.max_wait_ms),
        ]),
        width,
      ),
    );
  }
  return `${out.join('\n')}\n`;
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
  };
}

export function formatReportJson(report: Report): string {
  return `${JSON.stringify(reportToJson(report), null, 2)}\n`;
}
