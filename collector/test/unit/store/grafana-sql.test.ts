// The Grafana SQL expander of the store dashboard tests (test/helpers/grafana-sql.ts) against
// the examples of Grafana's documentation:
//   https://grafana.com/docs/grafana/latest/datasources/postgres/query-editor/ (Macros)
//   https://grafana.com/docs/grafana/latest/dashboards/variables/variable-syntax/ (formats)
//   https://grafana.com/docs/grafana/latest/datasources/postgres/template-variables/
import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  expandMacros,
  formatInterval,
  type GrafanaQueryContext,
  grafanaSql,
  type GrafanaVariable,
  interpolateVariables,
  parseIntervalSeconds,
} from '../../helpers/grafana-sql.ts';

// The documentation's example range: 2017-04-21T05:01:17Z .. 2017-04-21T05:06:17Z.
const range = { from: new Date('2017-04-21T05:01:17Z'), to: new Date('2017-04-21T05:06:17Z') };
const variable = (name: string, current: GrafanaVariable['current'], more: Partial<GrafanaVariable> = {}): GrafanaVariable => ({
  name,
  multi: true,
  includeAll: true,
  allValue: null,
  options: ['db1', 'db2', "o'neil"],
  current,
  ...more,
});
const ctx = (variables: GrafanaVariable[] = [], intervalMs = 300_000): GrafanaQueryContext => ({ ...range, intervalMs, variables });

test('macros expand to the documented SQL', () => {
  const cases: Array<[string, string]> = [
    ['$__time(dateColumn)', 'dateColumn AS "time"'],
    ['$__timeEpoch(dateColumn)', 'extract(epoch from dateColumn) AS "time"'],
    ['$__timeFilter(dateColumn)', "dateColumn BETWEEN '2017-04-21T05:01:17.000Z' AND '2017-04-21T05:06:17.000Z'"],
    ['$__timeFrom()', "'2017-04-21T05:01:17.000Z'"],
    ['$__timeTo()', "'2017-04-21T05:06:17.000Z'"],
    ["$__timeGroup(dateColumn,'5m')", '(extract(epoch from dateColumn)/300)::bigint*300'],
    ["$__timeGroup(dateColumn,'5m', 0)", '(extract(epoch from dateColumn)/300)::bigint*300'],
    ["$__timeGroupAlias(dateColumn,'5m')", '(extract(epoch from dateColumn)/300)::bigint*300 AS "time"'],
    ['$__unixEpochFilter(dateColumn)', 'dateColumn >= 1492750877 AND dateColumn <= 1492751177'],
    ['$__unixEpochFrom()', '1492750877'],
    ['$__unixEpochTo()', '1492751177'],
    ["$__unixEpochGroupAlias(dateColumn,'5m')", 'floor(dateColumn/300)*300 AS "time"'],
  ];
  for (const [macro, sql] of cases) assert.equal(expandMacros(`SELECT ${macro}`, range), `SELECT ${sql}`, macro);
  assert.throws(() => expandMacros('SELECT $__nope(x)', range), /unknown macro \$__nope/);
  assert.throws(() => expandMacros('SELECT $__timeFilter()', range), /needs 1 argument/);
});

test('$__interval and $__interval_ms are interpolated before the macros, as the browser does it first', () => {
  assert.equal(
    grafanaSql('SELECT $__timeGroupAlias(ts, $__interval), count(*) / ($__interval_ms / 1000.0)', ctx([], 10_000)),
    'SELECT (extract(epoch from ts)/10)::bigint*10 AS "time", count(*) / (10000 / 1000.0)',
  );
  assert.deepEqual(
    [formatInterval(500), formatInterval(15_000), formatInterval(300_000), formatInterval(7_200_000), formatInterval(86_400_000), formatInterval(90_000)],
    ['500ms', '15s', '5m', '2h', '1d', '90s'],
  );
  assert.deepEqual(
    [parseIntervalSeconds("'5m'"), parseIntervalSeconds('10s'), parseIntervalSeconds('500ms'), parseIntervalSeconds('1h')],
    [300, 10, 0.5, 3600],
  );
});

test('multi-value variables: quoted and comma-separated by default and with :sqlstring; other formats', () => {
  const two = [variable('target', ['db1', "o'neil"])];
  assert.equal(interpolateVariables('target IN ($target)', ctx(two)), "target IN ('db1','o''neil')");
  assert.equal(interpolateVariables('target IN (${target})', ctx(two)), "target IN ('db1','o''neil')");
  assert.equal(interpolateVariables('target IN (${target:sqlstring})', ctx(two)), "target IN ('db1','o''neil')");
  assert.equal(interpolateVariables('target IN ([[target]])', ctx(two)), "target IN ('db1','o''neil')");
  assert.equal(
    interpolateVariables('${target:csv} ${target:pipe} ${target:singlequote} ${target:doublequote}', ctx(two)),
    "db1,o'neil db1|o'neil 'db1','o\\'neil' \"db1\",\"o'neil\"",
  );
  // A variable that is neither multi-value nor include-All is inserted raw.
  const single = [variable('db', ['shop'], { multi: false, includeAll: false })];
  assert.equal(interpolateVariables("database = '$db'", ctx(single)), "database = 'shop'");
  assert.throws(() => interpolateVariables('${target:json}', ctx(two)), /format json is not supported/);
});

test('All: every option, or the custom all value inserted as is (not quoted, whatever the format)', () => {
  assert.equal(interpolateVariables('target IN ($target)', ctx([variable('target', 'all')])), "target IN ('db1','db2','o''neil')");
  const custom = [variable('target', 'all', { allValue: "'__all'" })];
  assert.equal(interpolateVariables("('__all' IN ($target) OR target IN ($target))", ctx(custom)), "('__all' IN ('__all') OR target IN ('__all'))");
  assert.equal(interpolateVariables('${target:sqlstring}', ctx(custom)), "'__all'");
  assert.equal(interpolateVariables('${target:text}', ctx(custom)), 'All');
});

test('macros, unknown names and string contents are left to the next step; nothing else is touched', () => {
  const sql = "SELECT $__timeGroupAlias(ts, $__interval), '$1' FROM pglog.statements WHERE $__timeFilter(ts) AND target IN ($target)";
  const interpolated = interpolateVariables(sql, ctx([variable('target', ['db2'])], 60_000));
  assert.equal(interpolated, "SELECT $__timeGroupAlias(ts, 1m), '$1' FROM pglog.statements WHERE $__timeFilter(ts) AND target IN ('db2')");
  assert.equal(
    expandMacros(interpolated, range),
    "SELECT (extract(epoch from ts)/60)::bigint*60 AS \"time\", '$1' FROM pglog.statements WHERE ts BETWEEN '2017-04-21T05:01:17.000Z' AND '2017-04-21T05:06:17.000Z' AND target IN ('db2')",
  );
});
