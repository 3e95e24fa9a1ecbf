// Kubeconfig and in-cluster config loading: fields, files relative to the kubeconfig, errors
// that name the file and the field.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { inClusterConfig, loadKubeconfig, loadKubeconfigFile } from '@pglog/common/kube/config.ts';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n';

function dir(): string {
  return mkdtempSync(join(tmpdir(), 'pglog-kubeconfig-'));
}

const yaml = `apiVersion: v1
kind: Config
current-context: dev
clusters:
  - name: c1
    cluster: { server: "https://10.0.0.1:6443", certificate-authority: ca.pem, tls-server-name: kubernetes }
  - name: c2
    cluster: { server: "https://other:443", certificate-authority-data: ${Buffer.from(PEM).toString('base64')}, insecure-skip-tls-verify: true }
users:
  - name: tok
    user: { token: abc }
  - name: cert
    user: { client-certificate: client.pem, client-key-data: ${Buffer.from(KEY).toString('base64')} }
  - name: file
    user: { tokenFile: token }
  - name: plugin
    user: { exec: { command: aws } }
contexts:
  - name: dev
    context: { cluster: c1, user: tok, namespace: team }
  - name: certs
    context: { cluster: c2, user: cert }
  - name: tokfile
    context: { cluster: c1, user: file }
  - name: plugin
    context: { cluster: c1, user: plugin }
  - name: broken
    context: { cluster: missing, user: tok }
`;

async function rejectsConfig(p: Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.equal((e as { code?: string }).code, 'CONFIG_INVALID');
    assert.match((e as Error).message, pattern);
    return true;
  });
}

describe('kubeconfig files', () => {
  const d = dir();
  const file = join(d, 'config');
  writeFileSync(file, yaml);
  writeFileSync(join(d, 'ca.pem'), PEM);
  writeFileSync(join(d, 'client.pem'), PEM);

  test('the current context: server, CA from a file beside it, server name, token, namespace', async () => {
    assert.deepEqual(await loadKubeconfigFile(file), {
      server: 'https://10.0.0.1:6443',
      caCert: PEM,
      tlsServerName: 'kubernetes',
      token: 'abc',
      namespace: 'team',
    });
  });

  test('a named context: inline CA, client certificate from a file and key inline, skip verify', async () => {
    assert.deepEqual(await loadKubeconfigFile(file, 'certs'), {
      server: 'https://other:443',
      caCert: PEM,
      insecureSkipTlsVerify: true,
      clientCert: PEM,
      clientKey: KEY,
    });
  });

  test('tokenFile is resolved against the kubeconfig directory', async () => {
    assert.equal((await loadKubeconfigFile(file, 'tokfile')).tokenFile, join(d, 'token'));
  });

  test('errors name the file and what is wrong', async () => {
    await rejectsConfig(loadKubeconfigFile(file, 'nope'), new RegExp(`kubeconfig ${file}: no entry named "nope" in contexts`));
    await rejectsConfig(loadKubeconfigFile(file, 'broken'), /no entry named "missing" in clusters/);
    await rejectsConfig(
      loadKubeconfigFile(file, 'plugin'),
      /users\[name=plugin\]\.user\.exec\.apiVersion "" is not supported: only client\.authentication\.k8s\.io\/v1/,
    );
    await rejectsConfig(loadKubeconfigFile(join(d, 'absent')), /absent: cannot read/);
    const bad = join(d, 'bad');
    writeFileSync(bad, 'clusters: [\n');
    await rejectsConfig(loadKubeconfigFile(bad), /not valid YAML/);
    const http = join(d, 'http');
    writeFileSync(http, yaml.replace('https://10.0.0.1:6443', 'http://10.0.0.1:8080'));
    await rejectsConfig(loadKubeconfigFile(http), /clusters\[name=c1\]\.cluster\.server must be an https:\/\/ URL/);
    const noCa = join(dir(), 'config');
    writeFileSync(noCa, yaml);
    await rejectsConfig(loadKubeconfigFile(noCa), /clusters\[name=c1\]\.cluster\.certificate-authority: cannot read .*ca\.pem/);
  });
});

