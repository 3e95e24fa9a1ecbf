// One command run to its end with both output streams collected, for tests that look at the
// exit code and stderr themselves (helm, kubectl, `pglog` with probe flags) rather than take a
// rejection for a non-zero exit.
import { spawn } from 'node:child_process';

export interface CommandResult {
  /** The exit code; -1 when the command was ended by a signal. */
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunCommandOptions {
  /** Written to the command's stdin, which is then closed (default: nothing). */
  readonly stdin?: string;
  /** The command's environment (default: this process's). */
  readonly env?: NodeJS.ProcessEnv;
}

/** Runs `command args` and resolves with its exit code and output; rejects only when it cannot be started. */
export function runCommand(command: string, args: readonly string[], options: RunCommandOptions = {}): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    // Kept as bytes and decoded once at the end: a character split across two chunks stays whole.
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
    // A command that exits without reading its input (helm, diff) must not fail the write.
    child.stdin.on('error', () => {});
    child.stdin.end(options.stdin ?? '');
  });
}
