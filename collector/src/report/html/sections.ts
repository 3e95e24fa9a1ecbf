/**
 * The HTML report's event sections: errors, lock waits and deadlocks, blocking episodes,
 * checkpoints, autovacuum/autoanalyze, temporary files, sessions. Pure (markup.ts escapes).
 */
import type { BlockingEpisode } from '../snapshot-types.ts';
import type { ErrorStats, LockWaitStats } from '../types.ts';
import { anyPoint, bytes, chart, type Column, count, esc, ms, orNone, shownOf, table, timeCell } from './markup.ts';
import type { Checkpoint, Deadlock, HtmlReport, MaintenanceRow, SessionRow, TempFileRow } from './model.ts';

const text = <T>(title: string, f: (r: T) => string | null): Column<T> => ({ title, cell: (r) => orNone(f(r)) });
const code = <T>(title: string, f: (r: T) => string | null): Column<T> => ({ title, cls: 'code', cell: (r) => `<span class="q">${orNone(f(r))}</span>` });
const num = <T>(title: string, f: (r: T) => number): Column<T> => ({ title, cls: 'num', cell: (r) => count(f(r)), value: f });
const dur = <T>(title: string, f: (r: T) => number | null): Column<T> => ({ title, cls: 'num', cell: (r) => ms(f(r)), value: f });
const size = <T>(title: string, f: (r: T) => number): Column<T> => ({ title, cls: 'num', cell: (r) => esc(bytes(f(r))), value: f });
const at = <T>(title: string, f: (r: T) => number | null): Column<T> => ({ title, cell: (r) => timeCell(f(r)), value: f });
const secs = <T>(title: string, f: (r: T) => number | null): Column<T> => ({
  title,
  cls: 'num',
  cell: (r) => {
    const v = f(r);
    return v === null ? orNone(null) : esc(`${v.toFixed(3)} s`);
  },
  value: f,
});

/** The name columns most tables start with. */
const TARGET = text('target', (x: { target: string }) => x.target);
const INSTANCE = text('instance', (x: { instance: string }) => x.instance);
const DATABASE = text('database', (x: { database: string | null }) => x.database);

export function errorSection(r: HtmlReport): string {
  const bySqlstate = r.errors.sqlstates.slice(0, r.meta.limit);
  const m = r.errors.messages;
  type S = { sqlstate: string | null; count: number };
  const sqlstateColumns: Array<Column<S>> = [code('SQLSTATE', (e) => e.sqlstate), num('count', (e) => e.count)];
  const messages: Array<Column<ErrorStats>> = [
    TARGET,
    DATABASE,
    text('severity', (e) => e.severity),
    code('SQLSTATE', (e) => e.sqlstate),
    num('count', (e) => e.count),
    at('first seen', (e) => e.first_seen.getTime()),
    at('last seen', (e) => e.last_seen.getTime()),
    code('message', (e) => e.message),
  ];
  return `<section id="errors"><h2>Errors</h2>
<div class="charts">${chart('errors', 'Errors per bin by SQLSTATE', anyPoint(r.series.errors ?? []))}</div>
<h3>By SQLSTATE${shownOf(bySqlstate.length, r.errors.sqlstates.length)} <span class="sort">sorted by count, most first</span></h3>
${table('errors-sqlstate-table', sqlstateColumns, bySqlstate, { column: 1, dir: 'desc' })}
<h3>By SQLSTATE and message${shownOf(m.rows.length, m.groups)} <span class="sort">sorted by count, most first</span></h3>
${table('errors-table', messages, m.rows, { column: 4, dir: 'desc' })}
</section>`;
}

