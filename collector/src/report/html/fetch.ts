/**
 * Runs the HTML report's queries in one read-only REPEATABLE READ transaction (../fetch.ts),
 * so every section, total and chart describes the same snapshot of the store while collectors
 * write, and assembles the model (model.ts).
 */
import type pg from 'pg';

import { inReadOnlySnapshot } from '../fetch.ts';
import { episodeFromRow, episodesQuery } from '../locks-query.ts';
import { errorFromRow, errorsQuery, groupsOf, lockWaitFromRow, lockWaitsQuery, type Row } from '../query.ts';
import type { ReportFilter } from '../types.ts';
import {
  attachTemplateDetails, checkpointFromRow, deadlockFromRow, errorSeries, eventSeries, type HtmlReport,
maintenanceFromRow, metaOf,
  sessionFromRow, sizeClasses, statementSeries, targetSeries, tempFileFromRow, templateFromRow, templateKeys, } from './model.ts';
import {
  binCount, binWidthMs, checkpointsQuery, deadlocksQuery, errorSeriesQuery, eventSeriesQuery, type HtmlFilter,
maintenanceQuery, perTargetCountsQuery,
  sessionsQuery, statementSeriesQuery, targetSeriesQuery,   tempFileSizesQuery, tempFilesQuery, templateExamplesQuery, templatePlansQuery, templateSeriesQuery, templatesQuery,
} from './queries.ts';
import { rollupServes, rollupStatementSeriesQuery, rollupTargetSeriesQuery, rollupTemplateSeriesQuery, rollupTemplatesQuery } from './queries-rollup.ts';

/** The statement queries that have two sources: the rows (exact), or the statement rollup. */
const FROM_ROWS = { series: statementSeriesQuery, targets: targetSeriesQuery, templates: templatesQuery, templateSeries: templateSeriesQuery };
const FROM_ROLLUP = { series: rollupStatementSeriesQuery, targets: rollupTargetSeriesQuery, templates: rollupTemplatesQuery, templateSeries: rollupTemplateSeriesQuery };

/** work_mem of the report's transaction (SET LOCAL): what its sorts may use before spilling. */
export const REPORT_WORK_MEM = '128MB';

/** How long each query took (`pglog report --html` does not ask; bench/report-bench.ts does). */
export type QueryTimings = Array<{ query: string; ms: number }>;

/**
 * Windows whose bins are whole minutes read the statements' ranking and series from the
 * statement rollup (queries-rollup.ts: p95/p50/p99 then within 9.1 %); `rollup: false` reads
 * the rows for all of them (exact percentiles; tests compare the two).
 */
export async function fetchHtmlReport(client: pg.ClientBase, base: ReportFilter, now: number = Date.now(), timings?: QueryTimings, opts: { rollup?: boolean } = {}): Promise<HtmlReport> {
  const filter: HtmlFilter = { ...base, binMs: binWidthMs(base.since, base.until) };
  const statements = opts.rollup !== false && rollupServes(filter.binMs) ? FROM_ROLLUP : FROM_ROWS;
  const bins = binCount(filter.since, filter.until, filter.binMs);
  const rows = async (q: { text: string; values: unknown[] }, name = 'query'): Promise<Row[]> => {
    const started = performance.now();
    const result = (await client.query(q)).rows as Row[];
    timings?.push({ query: name, ms: performance.now() - started });
    return result;
  };
  return inReadOnlySnapshot(client, async () => {
    // The percentiles sort every statement of the window: in memory, not in temporary files,
    // for this transaction only.
    await client.query(`SET LOCAL work_mem = '${REPORT_WORK_MEM}'`);
    const st = statementSeries(await rows(statements.series(filter), 'statement series'), bins, filter.binMs);
    const ev = eventSeries(await rows(eventSeriesQuery(filter), 'event series'), bins);
    const er = errorSeries(await rows(errorSeriesQuery(filter), 'error series'), bins);
    const tg = targetSeries(await rows(statements.targets(filter), 'target series'), bins, filter.binMs);
    const perTarget = await rows(perTargetCountsQuery(filter), 'per-target counts');

    const templateRows = await rows(statements.templates(filter), 'templates');
    const templates = templateRows.map((r) => templateFromRow(r, bins));
    if (templates.length > 0) {
      const keys = templateKeys(templates);
      const fingerprints = [...new Set(templates.map((t) => t.fingerprint).filter((f): f is string => f !== null))];
      attachTemplateDetails(templates, await rows(templateExamplesQuery(filter, keys), 'template examples'), await rows(statements.templateSeries(filter, keys), 'template series'),
        await rows(templatePlansQuery(filter, fingerprints), 'template plans'), bins);
    }
    const errorRows = await rows(errorsQuery(filter), 'errors');
    const lockRows = await rows(lockWaitsQuery(filter), 'lock waits');
    const deadlockRows = await rows(deadlocksQuery(filter), 'deadlocks');
    const episodeRows = await rows(episodesQuery({ ...filter, minDurationMs: 0 }), 'blocking episodes');
    const checkpointRows = await rows(checkpointsQuery(filter), 'checkpoints');
    const maintenanceRows = await rows(maintenanceQuery(filter), 'maintenance');
    const tempRows = await rows(tempFilesQuery(filter), 'temp files');
    const sizeRows = await rows(tempFileSizesQuery(filter), 'temp file sizes');
    const sessionRows = await rows(sessionsQuery(filter), 'sessions');

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
      meta: metaOf(filter, now, statements === FROM_ROLLUP ? 'histogram' : 'exact'),
      overview: {
        ...st.totals,
        peakQpsAt: st.totals.peakQpsAt === null ? null : filter.since.getTime() + st.totals.peakQpsAt * filter.binMs,
        meanMs: st.totals.timed === 0 ? null : st.totals.totalMs / st.totals.timed,
        errors: errorsTotal, lockWaits: t.lock_waits ?? 0, deadlocks: t.deadlocks ?? 0, connections: t.connections ?? 0,
        disconnections: t.disconnections ?? 0, tempFiles: t.temp_files ?? 0, tempBytes: t.temp_bytes ?? 0, checkpoints: t.checkpoints ?? 0,
        autovacuum: t.autovacuum ?? 0, autoanalyze: t.autoanalyze ?? 0,
        peakErrorsPerS: Math.max(0, ...er.perBin) / (filter.binMs / 1000),
      },
      targets: [...targets.values()].sort((a, b) => b.statements - a.statements || a.target.localeCompare(b.target)),
      series: {
        ...st.series, errors: er.perBin,
        lockWaits: ev.counts.lock_waits ?? [], deadlocks: ev.counts.deadlocks ?? [],
        connections: ev.counts.connections ?? [], disconnections: ev.counts.disconnections ?? [],
        tempFiles: ev.counts.temp_files ?? [], tempBytes: ev.values.temp_files ?? [],
        checkpoints: ev.counts.checkpoints ?? [], checkpointMaxS: ev.values.checkpoints ?? [],
        autovacuum: ev.counts.autovacuum ?? [], autoanalyze: ev.counts.autoanalyze ?? [], blocked: ev.values.blocked ?? [],
      },
      targetSeries: tg.series,
      templates: { rows: templates, groups: groupsOf(templateRows) },
      errors: { sqlstates: er.totals, series: { sqlstates: er.sqlstates, counts: er.counts }, messages: { rows: errorRows.map(errorFromRow), groups: groupsOf(errorRows) } },
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
  });
}
