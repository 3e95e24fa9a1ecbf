// `pglog operator` arguments: defaults from the pod's environment, the Lease timings derived
// from its duration, and USAGE errors that name the option.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseOperatorArgs } from '@pglog/cli/operator-command.ts';
import { isPglogError } from '@pglog/common/errors.ts';

const inPod = {
  KUBERNETES_SERVICE_HOST: '10.0.0.1',
  KUBERNETES_SERVICE_PORT: '443',
  POD_NAME: 'pglog-operator-7d9',
  POD_NAMESPACE: 'pglog',
  PGLOG_IMAGE: 'reg.example/pglog:1',
};

test('in a pod: service account access, identity and Lease namespace from the downward API', () => {
  const c = parseOperatorArgs([], inPod);
  assert.equal(c.kube.kind, 'in-cluster');
  assert.deepEqual(
    [c.operator.identity, c.operator.leaseNamespace, c.operator.leaseName, c.operator.defaultImage],
    ['pglog-operator-7d9', 'pglog', 'pglog-operator', 'reg.example/pglog:1'],
  );
  assert.deepEqual([c.operator.leaseDurationMs, c.operator.renewDeadlineMs, c.operator.retryPeriodMs], [15_000, 10_000, 2_000]);
  assert.equal(c.operator.namespace, undefined, 'all namespaces');
  assert.deepEqual(c.operator.listen, { host: '0.0.0.0', port: 8080 });
});

test('flags override: kubeconfig and context, namespace, lease, listen, workers', () => {
  const c = parseOperatorArgs(
    [
      '--kubeconfig',
      '/k',
      '--kube-context',
      'ctx',
      '--namespace',
      'db',
      '--lease-duration',
      '4',
      '--listen',
      '127.0.0.1:0',
      '--workers',
      '3',
      '--image',
      'x.example/y:z',
    ],
    {},
  );
  assert.deepEqual(c.kube, { kind: 'kubeconfig', paths: ['/k'], context: 'ctx', from: '--kubeconfig', env: {} });
  assert.deepEqual(parseOperatorArgs(['--kubeconfig', '/k', '--context', 'other', '--image', 'x.example/y:z'], {}).kube, {
    kind: 'kubeconfig',
    paths: ['/k'],
    context: 'other',
    from: '--kubeconfig',
    env: {},
  });
  assert.equal(c.operator.leaseNamespace, 'db');
  assert.deepEqual([c.operator.leaseDurationMs, c.operator.renewDeadlineMs], [4000, 2667]);
  assert.deepEqual(c.operator.listen, { host: '127.0.0.1', port: 0 });
  assert.equal(c.operator.workers, 3);
});

test('allowed images default to the repository of --image, store Secrets to pglog-store; collector namespaces to every watched one', () => {
  const digest = `sha256:${'ab'.repeat(32)}`;
  const c = parseOperatorArgs(['--image', `registry.example:5000/pglog/pglog:1.2@${digest}`], inPod);
  assert.deepEqual(c.operator.policy, { allowedImages: ['registry.example:5000/pglog/pglog'], allowedStoreSecrets: ['pglog-store'] });
  const d = parseOperatorArgs(
    [
      '--image',
      'reg.example/pglog:1.4.2',
      '--allowed-images',
      `reg.example/pglog:1.*, ghcr.io/team/, reg.example/pglog@${digest}`,
      '--allowed-store-secrets',
      'store, team-b/store-b',
      '--collector-namespaces',
      'db,pglog',
    ],
    inPod,
  );
  assert.deepEqual(d.operator.policy, {
    allowedImages: ['reg.example/pglog:1.*', 'ghcr.io/team/', `reg.example/pglog@${digest}`],
    allowedStoreSecrets: ['store', 'team-b/store-b'],
    collectorNamespaces: ['db', 'pglog'],
  });
});

test('bad input is a USAGE error naming the option', () => {
  const usage = (argv: string[], env: Record<string, string> = inPod): string => {
    try {
      parseOperatorArgs(argv, env);
    } catch (e) {
      assert.ok(isPglogError(e) && e.code === 'USAGE');
      return e.message;
    }
    throw new Error('no error');
  };
  assert.match(usage(['--bogus']), /operator: .*--bogus/);
  assert.match(usage([], { ...inPod, PGLOG_IMAGE: '' }), /--image IMAGE/);
  assert.match(usage(['--listen', 'nowhere']), /--listen must be HOST:PORT/);
  assert.match(usage(['--lease-duration', '1']), /--lease-duration must be a whole number of at least 2/);
  assert.match(usage([], { PGLOG_IMAGE: 'i' }), /outside a pod it needs --kubeconfig PATH, KUBECONFIG or ~\/\.kube\/config/);
  assert.match(usage(['--context', 'c']), /--context needs a kubeconfig/);
  assert.match(usage(['--allowed-images', 'reg/pglog:1']), /--allowed-images entry 'reg\/pglog:1' names no registry host/);
  assert.match(usage(['--allowed-images', 'reg.example/*']), /--allowed-images entry 'reg\.example\/\*' is not an image repository .*path component '\*'/);
  assert.match(usage(['--allowed-images', 'reg.example/pglog,']), /has an empty entry/);
  assert.match(usage(['--allowed-images', 'other.example/pglog']), /--image reg\.example\/pglog:1 is not in --allowed-images \(other\.example\/pglog\)/);
  assert.match(usage(['--image', 'pglog:dev']), /--image pglog:dev names no registry host: write it as pulled, e\.g\. docker\.io\/library\/pglog:dev/);
  assert.match(usage(['--image', 'ghcr.io/pglog/pglog@evil.com/x']), /--image ghcr\.io\/pglog\/pglog@evil\.com\/x is not an image reference: its digest/);
  assert.match(usage(['--allowed-store-secrets', 'store,*']), /--allowed-store-secrets entry '\*' is not a Secret name or NAMESPACE\/NAME/);
  assert.match(usage(['--collector-namespaces', 'db,Bad_NS']), /--collector-namespaces entry 'Bad_NS' is not a namespace name/);
});

test('the cluster is found as kubectl finds it: --kubeconfig, else KUBECONFIG (every file), else in a pod, else ~/.kube/config', () => {
  const kube = (argv: string[], env: Record<string, string>): unknown => parseOperatorArgs([...argv, '--image', 'x.example/y:z'], env).kube;
  const everything = { ...inPod, KUBECONFIG: '/a:/b::/c', HOME: '/home/u' };
  assert.deepEqual(kube(['--kubeconfig', '/k'], everything), { kind: 'kubeconfig', paths: ['/k'], context: null, from: '--kubeconfig', env: everything });
  assert.deepEqual(kube(['--context', 'ctx'], everything), {
    kind: 'kubeconfig',
    paths: ['/a', '/b', '/c'],
    context: 'ctx',
    from: 'KUBECONFIG',
    env: everything,
  });
  const pod = { ...inPod, HOME: '/home/u', KUBECONFIG: '' };
  assert.equal((kube([], pod) as { kind: string }).kind, 'in-cluster');
  const laptop = { HOME: '/home/u' };
  assert.deepEqual(kube(['--kube-context', 'dev'], laptop), {
    kind: 'kubeconfig',
    paths: ['/home/u/.kube/config'],
    context: 'dev',
    from: '~/.kube/config',
    env: laptop,
  });
});
