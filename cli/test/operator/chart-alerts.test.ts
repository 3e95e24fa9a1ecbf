// The chart's alert rules (charts/pglog/templates/prometheusrule.yaml) with the real helm and
// the real promtool (scripts/install-promtool.sh; `make test` builds it): the PrometheusRule
// renders only when asked, `promtool check rules` accepts its groups, and `promtool test rules`
// runs, for every alert, series in which it fires (with its labels and its annotations naming
// the target) and series in which it must not. The series are what a collector exports: every
// metric a rule reads is registered by CollectorMetrics, and every input series has the label
// names the collector writes, plus the labels the chart's ServiceMonitor adds when scraping
// (pglog's `instance` kept as `exported_instance`). Every runbook_url points at a section of
// docs/operations.md.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { createCollectorMetrics } from '@pglog/collector/observability/metrics.ts';
import { parseMetrics } from '@pglog/test-support/collect-scenario.ts';
import { kubeBin } from '@pglog/test-support/control-plane.ts';
import { privateHelmEnv } from '@pglog/test-support/helm.ts';
import { type CommandResult, runCommand } from '@pglog/test-support/run-command.ts';
import { parseAllDocuments, stringify } from 'yaml';

import { ALERT_CASES, type AlertCase, SCRAPE_LABELS } from '../helpers/alert-cases.ts';

const ROOT = join(import.meta.dirname, '../../..');
const CHART = join(ROOT, 'charts/pglog');
const NAMESPACE = 'pglog-system';
const PROMTOOL = process.env['PGLOG_PROMTOOL'] ?? join(process.env['HOME'] ?? '/root', '.cache/pglog/prometheus/v0.316.0/bin/promtool');

interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
interface RuleGroup {
  name: string;
  rules: AlertRule[];
}

const run = (command: string, args: readonly string[], env?: NodeJS.ProcessEnv): Promise<CommandResult> => runCommand(command, args, { env });

const WORK = mkdtempSync(join(tmpdir(), 'pglog-alerts-'));
const HELM_ENV = privateHelmEnv(join(WORK, 'helm'));

async function renderRules(set: string[] = []): Promise<RuleGroup[] | null> {
  const args = ['template', 'pglog', CHART, '--namespace', NAMESPACE, ...set.flatMap((s) => ['--set', s])];
  const r = await run(join(kubeBin(), 'helm'), args, HELM_ENV);
  assert.equal(r.code, 0, r.stderr);
  const objects = parseAllDocuments(r.stdout).map((d) => d.toJS() as { kind?: string; spec?: { groups: RuleGroup[] } } | null);
  const rule = objects.find((o) => o?.kind === 'PrometheusRule');
  return rule?.spec?.groups ?? null;
}

/** `text` without what stands between `open` and `close` (label matchers, ranges). */
function stripBetween(text: string, open: string, close: string): string {
  let out = '';
  let inside = false;
  for (const ch of text) {
    if (!inside && ch === open) {
      inside = true;
      out += ' ';
    } else if (inside && ch === close) inside = false;
    else if (!inside) out += ch;
  }
  return out;
}

/** The metric names in a PromQL expression (not functions, keywords, labels or durations). */
function metricNames(expr: string): string[] {
  const stripped = stripBetween(stripBetween(expr, '{', '}'), '[', ']')
    .replace(/\b(?:by|without|on|ignoring)\s*\([^)]*\)/g, ' ')
    .replace(/\boffset\s+\w+/g, ' ')
    .replace(/\b[a-zA-Z_][a-zA-Z0-9_]*\s*\(/g, '(');
  const keywords = new Set(['and', 'or', 'unless', 'bool']);
  return [...stripped.matchAll(/\b[a-zA-Z_:][a-zA-Z0-9_:]*\b/g)].map((m) => m[0]).filter((w) => !keywords.has(w));
}

