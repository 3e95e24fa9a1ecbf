// The store dashboard over several stores (charts/pglog/dashboards/pglog-store.json): the Store
// variable takes several data sources; every row is repeated by it, so every panel runs once
// per store chosen on that store (the panel's data source is the variable, which a repeated
// row sets to its one store); no panel repeats on its own (a repeat inside a repeated row would
// multiply); a fingerprint's link keeps the store of the row it was clicked in. That the SQL
// runs on each store is collector/test/integration/store-dashboard.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DATASOURCE_TYPE } from '../../../../scripts/dashboards/grafana.ts';
import { STORE_REPEAT } from '../../../../scripts/dashboards/store-dashboard.ts';
import { readStoreDashboard } from '../../helpers/store-dashboard-json.ts';

type Json = Record<string, unknown>;

/** The file as plain JSON: the fields the repeat is made of are not in the typed view the other tests read. */
function dashboard(): { panels: Json[]; templating: { list: Json[] } } {
  return readStoreDashboard() as unknown as { panels: Json[]; templating: { list: Json[] } };
}

test('the Store variable: PostgreSQL data sources, several at once, no All (it would take every PostgreSQL data source)', () => {
  const v = dashboard().templating.list.find((x) => x.name === 'datasource')!;
  assert.deepEqual([v.type, v.query, v.multi, v.includeAll], ['datasource', DATASOURCE_TYPE, true, false]);
  assert.equal(STORE_REPEAT.variable, 'datasource');
});

test('every panel is in a row repeated by the Store variable, whose title names the store; rows are expanded', () => {
  const { panels } = dashboard();
  assert.equal(panels[0]?.type, 'row', 'the first panel is a row: no panel outside a row');
  const rows = panels.filter((p) => p.type === 'row');
  assert.ok(rows.length >= 10, `${rows.length} rows`);
  for (const row of rows) {
    assert.equal(row.repeat, 'datasource', String(row.title));
    assert.match(String(row.title), /^[A-Z].* · \$\{datasource:text\}$/);
    // An expanded row's panels follow it in the list (a collapsed one would hold them in `panels`).
    assert.deepEqual([row.collapsed, row.panels], [false, []], String(row.title));
  }
  let row: Json | undefined;
  for (const p of panels) {
    if (p.type === 'row') {
      row = p;
      continue;
    }
    assert.equal(row?.repeat, 'datasource', `${String(p.title)}: not under a row repeated per store`);
    assert.equal(p.repeat, undefined, `${String(p.title)}: repeats inside a repeated row`);
    assert.deepEqual(p.datasource, { type: DATASOURCE_TYPE, uid: '${datasource}' }, String(p.title));
    for (const t of p.targets as Json[]) assert.deepEqual(t.datasource, { type: DATASOURCE_TYPE, uid: '${datasource}' }, String(p.title));
  }
});

test("a fingerprint's link opens the template on the store of its row, with the same filters", () => {
  const links = dashboard()
    .panels.flatMap((p) => (p.fieldConfig as { overrides?: Array<{ properties: Array<{ id: string; value: unknown }> }> } | undefined)?.overrides ?? [])
    .flatMap((o) => o.properties)
    .filter((x) => x.id === 'links')
    .flatMap((x) => x.value as Array<{ url: string }>);
  assert.ok(links.length >= 4, `${links.length} links`);
  for (const l of links) {
    assert.match(l.url, /^\/d\/pglog-store\/pglog-store\?/);
    for (const part of ['${datasource:queryparam}', '${target:queryparam}', '${database:queryparam}', '${__url_time_range}'])
      assert.ok(l.url.includes(part), `${l.url}: ${part}`);
  }
});
