// The Helm chart (charts/pglog) rendered by the real helm binary, without an API server: `helm
// lint` is clean (also --strict, and with the HPA, its custom metric and the ServiceMonitor on);
// the values schema refuses unknown keys; the chart's CRDs are those of crds/; what renders with
// each option; both Grafana dashboards (the store dashboard byte for byte the chart's
// dashboards/pglog-store.json); the operator Deployment and its rendered arguments, which parse;
// the admission policy's patterns, which admit what the operator's allow-list admits.
// What the rendered objects do on a real kube-apiserver: helm-chart.test.ts.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';

import { parseOperatorArgs } from '@pglog/cli/operator-command.ts';
import { imageAllowed } from '@pglog/operator/desired/image-allow-list.ts';

import { ALL_ON, CHART, helm, HELM_HOME, NAMESPACE, OTHER, OUTSIDE, type PodTemplate, render, ROOT } from '../helpers/helm-chart.ts';

describe('charts/pglog rendered', { timeout: 240_000 }, () => {
  after(() => rmSync(HELM_HOME, { recursive: true, force: true }));

  test('helm lint is clean: defaults, --strict, and with the HPA, custom metric and ServiceMonitor on', async () => {
    for (const args of [
      [],
      ['--strict'],
      ['--strict', ...ALL_ON],
      ['--strict', '--set', 'hpa.enabled=true,dashboard.enabled=false,storeDashboard.enabled=false,networkPolicy.enabled=false,pool.enabled=false'],
    ]) {
      const r = await helm(['lint', CHART, ...args]);
      assert.equal(r.code, 0, `helm lint ${args.join(' ')}:\n${r.stdout}${r.stderr}`);
      assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
      assert.doesNotMatch(r.stdout + r.stderr, /\[(WARNING|ERROR)\]/, r.stdout);
    }
  });

  test('values.schema.json refuses unknown and ill-typed values', async () => {
    for (const bad of [
      'unknownKey=1',
      'operator.replicas=two',
      'hpa.extra=1',
      'operator.logLevel=loud',
      'pool.name=Not_A_Name',
      'storeDashboard.extra=1',
      'storeDashboard.enabled=yes',
      'storeDashboard.namespace=Not_A_Namespace',
      'prometheusRule.alerts.PglogDeadlocks.count=0',
      'prometheusRule.alerts.PglogNoSuchAlert.enabled=true',
      'prometheusRule.alerts.PglogLagGrowing.window=soon',
      'prometheusRule.alerts.PglogTargetDown.severity=page',
      'admissionPolicy.enabled=yes',
      'admissionPolicy.extra=1',
      'operator.allowedStoreSecrets={*}',
      'operator.allowedImages={ghcr.io/pglog/pglog;rm}',
    ]) {
      const r = await helm(['template', 'pglog', CHART, '--set', bad]);
      assert.notEqual(r.code, 0, `--set ${bad} was accepted`);
      assert.match(r.stderr, /values don't meet the specifications of the schema|schema/, r.stderr);
    }
  });

  test("the chart's CRDs are byte for byte those of crds/ (generated together by scripts/gen-crds.ts)", () => {
    const names = (dir: string): string[] => readdirSync(dir).sort();
    assert.deepEqual(names(join(CHART, 'crds')), names(join(ROOT, 'crds')));
    for (const name of names(join(ROOT, 'crds'))) {
      assert.ok(
        readFileSync(join(CHART, 'crds', name)).equals(readFileSync(join(ROOT, 'crds', name))),
        `charts/pglog/crds/${name} differs from crds/${name}: run \`make crds\``,
      );
    }
  });

  test('what renders: defaults, HPA on CPU or a Pods metric, ServiceMonitor, dashboard', async () => {
    const plain = (await render()).objects;
    const kinds = plain.map((o) => o.kind).sort();
    for (const kind of [
      'ClusterRole',
      'ClusterRoleBinding',
      'CollectorPool',
      'ConfigMap',
      'Deployment',
      'NetworkPolicy',
      'PodDisruptionBudget',
      'Role',
      'RoleBinding',
      'Service',
      'ServiceAccount',
    ]) {
      assert.ok(kinds.includes(kind), `${kind} missing from ${kinds.join(', ')}`);
    }
    assert.ok(
      !kinds.includes('HorizontalPodAutoscaler') && !kinds.includes('ServiceMonitor') && !kinds.includes('PrometheusRule'),
      'HPA, ServiceMonitor and PrometheusRule are off by default',
    );
    const pool = plain.find((o) => o.kind === 'CollectorPool') as unknown as { spec: { replicas?: number; store: unknown } };
    assert.equal(pool.spec.replicas, 2);
    assert.deepEqual(pool.spec.store, { secretRef: { name: 'pglog-store', key: 'url' } });
    const dashboard = plain.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'pglog-dashboard') as unknown as {
      metadata: { labels: Record<string, string> };
      data: Record<string, string>;
    };
    assert.equal(dashboard.metadata.labels['grafana_dashboard'], '1');
    const panels = (JSON.parse(dashboard.data['pglog.json']!) as { panels: Array<{ targets: Array<{ expr: string }> }> }).panels;
    const exprs = panels.flatMap((p) => p.targets.map((t) => t.expr)).join('\n');
    for (const metric of [
      'pglog_nodejs_eventloop_lag_p99_seconds',
      'pglog_read_bytes_total',
      'pglog_lag_seconds',
      'pglog_copy_duration_seconds_bucket',
      'pglog_operator_reconcile_total',
      'pglog_operator_shard_load_bytes_per_second',
      'pglog_operator_transport_promotions_total',
      'pglog_longest_blocking_wait_seconds',
      'pglog_snapshot_failures_total',
      'pglog_sessions',
    ]) {
      assert.ok(exprs.includes(metric), `dashboard has no panel on ${metric}`);
    }
    // Through the chart's ServiceMonitor, Prometheus keeps `instance` for the scraped pod, so
    // pglog's own instance label arrives as `exported_instance` (as the alert rules read it).
    assert.doesNotMatch(exprs, /by \([^)]*\binstance\b/, 'panels group by exported_instance, not the scrape instance');

    // The store dashboard (issue 16): the chart's dashboards/pglog-store.json byte for byte, on a
    // PostgreSQL data source the user picks; off, in another namespace and annotated on request.
    const store = plain.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'pglog-store-dashboard') as unknown as
      { metadata: { namespace: string; labels: Record<string, string>; annotations?: Record<string, string> }; data: Record<string, string> } | undefined;
    assert.ok(store !== undefined, 'the store dashboard ConfigMap is rendered by default');
    assert.equal(store.metadata.namespace, NAMESPACE);
    assert.equal(store.metadata.labels['grafana_dashboard'], '1');
    assert.equal(store.data['pglog-store.json'], readFileSync(join(CHART, 'dashboards/pglog-store.json'), 'utf8').trimEnd());
    const storeJson = JSON.parse(store.data['pglog-store.json']) as {
      templating: { list: Array<{ name: string; type: string; query: string }> };
      panels: Array<{ datasource?: { type: string } }>;
    };
    assert.deepEqual(
      storeJson.templating.list.map((v) => [v.name, v.type]),
      [
        ['datasource', 'datasource'],
        ['target', 'query'],
        ['database', 'query'],
        ['fingerprint', 'textbox'],
      ],
    );
    assert.equal(storeJson.templating.list[0]!.query, 'grafana-postgresql-datasource');
    assert.ok(storeJson.panels.filter((p) => p.datasource !== undefined).every((p) => p.datasource!.type === 'grafana-postgresql-datasource'));
    const moved = (await render(['--set', 'storeDashboard.namespace=monitoring,storeDashboard.annotations.grafana_folder=pglog'])).objects.find(
      (o) => o.metadata.name === 'pglog-store-dashboard',
    ) as unknown as { metadata: { namespace: string; annotations: Record<string, string> } };
    assert.deepEqual([moved.metadata.namespace, moved.metadata.annotations], ['monitoring', { grafana_folder: 'pglog' }]);
    const off = (await render(['--set', 'storeDashboard.enabled=false'])).objects;
    const offNames = off.filter((o) => o.kind === 'ConfigMap').map((o) => o.metadata.name);
    assert.ok(offNames.includes('pglog-dashboard') && !offNames.includes('pglog-store-dashboard'), offNames.join(', '));

    const cpu = (await render(['--set', 'hpa.enabled=true'])).objects;
    const hpa = cpu.find((o) => o.kind === 'HorizontalPodAutoscaler') as unknown as {
      apiVersion: string;
      spec: { scaleTargetRef: unknown; metrics: unknown[] };
    };
    assert.equal(hpa.apiVersion, 'autoscaling/v2');
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'pglog.io/v1alpha1', kind: 'CollectorPool', name: 'main' });
    assert.deepEqual(hpa.spec.metrics, [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } }]);
    // The HPA owns spec.replicas: the chart leaves it out, so `helm upgrade` does not undo a scale.
    assert.equal((cpu.find((o) => o.kind === 'CollectorPool') as unknown as { spec: { replicas?: number } }).spec.replicas, undefined);

    const all = (await render(ALL_ON)).objects;
    const custom = all.find((o) => o.kind === 'HorizontalPodAutoscaler') as unknown as { spec: { metrics: unknown[] } };
    assert.deepEqual(custom.spec.metrics, [
      { type: 'Pods', pods: { metric: { name: 'pglog_nodejs_eventloop_lag_p99_seconds' }, target: { type: 'AverageValue', averageValue: '100m' } } },
    ]);
    const monitor = all.find((o) => o.kind === 'ServiceMonitor') as unknown as {
      spec: { selector: unknown; targetLabels: string[]; endpoints: Array<{ port: string }> };
    };
    assert.deepEqual(monitor.spec.selector, { matchLabels: { 'app.kubernetes.io/name': 'pglog' } });
    // The alert rules tell collector pods from the operator by this label (charts/pglog/templates/prometheusrule.yaml).
    assert.deepEqual(monitor.spec.targetLabels, ['app.kubernetes.io/component']);
    assert.equal(monitor.spec.endpoints[0]!.port, 'http-metrics');
    const operatorService = all.find((o) => o.kind === 'Service') as unknown as {
      metadata: { labels: Record<string, string> };
      spec: { ports: Array<{ name: string }> };
    };
    assert.equal(operatorService.metadata.labels['app.kubernetes.io/name'], 'pglog');
    assert.equal(operatorService.spec.ports[0]!.name, 'http-metrics');

    // A pool outside the collector namespaces would have pods without an account: refused.
    const refused = await helm(['template', 'pglog', CHART, '--namespace', NAMESPACE, '--set', `pool.namespace=${OUTSIDE}`]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /not one of collectorNamespaces/);
  });

  test('the operator Deployment: 2 replicas, Lease in the release namespace, its flags parse', async () => {
    const { objects } = await render(['--set', 'image.repository=registry.example/pglog,image.tag=1.2.3']);
    const deployment = objects.find((o) => o.kind === 'Deployment') as unknown as {
      spec: { replicas: number; template: PodTemplate & { spec: { serviceAccountName: string } } };
    };
    assert.equal(deployment.spec.replicas, 2);
    assert.equal(deployment.spec.template.spec.serviceAccountName, 'pglog-operator');
    const container = deployment.spec.template.spec.containers[0]!;
    assert.deepEqual(
      container.env?.map((e) => e.name),
      ['POD_NAME', 'POD_NAMESPACE'],
    );
    const args = container.args!;
    assert.equal(args[0], 'operator');
    assert.ok(!args.some((a) => a.startsWith('--namespace')), 'watches all namespaces by default');
    const parsed = parseOperatorArgs(
      args.slice(1).map((a) => a.replace('$(POD_NAMESPACE)', NAMESPACE)),
      { POD_NAME: 'pglog-operator-abc', POD_NAMESPACE: NAMESPACE, KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' },
    );
    assert.equal(parsed.operator.leaseNamespace, NAMESPACE);
    assert.equal(parsed.operator.leaseName, 'pglog-operator');
    assert.equal(parsed.operator.defaultImage, 'registry.example/pglog:1.2.3');
    assert.equal(parsed.operator.serviceAccountName, 'pglog-collector');
    assert.equal(parsed.operator.namespace, undefined);
    assert.equal(parsed.operator.identity, 'pglog-operator-abc');
    assert.deepEqual(parsed.operator.listen, { host: '0.0.0.0', port: 8080 });
    // Pools may run only the chart's own image repository, and only in the collector namespaces.
    assert.deepEqual(parsed.operator.policy, {
      allowedImages: ['registry.example/pglog'],
      allowedStoreSecrets: ['pglog-store'],
      collectorNamespaces: [NAMESPACE],
    });
    const widened = (
      await render([
        '--set',
        `image.repository=registry.example/pglog,operator.allowedImages={registry.example/pglog,registry.example/team/},collectorNamespaces={${NAMESPACE},${OTHER}},operator.allowedStoreSecrets={pglog-store,${OTHER}/store-b}`,
      ])
    ).objects;
    const widenedArgs = (widened.find((o) => o.kind === 'Deployment') as unknown as { spec: { template: PodTemplate } }).spec.template.spec.containers[0]!
      .args!;
    const reparsed = parseOperatorArgs(
      widenedArgs.slice(1).map((a) => a.replace('$(POD_NAMESPACE)', NAMESPACE)),
      { POD_NAME: 'p', POD_NAMESPACE: NAMESPACE, KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' },
    );
    assert.deepEqual(reparsed.operator.policy, {
      allowedImages: ['registry.example/pglog', 'registry.example/team/'],
      allowedStoreSecrets: ['pglog-store', `${OTHER}/store-b`],
      collectorNamespaces: [NAMESPACE, OTHER],
    });
  });

  test("allow-lists the operator would refuse stop the render: a host-less image, a store list without the chart pool's Secret", async () => {
    for (const [values, message] of [
      ['image.repository=pglog', /operator\.allowedImages \(or image\.repository\) entry pglog names no registry host/],
      ['operator.allowedImages={ghcr.io/pglog/pglog,team/pglog}', /entry team\/pglog names no registry host/],
      ['operator.allowedStoreSecrets={other}', /pool\.store\.secretName pglog-store is not in operator\.allowedStoreSecrets/],
    ] as const) {
      const r = await helm(['template', 'pglog', CHART, '--namespace', NAMESPACE, '--set', values]);
      assert.notEqual(r.code, 0, values);
      assert.match(r.stderr, message, r.stderr);
    }
    const own = await render(['--set', `operator.allowedStoreSecrets={${NAMESPACE}/pglog-store}`]);
    assert.ok(
      own.objects.some((o) => o.kind === 'CollectorPool'),
      "NAMESPACE/NAME naming the chart pool's Secret",
    );
  });

  test("the admission policy admits exactly what the operator's allow-list admits, bound to the collector namespaces", async () => {
    const digest = `sha256:${'ab'.repeat(32)}`;
    const entries = [
      'ghcr.io/pglog/pglog',
      'registry.example:5000/team/',
      'registry.example/pinned:1.4.*',
      `registry.example/exact@${digest}`,
      'registry.example/l:late*',
    ];
    const { objects } = await render([
      '--set',
      `operator.allowedImages={${entries.join(',')}},operator.allowedStoreSecrets={pglog-store,${OTHER}/store-b},collectorNamespaces={${NAMESPACE},${OTHER}}`,
    ]);
    const policy = objects.find((o) => o.kind === 'ValidatingAdmissionPolicy') as unknown as {
      spec: { variables: Array<{ name: string; expression: string }> };
    };
    const variable = (name: string): unknown => JSON.parse(policy.spec.variables.find((v) => v.name === name)!.expression);
    assert.deepEqual(variable('images'), entries);
    assert.deepEqual(variable('storeSecrets'), ['pglog-store', `${OTHER}/store-b`]);
    // RE2 as CEL runs it; these patterns use nothing JavaScript reads differently.
    const reference = new RegExp(variable('reference') as string);
    const patterns = (variable('imagePatterns') as string[]).map((p) => new RegExp(p));
    const admitted = (image: string): boolean => reference.test(image) && patterns.some((p) => p.test(image));
    const images = [
      'ghcr.io/pglog/pglog',
      'ghcr.io/pglog/pglog:1.0',
      `ghcr.io/pglog/pglog@${digest}`,
      `ghcr.io/pglog/pglog:1@${digest}`,
      'ghcr.io/pglog/pglog@evil.com/x',
      'ghcr.io/pglog/pglog@sha256:abcd',
      'ghcr.io/pglog/pglog-evil:1',
      'ghcr.io/pglog/pglogx',
      'ghcr.io/pglog:1',
      'GHCR.io/pglog/pglog:1',
      'pglog/pglog:1',
      'pglog',
      'registry.example:5000/team/x:2',
      'registry.example:5000/team/a/b',
      'registry.example:5000/team',
      'registry.example:5000/team-evil/x',
      'registry.example:5000/team/../x',
      'registry.example/pinned:1.4.7',
      'registry.example/pinned:1.4.10-rc1',
      'registry.example/pinned:1.3.9',
      'registry.example/pinned:1.40',
      'registry.example/pinned',
      `registry.example/pinned:1.4.7@${digest}`,
      `registry.example/exact@${digest}`,
      `registry.example/exact:any@${digest}`,
      `registry.example/exact@sha256:${'cd'.repeat(32)}`,
      'registry.example/exact:1',
      'registry.example/l',
      'registry.example/l:latest',
      'registry.example/l:later',
      'registry.example/l:1',
      `ghcr.io/pglog/pglog:${'x'.repeat(129)}`,
    ];
    const differ = images.filter((image) => admitted(image) !== imageAllowed(image, entries));
    assert.deepEqual(differ, [], 'the policy and the operator disagree on these');
    assert.ok(images.filter((image) => imageAllowed(image, entries)).length >= 12, 'the table has admitted images too');
    const binding = objects.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding') as unknown as {
      spec: { policyName: string; validationActions: string[]; matchResources: unknown };
    };
    assert.equal(binding.spec.policyName, 'pglog-collectorpools');
    assert.deepEqual(binding.spec.validationActions, ['Deny']);
    assert.deepEqual(binding.spec.matchResources, {
      namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [NAMESPACE, OTHER] }] },
    });
    const off = (await render(['--set', 'admissionPolicy.enabled=false'])).objects;
    assert.ok(!off.some((o) => o.kind.startsWith('ValidatingAdmissionPolicy')));
  });
});
