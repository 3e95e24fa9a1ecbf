// A test host in a network namespace (needs root and iproute2): `ip netns add`, a veth pair
// with a private /30 (10.231.N.1 on the host side, 10.231.N.2 inside), loopback up inside.
// Processes started with run() live in the namespace; their address is reachable from the
// host (and from a kube-apiserver on the host) and, unlike a loopback address, may be an
// Endpoints/EndpointSlice address. dispose() (and process exit) kills those processes and
// deletes the namespace, which deletes both ends of the veth pair. A namespace's name holds
// the creating process's pid (pglog-t-PID-XXXX): one left behind by a test process killed by a
// signal (no exit hooks run) is removed, with its processes, by the next createNetnsHost().
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';

import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';

export interface NetnsHost {
  /** The namespace's name, e.g. pglog-t-1234-1a2b3c. */
  readonly name: string;
  /** The address inside the namespace (10.231.N.2). */
  readonly address: string;
  /** The host end's address (10.231.N.1). */
  readonly hostAddress: string;
  /** Starts `command args` inside the namespace (stdout and stderr piped). */
  run(command: string, args: readonly string[], env?: NodeJS.ProcessEnv): ChildProcess;
  /** Kills the processes it started and deletes the namespace and the veth pair. */
  dispose(): Promise<void>;
}

const ip = (args: readonly string[]): string => execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** A /30 of 10.231.0.0/16 that no interface of this host uses. */
function freeSubnet(): number {
  const used = ip(['-o', '-4', 'addr', 'show']);
  for (let i = 0; i < 64; i++) {
    const n = randomBytes(1)[0]!;
    if (!used.includes(`10.231.${n}.`)) return n;
  }
  throw new Error('netns: no free 10.231.N.0/30');
}

function deleteNamespace(name: string, hostIf?: string): void {
  try {
    ip(['netns', 'del', name]);
  } catch {
    /* already gone */
  }
  if (hostIf !== undefined)
    try {
      ip(['link', 'del', hostIf]);
    } catch {
      /* gone with the namespace */
    }
}

/** Namespaces of test processes that are gone: their processes killed, the namespaces deleted (their veth pairs go with them). */
function sweepStale(): void {
  for (const line of ip(['netns', 'list']).split('\n')) {
    const m = /^(pglog-t-(\d+)-[0-9a-f]+)\b/.exec(line);
    if (m === null || existsSync(`/proc/${m[2]}`)) continue;
    try {
      for (const pid of ip(['netns', 'pids', m[1]!])
        .split('\n')
        .filter((x) => /^\d+$/.test(x))) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    } catch {
      /* deleted meanwhile */
    }
    deleteNamespace(m[1]!);
  }
}

export function createNetnsHost(): NetnsHost {
  sweepStale();
  const id = randomBytes(3).toString('hex');
  const name = `pglog-t-${process.pid}-${id}`;
  // Interface names: at most 15 bytes.
  const hostIf = `pgh${id}`;
  const nsIf = `pgn${id}`;
  const n = freeSubnet();
  const hostAddress = `10.231.${n}.1`;
  const address = `10.231.${n}.2`;
  const children: ChildProcess[] = [];
  const kill = (): void => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  const forget = onProcessExit(() => {
    kill();
    deleteNamespace(name, hostIf);
  });
  try {
    ip(['netns', 'add', name]);
    ip(['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf]);
    ip(['link', 'set', nsIf, 'netns', name]);
    ip(['addr', 'add', `${hostAddress}/30`, 'dev', hostIf]);
    ip(['link', 'set', hostIf, 'up']);
    ip(['-n', name, 'addr', 'add', `${address}/30`, 'dev', nsIf]);
    ip(['-n', name, 'link', 'set', nsIf, 'up']);
    ip(['-n', name, 'link', 'set', 'lo', 'up']);
  } catch (e) {
    forget();
    deleteNamespace(name, hostIf);
    throw e;
  }
  let disposed = false;
  return {
    name,
    address,
    hostAddress,
    run(command, args, env) {
      // `ip netns exec` execs the command: the child's pid is the command's.
      const child = spawn('ip', ['netns', 'exec', name, command, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
      children.push(child);
      return child;
    },
    async dispose() {
      if (disposed) return;
      disposed = true;
      const exits = children.map((c) =>
        c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => c.once('exit', () => r())),
      );
      for (const c of children) c.kill('SIGTERM');
      const timer = setTimeout(kill, 3000);
      await Promise.all(exits);
      clearTimeout(timer);
      deleteNamespace(name, hostIf);
      forget();
    },
  };
}
