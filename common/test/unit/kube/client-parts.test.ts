// The pure parts of the Kubernetes client: paths, status → error code, NDJSON splitting.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';

import { codeForStatus, isKubeError, KubeError, kubeErrorFromStatus, kubeNetworkError } from '@pglog/common/kube/errors.ts';
import { ndjsonLines } from '@pglog/common/kube/ndjson.ts';
import { queryString, resourcePath } from '@pglog/common/kube/paths.ts';
import { COLLECTOR_SHARDS, CUSTOM_RESOURCE_DEFINITIONS, PODS } from '@pglog/common/kube/resources.ts';

describe('resource paths', () => {
  test('core and group resources, namespaced and cluster-scoped, subresources', () => {
    assert.equal(resourcePath(PODS, 'ns'), '/api/v1/namespaces/ns/pods');
    assert.equal(resourcePath(PODS, undefined), '/api/v1/pods');
    assert.equal(resourcePath(PODS, 'ns', 'p-0'), '/api/v1/namespaces/ns/pods/p-0');
    assert.equal(resourcePath(COLLECTOR_SHARDS, 'ns', 's-1', 'status'), '/apis/pglog.io/v1alpha1/namespaces/ns/collectorshards/s-1/status');
    assert.equal(resourcePath(CUSTOM_RESOURCE_DEFINITIONS, undefined, 'a.b.io'), '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b.io');
  });

  test('refused: a namespace for a cluster-scoped type, none for one namespaced object, a name with a slash', () => {
    assert.throws(
      () => resourcePath(CUSTOM_RESOURCE_DEFINITIONS, 'ns'),
      (e) => isKubeError(e, 'KUBE_INVALID') && /cluster-scoped/.test(e.message),
    );
    assert.throws(
      () => resourcePath(PODS, undefined, 'p'),
      (e) => isKubeError(e, 'KUBE_INVALID') && /namespace is required/.test(e.message),
    );
    assert.throws(
      () => resourcePath(PODS, 'ns', '../secrets'),
      (e) => isKubeError(e, 'KUBE_INVALID'),
    );
    assert.throws(
      () => resourcePath(PODS, '', 'p'),
      (e) => isKubeError(e, 'KUBE_INVALID'),
    );
  });

  test('query strings skip undefined and encode values', () => {
    assert.equal(queryString({}), '');
    assert.equal(queryString({ a: undefined }), '');
    assert.equal(queryString({ labelSelector: 'app in (a,b)', limit: 5, watch: true }), '?labelSelector=app+in+%28a%2Cb%29&limit=5&watch=true');
  });
});

describe('Kubernetes errors', () => {
  test('status codes map to stable codes', () => {
    const cases: Array<[number, string, string]> = [
      [401, '', 'KUBE_FORBIDDEN'],
      [403, '', 'KUBE_FORBIDDEN'],
      [404, '', 'KUBE_NOT_FOUND'],
      [409, 'AlreadyExists', 'KUBE_CONFLICT'],
      [409, 'Conflict', 'KUBE_CONFLICT'],
      [410, '', 'KUBE_GONE'],
      [500, 'Expired', 'KUBE_GONE'],
      [400, '', 'KUBE_INVALID'],
      [422, '', 'KUBE_INVALID'],
      [429, '', 'KUBE_UNAVAILABLE'],
      [500, '', 'KUBE_UNAVAILABLE'],
      [503, '', 'KUBE_UNAVAILABLE'],
      [504, '', 'KUBE_UNAVAILABLE'],
    ];
    for (const [status, reason, code] of cases) assert.equal(codeForStatus(status, reason), code, `${status} ${reason}`);
  });

  test('a Status body gives reason and message; another body its start; a network error has status 0', () => {
    const e = kubeErrorFromStatus(
      'PUT /api/v1/namespaces/d/configmaps/x',
      409,
      JSON.stringify({ kind: 'Status', code: 409, reason: 'AlreadyExists', message: 'configmaps "x" already exists' }),
    );
    assert.ok(e instanceof KubeError);
    assert.deepEqual([e.code, e.status, e.reason], ['KUBE_CONFLICT', 409, 'AlreadyExists']);
    assert.equal(e.message, 'PUT /api/v1/namespaces/d/configmaps/x: HTTP 409 AlreadyExists: configmaps "x" already exists');
    const html = kubeErrorFromStatus('GET /api', 502, '<html>bad gateway</html>');
    assert.deepEqual([html.code, html.reason], ['KUBE_UNAVAILABLE', 'Unknown']);
    assert.match(html.message, /HTTP 502 Unknown: <html>bad gateway/);
    const gone = kubeErrorFromStatus('GET /api/v1/pods (watch)', 410, { code: 410, reason: 'Expired', message: 'too old' });
    assert.ok(isKubeError(gone, 'KUBE_GONE'));
    const net = kubeNetworkError('GET /api', new Error('connect ECONNREFUSED'), false);
    assert.deepEqual([net.code, net.status, net.reason], ['KUBE_UNAVAILABLE', 0, 'NetworkError']);
    assert.equal(kubeNetworkError('GET /api', new Error('x'), true).reason, 'Timeout');
    assert.equal(isKubeError(new Error('x')), false);
    assert.equal(isKubeError(gone, 'KUBE_CONFLICT'), false);
  });
});

describe('NDJSON lines', () => {
  // A readable stream delivers the chunks asynchronously, as a response does.
  const chunks = (...parts: Array<string | Buffer>): AsyncIterable<Buffer | string> =>
    Readable.from(parts, { objectMode: true }) as AsyncIterable<Buffer | string>;
  const collect = async (it: AsyncIterable<string>): Promise<string[]> => {
    const out: string[] = [];
    for await (const l of it) out.push(l);
    return out;
  };

  test('lines split across chunks, several per chunk, blank lines, a last line without newline', async () => {
    assert.deepEqual(await collect(ndjsonLines(chunks('{"a"', ':1}\n{"b":2}\n\n{"c"', ':3}\n{"d":4}'))), ['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}']);
  });

  test('a multi-byte character split across chunks', async () => {
    const bytes = Buffer.from('{"n":"é€"}\n');
    const out = await collect(ndjsonLines(chunks(...[...bytes].map((b) => Buffer.from([b])))));
    assert.deepEqual(
      out.map((l) => JSON.parse(l) as unknown),
      [{ n: 'é€' }],
    );
  });
});
