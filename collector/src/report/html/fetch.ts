/**
 * Runs the HTML report's queries in one read-only REPEATABLE READ transaction (../fetch.ts),
 * so every section, total and chart describes the same snapshot of the store while collectors
 * write, and assembles the model (model.ts).
 */
import type pg from 'pg';

import { inReadOnlySnapshot } from '../fetch.ts';
import { episodesQuery } from '../locks-query.ts';
import { errorsQuery, lockWaitsQuery, type Row } from '../query.ts';
import type { ReportFilter } from '../types.ts';
import { assembleHtmlReport } from './assemble.ts';
import { attachTemplateDetails, errorSeries, eventSeries, type HtmlReport, statementSeries, targetSeries, templateFromRow, templateKeys } from './model.ts';
import {
  binCount,
  binWidthMs,
  checkpointsQuery,
  deadlocksQuery,
  errorSeriesQuery,
  eventSeriesQuery,
  type HtmlFilter,
  maintenanceQuery,
  perTargetCountsQuery,
  sessionsQuery,
  statementSeriesQuery,
  targetSeriesQuery,
  tempFileSizesQuery,
  tempFilesQuery,
  templateExamplesQuery,
  templatePlansQuery,
  templateSeriesQuery,
  templatesQuery,
} from './queries.ts';
import { rollupServes, rollupStatementSeriesQuery, rollupTargetSeriesQuery, rollupTemplateSeriesQuery, rollupTemplatesQuery } from './queries-rollup.ts';

/** The statement queries that have two sources: the rows (exact), or the statement rollup. */
const FROM_ROWS = { series: statementSeriesQuery, targets: targetSeriesQuery, templates: templatesQuery, templateSeries: templateSeriesQuery };
const FROM_ROLLUP = {
  series: rollupStatementSeriesQuery,
  targets: rollupTargetSeriesQuery,
  templates: rollupTemplatesQuery,
  templateSeries: rollupTemplateSeriesQuery,
};

/** work_mem of the report's transaction (SET LOCAL): what its sorts may use before spilling. */
export const REPORT_WORK_MEM = '128MB';

/** How long each query took (`pglog report --html` does not ask; bench/report-bench.ts does). */
export type QueryTimings = Array<{ query: string; ms: number }>;

/**
 * Windows whose bins are whole minutes read the statements' ranking and series from the
 * statement rollup (queries-rollup.ts: p95/p50/p99 then within 9.1 %); `rollup: false` reads
 * the rows for all of them (exact percentiles; tests compare the two).
 */
export async function fetchHtmlReport(
  client: pg.ClientBase,
  base: ReportFilter,
  now: number = Date.now(),
  timings?: QueryTimings,
  opts: { rollup?: boolean } = {},
): Promise<HtmlReport> {
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
      attachTemplateDetails(
        templates,
        await rows(templateExamplesQuery(filter, keys), 'template examples'),
        await rows(statements.templateSeries(filter, keys), 'template series'),
        await rows(templatePlansQuery(filter, fingerprints), 'template plans'),
        bins,
      );
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

    return assembleHtmlReport({
      filter,
      now,
      percentiles: statements === FROM_ROLLUP ? 'histogram' : 'exact',
      st,
      ev,
      er,
      tg,
      perTarget,
      templateRows,
      templates,
      errorRows,
      lockRows,
      deadlockRows,
      episodeRows,
      checkpointRows,
      maintenanceRows,
      tempRows,
      sizeRows,
      sessionRows,
    });
  });
}
