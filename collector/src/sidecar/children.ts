/**
 * The sidecar's child processes: each in a process group of its own (so a stream's shell and
 * the ssh it becomes are killed together, and a terminal's Ctrl-C reaches only the sidecar,
 * which then stops them in order), recorded in DIR/sidecar.pids while alive, with the tail of
 * their standard error kept for the error message.
 */
import { spawn } from 'node:child_process';

import type { PidsFile } from './sidecar-files.ts';

export interface ChildExit {
  code: number | null;
  /** Signal name (SIGTERM ...), when it ended by one. */
  signal: string | null;
  /** Why it could not be started at all (spawn failed). */
  spawnError?: string;
}

/** Standard error kept per child: its end, where ssh says why it exits. */
const STDERR_TAIL_BYTES = 8192;
/** After 'exit', how long to wait for the rest of standard error (a grandchild may hold the pipe). */
const STDERR_DRAIN_MS = 200;

export class Child {
  readonly pid: number;
  readonly exited: Promise<ChildExit>;
  private tail = '';
  private done = false;

  /** `onStderr` sees standard error as it comes (for lines worth logging while the child runs). */
  constructor(file: string, args: readonly string[], pids: PidsFile, onStderr?: (chunk: string) => void) {
    const proc = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    this.pid = proc.pid ?? -1;
    if (this.pid > 0) pids.add(this.pid);
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (chunk: string) => {
      this.tail += chunk;
      if (this.tail.length > 2 * STDERR_TAIL_BYTES) this.tail = this.tail.slice(-STDERR_TAIL_BYTES);
      onStderr?.(chunk);
    });
    this.exited = new Promise<ChildExit>((resolve) => {
      let exit: ChildExit | null = null;
      const finish = (): void => {
        if (this.done || exit === null) return;
        this.done = true;
        if (this.pid > 0) pids.delete(this.pid);
        resolve(exit);
      };
      proc.once('error', (e) => {
        // Only spawn failures matter here; kill() errors are ignored where they are sent.
        if (this.pid > 0) return;
        exit = { code: null, signal: null, spawnError: e.message };
        finish();
      });
      proc.once('exit', (code, signal) => {
        exit = { code, signal };
        setTimeout(finish, STDERR_DRAIN_MS).unref();
      });
      proc.once('close', finish);
    });
  }

  get running(): boolean {
    return !this.done && this.pid > 0;
  }

  /** The end of what it wrote to standard error. */
  get stderr(): string {
    return this.tail.slice(-STDERR_TAIL_BYTES);
  }

  /** Signals its whole process group. */
  signal(sig: NodeJS.Signals): void {
    if (!this.running) return;
    try {
      process.kill(-this.pid, sig);
    } catch {
      try {
        process.kill(this.pid, sig);
      } catch {
        /* already gone */
      }
    }
  }

  /** SIGTERM to the group, SIGKILL if it is still there after `graceMs`; resolves once it has exited. */
  async terminate(graceMs: number): Promise<ChildExit> {
    this.signal('SIGTERM');
    const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}
