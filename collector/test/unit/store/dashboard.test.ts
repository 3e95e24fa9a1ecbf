// The chart's store dashboard (charts/pglog/dashboards/pglog-store.json): the file is what
// scripts/dashboards/ generates; every panel has a title, a description and the store's data
// source; every query reads only the stable views of the store (the views the migrations
// create, and pglog.snapshot_runs, documented stable in docs/store.md), filters by the time
// range and the target and database variables, and a time series returns "time" first,
// sorted. That the queries run and return rows is collector/test/integration/store-dashboard.test.ts.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { DATASOURCE_TYPE } from '../../../../scripts/dashboards/grafana.ts';
import { STORE_DASHBOARD_FILE, storeDashboardText } from '../../../../scripts/dashboards/store-dashboard.ts';
import { STABLE_VIEWS } from '../../helpers/store-catalog.ts';
import { type DashboardPanel, readStoreDashboard, type StoreDashboard } from '../../helpers/store-dashboard-json.ts';

const ROOT = join(import.meta.dirname, '../../../..');
const MIGRATIONS = join(ROOT, 'collector/src/store/migrations');

const queryPanels = (d: StoreDashboard): DashboardPanel[] => d.panels.filter((p) => p.type !== 'row');

/** The stable relations: every view the migrations create, and snapshot_runs (docs/store.md: "part of the stable interface"). */
function stableRelations(): Set<string> {
  const names = new Set(['snapshot_runs']);
  for (const file of readdirSync(MIGRATIONS).filter((f) => f.endsWith('.sql'))) {
    for (const m of readFileSync(join(MIGRATIONS, file), 'utf8').matchAll(/CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+pglog\.(\w+)/gi)) names.add(m[1]!);
  }
  return names;
}

/**
 * What a query reads that is not a stable view: each FROM / JOIN item must be pglog.<stable
 * view>, a CTE of the query, or a subquery; a comma list after FROM is refused (write JOINs, so
 * every relation is checked). `extract(epoch from x)` is not a FROM clause.
 */