/** Every series a collector exports (name and label names), from a real CollectorMetrics registry with each method used once. */
async function exportedSeries(): Promise<Map<string, Set<string>>> {
  const m = createCollectorMetrics({ defaultMetrics: true });
  m.readBytes('db1', 'main', 1);
  m.lagBytes('db1', 'main', 1);
  m.newestCommittedEntry('db1', 'main', Date.now());
  m.logErrors('db1', 'main', '40');
  m.targetConnected('db1', true);
  m.targetTransport('db1', 'inproc');
  m.error('db1', 'SSH_TIMEOUT');
  m.sidecarUp(true);
  m.storeError('STORE_UNAVAILABLE');
  m.batchCommitted(1, 1, 0.01, 0.1);
  m.snapshots.succeeded('db1', 'main', 'activity', 0.01, Date.now());
  m.snapshots.failed('db1', 'main', 'activity', 'SQL_TIMEOUT');
  m.snapshots.activity('db1', 'main', ['active'], 1, 12);
  const series = new Map<string, Set<string>>();
  for (const s of parseMetrics(await m.metricsText())) {
    const keys = Object.keys(s.labels)
      .filter((k) => k !== 'le' && k !== 'quantile')
      .sort()
      .join(',');
    let set = series.get(s.name);
    if (set === undefined) series.set(s.name, (set = new Set()));
    set.add(keys);
  }
  return series;
}

/** GitHub's anchor of a Markdown heading. */
const anchorOf = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replace(/ /g, '-');

/** An annotation as Prometheus renders it for these labels; `value` is what the `$value` pipeline prints. */
function expand(template: string, labels: Record<string, string>, value: string | undefined, alert: string): string {
  return template
    .replace(/\{\{ \$labels\.([a-zA-Z_][a-zA-Z0-9_]*) \}\}/g, (_, name: string) => {
      const v = labels[name];
      assert.ok(v !== undefined, `${alert}: an annotation names $labels.${name}, which the alert does not have (${Object.keys(labels).join(', ')})`);
      return v;
    })
    .replace(/\{\{ \$value[^}]*\}\}/g, () => {
      assert.ok(value !== undefined, `${alert}: an annotation prints $value; the case must say how it reads`);
      return value;
    });
}

function testGroup(c: AlertCase, rule: AlertRule): unknown {
  return {
    name: `${c.alert}: ${c.name}`,
    interval: '1m',
    input_series: c.series.map((s) => ({ series: seriesText(s.name, s.labels), values: s.values })),
    alert_rule_test: [
      {
        eval_time: c.evalTime,
        alertname: c.alert,
        exp_alerts: c.fires.map((f) => {
          const labels = { ...f.labels, ...rule.labels };
          return {
            exp_labels: labels,
            exp_annotations: Object.fromEntries(
              Object.entries(rule.annotations).map(([k, v]) => [k, expand(v, { ...labels, alertname: c.alert }, f.value, c.alert)]),
            ),
          };
        }),
      },
    ],
  };
}

const seriesText = (name: string, labels: Record<string, string>): string =>
  `${name}{${Object.entries(labels)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(', ')}}`;

