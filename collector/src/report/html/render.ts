/**
 * The HTML report as one self-contained page: styles and scripts inlined (uPlot and client.js,
 * passed in as `assets`), the model embedded as JSON for the charts, tables rendered here.
 * Pure: a model and the assets in, a string out. The event sections are in sections.ts.
 */
import { contentSecurityPolicy, inline } from './csp.ts';
import { anyPoint, bytes, chart, type Column, count, esc, jsonForScript, ms, NONE_HTML, orNone, shownOf, table, timeCell } from './markup.ts';
import type { HtmlReport, Template } from './model.ts';
import { blockingSection, checkpointSection, errorSection, lockSection, maintenanceSection, sessionSection, tempFileSection } from './sections.ts';

export interface Assets {
  uplotJs: string;
  uplotCss: string;
  clientJs: string;
  css: string;
}

export function renderHtml(r: HtmlReport, assets: Assets): string {
  const scope = [r.meta.target === null ? 'all targets' : `target ${r.meta.target}`, r.meta.database === null ? null : `database ${r.meta.database}`]
    .filter((s) => s !== null)
    .join(', ');
  const nav = [
    ['overview', 'Overview'],
    ['statements', 'Statements'],
    ['templates', 'Top templates'],
    ['errors', 'Errors'],
    ['locks', 'Lock waits'],
    ['blocking', 'Blocking'],
    ['checkpoints', 'Checkpoints'],
    ['maintenance', 'Autovacuum'],
    ['tempfiles', 'Temp files'],
    ['sessions', 'Sessions'],
  ]
    .map(([id, t]) => `<a href="#${id}">${esc(t)}</a>`)
    .join('');
  // The CSP allows exactly these elements, by hash (csp.ts); the page has no other script or style.
  const styles = [inline('style', assets.uplotCss), inline('style', assets.css)];
  const scripts = [inline('script', assets.uplotJs), inline('script', assets.clientJs)];
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${contentSecurityPolicy(scripts, styles)}">
<title>pglog report ${esc(scope)}</title>
${styles.map((e) => e.element).join('\n')}
</head><body>
<header><h1>pglog report</h1>
<p class="window">${timeCell(r.meta.since)} .. ${timeCell(r.meta.until)} · ${esc(scope)} · bins of ${ms(r.meta.binMs)}
<label class="utc"><input type="checkbox" id="utc-toggle"> UTC</label></p>
<nav>${nav}</nav></header>
<main>
${overviewSection(r)}
${statementSection(r)}
${templateSection(r)}
${errorSection(r)}
${lockSection(r)}
${blockingSection(r)}
${checkpointSection(r)}
${maintenanceSection(r)}
${tempFileSection(r)}
${sessionSection(r)}
</main>
<footer>Generated ${timeCell(r.meta.generatedAt)} by pglog from the store's stable views (docs/report.md).</footer>
<script type="application/json" id="report-data">${jsonForScript(r)}</script>
${scripts.map((e) => e.element).join('\n')}
</body></html>
`;
}

function card(label: string, value: string, id: string): string {
  return `<div class="card" id="ov-${esc(id)}"><div class="label">${esc(label)}</div><div class="value">${value}</div></div>`;
}

function overviewSection(r: HtmlReport): string {
  const o = r.overview;
  const cards = [
    card('Statements', count(o.statements), 'statements'),
    card('With a duration', count(o.timed), 'timed'),
    card('Total duration', ms(o.totalMs), 'total'),
    card('Mean duration', ms(o.meanMs), 'mean'),
    card('Peak statements/s', `${esc(o.peakQps.toFixed(1))}${o.peakQpsAt === null ? '' : ` <small>at ${timeCell(o.peakQpsAt)}</small>`}`, 'peak'),
    card('Errors', count(o.errors), 'errors'),
    card('Peak errors/s', esc(o.peakErrorsPerS.toFixed(2)), 'peak-errors'),
    card('Lock wait messages', count(o.lockWaits), 'lockwaits'),
    card('Deadlocks', count(o.deadlocks), 'deadlocks'),
    card('Sessions started', count(o.connections), 'connections'),
    card('Sessions ended', count(o.disconnections), 'disconnections'),
    card('Temporary files', `${count(o.tempFiles)} <small>${esc(bytes(o.tempBytes))}</small>`, 'tempfiles'),
    card('Checkpoints', count(o.checkpoints), 'checkpoints'),
    card('Autovacuum / autoanalyze', `${count(o.autovacuum)} / ${count(o.autoanalyze)}`, 'maintenance'),
  ].join('');
  type T = HtmlReport['targets'][number];
  const c =
    (k: string) =>
    (t: T): number =>
      t.counts[k] ?? 0;
  const num = (title: string, f: (t: T) => number): Column<T> => ({ title, cls: 'num', cell: (t) => count(f(t)), value: f });
  const columns: Array<Column<T>> = [
    { title: 'target', cell: (t) => esc(t.target) },
    num('statements', (t) => t.statements),
    { title: 'total duration', cls: 'num', cell: (t) => ms(t.totalMs), value: (t) => t.totalMs },
    num('errors', c('errors')),
    num('lock waits', c('lock_waits')),
    num('deadlocks', c('deadlocks')),
    num('sessions', c('connections')),
    num('temp files', c('temp_files')),
    num('checkpoints', c('checkpoints')),
    num('autovacuum', c('autovacuum')),
    num('autoanalyze', c('autoanalyze')),
  ];
  return `<section id="overview"><h2>Overview</h2>
<div class="cards">${cards}</div>
<h3>Fleet: by target <span class="sort">sorted by statements, most first</span></h3>
${table('targets-table', columns, r.targets, { column: 1, dir: 'desc' })}
</section>`;
}

/** Where a percentile is read from the statement rollup's histogram, the title says so. */
function approximate(r: HtmlReport): string {
  return r.meta.percentiles === 'histogram' ? " (from the statement rollup's histogram: within 9.1 %)" : '';
}

function statementSection(r: HtmlReport): string {
  const s = r.series;
  const has = anyPoint(s.qps ?? []);
  return `<section id="statements"><h2>Statements over time</h2>
<div class="charts">
${chart('qps', 'Statements per second', has)}
${chart('percentiles', `Duration percentiles (ms): p50, p95, p99${approximate(r)}`, anyPoint(s.p50 ?? [], s.p95 ?? [], s.p99 ?? []))}
${r.targetSeries.targets.length > 1 ? chart('target-qps', 'Statements per second by target', has) : ''}
</div></section>`;
}

const RANKINGS = [
  { key: 'total', title: 'by total time', column: 4 },
  { key: 'calls', title: 'by calls', column: 3 },
  { key: 'mean', title: 'by mean', column: 5 },
  { key: 'p95', title: 'by p95', column: 6 },
] as const;

function templateColumns(): Array<Column<Template>> {
  return [
    { title: 'target', cell: (t) => esc(t.target) },
    { title: 'database', cell: (t) => orNone(t.database) },
    { title: 'fingerprint', cls: 'code', cell: (t) => orNone(t.fingerprint) },
    { title: 'calls', cls: 'num', cell: (t) => count(t.calls), value: (t) => t.calls },
    { title: 'total', cls: 'num', cell: (t) => ms(t.totalMs), value: (t) => t.totalMs },
    { title: 'mean', cls: 'num', cell: (t) => ms(t.meanMs), value: (t) => t.meanMs },
    { title: 'p95', cls: 'num', cell: (t) => ms(t.p95Ms), value: (t) => t.p95Ms },
    { title: 'max', cls: 'num', cell: (t) => ms(t.maxMs), value: (t) => t.maxMs },
    { title: 'template', cls: 'code', cell: (t) => `<span class="q">${esc(t.normalized ?? t.query)}</span>` },
  ];
}

function templateSection(r: HtmlReport): string {
  const limit = r.meta.limit;
  const tabs = RANKINGS.map(
    (k, i) => `<button type="button" class="tab${i === 0 ? ' active' : ''}" data-tab="templates-${k.key}">${esc(k.title)}</button>`,
  ).join('');
  const tables = RANKINGS.map((k, i) => {
    const rows = r.templates.rows.filter((t) => t.rank[k.key] <= limit).sort((a, b) => a.rank[k.key] - b.rank[k.key]);
    return `<div class="tab-panel" id="templates-${k.key}"${i === 0 ? '' : ' hidden'}>
<p class="sort">sorted ${esc(k.title)}, largest first; click a row for its template, example, plan and series${esc(approximate(r))}</p>
${table(`templates-${k.key}-table`, templateColumns(), rows, { column: k.column, dir: 'desc' }, (t) => `class="drill-row" data-template="${esc(t.id)}" tabindex="0"`)}
</div>`;
  }).join('\n');
  const drills = r.templates.rows.map(drillDown).join('\n');
  return `<section id="templates"><h2>Top query templates${shownOf(Math.min(limit, r.templates.groups), r.templates.groups)}</h2>
<p class="note">Statements logged with a duration. A template is a (target, database, fingerprint).</p>
<div class="tabs">${tabs}</div>
${tables}
<div class="drills">${drills}</div>
</section>`;
}

function drillDown(t: Template): string {
  const ex = t.example;
  const example =
    ex === null
      ? `<p>${NONE_HTML}</p>`
      : `<p class="meta">slowest in the window: ${ms(ex.durationMs)} at ${timeCell(ex.ts)}, user ${orNone(ex.user)}, application ${orNone(ex.application)}</p>
<pre class="sql">${esc(ex.query)}</pre>${ex.parameters === null ? '' : `<p class="meta">parameters</p><pre class="params">${esc(ex.parameters)}</pre>`}`;
  const plan =
    t.plan === null
      ? '<p class="empty">no auto_explain plan in this window</p>'
      : `<p class="meta">auto_explain (${orNone(t.plan.format)}) at ${timeCell(t.plan.ts)}, ${ms(t.plan.durationMs)}</p><pre class="plan">${esc(t.plan.plan)}</pre>`;
  return `<section class="drill" id="drill-${esc(t.id)}" data-template="${esc(t.id)}" hidden>
<h3>Template ${orNone(t.fingerprint)} <small>${esc(t.target)} / ${orNone(t.database)}</small> <button type="button" class="close">close</button></h3>
<p class="meta">${count(t.calls)} calls, total ${ms(t.totalMs)}, mean ${ms(t.meanMs)}, p95 ${ms(t.p95Ms)}, max ${ms(t.maxMs)}</p>
<h4>Normalized</h4><pre class="sql">${esc(t.normalized ?? t.query)}</pre>
<h4>Example</h4>${example}
<h4>Plan</h4>${plan}
<h4>Over time</h4><div class="chart" data-chart="template" data-template="${esc(t.id)}"></div>
</section>`;
}