describe('kubeconfig files merged as kubectl merges $KUBECONFIG', () => {
  const d = dir();
  const first = join(d, 'first');
  const second = join(d, 'second');
  // The first file sets the current context and a user both files define; the second brings the cluster and its CA.
  writeFileSync(
    first,
    `current-context: work
contexts:
  - name: work
    context: { cluster: shared, user: me, namespace: mine }
users:
  - name: me
    user: { tokenFile: tok }
`,
  );
  writeFileSync(
    second,
    `current-context: other
contexts:
  - name: work
    context: { cluster: nowhere, user: nobody }
  - name: other
    context: { cluster: shared, user: me }
clusters:
  - name: shared
    cluster: { server: "https://10.0.0.9:6443", certificate-authority: ca.pem }
users:
  - name: me
    user: { token: second-file }
  - name: plugin
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1
        command: ./bin/creds
        args: [get, --fast]
        env: [{ name: REGION, value: eu }]
        provideClusterInfo: true
`,
  );
  writeFileSync(join(d, 'ca.pem'), PEM);

  test('the first file that sets a value wins; paths resolve against the file that named them', async () => {
    const c = await loadKubeconfig({ paths: [first, join(d, 'missing'), second] });
    assert.deepEqual(c, { server: 'https://10.0.0.9:6443', caCert: PEM, tokenFile: join(d, 'tok'), namespace: 'mine' });
    assert.equal((await loadKubeconfig({ paths: [second, first] })).token, 'second-file');
  });

  test('--context picks another context of the merged files', async () => {
    assert.equal((await loadKubeconfig({ paths: [first, second], context: 'other' })).tokenFile, join(d, 'tok'));
  });

  test('an exec plugin: command relative to its file, args, the caller environment plus its env', async () => {
    const third = join(d, 'third');
    writeFileSync(third, 'contexts: [{ name: p, context: { cluster: shared, user: plugin } }]\n');
    const c = await loadKubeconfig({ paths: [third, second], context: 'p', env: { PATH: '/usr/bin', REGION: 'us' } });
    assert.deepEqual(c.exec, {
      command: join(d, 'bin', 'creds'),
      args: ['get', '--fast'],
      env: { PATH: '/usr/bin', REGION: 'eu' },
      apiVersion: 'client.authentication.k8s.io/v1',
      provideClusterInfo: true,
      source: `users[name=plugin].user of ${second}`,
    });
  });

  test('no file at all, or an explicit one missing, is an error', async () => {
    await rejectsConfig(loadKubeconfig({ paths: [join(d, 'a'), join(d, 'b')] }), /none of these files exists/);
    await rejectsConfig(loadKubeconfig({ paths: [join(d, 'a')], mustExist: true }), /a: cannot read/);
  });
});

describe('in-cluster config', () => {
  test('server from host and port (IPv6 bracketed), CA, namespace, token file kept for re-reading', async () => {
    const d = dir();
    writeFileSync(join(d, 'token'), 'tok\n');
    writeFileSync(join(d, 'ca.crt'), PEM);
    writeFileSync(join(d, 'namespace'), 'pglog\n');
    const paths = { tokenFile: join(d, 'token'), caFile: join(d, 'ca.crt'), namespaceFile: join(d, 'namespace') };
    assert.deepEqual(await inClusterConfig({ host: '10.96.0.1', port: '443', ...paths }), {
      server: 'https://10.96.0.1:443',
      caCert: PEM,
      tokenFile: paths.tokenFile,
      namespace: 'pglog',
    });
    assert.equal((await inClusterConfig({ host: 'fd00::1', port: 443, ...paths })).server, 'https://[fd00::1]:443');
    await rejectsConfig(inClusterConfig({ host: '10.96.0.1', port: 'https', ...paths }), /port "https" is not a port number/);
    await rejectsConfig(
      inClusterConfig({ host: '10.96.0.1', port: 443, ...paths, tokenFile: join(d, 'none') }),
      /cannot read the service account token .*none/,
    );
  });
});
