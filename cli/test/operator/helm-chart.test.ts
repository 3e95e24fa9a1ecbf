// The Helm chart (charts/pglog) with the real helm binary and a real kube-apiserver: `helm
// lint` is clean (also --strict, and with the HPA, its custom metric and the ServiceMonitor
// on); the values schema refuses unknown keys; every rendered object passes a server-side dry
// run, the operator Deployment (and a Pod from its template) without a PodSecurity warning in
// a namespace that enforces `restricted`; both Grafana dashboards render (the store dashboard
// byte for byte the chart's dashboards/pglog-store.json); the RBAC, applied for real, grants the collector
// and the operator what they need and nothing more (kubectl auth can-i --as the service
// accounts), with no wildcard anywhere; the operator's rendered arguments parse.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { parseOperatorArgs } from '@pglog/cli/operator-command.ts';
import { type ControlPlane,kubeBin, startControlPlane } from '@pglog/test-support/control-plane.ts';
import { parseAllDocuments } from 'yaml';

const ROOT = join(import.meta.dirname, '../../..');
const CHART = join(ROOT, 'charts/pglog');
const NAMESPACE = 'pglog-system';
/** A second collector namespace, and one the chart was not told about. */
const OTHER = 'pglog-team-b';
const OUTSIDE = 'pglog-outside';
const ALL_ON = ['--set', 'hpa.enabled=true,hpa.customMetric.enabled=true,serviceMonitor.enabled=true,prometheusRule.enabled=true'];

interface Result { code: number; stdout: string; stderr: string }
interface Obj { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; [k: string]: unknown }
interface Rule { apiGroups?: string[]; resources?: string[]; verbs: string[]; resourceNames?: string[]; nonResourceURLs?: string[] }
interface PodTemplate { metadata?: { labels?: Record<string, string> }; spec: { containers: Array<{ args?: string[]; env?: Array<{ name: string }> }> } }

function run(command: string, args: readonly string[], stdin = '', env?: NodeJS.ProcessEnv): Promise<Result> {
  return new Promise((resolve) => {
    const child = execFile(command, args, { maxBuffer: 64 * 1024 * 1024, ...(env === undefined ? {} : { env }) });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (b: Buffer) => { stdout += b.toString(); });
    child.stderr!.on('data', (b: Buffer) => { stderr += b.toString(); });
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    // A command that exits without reading its input (helm, diff) must not fail the write.
    child.stdin!.on('error', () => {});
    child.stdin!.end(stdin);
  });
}

// helm's cache, config and data in a private directory: nothing of the user's is read or written.
const HELM_HOME = mkdtempSync(join(tmpdir(), 'pglog-helm-'));
const HELM_ENV = { ...process.env, HELM_CACHE_HOME: join(HELM_HOME, 'cache'), HELM_CONFIG_HOME: join(HELM_HOME, 'config'), HELM_DATA_HOME: join(HELM_HOME, 'data') };
const helm = (args: readonly string[]): Promise<Result> => run(join(kubeBin(), 'helm'), args, '', HELM_ENV);

async function render(extra: readonly string[] = []): Promise<{ text: string; objects: Obj[] }> {
  const r = await helm(['template', 'pglog', CHART, '--namespace', NAMESPACE, ...extra]);
  assert.equal(r.code, 0, r.stderr);
  const objects = parseAllDocuments(r.stdout).map((d) => d.toJS() as Obj | null).filter((o): o is Obj => o !== null);
  return { text: r.stdout, objects };
}

const toYaml = (objects: readonly Obj[]): string => objects.map((o) => JSON.stringify(o)).join('\n---\n');

