/**
 * One remote command on an ssh2 session channel, as a RemoteProcess.
 *
 * stdout is the channel itself, not a copy: the server is granted more window only as the
 * consumer reads (ssh-window.ts), so a paused consumer stops the remote writer once the
 * collector holds one window of its output (512 KiB by default); the rest waits in the
 * server's kernel buffers and its blocked write().
 *
 * stdin is deliberately left open (no EOF sent): ssh2 refuses to send a signal request on a
 * channel whose writable side has ended, and close() needs to send TERM. Commands run here
 * never read their standard input.
 */
import type { Readable } from 'node:stream';

import type { PglogError } from '@pglog/common/errors.ts';
import type { ClientChannel } from 'ssh2';

import type { RemoteExit, RemoteProcess } from './remote-shell.ts';

/** How long close() waits for the command to end on TERM before closing the channel. */
const HANG_UP_AFTER_MS = 1000;

export class SshRemoteProcess implements RemoteProcess {
  readonly stdout: Readable;
  readonly stderr: Readable;
  readonly exit: Promise<RemoteExit>;
  private readonly channel: ClientChannel;
  private readonly done: () => void;
  private exitInfo: RemoteExit | null = null;
  private settled = false;
  private closing = false;
  private hangUpTimer: NodeJS.Timeout | undefined;
  private resolveExit!: (exit: RemoteExit) => void;
  private rejectExit!: (error: PglogError) => void;

  /**
   * `done` runs once when the process is over for the connection (its session slot is free).
   * The channel must have gone through watchExit() synchronously in ssh2's exec callback.
   */
  constructor(channel: ClientChannel, done: () => void) {
    this.channel = channel;
    this.done = done;
    this.stdout = channel;
    this.stderr = channel.stderr;
    this.exit = new Promise<RemoteExit>((resolve, reject) => {
      this.resolveExit = resolve;
      this.rejectExit = reject;
    });
    // Callers that only read stdout must not crash the process with an unhandled rejection.
    this.exit.catch(() => undefined);
    // exit-status or exit-signal arrives after all of the command's output (same ordered
    // connection), so from here on no byte of it can be lost with the connection.
    this.exitInfo = earlyExits.get(channel) ?? null;
    channel.on('exit', (code: number | null, signal?: string) => {
      this.exitInfo = exitOf(code, signal);
    });
    // ssh2 emits 'close' only once stdout has ended (every byte handed to the consumer).
    channel.on('close', () => this.settle());
  }

  /** Whether the command has reported how it ended (all its output has arrived). */
  get finished(): boolean {
    return this.exitInfo !== null;
  }

  /**
   * Sends TERM (OpenSSH 7.9+ delivers it to the command, unless the login is root or the
   * command is forced); the server then reports the exit and closes the channel itself. A
   * command that outlives HANG_UP_AFTER_MS (the signal was refused, or arrived while sshd's
   * child was still between fork and exec) gets TERM again and the channel is closed, which
   * hangs it up: its next write fails. Nobody reads after close(), so both outputs are drained
   * to let the channel finish.
   */
  close(): void {
    if (this.closing || this.settled) return;
    this.closing = true;
    this.channel.signal('TERM');
    this.stdout.resume();
    this.stderr.resume();
    this.hangUpTimer = setTimeout(() => {
      this.channel.signal('TERM');
      this.channel.close();
    }, HANG_UP_AFTER_MS);
    this.hangUpTimer.unref();
  }

  /**
   * The connection under the command is gone. A command that had not finished fails with
   * `error`; one that had finished keeps its result (its stdout still ends normally).
   */
  fail(error: PglogError): void {
    if (this.settled || this.exitInfo !== null) return;
    this.settled = true;
    clearTimeout(this.hangUpTimer);
    this.rejectExit(error);
    this.done();
  }

  private settle(): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.hangUpTimer);
    this.resolveExit(this.exitInfo ?? { code: null, signal: null });
    this.done();
  }
}

function exitOf(code: number | null, signal?: string): RemoteExit {
  return typeof code === 'number' ? { code, signal: null } : { code: null, signal: signal ?? null };
}

/** Exit statuses that arrived before an SshRemoteProcess took its channel over. */
const earlyExits = new WeakMap<ClientChannel, RemoteExit>();

/**
 * Records the channel's exit status from the moment ssh2 hands the channel over. ssh2 handles
 * every packet of a received chunk synchronously: a short command's exec reply, exit-status
 * and close can come in one chunk, so 'exit' is emitted before the code awaiting the channel
 * runs (only 'close' waits for the stream to end). Without this, such a command ended "without
 * an exit status" (8 of 250 short commands with 50 busy servers on one machine).
 */
export function watchExit(channel: ClientChannel): ClientChannel {
  channel.once('exit', (code: number | null, signal?: string) => {
    earlyExits.set(channel, exitOf(code, signal));
  });
  return channel;
}
