/**
 * The HTML report's model (model.ts) put together from the rows its queries returned in one
 * snapshot (fetch.ts): totals, per-target counts and every section, and each section's rows
 * mapped to its model. Pure: no I/O.
 */
import { episodeFromRow } from '../locks-query.ts';
import { errorFromRow, groupsOf, lockWaitFromRow, num, numOrNull, type Row, text, textOrNull } from '../query.ts';
import {
  type Checkpoint,
  type Deadlock,
  type errorSeries,
  type eventSeries,
  type HtmlReport,
  inRange,
  type MaintenanceRow,
  ms,
  type SessionRow,
  type statementSeries,
  type targetSeries,
  type TempFileRow,
  zeros,
} from './model.ts';
import { binCount, type HtmlFilter } from './queries.ts';

/** What the report's queries returned, the series already binned. */
export interface FetchedReport {
  filter: HtmlFilter;
  now: number;
  /** Exact percentiles from the rows, or within the rollup histogram's error. */
  percentiles: 'exact' | 'histogram';
  st: ReturnType<typeof statementSeries>;
  ev: ReturnType<typeof eventSeries>;
  er: ReturnType<typeof errorSeries>;
  tg: ReturnType<typeof targetSeries>;
  perTarget: Row[];
  templateRows: Row[];
  templates: HtmlReport['templates']['rows'];
  errorRows: Row[];
  lockRows: Row[];
  deadlockRows: Row[];
  episodeRows: Row[];
  checkpointRows: Row[];
  maintenanceRows: Row[];
  tempRows: Row[];
  sizeRows: Row[];
  sessionRows: Row[];
}

export function assembleHtmlReport(f: FetchedReport): HtmlReport {
  const { filter, now, percentiles, st, ev, er, tg, perTarget, templateRows, templates } = f;
  const { errorRows, lockRows, deadlockRows, episodeRows, checkpointRows, maintenanceRows, tempRows, sizeRows, sessionRows } = f;
  const targets = new Map<string, HtmlReport['targets'][number]>();
  for (const [target, t] of tg.totals) targets.set(target, { target, statements: t.statements, totalMs: t.totalMs, counts: {} });
  for (const r of perTarget) {
    const target = String(r.target);
    const row = targets.get(target) ?? { target, statements: 0, totalMs: 0, counts: {} };
    row.counts[String(r.kind)] = Number(r.n);
    targets.set(target, row);
  }
  const errorsTotal = er.totals.reduce((a, t) => a + t.count, 0);
  const t = ev.totals;
  const report: HtmlReport = {
    meta: metaOf(filter, now, percentiles),
    overview: {
      ...st.totals,
      peakQpsAt: st.totals.peakQpsAt === null ? null : filter.since.getTime() + st.totals.peakQpsAt * filter.binMs,
      meanMs: st.totals.timed === 0 ? null : st.totals.totalMs / st.totals.timed,
      errors: errorsTotal,
      lockWaits: t.lock_waits ?? 0,
      deadlocks: t.deadlocks ?? 0,
      connections: t.connections ?? 0,
      disconnections: t.disconnections ?? 0,
      tempFiles: t.temp_files ?? 0,
      tempBytes: t.temp_bytes ?? 0,
      checkpoints: t.checkpoints ?? 0,
      autovacuum: t.autovacuum ?? 0,
      autoanalyze: t.autoanalyze ?? 0,
      peakErrorsPerS: Math.max(0, ...er.perBin) / (filter.binMs / 1000),
    },
    targets: [...targets.values()].sort((a, b) => b.statements - a.statements || a.target.localeCompare(b.target)),
    series: {
      ...st.series,
      errors: er.perBin,
      lockWaits: ev.counts.lock_waits ?? [],
      deadlocks: ev.counts.deadlocks ?? [],
      connections: ev.counts.connections ?? [],
      disconnections: ev.counts.disconnections ?? [],
      tempFiles: ev.counts.temp_files ?? [],
      tempBytes: ev.values.temp_files ?? [],
      checkpoints: ev.counts.checkpoints ?? [],
      checkpointMaxS: ev.values.checkpoints ?? [],
      autovacuum: ev.counts.autovacuum ?? [],
      autoanalyze: ev.counts.autoanalyze ?? [],
      blocked: ev.values.blocked ?? [],
    },
    targetSeries: tg.series,
    templates: { rows: templates, groups: groupsOf(templateRows) },
    errors: {
      sqlstates: er.totals,
      series: { sqlstates: er.sqlstates, counts: er.counts },
      messages: { rows: errorRows.map(errorFromRow), groups: groupsOf(errorRows) },
    },
    locks: {
      byType: { rows: lockRows.map(lockWaitFromRow), groups: groupsOf(lockRows) },
      deadlocks: { rows: deadlockRows.map(deadlockFromRow), groups: groupsOf(deadlockRows) },
    },
    blocking: { rows: episodeRows.map(episodeFromRow), groups: groupsOf(episodeRows) },
    checkpoints: { rows: checkpointRows.map(checkpointFromRow).reverse(), groups: groupsOf(checkpointRows) },
    maintenance: { rows: maintenanceRows.map(maintenanceFromRow), groups: groupsOf(maintenanceRows) },
    tempFiles: { rows: tempRows.map(tempFileFromRow), groups: groupsOf(tempRows), sizeClasses: sizeClasses(sizeRows) },
    sessions: { rows: sessionRows.map(sessionFromRow), groups: groupsOf(sessionRows) },
  };
  return report;
}

