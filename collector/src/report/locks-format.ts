/**
 * `pglog report locks` as text (an ASCII tree per server, a table of episodes) or as one JSON
 * document. Pure: a LocksReport in, a string out.
 */
import type { BlockingNode } from './blocking-tree.ts';
import { formatCount, formatMs, formatTime, jsonText, linesText, NONE, reportHeader, sectionTitle, storesLines, storeTable } from './format.ts';
import { iso, lastRunFailure, NO_RUNS, serverName, snapshotReportJson } from './snapshot-format.ts';
import type { BlockingEpisode, LocksReport, ServerLocks } from './snapshot-types.ts';
import { escapeControls } from './terminal-safe.ts';
import { type Column, cut, flexColumn, INSTANCE_COLUMN, numberColumns, oneLine, TARGET_COLUMN, textColumns } from './text-table.ts';

/** The query of a tree line never gets fewer characters than this, even past the width. */
const MIN_QUERY_CHARS = 20;

function codePoints(s: string): number {
  return Array.from(s).length;
}

/** `app@shop`; pid 0 is how pg_blocking_pids shows a prepared transaction. */
function who(n: BlockingNode): string {
  if (n.pid === 0) return '(prepared transaction)';
  return `${n.user ?? NONE}@${n.database ?? NONE}`;
}

function lockObject(relation: string | null, lockType: string | null): string {
  return relation ?? lockType ?? NONE;
}

/** One node as a line (without the tree prefix); the query is cut so the line fits `width`. */
export function nodeLine(n: BlockingNode, parent: BlockingNode | null, width: number): string {
  const parts = [`${n.pid} ${who(n)}`];
  if (n.state !== null) parts.push(n.state);
  if (parent !== null && n.waitMode !== null) {
    let wait = `waits ${n.waitMode} on ${lockObject(n.relation, n.lockType)} ${formatMs(n.waitMs)}`;
    // No held mode: the parent holds nothing conflicting but is queued ahead with a request that conflicts.
    if (n.heldMode === null) wait += ` (queued behind ${parent.pid}${parent.waitMode === null ? '' : `'s ${parent.waitMode}`})`;
    parts.push(wait);
  } else if (n.waitsFor.length > 0) {
    parts.push(`in a lock cycle, waits for ${n.waitsFor.join(', ')}`);
  }
  const others = parent === null ? [] : n.waitsFor.filter((p) => p !== parent.pid);
  if (others.length > 0) parts.push(`also waits for ${others.join(', ')}`);
  if (n.repeat) parts.push('[repeat: see above]');
  if (n.cycle) parts.push(`[cycle: back to ${n.pid} above]`);
  if (!n.repeat && !n.cycle && n.holds.length > 0) {
    parts.push(`holds ${n.holds.map((h) => `${h.mode} on ${lockObject(h.relation, h.lockType)}`).join(', ')}`);
  }
  if (n.xactMs !== null) parts.push(`xact ${formatMs(n.xactMs)}`);
  if (n.application !== null && n.application !== '') parts.push(`[${oneLine(n.application)}]`);
  // User, database, relation and state names are the server's text: escaped (a newline in one
  // would fake a tree line) before the query's budget is measured against the line.
  const line = escapeControls(parts.join('  '));
  if (n.query === null || n.query === '' || n.repeat || n.cycle) return line;
  const budget = Math.max(MIN_QUERY_CHARS, width - codePoints(line) - 4);
  return `${line}  "${cut(oneLine(n.query), budget)}"`;
}

/** Waiters shown under one node in text; a lock queue of hundreds reads better as a count (JSON has them all). */
export const MAX_CHILDREN_SHOWN = 20;
/** Servers without blocked sessions get a line each up to this many; more are one summary line. */
export const QUIET_SERVERS_LISTED = 5;

