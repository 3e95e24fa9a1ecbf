// The Helm chart (charts/pglog) with the real helm binary and a real kube-apiserver: every
// rendered object passes a server-side dry run, the operator Deployment (and a Pod from its
// template) without a PodSecurity warning in a namespace that enforces `restricted`; the plain
// kubectl install of docs/install.md too; the RBAC, applied for real, grants the collector and
// the operator what they need and nothing more (kubectl auth can-i --as the service accounts),
// with no wildcard anywhere; helm install and uninstall. What renders, without an API server:
// helm-chart-render.test.ts.
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { type ControlPlane, kubeBin, startControlPlane } from '@pglog/test-support/control-plane.ts';

import {
  ALL_ON,
  CHART,
  helm,
  HELM_HOME,
  NAMESPACE,
  OTHER,
  OUTSIDE,
  type PodTemplate,
  render,
  type Result,
  ROOT,
  type Rule,
  run,
  toYaml,
} from '../helpers/helm-chart.ts';

describe('charts/pglog', { timeout: 240_000 }, () => {
  let cp: ControlPlane;
  const kubectl = (args: readonly string[], stdin = ''): Promise<Result> => run(join(kubeBin(), 'kubectl'), ['--kubeconfig', cp.kubeconfig, ...args], stdin);

  before(async () => {
    cp = await startControlPlane();
    for (const [name, labels] of [
      [
        NAMESPACE,
        {
          'pod-security.kubernetes.io/enforce': 'restricted',
          'pod-security.kubernetes.io/enforce-version': 'latest',
          'pod-security.kubernetes.io/warn': 'restricted',
        },
      ],
      [OTHER, { 'pod-security.kubernetes.io/enforce': 'restricted' }],
      [OUTSIDE, {}],
    ] as const) {
      await cp.kubectl(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } }));
    }
    // The chart's CRDs (helm installs crds/ before the templates), and minimal ServiceMonitor and
    // PrometheusRule CRDs standing in for the Prometheus Operator's.
    await cp.kubectl(['apply', '--server-side', '-f', join(CHART, 'crds')]);
    for (const [kind, plural] of [
      ['ServiceMonitor', 'servicemonitors'],
      ['PrometheusRule', 'prometheusrules'],
    ] as const) {
      await cp.kubectl(
        ['apply', '-f', '-'],
        JSON.stringify({
          apiVersion: 'apiextensions.k8s.io/v1',
          kind: 'CustomResourceDefinition',
          metadata: { name: `${plural}.monitoring.coreos.com` },
          spec: {
            group: 'monitoring.coreos.com',
            scope: 'Namespaced',
            names: { kind, listKind: `${kind}List`, plural, singular: kind.toLowerCase() },
            versions: [
              { name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } },
            ],
          },
        }),
      );
    }
    await cp.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd', '--all']);
  });
  after(async () => {
    await cp?.stop();
    rmSync(HELM_HOME, { recursive: true, force: true });
  });

  test('the whole manifest (everything on, two collector namespaces) passes a server-side dry run without warnings', async () => {
    const { text } = await render([...ALL_ON, '--set', `collectorNamespaces={${NAMESPACE},${OTHER}}`]);
    const r = await kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], text);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /[Ww]arning|PodSecurity/, r.stderr);
    for (const name of [
      'deployment.apps/pglog-operator',
      'collectorpool.pglog.io/main',
      'horizontalpodautoscaler.autoscaling/main',
      'servicemonitor.monitoring.coreos.com/pglog',
      'prometheusrule.monitoring.coreos.com/pglog',
      'clusterrole.rbac.authorization.k8s.io/pglog-collector',
      'networkpolicy.networking.k8s.io/pglog-collector',
      'validatingadmissionpolicy.admissionregistration.k8s.io/pglog-collectorpools',
      'validatingadmissionpolicybinding.admissionregistration.k8s.io/pglog-collectorpools',
    ]) {
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
    assert.deepEqual(
      workloads.map((o) => o.kind),
      ['Deployment', 'Job'],
    );
    for (const w of workloads) {
      const r = await kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], JSON.stringify(w));
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stderr, /PodSecurity|[Ww]arning/, r.stderr);
      const template = (w['spec'] as { template: PodTemplate }).template;
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `${w.metadata.name}-0`, namespace: NAMESPACE, labels: template.metadata?.labels },
        spec: template.spec,
      };
      const admitted = await kubectl(['apply', '--dry-run=server', '-o', 'name', '-f', '-'], JSON.stringify(pod));
      assert.equal(admitted.code, 0, admitted.stderr);
      assert.match(admitted.stdout, /^pod\//);
      assert.doesNotMatch(admitted.stderr, /PodSecurity|[Ww]arning/, admitted.stderr);
    }
  });

  test("docs/install.md's plain-kubectl operator Deployment and pool pass the same dry run", async () => {
    const blocks = [...readFileSync(join(ROOT, 'docs/install.md'), 'utf8').matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) =>
      m[1]!.replaceAll('pglog-system', NAMESPACE),
    );
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
    for (const step of [
      `kubectl -n ${namespace} create secret generic pglog-store`,
      '--from-literal=url=',
      `kubectl -n ${namespace} label secret db1-ssh pglog.io/ssh-credentials=true`,
      `kubectl -n ${namespace} annotate secret db1-ssh pglog.io/allowed-targets=db1`,
      `kubectl -n ${namespace} apply -f targets.yaml`,
      `kubectl -n ${namespace} get pgt`,
      `kubectl -n ${namespace} scale cpool main --replicas=4`,
    ]) {
      assert.ok(notes.includes(step), `NOTES lack "${step}":\n${notes}`);
    }
    const selector = `app.kubernetes.io/instance=${release}`;
    const clusterWide = 'clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings';
    const listed = await cp.kubectl(['get', clusterWide, '-l', selector, '-o', 'name']);
    assert.deepEqual(listed.trim().split('\n').sort(), [
      `clusterrole.rbac.authorization.k8s.io/${release}-collector`,
      `clusterrole.rbac.authorization.k8s.io/${release}-operator`,
      `clusterrole.rbac.authorization.k8s.io/${release}-operator-workloads`,
      `clusterrolebinding.rbac.authorization.k8s.io/${release}-operator`,
      `validatingadmissionpolicy.admissionregistration.k8s.io/${release}-collectorpools`,
      `validatingadmissionpolicybinding.admissionregistration.k8s.io/${release}-collectorpools`,
    ]);
    assert.match(await cp.kubectl(['-n', namespace, 'get', 'cpool', 'main', '-o', 'name']), /collectorpool\.pglog\.io\/main/);
    const uninstalled = await helm(['uninstall', release, '--kubeconfig', cp.kubeconfig, '--namespace', namespace]);
    assert.equal(uninstalled.code, 0, uninstalled.stderr);
    const left = await cp.kubectl(['get', clusterWide, '-l', selector, '-o', 'name']);
    assert.equal(left.trim(), '');
    const leftInNamespace = await cp.kubectl([
      '-n',
      namespace,
      'get',
      'deploy,svc,sa,roles,rolebindings,networkpolicies,configmaps,pdb,cpool',
      '-l',
      selector,
      '-o',
      'name',
    ]);
    assert.equal(leftInNamespace.trim(), '');
  });

  test('RBAC applied for real: the collector and the operator can do what they need and no more', async () => {
    const { objects } = await render(['--set', `collectorNamespaces={${NAMESPACE},${OTHER}}`]);
    const rbac = objects.filter((o) => ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(o.kind));
    const applied = await kubectl(['apply', '-f', '-'], toYaml(rbac));
    assert.equal(applied.code, 0, applied.stderr);
    const can = async (who: string, namespace: string, verb: string, resource: string, subresource?: string, name?: string): Promise<boolean> => {
      const r = await kubectl([
        'auth',
        'can-i',
        verb,
        name === undefined ? resource : `${resource}/${name}`,
        '-n',
        namespace,
        `--as=system:serviceaccount:${who}`,
        ...(subresource === undefined ? [] : [`--subresource=${subresource}`]),
      ]);
      assert.ok(/^(?:yes|no)\b/.test(r.stdout.trim()), `can-i ${verb} ${resource}: ${r.stdout}${r.stderr}`);
      return r.stdout.trim().startsWith('yes');
    };
    const expect = async (who: string, namespace: string, cases: Array<[string, string, boolean, string?, string?]>): Promise<void> => {
      const wrong: string[] = [];
      for (const [verb, resource, allowed, subresource, name] of cases) {
        if ((await can(who, namespace, verb, resource, subresource, name)) !== allowed)
          wrong.push(`${verb} ${resource}${subresource === undefined ? '' : `/${subresource}`} in ${namespace}: expected ${allowed ? 'yes' : 'no'}`);
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
    await expect(`${NAMESPACE}:pglog-collector`, OUTSIDE, [
      ['get', 'secrets', false],
      ['get', 'collectorshards.pglog.io', false],
    ]);
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
      await expect(who, NAMESPACE, [
        ['patch', crd, false, undefined, 'postgrestargets.pglog.io'],
        ['create', crd, false],
      ]);
    }
  });
});
