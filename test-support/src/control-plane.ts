// A real Kubernetes control plane for the operator's tests: etcd (Debian's etcd-server),
// kube-apiserver and, when asked, kube-controller-manager, built by
// scripts/install-kube-tools.sh (`make test` runs it and passes the bin directory in
// PGLOG_KUBE_BIN). Everything listens on 127.0.0.1 on free ports, in a private directory,
// with a bearer token in the system:masters group; it is all stopped and removed by stop()
// and on process exit.
import { type ChildProcess, execFile } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { ChildGroup } from './child-group.ts';
import { onProcessExit } from './exit-cleanup.ts';
import { runCommand } from './run-command.ts';
import { freePort, sleep } from './wait.ts';

const run = promisify(execFile);

export interface ControlPlane {
  /** https://127.0.0.1:PORT (or the bindAddress option) */
  readonly server: string;
  /** Bearer token of a cluster admin (group system:masters). */
  readonly token: string;
  /** A kubeconfig file for that admin (TLS verified against the apiserver's own certificate). */
  readonly kubeconfig: string;
  /** The apiserver's serving certificate (PEM), to trust in clients. */
  readonly caCert: string;
  /** Runs kubectl against this control plane; resolves with stdout, rejects with stderr. */
  kubectl(args: readonly string[], stdin?: string): Promise<string>;
  /** Everything the components logged, for failure messages. */
  logs(): string;
  stop(): Promise<void>;
}

export interface ControlPlaneOptions {
  /** Also run kube-controller-manager (StatefulSets, garbage collection, ...). Default false. */
  controllerManager?: boolean;
  /**
   * More kube-apiserver flags, e.g. `--watch-cache=false` with `--etcd-compaction-interval=5s`
   * so that a watch from an old resourceVersion reaches etcd and gets 410 Gone within seconds.
   */
  apiserverArgs?: readonly string[];
  /**
   * More kube-controller-manager flags (with `controllerManager: true`), e.g.
   * `--horizontal-pod-autoscaler-sync-period=2s`.
   */
  controllerManagerArgs?: readonly string[];
  /**
   * The address kube-apiserver listens on and advertises (default 127.0.0.1). A real node's
   * pods reach it through the `kubernetes` Service, whose endpoint cannot be a loopback
   * address: real-node.ts passes the node's bridge address, which only this machine has.
   */
  bindAddress?: string;
  /** kube-apiserver's --service-cluster-ip-range (default 10.0.0.0/24). */
  serviceRange?: string;
}

/** kubectl with this kubeconfig: stdout and stderr (warnings arrive there); rejects with stderr on a non-zero exit. */
export async function runKubectl(kubeconfig: string, args: readonly string[], stdin?: string): Promise<{ stdout: string; stderr: string }> {
  const r = await runCommand(join(kubeBin(), 'kubectl'), ['--kubeconfig', kubeconfig, ...args], { stdin });
  if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: exit ${r.code}: ${r.stderr.trim()}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

/** The bin directory of the built tools: PGLOG_KUBE_BIN, or the default cache location. */
export function kubeBin(): string {
  return process.env['PGLOG_KUBE_BIN'] ?? join(process.env['HOME'] ?? '/root', '.cache/pglog/kube/v1.37.2/bin');
}

/** A child of the control plane ended while we waited for it (or another) to be ready. */
class ChildExited extends Error {}

/**
 * Polls `url` until it answers. Fails at once when one of `group`'s children has exited (a
 * port taken between freePort() and the child's listen, a bad flag), with that child's output.
 */
async function waitReady(url: string, token: string, what: string, group: ChildGroup, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await run('curl', ['-fsk', '--max-time', '2', ...(token === '' ? [] : ['-H', `Authorization: Bearer ${token}`]), url]);
      return;
    } catch {
      const exited = group.exited();
      if (exited !== null) throw new ChildExited(`${what} not ready: ${exited.name} ${exited.how}:\n${group.logsOf(exited.name).slice(-4000)}`);
      if (Date.now() > deadline) throw new Error(`${what} not ready after ${timeoutMs} ms:\n${group.logs().slice(-4000)}`);
      await sleep(250);
    }
  }
}

/** Attempts at etcd on fresh ports: another process may take a port freePort() found free. */
const ETCD_ATTEMPTS = 3;

/**
 * Starts etcd in `group` and waits until it is healthy; on fresh ports again when it exits
 * first. Resolves with its client URL.
 */
