/**
 * Standalone mode's sidecar: `pglog collect` runs `pglog sshproxy --dir DIR` as a child
 * process with a private directory, and starts it again (with backoff) when it ends. In a pod
 * the sidecar is the second container and the kubelet does this instead.
 *
 * The child is started while the collector's heap is still small (start-up), and again only
 * after it ended, so the cost of spawning from a big heap is paid rarely. Its JSON log lines
 * go to the same standard output as the collector's.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from '../observability/logger.ts';
import type { CollectorMetrics } from '../observability/metrics.ts';
import type { SidecarClient } from '../transport/sidecar-client.ts';
import { pause } from '../transport/clock.ts';
import { backoffDelay } from './retry.ts';

export interface SidecarChildOptions {
  /** How to run this program: [node, ...node flags, main script]; `sshproxy --dir DIR` is appended. */
  command: readonly string[];
  client: SidecarClient;
  logLevel: string;
  log: Logger;
  metrics: CollectorMetrics;
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
      const child = spawn(command[0]!, [...command.slice(1), 'sshproxy', '--dir', client.dir, '--log-level', this.o.logLevel], {
        stdio: ['ignore', 'inherit', 'inherit'],
        // Its own process group, so that what it leaves behind can be ended with it.
        detached: true,
      });
      this.child = child;
      const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: Error }>((resolve) => {
        child.once('error', (error) => resolve({ code: null, signal: null, error }));
        child.once('exit', (code, signal) => resolve({ code, signal }));
      });
      log.info({ pid: child.pid, dir: client.dir }, `sshproxy sidecar started (pid ${child.pid ?? '?'})`);
      const how = await ended;
      this.child = null;
      killGroup(child.pid);
      if (this.abort.signal.aborted) return;
      client.markGone();
      metrics.sidecarProcessRestart();
      if (Date.now() - started > HEALTHY_AFTER_MS) attempt = 1;
      const delay = backoffDelay(attempt, 500, 30_000);
      const why = how.error !== undefined ? how.error.message : how.signal !== null ? `killed by ${how.signal}` : `exit status ${how.code ?? '?'}`;
      log.error({ code: 'SIDECAR_UNAVAILABLE', exitCode: how.code, signal: how.signal, retryInMs: delay }, `sshproxy sidecar ended (${why}); its streams resume from their committed offsets; starting it again in ${delay} ms`);
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
