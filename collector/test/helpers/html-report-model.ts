// A report model for the HTML renderer's tests: every section filled, `hostile` wherever the
// store's text (names, queries, messages) goes.
import type { HtmlReport } from '../../src/report/html/model.ts';

/** The headline numbers: none of them text. */
const OVERVIEW: HtmlReport['overview'] = {
  statements: 1,
  timed: 1,
  totalMs: 1,
  meanMs: 1,
  errors: 1,
  lockWaits: 0,
  deadlocks: 0,
  connections: 0,
  disconnections: 0,
  tempFiles: 0,
  tempBytes: 0,
  checkpoints: 0,
  autovacuum: 0,
  autoanalyze: 0,
  peakQps: 1,
  peakQpsAt: 0,
  peakErrorsPerS: 1,
};

/** A small report of every section, with `hostile` as every text a monitored server chose. */
export function hostileHtmlReport(hostile: string): HtmlReport {
  const zeros = [0, 0];
  return {
    meta: { since: 0, until: 2000, binMs: 1000, bins: 2, target: hostile, database: null, limit: 20, generatedAt: 0, percentiles: 'exact' },
    overview: { ...OVERVIEW },
    targets: [{ target: hostile, statements: 1, totalMs: 1, counts: {} }],
    series: { qps: [1, 0], statements: [1, 0], p50: [1, null], p95: [1, null], p99: [1, null], errors: [1, 0] },
    targetSeries: { targets: [hostile], qps: [[1, 0]] },
    templates: {
      rows: [
        {
          id: 't1',
          target: hostile,
          database: hostile,
          fingerprint: 'f',
          normalized: hostile,
          query: hostile,
          calls: 1,
          totalMs: 1,
          meanMs: 1,
          maxMs: 1,
          p95Ms: 1,
          rank: { total: 1, calls: 1, mean: 1, p95: 1 },
          example: { ts: 0, user: hostile, application: hostile, durationMs: 1, query: hostile, parameters: hostile },
          plan: { ts: 0, durationMs: 1, format: 'text', plan: hostile },
          series: { calls: [1, 0], meanMs: [1, null] },
        },
      ],
      groups: 1,
    },
    errors: {
      sqlstates: [{ sqlstate: hostile, count: 1 }],
      series: { sqlstates: [hostile], counts: [[1, 0]] },
      messages: {
        rows: [
          {
            target: hostile,
            database: null,
            severity: 'ERROR',
            sqlstate: hostile,
            message: hostile,
            count: 1,
            first_seen: new Date(0),
            last_seen: new Date(0),
          },
        ],
        groups: 1,
      },
    },
    locks: {
      byType: { rows: [], groups: 0 },
      deadlocks: {
        rows: [{ ts: 0, target: hostile, instance: 'm', database: null, pid: 1, message: hostile, processes: [{ pid: 1, query: hostile }] }],
        groups: 1,
      },
    },
    blocking: { rows: [], groups: 0 },
    checkpoints: { rows: [], groups: 0 },
    maintenance: { rows: [], groups: 0 },
    tempFiles: { rows: [], groups: 0, sizeClasses: zeros },
    sessions: { rows: [], groups: 0 },
  };
}