export function lockSection(r: HtmlReport): string {
  const l = r.locks.byType;
  const d = r.locks.deadlocks;
  const types: Array<Column<LockWaitStats>> = [
    TARGET,
    DATABASE,
    text('lock type', (x) => x.lock_type),
    num('messages', (x) => x.count),
    num('acquired', (x) => x.acquired),
    dur('total wait', (x) => x.total_wait_ms),
    dur('max wait', (x) => x.max_wait_ms),
  ];
  const deadlocks: Array<Column<Deadlock>> = [
    at('time', (x) => x.ts),
    TARGET,
    DATABASE,
    num('pid', (x) => x.pid ?? 0),
    { title: 'processes', cls: 'code', cell: (x) => processes(x.processes) },
  ];
  return `<section id="locks"><h2>Lock waits and deadlocks</h2>
<div class="charts">${chart('locks', 'Lock wait messages and deadlocks per bin', anyPoint(r.series.lockWaits ?? [], r.series.deadlocks ?? []))}</div>
<h3>By lock type${shownOf(l.rows.length, l.groups)} <span class="sort">sorted by total wait, longest first</span></h3>
${table('locks-table', types, l.rows, { column: 5, dir: 'desc' })}
<h3>Deadlocks${shownOf(d.rows.length, d.groups)} <span class="sort">newest first</span></h3>
${table('deadlocks-table', deadlocks, d.rows, { column: 0, dir: 'desc' })}
</section>`;
}

/** A deadlock's processes (jsonb from the store, hostile text) as escaped lines. */
function processes(v: unknown): string {
  if (!Array.isArray(v)) return orNone(null);
  return v
    .map((p: unknown) => {
      const o = (p ?? {}) as Record<string, unknown>;
      const s = (k: string): string => {
        const v = o[k];
        return typeof v === 'string' || typeof v === 'number' ? String(v) : '-';
      };
      return `<div>${esc(`${s('pid')} waits ${s('lock_mode')} on ${s('lock_object')}, blocked by ${s('blocked_by')}: ${s('query')}`)}</div>`;
    })
    .join('');
}

export function blockingSection(r: HtmlReport): string {
  const e = r.blocking;
  const columns: Array<Column<BlockingEpisode>> = [
    TARGET,
    INSTANCE,
    num('root pid', (x) => x.rootPid),
    at('first seen', (x) => x.firstSeen.getTime()),
    at('last seen', (x) => x.lastSeen.getTime()),
    num('snapshots', (x) => x.snapshots),
    num('peak waiters', (x) => x.peakWaiters),
    dur('max wait', (x) => x.maxWaitMs),
    text('root session', (x) => `${x.user ?? '-'}@${x.database ?? '-'}${x.application === null ? '' : ` [${x.application}]`}`),
    code('root query', (x) => x.query),
  ];
  return `<section id="blocking"><h2>Blocking episodes</h2>
<p class="note">From the SQL snapshots (pglog.blocking, pglog.activity): one episode per root session and transaction.</p>
<div class="charts">
${chart('blocked', 'Blocked sessions (most in one snapshot of the bin)', anyPoint(r.series.blocked ?? []))}
${chart('episodes', 'Episodes: from first to last snapshot, one line per root session', e.rows.length > 0)}
</div>
<h3>Episodes${shownOf(e.rows.length, e.groups)} <span class="sort">newest first (last seen)</span></h3>
${table('episodes-table', columns, e.rows, { column: 4, dir: 'desc' })}
</section>`;
}

export function checkpointSection(r: HtmlReport): string {
  const c = r.checkpoints;
  const newestFirst = [...c.rows].reverse();
  const columns: Array<Column<Checkpoint>> = [
    at('time', (x) => x.ts),
    TARGET,
    INSTANCE,
    text('kind', (x) => x.kind),
    text('reason', (x) => x.reason),
    num('buffers', (x) => x.buffers ?? 0),
    num('WAL added', (x) => x.walAdded ?? 0),
    num('removed', (x) => x.walRemoved ?? 0),
    num('recycled', (x) => x.walRecycled ?? 0),
    secs('write', (x) => x.writeS),
    secs('sync', (x) => x.syncS),
    secs('total', (x) => x.totalS),
    num('distance kB', (x) => x.distanceKb ?? 0),
  ];
  return `<section id="checkpoints"><h2>Checkpoints</h2>
<div class="charts">
${chart('checkpoint-times', 'Write, sync and total time of each checkpoint (s)', c.rows.length > 0)}
${chart('checkpoint-wal', 'WAL of each checkpoint: files added, removed, recycled; distance (kB, right axis)', c.rows.length > 0)}
</div>
<h3>Completed checkpoints${shownOf(c.rows.length, c.groups)} <span class="sort">newest first</span></h3>
${table('checkpoints-table', columns, newestFirst.slice(0, r.meta.limit), { column: 0, dir: 'desc' })}
</section>`;
}

