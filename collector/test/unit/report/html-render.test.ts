// The HTML report's pure parts: escaping and script-safe JSON with hostile texts, the bin
// width chosen from the window, and the page rendered from a model (hostile names stay
// escaped, every section present, approximate percentiles marked).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';

import { esc, jsonForScript } from '../../../src/report/html/markup.ts';
import { binCount, binWidthMs, MAX_BINS } from '../../../src/report/html/queries.ts';
import { renderHtml } from '../../../src/report/html/render.ts';
import { hostileHtmlReport } from '../../helpers/html-report-model.ts';

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

test('renderHtml: every section, hostile texts only escaped, the data element closed once', () => {
  const html = renderHtml(hostileHtmlReport(HOSTILE), { uplotJs: '/*u*/', uplotCss: '', clientJs: '/*c*/', css: '' });
  for (const id of ['overview', 'statements', 'templates', 'errors', 'locks', 'blocking', 'checkpoints', 'maintenance', 'tempfiles', 'sessions']) {
    assert.match(html, new RegExp(`<section id="${id}">`));
  }
  assert.ok(!html.includes('<script>alert'), 'no hostile script element');
  assert.ok(!html.includes('<img src=x'), 'no hostile element');
  assert.equal(html.split('</script>').length - 1, 3, 'the data, uPlot and the page script: three script elements end');
  assert.ok(html.includes('&lt;/script&gt;&lt;script&gt;alert(1)'));
  assert.throws(
    () => renderHtml(hostileHtmlReport(HOSTILE), { uplotJs: '</script>', uplotCss: '', clientJs: '', css: '' }),
    (e) => isPglogError(e),
  );
});

test("renderHtml: percentiles read from the statement rollup's histogram are marked approximate, exact ones are not", () => {
  const assets = { uplotJs: '/*u*/', uplotCss: '', clientJs: '/*c*/', css: '' };
  const exact = renderHtml(hostileHtmlReport(HOSTILE), assets);
  assert.doesNotMatch(exact, /within 9\.1 %/);
  const m = hostileHtmlReport(HOSTILE);
  m.meta.percentiles = 'histogram';
  const approx = renderHtml(m, assets);
  assert.match(
    approx,
    /Duration percentiles \(ms\): p50, p95, p99 \(from the statement rollup&#39;s histogram: within 9\.1 %\)|Duration percentiles \(ms\): p50, p95, p99 \(from the statement rollup's histogram: within 9\.1 %\)/,
  );
  assert.equal((approx.match(/within 9\.1 %/g) ?? []).length, 5, 'the percentile chart and the four template rankings');
});