describe('charts/pglog alert rules', { timeout: 240_000 }, () => {
  after(() => rmSync(WORK, { recursive: true, force: true }));

  test('the PrometheusRule is off by default, on with prometheusRule.enabled, and leaves out disabled alerts', async () => {
    assert.equal(await renderRules(), null);
    const all = await renderRules(['prometheusRule.enabled=true']);
    assert.deepEqual(all?.[0]?.rules.map((r) => r.alert).sort(), [...new Set(ALERT_CASES.map((c) => c.alert))].sort());
    const fewer = await renderRules([
      'prometheusRule.enabled=true',
      'prometheusRule.alerts.PglogDeadlocks.enabled=false',
      'prometheusRule.alertLabels.team=dba',
    ]);
    assert.ok(!fewer![0]!.rules.some((r) => r.alert === 'PglogDeadlocks'));
    for (const r of fewer![0]!.rules) assert.equal(r.labels['team'], 'dba', r.alert);
    // Every alert off: an empty group, still a valid rule file.
    const none = await renderRules([
      'prometheusRule.enabled=true',
      ...[...new Set(ALERT_CASES.map((c) => c.alert))].map((a) => `prometheusRule.alerts.${a}.enabled=false`),
    ]);
    assert.deepEqual(none, [{ name: 'pglog', rules: [] }]);
  });

  test('every alert: a severity, a summary and description, a runbook section in docs/operations.md; metrics the collector exports', async () => {
    const groups = (await renderRules(['prometheusRule.enabled=true']))!;
    const operations = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
    const anchors = new Set([...operations.matchAll(/^#{2,4} (.+)$/gm)].map((m) => anchorOf(m[1]!)));
    const exported = await exportedSeries();
    for (const rule of groups.flatMap((g) => g.rules)) {
      assert.match(rule.labels['severity'] ?? '', /^(critical|warning)$/, rule.alert);
      assert.ok((rule.annotations['summary'] ?? '') !== '' && (rule.annotations['description'] ?? '') !== '', rule.alert);
      const url = rule.annotations['runbook_url'] ?? '';
      assert.ok(url.startsWith('https://github.com/pglog/pglog/blob/main/docs/operations.md#'), url);
      assert.ok(anchors.has(url.split('#')[1]!), `${rule.alert}: no section #${url.split('#')[1]} in docs/operations.md`);
      for (const name of metricNames(rule.expr)) {
        assert.ok(name === 'up' || exported.has(name), `${rule.alert} reads ${name}, which the collector does not export`);
      }
    }
  });

  test('promtool check rules, and promtool test rules: each alert fires when it should and not when it should not', async () => {
    const groups = (await renderRules(['prometheusRule.enabled=true']))!;
    const rulesFile = join(WORK, 'rules.yaml');
    writeFileSync(rulesFile, stringify({ groups }));
    const check = await run(PROMTOOL, ['check', 'rules', rulesFile]);
    assert.equal(check.code, 0, `promtool check rules:\n${check.stdout}${check.stderr}`);
    assert.match(check.stdout, new RegExp(`SUCCESS: ${groups[0]!.rules.length} rules found`));

    // The input series are the collector's: its metric names and label names, as scraped.
    const exported = await exportedSeries();
    const scrapeKeys = new Set(Object.keys(SCRAPE_LABELS));
    for (const c of ALERT_CASES) {
      for (const s of c.series) {
        if (s.name === 'up') continue;
        const own = Object.keys(s.labels)
          .filter((k) => !scrapeKeys.has(k))
          .map((k) => (k === 'exported_instance' ? 'instance' : k))
          .sort()
          .join(',');
        assert.ok(exported.get(s.name)?.has(own), `${c.alert} (${c.name}): ${s.name} with labels ${own} is not a series the collector exports`);
      }
    }
    // At least one case where each alert fires and one where it does not.
    const rules = new Map(groups.flatMap((g) => g.rules).map((r) => [r.alert, r]));
    for (const name of rules.keys()) {
      assert.ok(
        ALERT_CASES.some((c) => c.alert === name && c.fires.length > 0),
        `${name}: no case where it fires`,
      );
      assert.ok(
        ALERT_CASES.some((c) => c.alert === name && c.fires.length === 0),
        `${name}: no case where it stays quiet`,
      );
    }
    const testsFile = join(WORK, 'tests.yaml');
    writeFileSync(
      testsFile,
      stringify({
        rule_files: [rulesFile],
        evaluation_interval: '1m',
        tests: ALERT_CASES.map((c) => testGroup(c, rules.get(c.alert)!)),
      }),
    );
    const r = await run(PROMTOOL, ['test', 'rules', testsFile]);
    assert.equal(r.code, 0, `promtool test rules:\n${r.stdout}${r.stderr}`);
    assert.match(r.stdout, /SUCCESS/);
  });

  test('promtool test rules fails on a wrong expectation (the test can fail)', async () => {
    const groups = (await renderRules(['prometheusRule.enabled=true']))!;
    const rulesFile = join(WORK, 'rules-neg.yaml');
    writeFileSync(rulesFile, stringify({ groups }));
    const rules = new Map(groups.flatMap((g) => g.rules).map((r) => [r.alert, r]));
    // A quiet case claimed to fire, with the labels of a firing case of the same alert.
    const quiet = ALERT_CASES.find((c) => c.alert === 'PglogDeadlocks' && c.fires.length === 0)!;
    const firing = ALERT_CASES.find((c) => c.alert === 'PglogDeadlocks' && c.fires.length > 0)!;
    const testsFile = join(WORK, 'tests-neg.yaml');
    writeFileSync(
      testsFile,
      stringify({ rule_files: [rulesFile], evaluation_interval: '1m', tests: [testGroup({ ...quiet, fires: firing.fires }, rules.get('PglogDeadlocks')!)] }),
    );
    const r = await run(PROMTOOL, ['test', 'rules', testsFile]);
    assert.notEqual(r.code, 0, r.stdout);
  });
});
