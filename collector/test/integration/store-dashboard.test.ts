// The chart's store dashboard (charts/pglog/dashboards/pglog-store.json, the file the chart's
// ConfigMap carries) against a real store filled by a real `pglog collect` run
// (helpers/store-workload.ts): each panel's SQL and each variable's query, expanded as Grafana
// would (helpers/grafana-sql.ts: variables, then the PostgreSQL data source's macros), runs and
// returns rows with All selected, with one target and database, with two targets; a target
// that does not exist leaves every panel empty (so each one applies the filter). The queries
// run as the read-only role docs/install.md ("The store dashboard") tells users to create for
// Grafana's data source, with exactly the grants it lists. Several stores: every row is
// repeated per store chosen, each copy's panels on its store, and the Target list comes from
// the first store; so every panel also runs on a second, empty store beside it, with All and
// with the first store's target chosen (nothing there), as Grafana runs a repeated row.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { migrate } from '@pglog/collector/store/migrate.ts';
import pg from 'pg';

import { type GrafanaQueryContext, grafanaSql, type GrafanaVariable } from '../helpers/grafana-sql.ts';
import { readStoreDashboard } from '../helpers/store-dashboard-json.ts';
import { startStoreWorkload, type StoreWorkload, WORKLOAD_DATABASE, WORKLOAD_TARGET } from '../helpers/store-workload.ts';

const ROOT = join(import.meta.dirname, '../../..');

/** The SQL block of docs/install.md's "The store dashboard": the data source's role and its grants. */
function documentedRoleSql(): { sql: string; role: string } {
  const doc = readFileSync(join(ROOT, 'docs/install.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### The store dashboard'));
  const m = /```sql\n([\s\S]*?)```/.exec(section);
  const role = m === null ? null : /CREATE ROLE (\w+) LOGIN/.exec(m[1]!);
  if (m === null || role === null) throw new Error('docs/install.md: no CREATE ROLE block under "The store dashboard"');
  return { sql: m[1]!, role: role[1]! };
}

type Selection = readonly string[] | 'all';