function unstableReads(sql: string, stable: ReadonlySet<string>): string[] {
  const bad: string[] = [];
  const ctes = new Set(
    [...sql.matchAll(/(?:\bWITH(?:\s+RECURSIVE)?|,)\s+(\w+)(?:\s*\([^)]*\))?\s+AS\s+(?:(?:NOT\s+)?MATERIALIZED\s+)?\(/gi)].map((m) => m[1]!.toLowerCase()),
  );
  for (const m of sql.matchAll(/pglog\.(\w+)/gi)) if (!stable.has(m[1]!)) bad.push(`pglog.${m[1]!} is not a stable view`);
  for (const m of sql.matchAll(/(?<!epoch\s)\b(FROM|JOIN)\s+(\(|[\w.]+)(?:\s+(?!ON\b|WHERE\b|GROUP\b|ORDER\b|CROSS\b|LEFT\b|JOIN\b|LIMIT\b)\w+)?\s*(,)?/gi)) {
    const item = m[2]!;
    if (m[3] !== undefined) bad.push(`${m[1]} ${item}, ...: a comma list (use JOIN)`);
    if (item === '(') continue;
    const dot = item.toLowerCase().split('.');
    if (dot.length === 2 && dot[0] === 'pglog' && stable.has(dot[1]!)) continue;
    if (dot.length === 1 && ctes.has(dot[0]!)) continue;
    bad.push(`${m[1]} ${item}: neither a stable pglog view nor a CTE`);
  }
  return bad;
}

test('the dashboard file is what scripts/dashboards/ generates (make dashboards)', () => {
  assert.equal(readFileSync(join(ROOT, STORE_DASHBOARD_FILE), 'utf8'), storeDashboardText(), `${STORE_DASHBOARD_FILE} is stale: run \`make dashboards\``);
});

test('every panel has a title, a description and the store data source; ids are unique; the grid is 24 wide', () => {
  const d = readStoreDashboard();
  const panels = queryPanels(d);
  assert.ok(panels.length >= 30, `${panels.length} panels`);
  assert.equal(new Set(d.panels.map((p) => p.id)).size, d.panels.length);
  for (const p of panels) {
    assert.ok((p.title ?? '').length > 0, `panel ${p.id} has no title`);
    assert.ok((p.description ?? '').length > 20, `${p.title}: no description`);
    assert.deepEqual(p.datasource, { type: DATASOURCE_TYPE, uid: '${datasource}' }, p.title);
    assert.ok(p.gridPos.x + p.gridPos.w <= 24 && p.gridPos.w > 0 && p.gridPos.h > 0, `${p.title}: ${JSON.stringify(p.gridPos)}`);
    assert.equal(p.targets?.length, 1, p.title);
    for (const t of p.targets ?? []) {
      assert.deepEqual(t.datasource, { type: DATASOURCE_TYPE, uid: '${datasource}' }, p.title);
      assert.equal(t.rawQuery, true);
      assert.equal(t.editorMode, 'code');
      assert.equal(t.format, p.type === 'timeseries' ? 'time_series' : 'table', p.title);
    }
  }
});

test('every query reads only stable views, within the time range, filtered by $target and (where the view has one) $database', () => {
  const stable = stableRelations();
  for (const v of STABLE_VIEWS) {
    assert.ok(stable.has(v), `the migrations create no view pglog.${v}`);
  }
  const d = readStoreDashboard();
  const viewsRead = new Set<string>();
  for (const p of queryPanels(d)) {
    const sql = p.targets![0]!.rawSql!;
    assert.deepEqual(unstableReads(sql, stable), [], p.title);
    for (const m of sql.matchAll(/pglog\.(\w+)/g)) viewsRead.add(m[1]!);
    assert.match(sql, /\$__timeFilter\(/, `${p.title}: not limited to the time range`);
    assert.match(sql, /'__all' IN \(\$target\) OR \w*\.?target IN \(\$target\)/, `${p.title}: not filtered by $target`);
    // Checkpoints belong to the whole server: they have no database.
    if (!/FROM pglog\.checkpoints\b/.test(sql))
      assert.match(sql, /'__all' IN \(\$database\) OR [\w.]*database IN \(\$database\)/, `${p.title}: not filtered by $database`);
    if (p.type === 'timeseries') {
      assert.match(sql, /^(?:WITH[\s\S]*\n)?SELECT (?:\$__timeGroupAlias\(|time,)/m, `${p.title}: a time series must return time first`);
      assert.match(sql, /ORDER BY 1\s*$/, `${p.title}: a time series must be sorted by time`);
    }
  }
  // Every stable view has a panel but read_positions (the collector's own bookkeeping).
  for (const v of STABLE_VIEWS.filter((x) => x !== 'read_positions')) {
    assert.ok(viewsRead.has(v), `no panel reads pglog.${v}`);
  }
});

test('the checker refuses tables, unknown relations and comma lists', () => {
  const stable = stableRelations();
  assert.deepEqual(unstableReads('WITH t AS (SELECT 1 FROM pglog.statements s) SELECT * FROM t JOIN pglog.templates q ON true', stable), []);
  assert.deepEqual(unstableReads('SELECT (extract(epoch from ts)/60)::bigint FROM (SELECT ts FROM pglog.errors) x', stable), []);
  assert.deepEqual(unstableReads('SELECT * FROM pglog.statement_events', stable), [
    'pglog.statement_events is not a stable view',
    'FROM pglog.statement_events: neither a stable pglog view nor a CTE',
  ]);
  assert.deepEqual(unstableReads('SELECT * FROM pg_class', stable), ['FROM pg_class: neither a stable pglog view nor a CTE']);
  assert.deepEqual(unstableReads('SELECT * FROM pglog.errors e, pg_class', stable), ['FROM pglog.errors, ...: a comma list (use JOIN)']);
  assert.deepEqual(unstableReads('SELECT * FROM pglog.errors LEFT JOIN pglog.query_templates USING (fingerprint)', stable), [
    'pglog.query_templates is not a stable view',
    'JOIN pglog.query_templates: neither a stable pglog view nor a CTE',
  ]);
});

test('variables: the data source by plugin type; target and database multi-value with All as the custom all value; the template as text', () => {
  const vars = new Map(readStoreDashboard().templating.list.map((v) => [v.name, v]));
  assert.deepEqual([...vars.keys()], ['datasource', 'target', 'database', 'fingerprint']);
  assert.equal(vars.get('fingerprint')?.type, 'textbox');
  // The free text is quoted by Grafana (sqlstring), never pasted into the SQL as typed.
  for (const p of queryPanels(readStoreDashboard())) {
    const sql = p.targets![0]!.rawSql!;
    for (const m of sql.matchAll(/\$\{?fingerprint\b(:\w+)?/g)) assert.equal(m[1], ':sqlstring', `${p.title}: ${m[0]}`);
  }
  assert.deepEqual([vars.get('datasource')?.type, vars.get('datasource')?.query], ['datasource', DATASOURCE_TYPE]);
  const stable = stableRelations();
  for (const name of ['target', 'database']) {
    const v = vars.get(name)!;
    assert.deepEqual([v.type, v.multi, v.includeAll, v.allValue], ['query', true, true, "'__all'"], name);
    assert.deepEqual(v.datasource, { type: DATASOURCE_TYPE, uid: '${datasource}' });
    assert.deepEqual(unstableReads(v.query, stable), [], name);
  }
});