function treeLines(nodes: readonly BlockingNode[], parent: BlockingNode | null, indent: string, width: number, out: string[]): void {
  const shown = parent === null ? nodes : nodes.slice(0, MAX_CHILDREN_SHOWN);
  const hidden = nodes.length - shown.length;
  shown.forEach((n, i) => {
    const last = i === shown.length - 1 && hidden === 0;
    const prefix = `${indent}${last ? '└─ ' : '├─ '}`;
    out.push(prefix + nodeLine(n, parent, width - codePoints(prefix)));
    treeLines(n.children, n, indent + (last ? '   ' : '│  '), width, out);
  });
  if (hidden > 0) out.push(`${indent}└─ … ${formatCount(hidden)} more waiting (--json lists them all)`);
}

/** A server with nothing to show: a snapshot, no blocking, a newest run that worked. */
function isQuiet(s: ServerLocks): boolean {
  return s.snapshotAt !== null && s.forest.roots.length === 0 && lastRunFailure(s) === null;
}

function serverLines(s: ServerLocks, width: number): string[] {
  const failure = lastRunFailure(s);
  if (s.snapshotAt === null) return [`${serverName(s)}  no snapshot in the window: ${failure ?? 'no successful run'}`];
  const f = s.forest;
  const summary =
    f.blockedSessions === 0
      ? 'no blocked sessions'
      : `${formatCount(f.blockedSessions)} session${f.blockedSessions === 1 ? '' : 's'} blocked, longest wait ${formatMs(f.longestWaitMs)}`;
  const out = [`${serverName(s)}  snapshot ${formatTime(s.snapshotAt)}Z  ${summary}`];
  if (failure !== null) out.push(`!  ${failure}`);
  for (const c of f.cycles) out.push(`!  lock cycle: ${[...c, c[0]].join(' → ')} (each waits for the next; a deadlock not broken yet)`);
  treeLines(f.roots, null, '', width, out);
  return out;
}

const EPISODE_COLUMNS: Column[] = [
  TARGET_COLUMN,
  INSTANCE_COLUMN,
  ...numberColumns('root pid'),
  ...textColumns('first seen', 'last seen'),
  ...numberColumns('snapshots', 'peak waiters', 'max wait'),
  { header: 'root session', align: 'left', maxWidth: 32 },
  flexColumn('query'),
];

function episodeCells(e: BlockingEpisode): string[] {
  return [
    e.target,
    e.instance,
    String(e.rootPid),
    formatTime(e.firstSeen),
    formatTime(e.lastSeen),
    formatCount(e.snapshots),
    formatCount(e.peakWaiters),
    formatMs(e.maxWaitMs),
    `${e.user ?? NONE}@${e.database ?? NONE}`,
    e.query === null ? NONE : oneLine(e.query),
  ];
}

export function formatLocksText(report: LocksReport, width: number): string {
  const out = [reportHeader('pglog report locks', report.filter), ...storesLines(report.stores), ''];
  if (report.servers.length === 0) out.push(NO_RUNS);
  const quiet = report.servers.filter(isQuiet);
  for (const s of report.servers) {
    if (!isQuiet(s) || quiet.length <= QUIET_SERVERS_LISTED) out.push(...serverLines(s, width));
  }
  if (quiet.length > QUIET_SERVERS_LISTED) out.push(`${formatCount(quiet.length)} more server instances: no blocked sessions in their newest snapshot`);
  out.push('');
  out.push(sectionTitle('Blocking episodes', report.episodes.length, report.episodesTotal, { order: ', newest first' }));
  if (report.episodesTotal > 0) out.push(storeTable(EPISODE_COLUMNS, report.episodes, episodeCells, width));
  return linesText(out);
}

export function locksToJson(report: LocksReport): object {
  const serverFields = ({ forest }: ServerLocks): object => ({
    blockedSessions: forest.blockedSessions,
    longestWaitMs: forest.longestWaitMs,
    cycles: forest.cycles,
    trees: forest.roots,
  });
  return {
    ...snapshotReportJson('locks', report, serverFields),
    episodes: report.episodes.map((e) => ({ ...e, xactStart: iso(e.xactStart), firstSeen: iso(e.firstSeen), lastSeen: iso(e.lastSeen) })),
    episodesTotal: report.episodesTotal,
  };
}

export function formatLocksJson(report: LocksReport): string {
  return jsonText(locksToJson(report));
}