describe('the store dashboard on a store filled by pglog collect', { timeout: 400_000 }, () => {
  let workload: StoreWorkload;
  let store: pg.Client;
  /** A second store chosen beside the first: migrated, empty, read as the same role. */
  let second: pg.Client;
  const dashboard = readStoreDashboard();
  const panels = dashboard.panels.filter((p) => p.targets !== undefined);
  const queryVariables = dashboard.templating.list.filter((v) => v.type === 'query');
  const textVariables = dashboard.templating.list.filter((v) => v.type === 'textbox');
  const options = new Map<string, string[]>();
  /** What the textbox variables hold (the template's fingerprint, as a top-templates link sets it). */
  const typed = new Map<string, string>();

  /** Grafana's query context: the time range around the workload, 5 s intervals, the given selections. */
  const context = (selected: Record<string, Selection>): GrafanaQueryContext => ({
    from: new Date(workload.startedAt.getTime() - 60_000),
    to: new Date(workload.seededAt.getTime() + 60_000),
    intervalMs: 5000,
    variables: queryVariables
      .map((v): GrafanaVariable => ({
        name: v.name,
        multi: v.multi === true,
        includeAll: v.includeAll === true,
        allValue: v.allValue ?? null,
        options: options.get(v.name) ?? [],
        current: selected[v.name] ?? 'all',
      }))
      .concat(textVariables.map((v) => ({ name: v.name, multi: false, includeAll: false, allValue: null, options: [], current: [typed.get(v.name) ?? ''] }))),
  });

  const run = async (rawSql: string, ctx: GrafanaQueryContext, on: pg.Client = store): Promise<{ sql: string; rows: Array<Record<string, unknown>> }> => {
    const sql = grafanaSql(rawSql, ctx);
    // Nothing of Grafana's syntax is left for PostgreSQL.
    assert.doesNotMatch(sql, /\$__|\$target|\$database|\$\{|\[\[/, sql);
    try {
      return { sql, rows: (await on.query(sql)).rows as Array<Record<string, unknown>> };
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${sql}`, { cause: e });
    }
  };

  before(async () => {
    workload = await startStoreWorkload();
    const { sql, role } = documentedRoleSql();
    const admin = new pg.Client({ connectionString: workload.storeUrl });
    await admin.connect();
    const secondUrl = workload.storeUrl.replace('/postgres?', '/pglog_second?');
    try {
      await admin.query(sql);
      await admin.query('CREATE DATABASE pglog_second');
    } finally {
      await admin.end();
    }
    // The second store: the schema, and the documented grants (the role exists already).
    const secondAdmin = new pg.Client({ connectionString: secondUrl });
    await secondAdmin.connect();
    try {
      await migrate(secondAdmin);
      await secondAdmin.query(sql.replace(/CREATE ROLE [^;]*;/, ''));
    } finally {
      await secondAdmin.end();
    }
    // The test cluster trusts local connections: the role logs in without its password.
    const asRole = (url: string): string => url.replace('postgresql://postgres@', `postgresql://${role}@`);
    store = new pg.Client({ connectionString: asRole(workload.storeUrl) });
    await store.connect();
    second = new pg.Client({ connectionString: asRole(secondUrl) });
    await second.connect();
    assert.equal((await store.query<{ u: string }>('SELECT current_user AS u')).rows[0]!.u, role);
  });
  after(async () => {
    await second?.end().catch(() => undefined);
    await store?.end().catch(() => undefined);
    await workload?.dispose();
  });

  test("the variables' queries list the workload's target and database", async () => {
    assert.deepEqual(
      queryVariables.map((v) => v.name),
      ['target', 'database'],
    );
    for (const v of queryVariables) {
      const { rows } = await run(v.query, context({}));
      options.set(
        v.name,
        rows.map((r) => String(Object.values(r)[0])),
      );
    }
    assert.deepEqual(options.get('target'), [WORKLOAD_TARGET]);
    assert.ok(options.get('database')!.includes(WORKLOAD_DATABASE), JSON.stringify(options.get('database')));
    const one = await run(queryVariables[1]!.query, context({ target: [WORKLOAD_TARGET] }));
    assert.ok(one.rows.length > 0);
    const none = await run(queryVariables[1]!.query, context({ target: ['no-such-target'] }));
    assert.equal(none.rows.length, 0);
    // The template a click on the first fingerprint of "Top templates by total time" selects.
    const top = panels.find((p) => p.title === 'Top templates by total time')!;
    const first = (await run(top.targets![0]!.rawSql!, context({}))).rows[0];
    assert.ok(typeof first?.fingerprint === 'string' && first.fingerprint !== '', JSON.stringify(first));
    assert.deepEqual(
      textVariables.map((v) => v.name),
      ['fingerprint'],
    );
    typed.set('fingerprint', first.fingerprint);
  });

  for (const [what, selected] of [
    ['All targets, all databases', {}],
    ['one target, one database', { target: [WORKLOAD_TARGET], database: [WORKLOAD_DATABASE] }],
    ['two targets (multi-value), all databases', { target: [WORKLOAD_TARGET, 'another-target'] }],
  ] as const) {
    test(`every panel returns rows: ${what}`, async () => {
      const empty: string[] = [];
      for (const panel of panels) {
        const { rows } = await run(panel.targets![0]!.rawSql!, context(selected));
        if (rows.length === 0) empty.push(panel.title ?? `panel ${panel.id}`);
        if (panel.type === 'timeseries') {
          for (const r of rows) assert.ok(r.time !== null && Number.isFinite(Number(r.time)), `${panel.title}: time ${String(r.time)}`);
        }
      }
      assert.ok(panels.length >= 30);
      assert.deepEqual(empty, [], `panels without rows (${what})`);
    });
  }

  test('with a target that does not exist every panel is empty (each applies $target)', async () => {
    const leaked: string[] = [];
    for (const panel of panels) {
      const { rows } = await run(panel.targets![0]!.rawSql!, context({ target: ['no-such-target'] }));
      // An aggregate without GROUP BY (the totals) answers one row of zeros and NULLs.
      if (rows.some((r) => Object.values(r).some((v) => v !== null && Number(v) !== 0))) leaked.push(`${panel.title}: ${JSON.stringify(rows[0])}`);
    }
    assert.deepEqual(leaked, []);
  });

  test('two stores chosen: every panel also runs on the second store (empty), with All and with a target of the first', async () => {
    for (const v of queryVariables) {
      const { rows } = await run(v.query, context({}), second);
      assert.deepEqual(rows, [], `${v.name} lists nothing of an empty store`);
    }
    for (const selected of [{}, { target: [WORKLOAD_TARGET] }] as Array<Record<string, Selection>>) {
      const leaked: string[] = [];
      for (const panel of panels) {
        const { rows } = await run(panel.targets![0]!.rawSql!, context(selected), second);
        if (rows.some((r) => Object.values(r).some((v) => v !== null && Number(v) !== 0))) leaked.push(`${panel.title}: ${JSON.stringify(rows[0])}`);
      }
      assert.deepEqual(leaked, [], JSON.stringify(selected));
    }
  });

  test('the totals agree with the store', async () => {
    const totals = panels.find((p) => p.type === 'stat')!;
    const { rows } = await run(totals.targets![0]!.rawSql!, context({}));
    const ctx = context({});
    const count = async (view: string, extra = ''): Promise<number> =>
      Number((await store.query<{ n: string }>(`SELECT count(*) AS n FROM pglog.${view} WHERE ts BETWEEN $1 AND $2 ${extra}`, [ctx.from, ctx.to])).rows[0]!.n);
    assert.equal(Number(rows[0]!.statements), await count('statements', 'AND duration_ms IS NOT NULL'));
    assert.equal(Number(rows[0]!.errors), await count('errors'));
    assert.ok(Number(rows[0]!.statements) > 100 && Number(rows[0]!.errors) >= 3, JSON.stringify(rows[0]));
  });
});
