// `pglog report --html` on a store filled by a real `pglog collect` run (report-scenario.ts):
// the report's totals equal the store's counts over the stable views for the window and the
// checker's count of the seq-load statements; then the page in headless Chromium (Debian's
// chromium through playwright-core, launched with the flags and a fresh user-data
// dir): no console error, every chart drawn with data points, every table in its stated
// order, a template's drill-down opens with its own chart, hostile log text stays text.
// A screenshot of each section is taken; PGLOG_REPORT_SCREENSHOTS=DIR keeps them (docs/report/).
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { runPglog } from '@pglog/test-support/cli.ts';
import pg from 'pg';
import { chromium } from 'playwright-core';

import { fetchHtmlReport } from '../../src/report/html/fetch.ts';
import type { HtmlReport } from '../../src/report/html/model.ts';
import { HOSTILE_LITERAL, type ReportScenario, startReportScenario } from '../helpers/report-scenario.ts';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const SECTIONS = ['overview', 'statements', 'templates', 'errors', 'locks', 'blocking', 'checkpoints', 'maintenance', 'tempfiles', 'sessions'];

let scenario: ReportScenario;
let work: string;
let htmlFile: string;
let report: HtmlReport;

/** The model embedded in the page, read back as the browser would. */
function embedded(html: string): HtmlReport {
  const m = /<script type="application\/json" id="report-data">([^<]*)<\/script>/.exec(html);
  assert.ok(m !== null, 'the page embeds its data');
  return JSON.parse(m[1] ?? '') as HtmlReport;
}

