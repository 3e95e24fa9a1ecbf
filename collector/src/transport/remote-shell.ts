/**
 * The one interface between log following (and later SQL over SSH) and how bytes reach the
 * collector. The in-process ssh2 transport implements it now; the sshproxy sidecar transport
 * (a FIFO fed by OpenSSH) implements it next, so nothing above this file knows which one runs.
 */
import type { Readable } from 'node:stream';

/** How a remote command ended. */
export interface RemoteExit {
  /** Exit status, or null when the command was ended by a signal or the channel closed without one. */
  code: number | null;
  /** Signal name (without `SIG`) when the remote process was killed by one, else null. */
  signal: string | null;
}

/** A command running on a server. */
export interface RemoteProcess {
  /**
   * The command's standard output as raw bytes. Backpressure is end to end: while this stream
   * is paused or its buffer is full, the transport stops granting the remote side room to send
   * (the SSH window is withheld once the bytes held reach it, ssh-window.ts; a FIFO fills), so
   * the remote command blocks.
   */
  readonly stdout: Readable;
  /** The command's standard error (small: diagnostics). */
  readonly stderr: Readable;
  /**
   * Settles once the command has ended and stdout has been fully delivered: resolves with how
   * it ended, rejects with a PglogError (SSH_TIMEOUT, SSH_CONNECT_FAILED, ...) when the
   * connection was lost under it.
   */
  readonly exit: Promise<RemoteExit>;
  /** Ends the command early (closes the channel, which hangs up the remote process). Idempotent. */
  close(): void;
}

/** A server on which commands can be run. */
export interface RemoteShell {
  /**
   * Starts `command` with the login shell of the SSH user. Waits for a free session slot when
   * the server's session limit is reached and for the connection when it is being
   * (re)established. Rejects with a PglogError with an SSH_* code when the command cannot be
   * started, or when `signal` aborts first.
   */
  spawn(command: string, options?: { signal?: AbortSignal | undefined }): Promise<RemoteProcess>;
}

/** Runs a short command and collects its output (probes, not log streams). */
export async function runRemote(
  shell: RemoteShell,
  command: string,
  options?: { signal?: AbortSignal | undefined; maxBytes?: number },
): Promise<{ stdout: Buffer; stderr: string; exit: RemoteExit }> {
  const max = options?.maxBytes ?? 4 * 1024 * 1024;
  const proc = await shell.spawn(command, options);
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let outBytes = 0;
  let errBytes = 0;
  proc.stdout.on('data', (b: Buffer) => {
    outBytes += b.length;
    if (outBytes <= max) out.push(b);
    else proc.close();
  });
  proc.stderr.on('data', (b: Buffer) => {
    errBytes += b.length;
    if (errBytes <= 64 * 1024) err.push(b);
  });
  const exit = await proc.exit;
  return { stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString('utf8'), exit };
}