export function maintenanceSection(r: HtmlReport): string {
  const m = r.maintenance;
  const columns: Array<Column<MaintenanceRow>> = [
    TARGET,
    DATABASE,
    code('table', (x) => x.relation),
    num('autovacuum', (x) => x.vacuums),
    num('autoanalyze', (x) => x.analyzes),
    secs('elapsed', (x) => x.elapsedS),
    num('tuples removed', (x) => x.tuplesRemoved),
    num('pages removed', (x) => x.pagesRemoved),
    size('WAL', (x) => x.walBytes),
    text('flags', (x) => [x.aggressive ? 'aggressive' : '', x.wraparound ? 'wraparound' : ''].filter(Boolean).join(' ') || null),
    at('last', (x) => x.lastSeen),
  ];
  return `<section id="maintenance"><h2>Autovacuum and autoanalyze</h2>
<div class="charts">${chart('maintenance', 'Autovacuum and autoanalyze runs per bin', anyPoint(r.series.autovacuum ?? [], r.series.autoanalyze ?? []))}</div>
<h3>By table${shownOf(m.rows.length, m.groups)} <span class="sort">sorted by time spent, most first</span></h3>
${table('maintenance-table', columns, m.rows, { column: 5, dir: 'desc' })}
</section>`;
}

const SIZE_CLASSES = ['< 64 kB', '64–256 kB', '256 kB–1 MB', '1–4 MB', '4–16 MB', '16–64 MB', '64–256 MB', '256 MB–1 GB', '≥ 1 GB'];

export function tempFileSection(r: HtmlReport): string {
  const t = r.tempFiles;
  const columns: Array<Column<TempFileRow>> = [
    TARGET,
    DATABASE,
    num('files', (x) => x.files),
    size('total', (x) => x.totalBytes),
    size('largest', (x) => x.maxBytes),
    code('fingerprint', (x) => x.fingerprint),
    code('statement', (x) => x.statement),
  ];
  type C = { label: string; n: number };
  const sizeColumns: Array<Column<C>> = [text('size', (c) => c.label), num('files', (c) => c.n)];
  const classes = SIZE_CLASSES.map((label, i) => ({ label, n: t.sizeClasses[i] ?? 0 })).filter((c) => c.n > 0);
  return `<section id="tempfiles"><h2>Temporary files</h2>
<div class="charts">${chart('tempfiles', 'Temporary files per bin and their size', anyPoint(r.series.tempFiles ?? []))}</div>
<h3>By size</h3>
${table('tempfile-sizes-table', sizeColumns, classes, null)}
<h3>By statement${shownOf(t.rows.length, t.groups)} <span class="sort">sorted by total size, largest first</span></h3>
${table('tempfiles-table', columns, t.rows, { column: 3, dir: 'desc' })}
</section>`;
}

export function sessionSection(r: HtmlReport): string {
  const s = r.sessions;
  const columns: Array<Column<SessionRow>> = [
    TARGET,
    DATABASE,
    text('user', (x) => x.user),
    text('application', (x) => x.application),
    num('connections', (x) => x.connections),
    num('disconnections', (x) => x.disconnections),
    dur('mean session', (x) => x.meanSessionMs),
    dur('longest session', (x) => x.maxSessionMs),
  ];
  return `<section id="sessions"><h2>Connections and sessions</h2>
<div class="charts">${chart('sessions', 'Connections (authorized) and disconnections per bin', anyPoint(r.series.connections ?? [], r.series.disconnections ?? []))}</div>
<h3>By database, user and application${shownOf(s.rows.length, s.groups)} <span class="sort">sorted by connections, most first</span></h3>
${table('sessions-table', columns, s.rows, { column: 4, dir: 'desc' })}
</section>`;
}
