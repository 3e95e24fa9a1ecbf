// The chart's CRD hook (charts/pglog/templates/crds-hook.yaml) rendered by the real helm: its
// account, which may create and patch pglog's CRDs cluster-wide, must not outlive the hook,
// failed or not (security review R9). Every hook object is deleted on success and on failure;
// the Job prints its log before helm deletes it when it fails, gives up within a bound and is
// removed after it ends even when no helm is left to delete it. That `pglog crds apply` refuses
// CRDs other than its own: cli/test/unit/crds-command.test.ts.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';

import { HELM_HOME, type Obj, render } from '../helpers/helm-chart.ts';

type Annotated = Obj & { metadata: { annotations?: Record<string, string> } };
type Job = Annotated & { spec: { backoffLimit?: number; activeDeadlineSeconds?: number; ttlSecondsAfterFinished?: number } };

describe('charts/pglog: the CRD hook', { timeout: 120_000 }, () => {
  after(() => rmSync(HELM_HOME, { recursive: true, force: true }));

  test('every hook object is deleted when the hook fails, as when it succeeds; the Job is bounded and cleaned up', async () => {
    const hooks = (await render()).objects.filter((o) => (o as Annotated).metadata.annotations?.['helm.sh/hook'] !== undefined) as Annotated[];
    assert.deepEqual(hooks.map((o) => `${o.kind} ${o.metadata.name}`).sort(), [
      'ClusterRole pglog-crds',
      'ClusterRoleBinding pglog-crds',
      'ConfigMap pglog-crds',
      'Job pglog-crds',
      'ServiceAccount pglog-crds',
    ]);
    for (const o of hooks) {
      const policies = (o.metadata.annotations?.['helm.sh/hook-delete-policy'] ?? '').split(',').sort();
      assert.deepEqual(policies, ['before-hook-creation', 'hook-failed', 'hook-succeeded'], `${o.kind} ${o.metadata.name}`);
    }
    const job = hooks.find((o) => o.kind === 'Job') as Job;
    assert.equal(job.metadata.annotations?.['helm.sh/hook-output-log-policy'], 'hook-failed', 'its log is printed before it is deleted');
    assert.equal(job.spec.activeDeadlineSeconds, 600);
    assert.equal(job.spec.ttlSecondsAfterFinished, 600);
    assert.equal(job.spec.backoffLimit, 3);
  });

  test('crds.apply=false renders no hook at all', async () => {
    const objects = (await render(['--set', 'crds.apply=false'])).objects as Annotated[];
    assert.deepEqual(
      objects.filter((o) => o.metadata.annotations?.['helm.sh/hook'] !== undefined),
      [],
    );
  });
});
