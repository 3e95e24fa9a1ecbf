/**
 * `pglog report activity` as text (a table of servers, a table of long-running sessions) or
 * as one JSON document. Pure: an ActivityReport in, a string out.
 */
import { formatCount, formatMs, formatTime, jsonText, linesText, NONE, reportHeader, sectionTitle, storesLines, storeTable } from './format.ts';
import { iso, lastRunFailure, NO_RUNS, serverName, snapshotReportJson } from './snapshot-format.ts';
import type { ActivityReport, LongSession, ServerActivity } from './snapshot-types.ts';
import { type Column, DATABASE_COLUMN, flexColumn, INSTANCE_COLUMN, numberColumns, oneLine, TARGET_COLUMN, textColumns } from './text-table.ts';

/** Sessions of the current snapshot: by state, summed (with --database, of that database only). */
export function sessionCount(s: ServerActivity): number {
  return Object.values(s.byState).reduce((a, b) => a + b, 0);
}

/** The table's state columns; every other state (fastpath, disabled, none) counts as "other". */
function stateCells(s: ServerActivity): string[] {
  const by = s.byState;
  const active = by.active ?? 0;
  const idleInXact = (by['idle in transaction'] ?? 0) + (by['idle in transaction (aborted)'] ?? 0);
  const idle = by.idle ?? 0;
  return [active, idleInXact, idle, sessionCount(s) - active - idleInXact - idle].map(formatCount);
}

const SERVER_COLUMNS: Column[] = [
  TARGET_COLUMN,
  INSTANCE_COLUMN,
  ...textColumns('snapshot (UTC)'),
  ...numberColumns('sessions', 'active', 'idle in xact', 'idle', 'other', 'lock waits', 'runs', 'failed'),
  ...textColumns('newest run'),
];

function serverCells(s: ServerActivity): string[] {
  const failure = lastRunFailure(s);
  const snapshot = s.snapshotAt === null ? NONE : formatTime(s.snapshotAt);
  const counts = s.snapshotAt === null ? [NONE, NONE, NONE, NONE, NONE, NONE] : [formatCount(sessionCount(s)), ...stateCells(s), formatCount(s.lockWaiting)];
  return [
    s.target,
    s.instance,
    snapshot,
    ...counts,
    formatCount(s.runs),
    formatCount(s.failedRuns),
    failure === null ? 'ok' : `FAILED ${s.lastErrorCode ?? ''}`.trimEnd(),
  ];
}

const LONG_COLUMNS: Column[] = [
  TARGET_COLUMN,
  INSTANCE_COLUMN,
  ...numberColumns('pid'),
  DATABASE_COLUMN,
  { header: 'user', align: 'left', maxWidth: 16 },
  { header: 'application', align: 'left', maxWidth: 20 },
  ...textColumns('state'),
  ...numberColumns('xact', 'statement'),
  { header: 'waiting for', align: 'left', maxWidth: 24 },
  flexColumn('query'),
];

function longCells(l: LongSession): string[] {
  const wait = l.waitEventType === null ? NONE : `${l.waitEventType}${l.waitEvent === null ? '' : `:${l.waitEvent}`}`;
  return [
    l.target,
    l.instance,
    String(l.pid),
    l.database ?? NONE,
    l.user ?? NONE,
    l.application === null || l.application === '' ? NONE : oneLine(l.application),
    l.state ?? NONE,
    formatMs(l.xactMs),
    formatMs(l.queryMs),
    wait,
    l.query === null ? NONE : oneLine(l.query),
  ];
}

export function formatActivityText(report: ActivityReport, width: number): string {
  const f = report.filter;
  const out = [reportHeader('pglog report activity', f, [`min duration ${formatMs(f.minDurationMs)}`]), ...storesLines(report.stores), ''];
  if (report.servers.length === 0) {
    out.push(NO_RUNS);
  } else {
    out.push('Servers: newest snapshot in the window');
    out.push(storeTable(SERVER_COLUMNS, report.servers, serverCells, width));
    // The reason in full below the table: a column would cut it to the terminal's width.
    for (const s of report.servers) {
      const failure = lastRunFailure(s);
      if (failure !== null) out.push(`!  ${serverName(s)}: ${failure}`);
    }
  }
  out.push('');
  const what = `Long-running sessions: transaction (or statement) of at least ${formatMs(f.minDurationMs)}`;
  out.push(sectionTitle(what, report.longRunning.length, report.longRunningTotal, { order: ', longest first', none: 'none' }));
  if (report.longRunningTotal > 0) out.push(storeTable(LONG_COLUMNS, report.longRunning, longCells, width));
  return linesText(out);
}

export function activityToJson(report: ActivityReport): object {
  const serverFields = (s: ServerActivity): object => ({
    sessions: s.snapshotAt === null ? null : sessionCount(s),
    byState: s.byState,
    lockWaiting: s.lockWaiting,
  });
  return {
    ...snapshotReportJson('activity', report, serverFields, { minDurationMs: report.filter.minDurationMs }),
    longRunning: report.longRunning.map((l) => ({ ...l, snapshotAt: iso(l.snapshotAt) })),
    longRunningTotal: report.longRunningTotal,
  };
}

export function formatActivityJson(report: ActivityReport): string {
  return jsonText(activityToJson(report));
}