export function checkpointFromRow(r: Row): Checkpoint {
  return {
    ts: ms(r.ts),
    target: text(r.target),
    instance: text(r.instance),
    kind: textOrNull(r.checkpoint_kind),
    reason: textOrNull(r.reason),
    buffers: numOrNull(r.buffers_written),
    buffersPct: numOrNull(r.buffers_pct),
    walAdded: numOrNull(r.wal_added),
    walRemoved: numOrNull(r.wal_removed),
    walRecycled: numOrNull(r.wal_recycled),
    writeS: numOrNull(r.write_s),
    syncS: numOrNull(r.sync_s),
    totalS: numOrNull(r.total_s),
    distanceKb: numOrNull(r.distance_kb),
  };
}

export function maintenanceFromRow(r: Row): MaintenanceRow {
  return {
    target: text(r.target),
    database: textOrNull(r.database),
    relation: textOrNull(r.relation),
    vacuums: num(r.vacuums),
    analyzes: num(r.analyzes),
    elapsedS: num(r.elapsed_s),
    tuplesRemoved: num(r.tuples_removed),
    pagesRemoved: num(r.pages_removed),
    walBytes: num(r.wal_bytes),
    aggressive: r.aggressive === true,
    wraparound: r.wraparound === true,
    lastSeen: ms(r.last_seen),
  };
}

export function tempFileFromRow(r: Row): TempFileRow {
  return {
    target: text(r.target),
    database: textOrNull(r.database),
    fingerprint: textOrNull(r.fingerprint),
    files: num(r.files),
    totalBytes: num(r.total_bytes),
    maxBytes: num(r.max_bytes),
    statement: textOrNull(r.statement),
  };
}

export function sessionFromRow(r: Row): SessionRow {
  return {
    target: text(r.target),
    database: textOrNull(r.database),
    user: textOrNull(r.username),
    application: textOrNull(r.application),
    connections: num(r.connections),
    disconnections: num(r.disconnections),
    meanSessionMs: numOrNull(r.mean_session_ms),
    maxSessionMs: numOrNull(r.max_session_ms),
  };
}

export function deadlockFromRow(r: Row): Deadlock {
  return {
    ts: ms(r.ts),
    target: text(r.target),
    instance: text(r.instance),
    database: textOrNull(r.database),
    pid: numOrNull(r.pid),
    message: text(r.message),
    processes: r.processes ?? null,
  };
}

/** Size classes of temporary files: index i counts files in [64 kB·4^(i-1), 64 kB·4^i). */
export function sizeClasses(rows: readonly Row[]): number[] {
  const out = zeros(9);
  for (const r of rows) {
    const c = num(r.class);
    if (inRange(c, 9)) out[c] = num(r.n);
  }
  return out;
}

export function metaOf(filter: HtmlFilter, generatedAt: number, percentiles: HtmlReport['meta']['percentiles'] = 'exact'): HtmlReport['meta'] {
  return {
    since: filter.since.getTime(),
    until: filter.until.getTime(),
    binMs: filter.binMs,
    bins: binCount(filter.since, filter.until, filter.binMs),
    target: filter.target,
    database: filter.database,
    limit: filter.limit,
    generatedAt,
    percentiles,
  };
}
