// Runs the real `pglog operator` CLI as a child process against a test control plane, with a
// short Lease so leader hand-over fits in a test. Its log lines are kept for failure messages.
import { type ChildProcess, spawn } from 'node:child_process';

import { PGLOG } from '@pglog/test-support/cli.ts';
import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import { freePort } from '@pglog/test-support/wait.ts';

export interface OperatorProcess {
  readonly identity: string;
  readonly child: ChildProcess;
  readonly metricsUrl: string;
  output(): string;
  /** SIGTERM and wait for exit (the Lease is released). */
  stop(): Promise<number | null>;
  /** SIGKILL: no release, the Lease expires. */
  kill(): Promise<void>;
}

/** `namespace` holds the Lease and is the one watched, unless `allNamespaces` (then every namespace is). */
export async function startOperator(options: {
  kubeconfig: string;
  namespace: string;
  identity: string;
  leaseSeconds?: number;
  allNamespaces?: boolean;
  extraArgs?: string[];
  /** `--allowed-store-secrets`: the store Secrets the test's pools name (default `store`, test-support/src/fleet.ts's). */
  storeSecrets?: readonly string[];
  /** Another `pglog` launcher (a checkout of another commit, for a benchmark's baseline). */
  pglog?: string;
}): Promise<OperatorProcess> {
  const port = await freePort();
  const child = spawn(
    options.pglog ?? PGLOG,
    [
      'operator',
      '--kubeconfig',
      options.kubeconfig,
      ...(options.allNamespaces === true ? [] : ['--namespace', options.namespace]),
      '--lease-namespace',
      options.namespace,
      '--identity',
      options.identity,
      '--image',
      'registry.invalid/pglog:test',
      '--allowed-store-secrets',
      (options.storeSecrets ?? ['store']).join(','),
      '--listen',
      `127.0.0.1:${port}`,
      '--lease-duration',
      String(options.leaseSeconds ?? 4),
      '--resync',
      '5',
      '--log-level',
      'debug',
      ...(options.extraArgs ?? []),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const unregister = onProcessExit(() => child.kill('SIGKILL'));
  return {
    identity: options.identity,
    child,
    metricsUrl: `http://127.0.0.1:${port}/metrics`,
    output: () => out,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const code = await exited;
      unregister();
      return code;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      unregister();
    },
  };
}
