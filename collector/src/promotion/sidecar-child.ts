/**
 * Standalone mode's sidecar: `pglog collect` runs `pglog sshproxy --dir DIR` as a child
 * process with a private directory, and starts it again (with backoff) when it ends. In a pod
 * the sidecar is the second container and the kubelet does this instead.
 *
 * The child is started while the collector's heap is still small (start-up), and again only
 * after it ended, so the cost of spawning from a big heap is paid rarely. Its JSON log lines
 * go to the same standard output as the collector's.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';

import type { Logger } from '@pglog/common/observability/logger.ts';
import { pause } from '@pglog/common/time/clock.ts';
import { backoffDelay } from '@pglog/common/time/retry.ts';

import type { CollectorMetrics } from '../observability/metrics.ts';
import { killStrayProcesses } from '../sidecar/sidecar-files.ts';
import type { SidecarClient } from '../transport/sidecar-client.ts';

export interface SidecarChildOptions {
  /** How to run this program: [node, ...node flags, main script]; `sshproxy --dir DIR` is appended. */
  command: readonly string[];
  client: SidecarClient;
  logLevel: string;
  /** Where the child's JSON log lines go (the collector's own log destination). */
  output: Writable;
  /** The directory is this process's private one: the child removes it when it stops. */
  privateDir: boolean;
  log: Logger;
  metrics: CollectorMetrics;
  /** The environment the child starts from (the process's); the store URL is withheld from it. */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Variables the sidecar child must not see: the store URL carries the store's password. */
const WITHHELD_FROM_SIDECAR = ['PGLOG_STORE_URL'];

/**
 * The environment of the sidecar child: what it would inherit, without the store URL. The
 * child and every ssh process it starts talk to remote servers and never to the store.
 */
export function sidecarChildEnv(inherited: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(inherited)) if (value !== undefined && !WITHHELD_FROM_SIDECAR.includes(name)) env[name] = value;
  return env;
}

/** A child that stayed up this long is considered healthy: its next failure retries quickly. */
const HEALTHY_AFTER_MS = 60_000;

export class SidecarChild {
  private readonly o: SidecarChildOptions;
  private readonly abort = new AbortController();
  private child: ChildProcess | null = null;
  private loop: Promise<void> | null = null;

  constructor(options: SidecarChildOptions) {
    this.o = options;
  }

  start(): void {
    this.loop ??= this.supervise();
  }

  private async supervise(): Promise<void> {
    const { command, client, log, metrics } = this.o;
    for (let attempt = 1; !this.abort.signal.aborted; attempt++) {
      const started = Date.now();
      const args = [...command.slice(1), 'sshproxy', '--dir', client.dir, '--log-level', this.o.logLevel, '--stop-on-stdin-eof'];
      if (this.o.privateDir) args.push('--remove-dir');
      const child = spawn(command[0]!, args, {
        // stdin: a pipe this process never writes to; the kernel closes it when this process
        // dies (even by SIGKILL), which stops the child and its ssh processes. stdout/stderr:
        // through this process, so an orphan never holds its supervisor's pipes.
        stdio: ['pipe', 'pipe', 'pipe'],
        // Its own process group, so that what it leaves behind can be ended with it.
        detached: true,
        // This process's environment minus the store URL (without one: inherited, in tests).
        ...(this.o.env === undefined ? {} : { env: sidecarChildEnv(this.o.env) }),
      });
      child.stdin.on('error', () => undefined);
      forwardLines(child.stdout, this.o.output);
      forwardLines(child.stderr, this.o.output);
      this.child = child;
      const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
        child.once('error', (error) => resolve({ code: null, signal: null, error }));
        child.once('exit', (code, signal) => resolve({ code, signal }));
      });
      log.info({ pid: child.pid, dir: client.dir }, `sshproxy sidecar started (pid ${child.pid ?? '?'})`);
      const how = await ended;
      this.child = null;
      killGroup(child.pid);
      // Its stream shells and ssh clients live in process groups of their own: a sidecar that
      // was killed leaves them behind (a new one on the same directory would clean up too).
      const strays = await killStrayProcesses(client.dir).catch(() => []);
      if (strays.length > 0) log.warn({ pids: strays }, `ended ${strays.length} processes the sshproxy sidecar left behind`);
      if (this.abort.signal.aborted) return;
      client.markGone();
      metrics.sidecarProcessRestart();
      if (Date.now() - started > HEALTHY_AFTER_MS) attempt = 1;
      const delay = backoffDelay(attempt, 500, 30_000);
      const why = how.error !== undefined ? how.error.message : how.signal !== null ? `killed by ${how.signal}` : `exit status ${how.code ?? '?'}`;
      log.error(
        { code: 'SIDECAR_UNAVAILABLE', exitCode: how.code, signal: how.signal, retryInMs: delay },
        `sshproxy sidecar ended (${why}); its streams resume from their committed offsets; starting it again in ${delay} ms`,
      );
      await pause(delay, this.abort.signal);
    }
  }

  /** Stops the sidecar (TERM, then KILL after `graceMs`) and waits for it. */
  async stop(graceMs = 2000): Promise<void> {
    this.abort.abort();
    const child = this.child;
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => killGroup(child.pid), graceMs);
      await exited;
      clearTimeout(timer);
    }
    await this.loop;
  }
}

/** SIGKILLs a process group that may already be gone. */
function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}

/** Copies whole lines only, so the child's log lines never interleave mid-line with ours. */
function forwardLines(from: Readable, to: Writable): void {
  let pending: Buffer[] = [];
  from.on('data', (chunk: Buffer) => {
    const end = chunk.lastIndexOf(10);
    if (end < 0) {
      pending.push(chunk);
      return;
    }
    to.write(pending.length === 0 ? chunk.subarray(0, end + 1) : Buffer.concat([...pending, chunk.subarray(0, end + 1)]));
    pending = end + 1 < chunk.length ? [chunk.subarray(end + 1)] : [];
  });
  from.on('end', () => {
    if (pending.length > 0) to.write(Buffer.concat([...pending, Buffer.from('\n')]));
    pending = [];
  });
}
