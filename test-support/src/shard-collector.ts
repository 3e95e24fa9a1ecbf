// Cluster mode's collector as a pod runs it, started by a test (there is no kubelet): the real
// `pglog collect --shard NAME` launcher against a test control plane (kubeconfig), the store
// URL in PGLOG_STORE_URL as the pod's secretKeyRef sets it, POD_NAME as the downward API does.
// Its output goes to a file, for its JSON records and for failure messages. Also the
// PostgresTarget of a test log server as a user writes it in the cluster.
import { spawn } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';

import { PGLOG } from './cli.ts';
import { jsonRecords, readOutput } from './collector-process.ts';
import type { LogServer } from './log-server.ts';
import type { TestSshServer } from './sshd.ts';

export interface ShardCollector {
  readonly shard: string;
  /** The launcher's pid (its collector child and sidecar are below it). */
  readonly pid: number;
  output(): string;
  /** The JSON log records of the launcher and its children. */
  records(): Array<Record<string, unknown>>;
  /** Pids of the collector children the launcher started, in order. */
  childPids(): number[];
  /** The last `lines` lines of the output. */
  tail(lines?: number): string;
  readonly exited: Promise<number | null>;
  /** SIGTERM to the launcher; resolves with its exit status. */
  stop(): Promise<number | null>;
}

export interface ShardCollectorOptions {
  shard: string;
  kubeconfig: string;
  namespace: string;
  storeUrl: string;
  /** Directory for the output file `<shard>.log`. */
  dir: string;
  /** More `pglog collect` options. */
  extraArgs?: readonly string[];
}

export function launchShardCollector(options: ShardCollectorOptions): ShardCollector {
  const { shard } = options;
  const file = join(options.dir, `${shard}.log`);
  const child = spawn(
    PGLOG,
    [
      'collect',
      '--shard',
      shard,
      '--kubeconfig',
      options.kubeconfig,
      '--namespace',
      options.namespace,
      '--listen',
      'off',
      '--log-level',
      'debug',
      '--status-interval',
      '2',
      '--resolve-interval',
      '5',
      '--batch-ms',
      '200',
      ...(options.extraArgs ?? []),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PGLOG_STORE_URL: options.storeUrl, POD_NAME: `pod-${shard}` } },
  );
  child.stdout.on('data', (b: Buffer) => appendFileSync(file, b));
  child.stderr.on('data', (b: Buffer) => appendFileSync(file, b));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const output = (): string => readOutput(file);
  const records = (): Array<Record<string, unknown>> => jsonRecords(output());
  return {
    shard,
    pid: child.pid!,
    output,
    records,
    childPids: () => [
      ...new Set(
        records()
          .filter((r) => typeof r['msg'] === 'string' && r['msg'].startsWith('pglog collect starting for CollectorShard'))
          .map((r) => Number(r['pid'])),
      ),
    ],
    tail: (lines = 40) => output().split('\n').slice(-lines).join('\n'),
    exited,
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** A PostgresTarget (cluster form: the key in the Secret `secret`) for a log server reached through the test sshd. */
export function logServerTarget(
  name: string,
  secret: string,
  ssh: TestSshServer,
  server: LogServer,
  extraSpec: Record<string, unknown> = {},
  extraInstance: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name },
    spec: {
      host: ssh.host,
      port: ssh.port,
      user: ssh.user,
      ssh: { secretRef: { name: secret } },
      transport: 'auto',
      instances: [
        { name: 'main', dataDirectory: server.dataDirectory, logDirectory: server.logDirectory, logLinePrefix: '%m [%p] %q%u@%d ', ...extraInstance },
      ],
      ...extraSpec,
    },
  };
}