before(
  async () => {
    scenario = await startReportScenario();
    work = mkdtempSync(join(tmpdir(), 'pglog-report-html-'));
    htmlFile = join(work, 'report.html');
    const r = await runPglog([
      'report',
      '--store',
      scenario.storeUrl,
      '--since',
      scenario.since.toISOString(),
      '--until',
      scenario.until.toISOString(),
      '--html',
      htmlFile,
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    report = embedded(readFileSync(htmlFile, 'utf8'));
  },
  { timeout: 400_000 },
);

after(async () => {
  await scenario?.dispose();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

/** The sum of a series (a bin without data is null). */
const sum = (a: ReadonlyArray<number | null> | undefined): number => (a ?? []).reduce<number>((x, v) => x + (v ?? 0), 0);

test("the report's totals equal the store's counts for the window and the checker's numbers", { timeout: 60_000 }, async () => {
  const db = new pg.Client({ connectionString: scenario.storeUrl });
  await db.connect();
  try {
    const w = [scenario.since, scenario.until];
    const n = async (sql: string): Promise<number> => Number((await db.query<{ n: string }>(`SELECT (${sql}) AS n`, w)).rows[0]?.n);
    const win = 'ts >= $1 AND ts < $2';
    const o = report.overview;
    assert.equal(o.statements, await n(`SELECT count(*) FROM pglog.statements WHERE ${win}`));
    assert.equal(o.timed, await n(`SELECT count(duration_ms) FROM pglog.statements WHERE ${win}`));
    assert.ok(Math.abs(o.totalMs - (await n(`SELECT sum(duration_ms) FROM pglog.statements WHERE ${win}`))) < 1e-6 * o.totalMs);
    assert.equal(o.errors, await n(`SELECT count(*) FROM pglog.errors WHERE ${win}`));
    assert.equal(o.lockWaits, await n(`SELECT count(*) FROM pglog.lock_waits WHERE ${win}`));
    assert.equal(o.deadlocks, await n(`SELECT count(*) FROM pglog.deadlocks WHERE ${win}`));
    assert.equal(o.connections, await n(`SELECT count(*) FROM pglog.sessions WHERE ${win} AND event = 'connection' AND phase = 'authorized'`));
    assert.equal(o.disconnections, await n(`SELECT count(*) FROM pglog.sessions WHERE ${win} AND event = 'disconnection'`));
    assert.equal(o.tempFiles, await n(`SELECT count(*) FROM pglog.temp_files WHERE ${win}`));
    assert.equal(o.tempBytes, await n(`SELECT sum(size_bytes) FROM pglog.temp_files WHERE ${win}`));
    assert.equal(o.checkpoints, await n(`SELECT count(*) FROM pglog.checkpoints WHERE ${win} AND phase = 'complete'`));
    assert.equal(o.autovacuum, await n(`SELECT count(*) FROM pglog.maintenance WHERE ${win} AND kind = 'autovacuum'`));
    assert.equal(o.autoanalyze, await n(`SELECT count(*) FROM pglog.maintenance WHERE ${win} AND kind = 'autoanalyze'`));
    for (const key of ['statements', 'errors', 'lockWaits', 'connections', 'tempFiles', 'checkpoints'] as const) assert.ok(o[key] > 0, `${key} in the window`);
    // The series add up to the totals, and the fleet table to the overview.
    assert.equal(sum(report.series.statements), o.statements);
    assert.equal(sum(report.series.errors), o.errors);
    assert.equal(sum(report.errors.sqlstates.map((s) => s.count)), o.errors);
    assert.equal(
      report.targets.reduce((x, t) => x + t.statements, 0),
      o.statements,
    );
    // The checker: every statement of the seq load the server logged is stored once, and the
    // report's template of those statements has exactly that many calls.
    assert.deepEqual([scenario.check.lost, scenario.check.duplicated], [[], []]);
    const seq = report.templates.rows.filter(
      (t) => t.normalized?.includes('select') === true && t.example?.query.includes(`pglog-seq:${scenario.run}:`) === true,
    );
    assert.equal(seq.length, 1, 'one template for the seq load');
    assert.equal(seq[0]?.calls, scenario.check.expected);
    assert.equal(seq[0]?.calls, await n(`SELECT count(*) FROM pglog.statements WHERE ${win} AND query LIKE 'SELECT ''pglog-seq:${scenario.run}:%'`));
  } finally {
    await db.end();
  }
});

test(
  'over a window of whole-minute bins the report reads the statement rollup: the same counts, totals and ranking as from the rows',
  { timeout: 120_000 },
  async () => {
    const db = new pg.Client({ connectionString: scenario.storeUrl });
    await db.connect();
    try {
      const both = async (since: Date): Promise<{ rolled: HtmlReport; raw: HtmlReport }> => {
        const filter = { since, until: scenario.until, target: null, database: null, limit: 50 };
        return {
          rolled: await fetchHtmlReport(db, filter, scenario.until.getTime(), undefined, { rollup: true }),
          raw: await fetchHtmlReport(db, filter, scenario.until.getTime(), undefined, { rollup: false }),
        };
      };
      // Three hours before the run, 12.345 s into a minute: bins of 2 minutes, so the rollup
      // serves the whole minutes and the rows the partial minutes at the window's edges.
      const { rolled, raw } = await both(new Date(scenario.since.getTime() - 3 * 3_600_000 + 12_345));
      const parts = Number((await db.query<{ n: string }>('SELECT count(*) AS n FROM pglog.statement_rollup')).rows[0]?.n);
      assert.ok(parts > 0, 'the collector wrote rollup rows');
      assert.equal(rolled.overview.statements, raw.overview.statements);
      assert.equal(rolled.overview.timed, raw.overview.timed);
      assert.ok(Math.abs(rolled.overview.totalMs - raw.overview.totalMs) <= 1e-9 * raw.overview.totalMs);
      assert.equal(rolled.overview.statements, report.overview.statements, 'the run is inside both windows');
      // Such a window's bins start 12.345 s into a minute, and a rollup minute goes to the bin
      // its start falls in (queries-rollup.ts): its series has every statement, but one logged
      // near a bin's edge may sit a bin earlier than in the rows' series.
      assert.equal(sum(rolled.series.statements), sum(raw.series.statements));
      assert.deepEqual(
        rolled.targets.map((t) => [t.target, t.statements]),
        raw.targets.map((t) => [t.target, t.statements]),
      );
      const key = (t: HtmlReport['templates']['rows'][number]): string => `${t.target} ${t.database ?? '-'} ${t.fingerprint ?? '-'}`;
      const byTotal = (r: HtmlReport): string[] =>
        r.templates.rows
          .filter((t) => t.rank.total <= 10)
          .sort((a, b) => a.rank.total - b.rank.total)
          .map((t) => `${key(t)} ${t.calls} ${t.maxMs}`);
      assert.deepEqual(byTotal(rolled), byTotal(raw));
      assert.equal(rolled.templates.groups, raw.templates.groups);
      for (const t of rolled.templates.rows) {
        const exact = raw.templates.rows.find((r) => key(r) === key(t));
        if (exact === undefined) continue;
        assert.equal(sum(t.series.calls), sum(exact.series.calls), key(t));
        assert.ok(t.p95Ms !== null && t.p95Ms > 0 && t.p95Ms <= t.maxMs * 1.1, `${key(t)}: p95 ${t.p95Ms} max ${t.maxMs}`);
        assert.ok(t.example !== null, `${key(t)} has its example`);
      }
      // Bins that start on whole minutes hold whole rollup minutes: the same series, bin by bin.
      const aligned = await both(new Date(Math.floor((scenario.since.getTime() - 3 * 3_600_000) / 60_000) * 60_000));
      assert.equal(sum(aligned.rolled.series.statements), report.overview.statements);
      assert.deepEqual(aligned.rolled.series.statements, aligned.raw.series.statements);
      for (const t of aligned.rolled.templates.rows) {
        const exact = aligned.raw.templates.rows.find((r) => key(r) === key(t));
        if (exact !== undefined) assert.deepEqual(t.series.calls, exact.series.calls, key(t));
      }
    } finally {
      await db.end();
    }
  },
);

test('in headless Chromium: no console error, charts with points, sorted tables, a drill-down, hostile text inert', { timeout: 180_000 }, async () => {
  assert.ok(existsSync(CHROMIUM), 'Debian chromium is installed (scripts/install-system-deps.sh)');
  const userDataDir = mkdtempSync(join(work, 'chromium-profile-'));
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    // Exactly the flags, plus what playwright needs to drive it (its pipe, a data dir).
    ignoreDefaultArgs: true,
    args: [...CHROMIUM_FLAGS, `--user-data-dir=${userDataDir}`, '--remote-debugging-pipe', '--no-startup-window'],
  });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => {
      problems.push(`pageerror: ${e.message}`);
    });
    page.on('request', (r) => {
      if (!r.url().startsWith('file:')) problems.push(`network request: ${r.url()}`);
    });
    await page.goto(`file://${htmlFile}`);
    await page.waitForSelector('body[data-ready="true"]');

    // Browser-side code as expressions (the project's types have no DOM).
    const chartState = (): Promise<Array<{ chart: string; points: number; canvas: boolean }>> =>
      page.evaluate(`[...document.querySelectorAll('.chart[data-chart]')]
      .filter((e) => e.offsetParent !== null)
      .map((e) => ({ chart: e.getAttribute('data-chart'), points: Number(e.getAttribute('data-points') || 0), canvas: e.querySelector('canvas') !== null }))`);
    const visible = await chartState();
    assert.ok(visible.length >= 11, `charts drawn: ${JSON.stringify(visible)}`);
    for (const c of visible) assert.ok(c.canvas && c.points > 0, `chart ${c.chart} has data points: ${JSON.stringify(c)}`);
    assert.equal(await page.locator('.chart-box .empty').count(), 0, 'no section of the scenario is without data');

    // Every table that states its order is in it (each tab shown in turn).
    const tabs: string[] = await page.evaluate(`[...document.querySelectorAll('.tab')].map((e) => e.getAttribute('data-tab'))`);
    for (const tab of tabs) {
      await page.click(`.tab[data-tab="${tab}"]`);
      const tables: Array<{ id: string; dir: string; values: number[] }> = await page.evaluate(`[...document.querySelectorAll('table[data-sorted]')]
        .filter((t) => t.offsetParent !== null).map((t) => {
          const [col, dir] = t.getAttribute('data-sorted').split(' ');
          const values = [...t.querySelectorAll('tbody tr')].map((tr) => Number(tr.children[Number(col)].getAttribute('data-v')));
          return { id: t.id, dir, values };
        })`);
      assert.ok(tables.length >= 8, `sorted tables: ${tables.map((t) => t.id).join(', ')}`);
      for (const t of tables) {
        assert.ok(t.values.length > 0 && t.values.every(Number.isFinite), `${t.id} has values: ${JSON.stringify(t.values)}`);
        for (let i = 1; i < t.values.length; i++) {
          const [a, b] = [t.values[i - 1] ?? 0, t.values[i] ?? 0];
          assert.ok(t.dir === 'desc' ? a >= b : a <= b, `${t.id} sorted ${t.dir}: ${JSON.stringify(t.values)}`);
        }
      }
    }
    await page.click('.tab[data-tab="templates-total"]');

    // A template's drill-down: normalized text, example, its own chart.
    await page.click('#templates-total-table tbody tr:first-child');
    const drill = page.locator('.drill:not([hidden])');
    assert.equal(await drill.count(), 1);
    await drill.locator('.chart canvas').waitFor();
    assert.ok(Number(await drill.locator('.chart').getAttribute('data-points')) > 0);
    assert.ok(((await drill.locator('pre.sql').first().textContent()) ?? '').length > 0);
    // The slow template has the plan auto_explain logged.
    const slow = report.templates.rows.find((t) => t.example?.query.includes('pg_sleep') === true);
    assert.ok(slow?.plan !== null && slow?.plan !== undefined, 'the pg_sleep template has its plan');
    await page.click(`#templates-total-table tr[data-template="${slow.id}"]`);
    assert.match((await page.locator(`#drill-${slow.id} pre.plan`).textContent()) ?? '', /Result|Aggregate|Scan/);

    // Hostile text: shown as text, never run.
    assert.equal(await page.evaluate('typeof window.__pwned'), 'undefined');
    assert.ok(((await page.textContent('body')) ?? '').includes('window.__pwned'), 'the hostile texts are on the page as text');
    assert.ok(
      report.templates.rows.some((t) => t.example?.query.includes(HOSTILE_LITERAL) === true) ||
        report.errors.messages.rows.some((e) => e.message.includes('__pwned')),
    );

    // The UTC toggle re-renders every time in UTC.
    await page.check('#utc-toggle');
    const times: string[] = await page.evaluate(`[...document.querySelectorAll('time[data-t]')].map((e) => e.textContent)`);
    assert.ok(times.length > 0 && times.every((t) => t.endsWith('Z')), times.slice(0, 3).join(', '));
    assert.deepEqual(problems, []);

    const shots = process.env.PGLOG_REPORT_SCREENSHOTS ?? join(work, 'shots');
    mkdirSync(shots, { recursive: true });
    await page.uncheck('#utc-toggle');
    await page.click('#templates-total-table tbody tr:first-child');
    for (const id of SECTIONS) {
      const file = join(work, `${id}.png`);
      await page.locator(`#${id}`).screenshot({ path: file });
      assert.ok(statSync(file).size > 5_000, `screenshot of ${id}`);
      copyFileSync(file, join(shots, `${id}.png`));
    }
  } finally {
    await browser.close();
  }
});