describe('charts/pglog', { timeout: 240_000 }, () => {
  let cp: ControlPlane;
  const kubectl = (args: readonly string[], stdin = ''): Promise<Result> => run(join(kubeBin(), 'kubectl'), ['--kubeconfig', cp.kubeconfig, ...args], stdin);

  before(async () => {
    cp = await startControlPlane();
    for (const [name, labels] of [
      [NAMESPACE, { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest', 'pod-security.kubernetes.io/warn': 'restricted' }],
      [OTHER, { 'pod-security.kubernetes.io/enforce': 'restricted' }],
      [OUTSIDE, {}],
    ] as const) {
      await cp.kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } }));
    }
    // The chart's CRDs (helm installs crds/ before the templates), and minimal ServiceMonitor and
    // PrometheusRule CRDs standing in for the Prometheus Operator's.
    await cp.kubectl(['apply', '--server-side', '-f', join(CHART, 'crds')]);
    for (const [kind, plural] of [['ServiceMonitor', 'servicemonitors'], ['PrometheusRule', 'prometheusrules']] as const) {
      await cp.kubectl(['apply', '-f', '-'], JSON.stringify({
        apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition',
        metadata: { name: `${plural}.monitoring.coreos.com` },
        spec: {
          group: 'monitoring.coreos.com', scope: 'Namespaced',
          names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
          versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
        },
      }));
    }
    await cp.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  });
  after(async () => {
    await cp?.stop();
    rmSync(HELM_HOME, { recursive: true, force: true });
  });

  test('helm lint is clean: defaults, --strict, and with the HPA, custom metric and ServiceMonitor on', async () => {
    for (const args of [[], ['--strict'], ['--strict', ...ALL_ON], ['--strict', '--set', 'hpa.enabled=true,dashboard.enabled=false,storeDashboard.enabled=false,networkPolicy.enabled=false,pool.enabled=false']]) {
      const r = await helm(['lint', CHART, ...args]);
      assert.equal(r.code, 0, `helm lint ${args.join(' ')}:\n${r.stdout}${r.stderr}`);
      assert.match(r.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
      assert.doesNotMatch(r.stdout + r.stderr, /\[(WARNING|ERROR)\]/, r.stdout);
    }
  });

  test('values.schema.json refuses unknown and ill-typed values', async () => {
    for (const bad of ['unknownKey=1', 'operator.replicas=two', 'hpa.extra=1', 'operator.logLevel=loud', 'pool.name=Not_A_Name',
      'storeDashboard.extra=1', 'storeDashboard.enabled=yes', 'storeDashboard.namespace=Not_A_Namespace',
      'prometheusRule.alerts.PglogDeadlocks.count=0', 'prometheusRule.alerts.PglogNoSuchAlert.enabled=true', 'prometheusRule.alerts.PglogLagGrowing.window=soon',
      'prometheusRule.alerts.PglogTargetDown.severity=page']) {
      const r = await helm(['template', 'pglog', CHART, '--set', bad]);
      assert.notEqual(r.code, 0, `--set ${bad} was accepted`);
      assert.match(r.stderr, /values don't meet the specifications of the schema|schema/, r.stderr);
    }
  });

  test('the chart\'s CRDs are byte for byte those of crds/ (generated together by scripts/gen-crds.ts)', () => {
    const names = (dir: string): string[] => readdirSync(dir).sort();
    assert.deepEqual(names(join(CHART, 'crds')), names(join(ROOT, 'crds')));
    for (const name of names(join(ROOT, 'crds'))) {
      assert.ok(readFileSync(join(CHART, 'crds', name)).equals(readFileSync(join(ROOT, 'crds', name))), `charts/pglog/crds/${name} differs from crds/${name}: run \`make crds\``);
    }
  });

  test('what renders: defaults, HPA on CPU or a Pods metric, ServiceMonitor, dashboard', async () => {
    const plain = (await render()).objects;
    const kinds = plain.map((o) => o.kind).sort();
    for (const kind of ['ClusterRole', 'ClusterRoleBinding', 'CollectorPool', 'ConfigMap', 'Deployment', 'NetworkPolicy', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']) {
      assert.ok(kinds.includes(kind), `${kind} missing from ${kinds.join(', ')}`);
    }
    assert.ok(!kinds.includes('HorizontalPodAutoscaler') && !kinds.includes('ServiceMonitor') && !kinds.includes('PrometheusRule'), 'HPA, ServiceMonitor and PrometheusRule are off by default');
    const pool = plain.find((o) => o.kind === 'CollectorPool') as unknown as { spec: { replicas?: number; store: unknown } };
    assert.equal(pool.spec.replicas, 2);
    assert.deepEqual(pool.spec.store, { secretRef: { name: 'pglog-store', key: 'url' } });
    const dashboard = plain.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'pglog-dashboard') as unknown as { metadata: { labels: Record<string, string> }; data: Record<string, string> };
    assert.equal(dashboard.metadata.labels['grafana_dashboard'], '1');
    const panels = (JSON.parse(dashboard.data['pglog.json']!) as { panels: Array<{ targets: Array<{ expr: string }> }> }).panels;
    const exprs = panels.flatMap((p) => p.targets.map((t) => t.expr)).join('\n');
    for (const metric of ['pglog_nodejs_eventloop_lag_p99_seconds', 'pglog_read_bytes_total', 'pglog_lag_seconds', 'pglog_copy_duration_seconds_bucket',
      'pglog_operator_reconcile_total', 'pglog_operator_shard_load_bytes_per_second', 'pglog_operator_transport_promotions_total',
      'pglog_longest_blocking_wait_seconds', 'pglog_snapshot_failures_total', 'pglog_sessions']) {
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
    const storeJson = JSON.parse(store.data['pglog-store.json']) as { templating: { list: Array<{ name: string; type: string; query: string }> }; panels: Array<{ datasource?: { type: string } }> };
    assert.deepEqual(storeJson.templating.list.map((v) => [v.name, v.type]), [['datasource', 'datasource'], ['target', 'query'], ['database', 'query'], ['fingerprint', 'textbox']]);
    assert.equal(storeJson.templating.list[0]!.query, 'grafana-postgresql-datasource');
    assert.ok(storeJson.panels.filter((p) => p.datasource !== undefined).every((p) => p.datasource!.type === 'grafana-postgresql-datasource'));
    const moved = (await render(['--set', 'storeDashboard.namespace=monitoring,storeDashboard.annotations.grafana_folder=pglog'])).objects
      .find((o) => o.metadata.name === 'pglog-store-dashboard') as unknown as { metadata: { namespace: string; annotations: Record<string, string> } };
    assert.deepEqual([moved.metadata.namespace, moved.metadata.annotations], ['monitoring', { grafana_folder: 'pglog' }]);
    const off = (await render(['--set', 'storeDashboard.enabled=false'])).objects;
    const offNames = off.filter((o) => o.kind === 'ConfigMap').map((o) => o.metadata.name);
    assert.ok(offNames.includes('pglog-dashboard') && !offNames.includes('pglog-store-dashboard'), offNames.join(', '));

    const cpu = (await render(['--set', 'hpa.enabled=true'])).objects;
    const hpa = cpu.find((o) => o.kind === 'HorizontalPodAutoscaler') as unknown as { apiVersion: string; spec: { scaleTargetRef: unknown; metrics: unknown[] } };
    assert.equal(hpa.apiVersion, 'autoscaling/v2');
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'pglog.io/v1alpha1', kind: 'CollectorPool', name: 'main' });
    assert.deepEqual(hpa.spec.metrics, [{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } }]);
    // The HPA owns spec.replicas: the chart leaves it out, so `helm upgrade` does not undo a scale.
    assert.equal((cpu.find((o) => o.kind === 'CollectorPool') as unknown as { spec: { replicas?: number } }).spec.replicas, undefined);

    const all = (await render(ALL_ON)).objects;
    const custom = all.find((o) => o.kind === 'HorizontalPodAutoscaler') as unknown as { spec: { metrics: unknown[] } };
    assert.deepEqual(custom.spec.metrics, [{ type: 'Pods', pods: { metric: { name: 'pglog_nodejs_eventloop_lag_p99_seconds' }, target: { type: 'AverageValue', averageValue: '100m' } } }]);
    const monitor = all.find((o) => o.kind === 'ServiceMonitor') as unknown as { spec: { selector: unknown; targetLabels: string[]; endpoints: Array<{ port: string }> } };
    assert.deepEqual(monitor.spec.selector, { matchLabels: { 'app.kubernetes.io/name': 'pglog' } });
    // The alert rules tell collector pods from the operator by this label (charts/pglog/templates/prometheusrule.yaml).
    assert.deepEqual(monitor.spec.targetLabels, ['app.kubernetes.io/component']);
    assert.equal(monitor.spec.endpoints[0]!.port, 'http-metrics');
    const operatorService = all.find((o) => o.kind === 'Service') as unknown as { metadata: { labels: Record<string, string> }; spec: { ports: Array<{ name: string }> } };
    assert.equal(operatorService.metadata.labels['app.kubernetes.io/name'], 'pglog');
    assert.equal(operatorService.spec.ports[0]!.name, 'http-metrics');

    // A pool outside the collector namespaces would have pods without an account: refused.
    const refused = await helm(['template', 'pglog', CHART, '--namespace', NAMESPACE, '--set', `pool.namespace=${OUTSIDE}`]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /not one of collectorNamespaces/);
  });

  test('the operator Deployment: 2 replicas, Lease in the release namespace, its flags parse', async () => {
    const { objects } = await render(['--set', 'image.repository=registry.example/pglog,image.tag=1.2.3']);
    const deployment = objects.find((o) => o.kind === 'Deployment') as unknown as { spec: { replicas: number; template: PodTemplate & { spec: { serviceAccountName: string } } } };
    assert.equal(deployment.spec.replicas, 2);
    assert.equal(deployment.spec.template.spec.serviceAccountName, 'pglog-operator');
    const container = deployment.spec.template.spec.containers[0]!;
    assert.deepEqual(container.env?.map((e) => e.name), ['POD_NAME', 'POD_NAMESPACE']);
    const args = container.args!;
    assert.equal(args[0], 'operator');
    assert.ok(!args.some((a) => a.startsWith('--namespace')), 'watches all namespaces by default');
    const parsed = parseOperatorArgs(args.slice(1).map((a) => a.replace('$(POD_NAMESPACE)', NAMESPACE)),
      { POD_NAME: 'pglog-operator-abc', POD_NAMESPACE: NAMESPACE, KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' });
    assert.equal(parsed.operator.leaseNamespace, NAMESPACE);
    assert.equal(parsed.operator.leaseName, 'pglog-operator');
    assert.equal(parsed.operator.defaultImage, 'registry.example/pglog:1.2.3');
    assert.equal(parsed.operator.serviceAccountName, 'pglog-collector');
    assert.equal(parsed.operator.namespace, undefined);
    assert.equal(parsed.operator.identity, 'pglog-operator-abc');
    assert.deepEqual(parsed.operator.listen, { host: '0.0.0.0', port: 8080 });
    // Pools may run only the chart's own image repository, and only in the collector namespaces.
    assert.deepEqual(parsed.operator.policy, { allowedImages: ['registry.example/pglog'], collectorNamespaces: [NAMESPACE] });
    const widened = (await render(['--set', `image.repository=registry.example/pglog,operator.allowedImages={registry.example/pglog,registry.example/team/},collectorNamespaces={${NAMESPACE},${OTHER}}`])).objects;
    const widenedArgs = (widened.find((o) => o.kind === 'Deployment') as unknown as { spec: { template: PodTemplate } }).spec.template.spec.containers[0]!.args!;
    const reparsed = parseOperatorArgs(widenedArgs.slice(1).map((a) => a.replace('$(POD_NAMESPACE)', NAMESPACE)), { POD_NAME: 'p', POD_NAMESPACE: NAMESPACE, KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' });
    assert.deepEqual(reparsed.operator.policy, { allowedImages: ['registry.example/pglog', 'registry.example/team/'], collectorNamespaces: [NAMESPACE, OTHER] });
  });

  test('the whole manifest (everything on, two collector namespaces) passes a server-side dry run without warnings', async () => {
    const { text } = await render([...ALL_ON, '--set', `collectorNamespaces={${NAMESPACE},${OTHER}}`]);
    const r = await kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], text);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /[Ww]arning|PodSecurity/, r.stderr);
    for (const name of ['deployment.apps/pglog-operator', 'collectorpool.pglog.io/main', 'horizontalpodautoscaler.autoscaling/main',
      'servicemonitor.monitoring.coreos.com/pglog', 'prometheusrule.monitoring.coreos.com/pglog', 'clusterrole.rbac.authorization.k8s.io/pglog-collector', 'networkpolicy.networking.k8s.io/pglog-collector']) {
      assert.ok(r.stdout.includes(name), `${name} not in:\n${r.stdout}`);
    }
  });

  test('objects with a Pod template pass Pod Security restricted: no warning, and a Pod from the template is admitted', async () => {
    const { objects } = await render(ALL_ON);
    // No controller-manager: the Pods' service accounts must exist for the Pod dry run.
    const accounts = objects.filter((o) => o.kind === 'ServiceAccount');
    const created = await kubectl(['apply', '-f', '-'], toYaml(accounts));
    assert.equal(created.code, 0, created.stderr);
    const workloads = objects.filter((o) => (o['spec'] as { template?: { spec?: unknown } } | undefined)?.template?.spec !== undefined);
    // The operator, and the CRD hook's Job (ADR 0013).
    assert.deepEqual(workloads.map((o) => o.kind), ['Deployment', 'Job']);
    for (const w of workloads) {
      const r = await kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], JSON.stringify(w));
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /PodSecurity|[Ww]arning/, r.stderr);
      const template = (w['spec'] as { template: PodTemplate }).template;
      const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: `${w.metadata.name}-0`, namespace: NAMESPACE, labels: template.metadata?.labels }, spec: template.spec };
      const admitted = await kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], JSON.stringify(pod));
      assert.equal(admitted.code, 0, admitted.stderr);
      assert.match(admitted.stdout, /^pod\//);
      assert.doesNotMatch(admitted.stderr, /PodSecurity|[Ww]arning/, admitted.stderr);
    }
  });

  test('docs/install.md\'s plain-kubectl operator Deployment and pool pass the same dry run', async () => {
    const blocks = [...readFileSync(join(ROOT, 'docs/install.md'), 'utf8').matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!.replaceAll('pglog-system', NAMESPACE));
    assert.equal(blocks.length, 2);
    for (const block of blocks) {
      const r = await kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], block);
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /PodSecurity|[Ww]arning/, r.stderr);
    }
  });

  test('no rule of any Role or ClusterRole has a wildcard', async () => {
    for (const extra of [[], ALL_ON, ['--set', `operator.watchNamespace=${OTHER}`]]) {
      const roles = (await render(extra)).objects.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole');
      assert.ok(roles.length >= 3);
      for (const role of roles) {
        const rules = role['rules'] as Rule[];
        assert.ok(rules.length > 0);
        for (const rule of rules) {
          for (const field of [rule.apiGroups, rule.resources, rule.verbs, rule.resourceNames, rule.nonResourceURLs]) {
            assert.ok(!(field ?? []).some((v) => v.includes('*')), `${role.kind} ${role.metadata.name}: ${JSON.stringify(rule)}`);
          }
        }
      }
    }
  });

  test('helm install prints what to do next; helm uninstall removes what it installed', async () => {
    const namespace = 'pglog-helm';
    const release = 'pglog-install';
    await cp.kubectl(['create', 'namespace', namespace]);
    // No kube-controller-manager here to run the CRD hook's Job: helm-upgrade.test.ts runs it.
    const installed = await helm(['install', release, CHART, '--kubeconfig', cp.kubeconfig, '--namespace', namespace, '--set', 'crds.apply=false']);
    assert.equal(installed.code, 0, installed.stderr);
    const notes = installed.stdout.slice(installed.stdout.indexOf('NOTES:'));
    for (const step of [`kubectl -n ${namespace} create secret generic pglog-store`, '--from-literal=url=', `kubectl -n ${namespace} label secret db1-ssh pglog.io/ssh-credentials=true`,
      `kubectl -n ${namespace} apply -f targets.yaml`,
      `kubectl -n ${namespace} get pgt`, `kubectl -n ${namespace} scale cpool main --replicas=4`]) {
      assert.ok(notes.includes(step), `NOTES lack "${step}":\n${notes}`);
    }
    const selector = `app.kubernetes.io/instance=${release}`;
    const listed = await cp.kubectl(['get', 'clusterroles,clusterrolebindings', '-l', selector, '-o', 'name']);
    assert.deepEqual(listed.trim().split('\n').sort(), [`clusterrole.rbac.authorization.k8s.io/${release}-collector`, `clusterrole.rbac.authorization.k8s.io/${release}-operator`,
      `clusterrole.rbac.authorization.k8s.io/${release}-operator-workloads`, `clusterrolebinding.rbac.authorization.k8s.io/${release}-operator`]);
    assert.match(await cp.kubectl(['-n', namespace, 'get', 'cpool', 'main', '-o', 'name']), /collectorpool\.pglog\.io\/main/);
    const uninstalled = await helm(['uninstall', release, '--kubeconfig', cp.kubeconfig, '--namespace', namespace]);
    assert.equal(uninstalled.code, 0, uninstalled.stderr);
    const left = await cp.kubectl(['get', 'clusterroles,clusterrolebindings', '-l', selector, '-o', 'name']);
    assert.equal(left.trim(), '');
    const leftInNamespace = await cp.kubectl(['-n', namespace, 'get', 'deploy,svc,sa,roles,rolebindings,networkpolicies,configmaps,pdb,cpool', '-l', selector, '-o', 'name']);
    assert.equal(leftInNamespace.trim(), '');
  });

  test('RBAC applied for real: the collector and the operator can do what they need and no more', async () => {
    const { objects } = await render(['--set', `collectorNamespaces={${NAMESPACE},${OTHER}}`]);
    const rbac = objects.filter((o) => ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(o.kind));
    const applied = await kubectl(['apply', '-f', '-'], toYaml(rbac));
    assert.equal(applied.code, 0, applied.stderr);
    const can = async (who: string, namespace: string, verb: string, resource: string, subresource?: string, name?: string): Promise<boolean> => {
      const r = await kubectl(['auth', 'can-i', verb, name === undefined ? resource : `${resource}/${name}`, '-n', namespace, `--as=system:serviceaccount:${who}`,
        ...(subresource === undefined ? [] : [`--subresource=${subresource}`])]);
      assert.ok(/^(?:yes|no)\b/.test(r.stdout.trim()), `can-i ${verb} ${resource}: ${r.stdout}${r.stderr}`);
      return r.stdout.trim().startsWith('yes');
    };
    const expect = async (who: string, namespace: string, cases: Array<[string, string, boolean, string?, string?]>): Promise<void> => {
      const wrong: string[] = [];
      for (const [verb, resource, allowed, subresource, name] of cases) {
        if (await can(who, namespace, verb, resource, subresource, name) !== allowed) wrong.push(`${verb} ${resource}${subresource === undefined ? '' : `/${subresource}`} in ${namespace}: expected ${allowed ? 'yes' : 'no'}`);
      }
      assert.deepEqual(wrong, [], `${who}:\n${wrong.join('\n')}`);
    };
    for (const namespace of [NAMESPACE, OTHER]) {
      await expect(`${namespace}:pglog-collector`, namespace, [
        ['get', 'secrets', true],
        ['list', 'secrets', false],
        ['watch', 'secrets', false],
        ['create', 'secrets', false],
        ['get', 'collectorshards.pglog.io', true],
        ['list', 'collectorshards.pglog.io', true],
        ['watch', 'collectorshards.pglog.io', true],
        ['update', 'collectorshards.pglog.io', true, 'status'],
        ['patch', 'collectorshards.pglog.io', true, 'status'],
        ['update', 'collectorshards.pglog.io', false],
        ['delete', 'collectorshards.pglog.io', false],
        ['create', 'collectorshards.pglog.io', false],
        ['get', 'postgrestargets.pglog.io', true],
        ['list', 'postgrestargets.pglog.io', false],
        ['patch', 'postgrestargets.pglog.io', false, 'status'],
        ['get', 'collectorpools.pglog.io', false],
        ['get', 'pods', false],
        ['get', 'configmaps', false],
      ]);
    }
    // Bound per namespace: nothing in a namespace the chart was not told about, nor across namespaces.
    await expect(`${NAMESPACE}:pglog-collector`, OUTSIDE, [['get', 'secrets', false], ['get', 'collectorshards.pglog.io', false]]);
    await expect(`${NAMESPACE}:pglog-collector`, OTHER, [['get', 'secrets', false]]);

    for (const namespace of [NAMESPACE, OTHER, OUTSIDE]) {
      // Workloads and shards are written only in the collector namespaces (review F11); read,
      // status and Events wherever pools may be declared.
      const writes = namespace !== OUTSIDE;
      await expect(`${NAMESPACE}:pglog-operator`, namespace, [
        ['get', 'secrets', false],
        ['list', 'secrets', false],
        ['watch', 'secrets', false],
        ['list', 'collectorpools.pglog.io', true],
        ['watch', 'postgrestargets.pglog.io', true],
        ['create', 'collectorshards.pglog.io', writes],
        ['update', 'collectorshards.pglog.io', writes],
        ['delete', 'collectorshards.pglog.io', writes],
        ['update', 'collectorshards.pglog.io', false, 'status'],
        ['patch', 'postgrestargets.pglog.io', true, 'status'],
        ['patch', 'collectorpools.pglog.io', true, 'status'],
        ['update', 'postgrestargets.pglog.io', false],
        ['delete', 'postgrestargets.pglog.io', false],
        ['create', 'collectorpools.pglog.io', false],
        ['patch', 'statefulsets.apps', writes],
        ['create', 'statefulsets.apps', writes],
        ['get', 'statefulsets.apps', true],
        ['delete', 'statefulsets.apps', false],
        ['patch', 'services', writes],
        ['create', 'services', writes],
        ['get', 'services', true],
        ['patch', 'poddisruptionbudgets.policy', writes],
        ['get', 'poddisruptionbudgets.policy', true],
        ['list', 'poddisruptionbudgets.policy', true],
        ['create', 'events', true],
        ['patch', 'events', true],
        ['get', 'pods', false],
        ['get', 'configmaps', false],
      ]);
    }
    // The Lease: in the release namespace only, and get/update only of its own.
    await expect(`${NAMESPACE}:pglog-operator`, NAMESPACE, [
      ['create', 'leases.coordination.k8s.io', true],
      ['get', 'leases.coordination.k8s.io', true, undefined, 'pglog-operator'],
      ['update', 'leases.coordination.k8s.io', true, undefined, 'pglog-operator'],
      ['update', 'leases.coordination.k8s.io', false, undefined, 'someone-else'],
      ['delete', 'leases.coordination.k8s.io', false, undefined, 'pglog-operator'],
    ]);
    await expect(`${NAMESPACE}:pglog-operator`, OUTSIDE, [['create', 'leases.coordination.k8s.io', false]]);
    // The CRD hook (ADR 0013): pglog's CRDs by name, nothing else; no one else may touch CRDs.
    const crd = 'customresourcedefinitions.apiextensions.k8s.io';
    await expect(`${NAMESPACE}:pglog-crds`, NAMESPACE, [
      ['get', crd, true, undefined, 'postgrestargets.pglog.io'],
      ['patch', crd, true, undefined, 'collectorpools.pglog.io'],
      ['patch', crd, true, undefined, 'collectorshards.pglog.io'],
      ['patch', crd, false, undefined, 'servicemonitors.monitoring.coreos.com'],
      ['get', crd, false, undefined, 'servicemonitors.monitoring.coreos.com'],
      ['delete', crd, false, undefined, 'postgrestargets.pglog.io'],
      ['update', crd, false, undefined, 'postgrestargets.pglog.io'],
      ['list', crd, false],
      ['get', 'secrets', false],
      ['get', 'postgrestargets.pglog.io', false],
    ]);
    for (const who of [`${NAMESPACE}:pglog-operator`, `${NAMESPACE}:pglog-collector`]) {
      await expect(who, NAMESPACE, [['patch', crd, false, undefined, 'postgrestargets.pglog.io'], ['create', crd, false]]);
    }
  });
});
