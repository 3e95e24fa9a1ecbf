// How users give the client their credentials, against a real kube-apiserver: an exec
// credential plugin (a real script that counts its runs: one run for 20 concurrent requests,
// its token cached until expirationTimestamp, run again after a 401 when its token is revoked,
// KUBERNETES_EXEC_INFO given), tokenFile, client certificates (files and -data), and the
// cluster found as kubectl finds it ($KUBECONFIG of two files merged, --context). Who the
// server took us for is asked with a SelfSubjectReview.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { parseOperatorArgs } from '@pglog/cli/operator-command.ts';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';
import { loadKubeAccess } from '@pglog/common/kube/kube-access.ts';
import { PGLOG } from '@pglog/test-support/cli.ts';
import { type ControlPlane, startControlPlane } from '@pglog/test-support/control-plane.ts';
import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import { freePort, sleep } from '@pglog/test-support/wait.ts';

const CONFIG_MAPS: ResourceType = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };
const SELF_SUBJECT_REVIEWS: ResourceType = {
  group: 'authentication.k8s.io',
  version: 'v1',
  plural: 'selfsubjectreviews',
  kind: 'SelfSubjectReview',
  namespaced: false,
};
const SA_USER = 'system:serviceaccount:default:plugin-user';

interface Review extends KubeObject {
  status?: { userInfo?: { username?: string; groups?: string[] } };
}