async function startEtcd(group: ChildGroup, dir: string): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    const [clientPort, peerPort] = [await freePort(), await freePort()];
    const client = `http://127.0.0.1:${clientPort}`;
    const peer = `http://127.0.0.1:${peerPort}`;
    const etcd = group.start('etcd', 'etcd', [
      '--data-dir',
      join(dir, `etcd-${attempt}`),
      '--name',
      'pglog-test',
      '--listen-client-urls',
      client,
      '--advertise-client-urls',
      client,
      '--listen-peer-urls',
      peer,
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster',
      `pglog-test=${peer}`,
      '--unsafe-no-fsync',
    ]);
    try {
      await waitReady(`${client}/health`, '', 'etcd', group, 30_000);
      return client;
    } catch (e) {
      group.remove(etcd);
      if (!(e instanceof ChildExited) || attempt === ETCD_ATTEMPTS) throw e;
    }
  }
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const bin = kubeBin();
  const bindAddress = options.bindAddress ?? '127.0.0.1';
  const dir = mkdtempSync(join(tmpdir(), 'pglog-kube-'));
  const [apiPort, kcmPort] = [await freePort(), await freePort()];
  const token = randomBytes(24).toString('hex');
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(join(dir, 'tokens.csv'), `${token},pglog-test-admin,pglog-test-admin,system:masters\n`, { mode: 0o600 });
  const group = new ChildGroup(dir, 2000);
  const start = (name: string, command: string, args: string[]): ChildProcess => group.start(name, command, args);
  const kill = (): void => group.killAll();
  const forget = onProcessExit(() => {
    kill();
    rmSync(dir, { recursive: true, force: true });
  });
  const logs = (): string => group.logs();
  try {
    const etcd = await startEtcd(group, dir);
    start('kube-apiserver', join(bin, 'kube-apiserver'), [
      `--etcd-servers=${etcd}`,
      `--secure-port=${apiPort}`,
      `--bind-address=${bindAddress}`,
      // No kubernetes.default endpoint to maintain when on loopback (a loopback address may not
      // be advertised); otherwise the endpoint pods reach through the Service's ClusterIP.
      ...(bindAddress === '127.0.0.1' ? ['--endpoint-reconciler-type=none'] : [`--advertise-address=${bindAddress}`]),
      `--cert-dir=${join(dir, 'certs')}`,
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--authorization-mode=RBAC',
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      `--service-cluster-ip-range=${options.serviceRange ?? '10.0.0.0/24'}`,
      ...(options.apiserverArgs ?? []),
    ]);
    const server = `https://${bindAddress}:${apiPort}`;
    await waitReady(`${server}/readyz`, token, 'kube-apiserver', group);
    const caCert = readFileSync(join(dir, 'certs', 'apiserver.crt'), 'utf8');
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'test',
        clusters: [
          { name: 'test', cluster: { server, 'certificate-authority-data': Buffer.from(caCert).toString('base64'), 'tls-server-name': 'kubernetes' } },
        ],
        users: [{ name: 'admin', user: { token } }],
        contexts: [{ name: 'test', context: { cluster: 'test', user: 'admin', namespace: 'default' } }],
      }),
      { mode: 0o600 },
    );
    if (options.controllerManager === true) {
      start('kube-controller-manager', join(bin, 'kube-controller-manager'), [
        `--kubeconfig=${kubeconfig}`,
        `--authentication-kubeconfig=${kubeconfig}`,
        `--authorization-kubeconfig=${kubeconfig}`,
        `--secure-port=${kcmPort}`,
        '--bind-address=127.0.0.1',
        '--leader-elect=false',
        `--service-account-private-key-file=${join(dir, 'sa.key')}`,
        '--use-service-account-credentials=false',
        '--controllers=*',
        '--cluster-cidr=10.1.0.0/16',
        '--allocate-node-cidrs=false',
        ...(options.controllerManagerArgs ?? []),
      ]);
      await waitReady(`https://127.0.0.1:${kcmPort}/healthz`, token, 'kube-controller-manager', group);
    }
    const kubectl = async (args: readonly string[], stdin?: string): Promise<string> => (await runKubectl(kubeconfig, args, stdin)).stdout;
    let stopped = false;
    return {
      server,
      token,
      kubeconfig,
      caCert,
      kubectl,
      logs,
      async stop() {
        if (stopped) return;
        stopped = true;
        await group.stop();
        forget();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (e) {
    kill();
    forget();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
}
