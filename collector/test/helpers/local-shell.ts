/**
 * A RemoteShell that runs commands with `/bin/sh -c` on this machine: a real shell on real
 * files, so following can be tested without SSH. Like an SSH channel, closing it hangs up the
 * command's pipes; `hangup: 'kill'` (the default) also ends the command's whole process group
 * at once, `'pipes-only'` leaves the command to notice the closed pipe by itself (as a remote
 * command does when a channel closes: on its next write).
 */
import { type ChildProcess, spawn } from 'node:child_process';

import { PglogError } from '@pglog/common/errors.ts';

import type { RemoteExit, RemoteProcess, RemoteShell } from '../../src/transport/remote-shell.ts';

export interface LocalShellOptions {
  hangup?: 'kill' | 'pipes-only';
}

export class LocalShell implements RemoteShell {
  /** Every command started, in order (tests check that commands ended). */
  readonly commands: { command: string; child: ChildProcess; exit: Promise<RemoteExit> }[] = [];
  private readonly hangup: 'kill' | 'pipes-only';

  constructor(options: LocalShellOptions = {}) {
    this.hangup = options.hangup ?? 'kill';
  }

  spawn(command: string, options?: { signal?: AbortSignal | undefined }): Promise<RemoteProcess> {
    if (options?.signal?.aborted === true) return Promise.reject(new PglogError('SSH_CHANNEL_FAILED', 'local shell: aborted before the command started'));
    // detached: its own process group, so close() can end the script and its children together.
    const child = spawn('/bin/sh', ['-c', command], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const exit = new Promise<RemoteExit>((resolve) => {
      child.once('close', (code, signal) => resolve({ code, signal: signal === null ? null : signal.replace(/^SIG/, '') }));
    });
    this.commands.push({ command, child, exit });
    const hangup = this.hangup;
    let closed = false;
    return new Promise((resolve, reject) => {
      child.once('error', (e) => reject(new PglogError('SSH_CHANNEL_FAILED', `local shell: cannot start /bin/sh: ${e.message}`, { cause: e })));
      child.once('spawn', () =>
        resolve({
          stdout: child.stdout,
          stderr: child.stderr,
          exit,
          close(): void {
            if (closed) return;
            closed = true;
            child.stdout?.destroy();
            child.stderr?.destroy();
            if (hangup === 'kill' && child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
              try {
                process.kill(-child.pid, 'SIGTERM');
              } catch {
                /* already gone */
              }
            }
          },
        }),
      );
    });
  }
}