async function whoami(client: KubeClient): Promise<string> {
  const r = await client.create<Review>(SELF_SUBJECT_REVIEWS, { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview', metadata: { name: '' } });
  return r.status?.userInfo?.username ?? '';
}

/** The plugin: counts its runs, keeps the KUBERNETES_EXEC_INFO it got, prints the token in DIR/token. */
const PLUGIN = `#!/bin/sh
echo run >> "$PLUGIN_DIR/runs"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$PLUGIN_DIR/exec-info"
printf '%s' "$PGLOG_TEST_MARK" > "$PLUGIN_DIR/mark"
# Slow enough that 20 concurrent requests all ask while it runs.
sleep 0.3
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}' \\
  "$(cat "$PLUGIN_DIR/token")" "$(cat "$PLUGIN_DIR/expiry")"
`;

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** A client CA for the API server and a certificate of user pglog-cert-user in group system:masters. */
function clientCertificates(dir: string): void {
  openssl(dir, ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=pglog-test-client-ca']);
  openssl(dir, ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'client.key', '-out', 'client.csr', '-subj', '/O=system:masters/CN=pglog-cert-user']);
  openssl(dir, ['x509', '-req', '-in', 'client.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'client.crt', '-days', '2']);
}

function runs(dir: string): number {
  return existsSync(join(dir, 'runs'))
    ? readFileSync(join(dir, 'runs'), 'utf8')
        .split('\n')
        .filter((l) => l !== '').length
    : 0;
}

/** The HTTP status the API server answers this bearer token with (the client is not in the way). */
function statusWithToken(cp: ControlPlane, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${cp.server}/api/v1/namespaces/default/configmaps`,
      {
        headers: { Authorization: `Bearer ${token}` },
        ca: cp.caCert,
        servername: 'kubernetes',
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('credentials users have, on a real kube-apiserver', { timeout: 300_000 }, () => {
  let cp: ControlPlane;
  const dir = mkdtempSync(join(tmpdir(), 'pglog-kube-creds-'));
  const cluster = (): Record<string, unknown> => ({
    name: 'test',
    cluster: { server: cp.server, 'certificate-authority-data': Buffer.from(cp.caCert).toString('base64'), 'tls-server-name': 'kubernetes' },
  });
  const mint = async (secret: string): Promise<string> => {
    await cp.kubectl(['create', 'secret', 'generic', secret, '-n', 'default']);
    return (
      await cp.kubectl(['create', 'token', 'plugin-user', '-n', 'default', '--bound-object-kind', 'Secret', '--bound-object-name', secret, '--duration', '1h'])
    ).trim();
  };

  before(async () => {
    clientCertificates(dir);
    cp = await startControlPlane({ apiserverArgs: [`--client-ca-file=${join(dir, 'ca.crt')}`] });
    await cp.kubectl(['create', 'serviceaccount', 'plugin-user', '-n', 'default']);
    await cp.kubectl(['create', 'clusterrolebinding', 'plugin-user', '--clusterrole', 'cluster-admin', '--serviceaccount', 'default:plugin-user']);
    writeFileSync(join(dir, 'plugin.sh'), PLUGIN);
    chmodSync(join(dir, 'plugin.sh'), 0o755);
  });
  after(async () => {
    await cp?.stop();
  });

  test('exec plugin: one run for 20 concurrent requests, cached until expirationTimestamp, run again after a 401', async () => {
    const pluginDir = join(dir, 'plugin');
    mkdirSync(pluginDir, { recursive: true });
    const first = await mint('bind-1');
    writeFileSync(join(pluginDir, 'token'), first);
    const expiresAt = Date.now() + 3_600_000;
    writeFileSync(join(pluginDir, 'expiry'), new Date(expiresAt).toISOString());
    const kubeconfig = join(dir, 'exec.kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'exec',
        clusters: [cluster()],
        users: [
          {
            name: 'plugin',
            user: {
              exec: {
                apiVersion: 'client.authentication.k8s.io/v1',
                command: './plugin.sh',
                args: [],
                provideClusterInfo: true,
                env: [{ name: 'PLUGIN_DIR', value: pluginDir }],
                interactiveMode: 'Never',
              },
            },
          },
        ],
        contexts: [{ name: 'exec', context: { cluster: 'test', user: 'plugin' } }],
      }),
    );
    let now = Date.now();
    const client = createKubeClient(await loadKubeconfigFile(kubeconfig), { tokens: { now: () => now } });
    try {
      await Promise.all(Array.from({ length: 20 }, () => client.list(CONFIG_MAPS, 'default')));
      assert.equal(runs(pluginDir), 1, 'one run for 20 concurrent requests');
      const info = JSON.parse(readFileSync(join(pluginDir, 'exec-info'), 'utf8')) as {
        apiVersion: string;
        kind: string;
        spec: { interactive: boolean; cluster?: { server: string; 'certificate-authority-data': string } };
      };
      assert.equal(info.apiVersion, 'client.authentication.k8s.io/v1');
      assert.equal(info.kind, 'ExecCredential');
      assert.equal(info.spec.interactive, false);
      assert.equal(info.spec.cluster?.server, cp.server);
      assert.equal(Buffer.from(info.spec.cluster['certificate-authority-data'], 'base64').toString(), cp.caCert);
      assert.equal(await whoami(client), SA_USER);

      for (let i = 0; i < 5; i++) await client.list(CONFIG_MAPS, 'default');
      assert.equal(runs(pluginDir), 1, 'cached while not expired');
      now = expiresAt + 1;
      writeFileSync(join(pluginDir, 'expiry'), new Date(expiresAt + 7_200_000).toISOString());
      await client.list(CONFIG_MAPS, 'default');
      assert.equal(runs(pluginDir), 2, 'run again once expired');

      // Revoke the cached token (its bound Secret goes); the plugin now hands out another one.
      const second = await mint('bind-2');
      writeFileSync(join(pluginDir, 'token'), second);
      await cp.kubectl(['delete', 'secret', 'bind-1', '-n', 'default']);
      // The API server caches successful authentications for a few seconds: wait until it refuses.
      while ((await statusWithToken(cp, first)) !== 401) await sleep(250);
      await client.list(CONFIG_MAPS, 'default');
      assert.equal(runs(pluginDir), 3, 'one more run after the 401');
      assert.equal(await whoami(client), SA_USER);
      assert.equal(runs(pluginDir), 3);
    } finally {
      client.close();
    }
  });

  test('$KUBECONFIG of two files merged, --context, tokenFile and client certificates (files and -data)', async () => {
    const token = await mint('bind-file');
    writeFileSync(join(dir, 'sa-token'), `${token}\n`);
    const users = join(dir, 'users.kubeconfig');
    // The first file: current-context, the contexts and the users (paths relative to it); the second: the cluster.
    writeFileSync(
      users,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'by-file',
        users: [
          { name: 'file', user: { tokenFile: 'sa-token' } },
          { name: 'cert-files', user: { 'client-certificate': 'client.crt', 'client-key': 'client.key' } },
          {
            name: 'cert-data',
            user: {
              'client-certificate-data': readFileSync(join(dir, 'client.crt')).toString('base64'),
              'client-key-data': readFileSync(join(dir, 'client.key')).toString('base64'),
            },
          },
        ],
        contexts: [
          { name: 'by-file', context: { cluster: 'test', user: 'file' } },
          { name: 'by-cert', context: { cluster: 'test', user: 'cert-files' } },
          { name: 'by-data', context: { cluster: 'test', user: 'cert-data' } },
        ],
      }),
    );
    const clusters = join(dir, 'clusters.kubeconfig');
    writeFileSync(
      clusters,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'by-data',
        clusters: [cluster()],
        users: [{ name: 'file', user: { token: 'not-this-one' } }],
      }),
    );
    const env = { KUBECONFIG: `${users}:${join(dir, 'absent')}:${clusters}`, HOME: dir };
    const as = async (argv: string[]): Promise<string> => {
      const config = parseOperatorArgs([...argv, '--image', 'reg.example/pglog:1'], env);
      const client = createKubeClient(await loadKubeAccess(config.kube));
      try {
        return await whoami(client);
      } finally {
        client.close();
      }
    };
    assert.equal(await as([]), SA_USER, 'current-context of the first file, its tokenFile');
    assert.equal(await as(['--context', 'by-cert']), 'pglog-cert-user');
    assert.equal(await as(['--context', 'by-data']), 'pglog-cert-user');
  });

  /** Runs the real `pglog operator` with only `env` until it holds the Lease as `identity`, then stops it. */
  async function operatorTakesLease(args: string[], env: Record<string, string>, identity: string): Promise<void> {
    const child = spawn(
      PGLOG,
      [
        'operator',
        ...args,
        '--namespace',
        'default',
        '--lease-namespace',
        'default',
        '--identity',
        identity,
        '--image',
        'registry.invalid/pglog:test',
        '--listen',
        `127.0.0.1:${await freePort()}`,
        '--lease-duration',
        '4',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env },
    );
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
    });
    child.stderr.on('data', (b: Buffer) => {
      out += b.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const forget = onProcessExit(() => child.kill('SIGKILL'));
    try {
      for (;;) {
        const holder = await cp.kubectl(['get', 'lease', 'pglog-operator', '-n', 'default', '-o', 'jsonpath={.spec.holderIdentity}']).catch(() => '');
        if (holder === identity) break;
        assert.equal(child.exitCode, null, `pglog operator exited: ${out}`);
        await sleep(200);
      }
    } finally {
      child.kill('SIGTERM');
      await exited;
      forget();
    }
  }

  test('pglog operator as users run it: $KUBECONFIG with --context to an exec plugin, which gets the environment; then ~/.kube/config', async () => {
    const pluginDir = join(dir, 'cli-plugin');
    mkdirSync(pluginDir, { recursive: true });
    writeFileSync(join(pluginDir, 'token'), await mint('bind-cli'));
    writeFileSync(join(pluginDir, 'expiry'), new Date(Date.now() + 3_600_000).toISOString());
    const users = join(dir, 'cli-users.kubeconfig');
    writeFileSync(
      users,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'nothing-here',
        users: [
          {
            name: 'plugin',
            user: {
              exec: {
                apiVersion: 'client.authentication.k8s.io/v1',
                command: join(dir, 'plugin.sh'),
                env: [{ name: 'PLUGIN_DIR', value: pluginDir }],
              },
            },
          },
        ],
        contexts: [{ name: 'by-exec', context: { cluster: 'test', user: 'plugin' } }],
      }),
    );
    const clusters = join(dir, 'cli-clusters.kubeconfig');
    writeFileSync(clusters, JSON.stringify({ apiVersion: 'v1', kind: 'Config', clusters: [cluster()] }));
    const base = { PATH: process.env['PATH'] ?? '/usr/bin:/bin' };
    await operatorTakesLease(['--context', 'by-exec'], { ...base, KUBECONFIG: `${users}:${clusters}`, PGLOG_TEST_MARK: 'from-the-environment' }, 'via-exec');
    assert.ok(runs(pluginDir) >= 1);
    assert.equal(readFileSync(join(pluginDir, 'mark'), 'utf8'), 'from-the-environment', 'the plugin runs with the environment pglog got');

    const home = join(dir, 'home');
    mkdirSync(join(home, '.kube'), { recursive: true });
    writeFileSync(join(home, 'sa-token'), await mint('bind-home'));
    writeFileSync(
      join(home, '.kube', 'config'),
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'home',
        clusters: [cluster()],
        users: [{ name: 'home', user: { tokenFile: join(home, 'sa-token') } }],
        contexts: [{ name: 'home', context: { cluster: 'test', user: 'home' } }],
      }),
    );
    await operatorTakesLease([], { ...base, HOME: home }, 'via-home');
  });
});
