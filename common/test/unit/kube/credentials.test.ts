// The exec credential plugin's contract (client.authentication.k8s.io/v1): what the plugin is
// told in KUBERNETES_EXEC_INFO, and which outputs are refused with an error that names it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { ExecPlugin, KubeConfig } from '@pglog/common/kube/config.ts';
import { execInfo, parseExecCredential } from '@pglog/common/kube/credentials.ts';

const PLUGIN: ExecPlugin = {
  command: '/usr/bin/get-token',
  args: [],
  env: {},
  apiVersion: 'client.authentication.k8s.io/v1',
  provideClusterInfo: false,
  installHint: 'install get-token',
  source: 'users[name=u].user of /k',
};
const CONFIG: KubeConfig = { server: 'https://10.0.0.1:6443', caCert: 'PEM', tlsServerName: 'kubernetes' };
const credential = (status: unknown): string => JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status });

describe('exec credential plugins', () => {
  test('KUBERNETES_EXEC_INFO: non-interactive; the cluster only with provideClusterInfo', () => {
    assert.deepEqual(JSON.parse(execInfo(CONFIG, PLUGIN)), {
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      spec: { interactive: false },
    });
    assert.deepEqual((JSON.parse(execInfo(CONFIG, { ...PLUGIN, provideClusterInfo: true })) as { spec: { cluster: unknown } }).spec.cluster, {
      server: 'https://10.0.0.1:6443',
      'certificate-authority-data': Buffer.from('PEM').toString('base64'),
      'tls-server-name': 'kubernetes',
    });
  });

  test('a token, with or without an expiry', () => {
    assert.deepEqual(parseExecCredential(PLUGIN, credential({ token: 't' })), { token: 't', expiresAt: null });
    assert.deepEqual(parseExecCredential(PLUGIN, credential({ token: 't', expirationTimestamp: '2026-01-01T00:00:00Z' })), {
      token: 't',
      expiresAt: Date.UTC(2026, 0, 1),
    });
  });

  test('refused outputs name the plugin, where it is configured and its install hint', () => {
    const refused = (stdout: string, pattern: RegExp): void => {
      assert.throws(
        () => parseExecCredential(PLUGIN, stdout),
        (e: unknown) => {
          assert.equal((e as { code?: string }).code, 'KUBE_FORBIDDEN');
          assert.match((e as Error).message, /exec credential plugin \/usr\/bin\/get-token \(users\[name=u\]\.user of \/k\)/);
          assert.match((e as Error).message, /\(install get-token\)$/);
          assert.match((e as Error).message, pattern);
          return true;
        },
      );
    };
    refused('not json', /not JSON/);
    refused(
      JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential', status: { token: 't' } }),
      /not an ExecCredential of client\.authentication\.k8s\.io\/v1/,
    );
    refused(credential({}), /no status\.token/);
    refused(credential({ clientCertificateData: 'x', clientKeyData: 'y' }), /client certificates from a plugin are not supported/);
    refused(credential({ token: 't', expirationTimestamp: 'tomorrow' }), /expirationTimestamp "tomorrow" is not an RFC 3339 time/);
  });
});
