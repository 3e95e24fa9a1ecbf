// Runs the real `pglog` launcher as a child process, the way users run it.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const PGLOG = fileURLToPath(new URL('../../cli/bin/pglog', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `input` is written to the child's stdin (a Buffer, or a generator of chunks for big inputs). */
export function runPglog(args: string[], input?: Buffer | (() => Iterable<Buffer>)): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(PGLOG, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
    child.stdin.on('error', () => {
      /* the child may exit before reading everything */
    });
    if (input === undefined) {
      child.stdin.end();
    } else if (Buffer.isBuffer(input)) {
      child.stdin.end(input);
    } else {
      const chunks = input()[Symbol.iterator]();
      const pump = (): void => {
        for (let next = chunks.next(); next.done !== true; next = chunks.next()) {
          if (!child.stdin.write(next.value)) {
            child.stdin.once('drain', pump);
            return;
          }
        }
        child.stdin.end();
      };
      pump();
    }
  });
}
