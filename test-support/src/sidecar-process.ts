// The `pglog sshproxy` sidecar as a child process, for the collector's tests and the benchmarks:
// started on a directory with its output kept, and the entry the collector writes for a test sshd.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import type { SidecarServer } from '@pglog/collector/transport/sidecar-client.ts';

import type { TestSshServer } from './sshd.ts';

const MAIN = fileURLToPath(new URL('../../cli/src/main.ts', import.meta.url));

export interface RunningSidecar {
  proc: ChildProcess;
  pid: number;
  /** What it wrote to stdout and stderr, interleaved (the last `keepChars` of it). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Debug logs and a short reconnect backoff: what the sidecar tests run it with. */
export const TEST_SIDECAR_ARGS = ['--log-level', 'debug', '--backoff-base-ms', '100', '--backoff-cap-ms', '400'];

/** `pglog sshproxy --dir DIR ...args`, run by this Node as the launcher would. */
export function launchSidecar(dir: string, args: string[], keepChars = Number.POSITIVE_INFINITY): RunningSidecar {
  const proc = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'sshproxy', '--dir', dir, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (s: string): void => {
    out += s;
    if (out.length > keepChars) out = out.slice(-keepChars);
  };
  proc.stdout.setEncoding('utf8').on('data', keep);
  proc.stderr.setEncoding('utf8').on('data', keep);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { proc, pid: proc.pid!, output: () => out, exited };
}

/** The sidecar's entry for `ssh` as `name`: its login, key and known_hosts, short keep-alive and connect timeouts; `over` replaces any. */
export function sidecarServer(ssh: TestSshServer, name: string, over: Partial<SidecarServer> = {}): SidecarServer {
  return {
    name,
    host: ssh.host,
    port: ssh.port,
    user: ssh.user,
    maxSessions: 10,
    serverAliveIntervalS: 2,
    connectTimeoutS: 5,
    privateKey: readFileSync(ssh.privateKeyFile),
    knownHosts: readFileSync(ssh.knownHostsFile, 'utf8'),
    ...over,
  };
}
