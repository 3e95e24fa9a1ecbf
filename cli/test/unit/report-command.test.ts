// The HTML report's pure parts: escaping and script-safe JSON with hostile texts, the bin
// width chosen from the window, the page rendered from a model (hostile names stay escaped,
// every section present), and the --html / --format options.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseReportArgs } from '@pglog/cli/report-command.ts';
import { esc, jsonForScript } from '@pglog/collector/report/html/markup.ts';
import type { HtmlReport } from '@pglog/collector/report/html/model.ts';
import { binCount, binWidthMs, MAX_BINS } from '@pglog/collector/report/html/queries.ts';
import { renderHtml } from '@pglog/collector/report/html/render.ts';
import { isPglogError } from '@pglog/common/errors.ts';

const HOSTILE = `</script><script>alert(1)</script><!-- ' " & \u2028 <img src=x onerror=alert(2)>`;

test('esc escapes the five significant characters; jsonForScript never contains < > & and parses back', () => {
  assert.equal(esc(`<a href="x" title='y'>&</a>`), '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
  assert.equal(esc(null), '');
  const json = jsonForScript({ q: HOSTILE, list: [HOSTILE] });
  assert.doesNotMatch(json, /[<>&\u2028\u2029]/);
  assert.deepEqual(JSON.parse(json), { q: HOSTILE, list: [HOSTILE] });
});

test('bins: a round width, at most MAX_BINS over the window', () => {
  const at = (s: string): Date => new Date(s);
  assert.equal(binWidthMs(at('2026-01-01T00:00:00Z'), at('2026-01-01T00:01:00Z')), 1000);
  assert.equal(binWidthMs(at('2026-01-01T00:00:00Z'), at('2026-01-01T01:00:00Z')), 30_000);
  assert.equal(binWidthMs(at('2026-01-01T00:00:00Z'), at('2026-01-02T00:00:00Z')), 900_000);
  for (const hours of [0.01, 1, 7, 24, 24 * 7, 24 * 90, 24 * 3650]) {
    const since = at('2026-01-01T00:00:00Z');
    const until = new Date(since.getTime() + hours * 3_600_000);
    assert.ok(binCount(since, until, binWidthMs(since, until)) <= MAX_BINS, `${hours} h`);
  }
});

function model(): HtmlReport {
  const zeros = [0, 0];
  return {
    meta: { since: 0, until: 2000, binMs: 1000, bins: 2, target: HOSTILE, database: null, limit: 20, generatedAt: 0, percentiles: 'exact' },
    overview: {
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
    },
    targets: [{ target: HOSTILE, statements: 1, totalMs: 1, counts: {} }],
    series: { qps: [1, 0], statements: [1, 0], p50: [1, null], p95: [1, null], p99: [1, null], errors: [1, 0] },
    targetSeries: { targets: [HOSTILE], qps: [[1, 0]] },
    templates: {
      rows: [
        {
          id: 't1',
          target: HOSTILE,
          database: HOSTILE,
          fingerprint: 'f',
          normalized: HOSTILE,
          query: HOSTILE,
          calls: 1,
          totalMs: 1,
          meanMs: 1,
          maxMs: 1,
          p95Ms: 1,
          rank: { total: 1, calls: 1, mean: 1, p95: 1 },
          example: { ts: 0, user: HOSTILE, application: HOSTILE, durationMs: 1, query: HOSTILE, parameters: HOSTILE },
          plan: { ts: 0, durationMs: 1, format: 'text', plan: HOSTILE },
          series: { calls: [1, 0], meanMs: [1, null] },
        },
      ],
      groups: 1,
    },
    errors: {
      sqlstates: [{ sqlstate: HOSTILE, count: 1 }],
      series: { sqlstates: [HOSTILE], counts: [[1, 0]] },
      messages: {
        rows: [
          {
            target: HOSTILE,
            database: null,
            severity: 'ERROR',
            sqlstate: HOSTILE,
            message: HOSTILE,
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
        rows: [{ ts: 0, target: HOSTILE, instance: 'm', database: null, pid: 1, message: HOSTILE, processes: [{ pid: 1, query: HOSTILE }] }],
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

test('renderHtml: every section, hostile texts only escaped, the data element closed once', () => {
  const html = renderHtml(model(), { uplotJs: '/*u*/', uplotCss: '', clientJs: '/*c*/', css: '' });
  for (const id of ['overview', 'statements', 'templates', 'errors', 'locks', 'blocking', 'checkpoints', 'maintenance', 'tempfiles', 'sessions']) {
    assert.match(html, new RegExp(`<section id="${id}">`));
  }
  assert.ok(!html.includes('<script>alert'), 'no hostile script element');
  assert.ok(!html.includes('<img src=x'), 'no hostile element');
  assert.equal(html.split('</script>').length - 1, 3, 'the data, uPlot and the page script: three script elements end');
  assert.ok(html.includes('&lt;/script&gt;&lt;script&gt;alert(1)'));
  assert.throws(
    () => renderHtml(model(), { uplotJs: '</script>', uplotCss: '', clientJs: '', css: '' }),
    (e) => isPglogError(e),
  );
});

test("renderHtml: percentiles read from the statement rollup's histogram are marked approximate, exact ones are not", () => {
  const assets = { uplotJs: '/*u*/', uplotCss: '', clientJs: '/*c*/', css: '' };
  const exact = renderHtml(model(), assets);
  assert.doesNotMatch(exact, /within 9\.1 %/);
  const m = model();
  m.meta.percentiles = 'histogram';
  const approx = renderHtml(m, assets);
  assert.match(
    approx,
    /Duration percentiles \(ms\): p50, p95, p99 \(from the statement rollup&#39;s histogram: within 9\.1 %\)|Duration percentiles \(ms\): p50, p95, p99 \(from the statement rollup's histogram: within 9\.1 %\)/,
  );
  assert.equal((approx.match(/within 9\.1 %/g) ?? []).length, 5, 'the percentile chart and the four template rankings');
});

test('--html FILE and --format html|json|text; one output option only', () => {
  const env = { PGLOG_STORE_URL: 'postgres://x@h/db' };
  const html = parseReportArgs(['--html', '/tmp/r.html'], env);
  assert.ok('html' in html && html.html?.file === '/tmp/r.html');
  const stdout = parseReportArgs(['--format', 'html'], env);
  assert.ok('html' in stdout && stdout.html?.file === null);
  const json = parseReportArgs(['--format', 'json'], env);
  assert.ok('json' in json && json.json && json.html === undefined);
  const text = parseReportArgs(['--format', 'text'], env);
  assert.ok('json' in text && !text.json && text.html === undefined);
  const usage = (e: unknown): boolean => isPglogError(e) && e.code === 'USAGE';
  assert.throws(() => parseReportArgs(['--format', 'pdf'], env), usage);
  assert.throws(() => parseReportArgs(['--json', '--html', 'x'], env), usage);
  assert.throws(() => parseReportArgs(['--format', 'json', '--json'], env), usage);
  assert.throws(() => parseReportArgs(['--html', ''], env), usage);
});
