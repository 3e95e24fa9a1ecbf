/**
 * The `proxy` transport: a RemoteShell whose commands the sshproxy sidecar runs with OpenSSH
 * and whose output arrives through FIFOs. Nothing above RemoteShell knows the difference, so
 * following, offsets and switches work the same on both transports.
 *
 * spawn(): the stream is added to desired.json; once the sidecar reports it `running` (both
 * FIFOs exist, the ssh client waits to open them), both read ends are opened without the
 * threadpool (fifo-reader.ts) and the command starts. Its exit status comes from status.json.
 *
 * Failure while waiting for the start: a stream the sidecar refused (its server's entry is
 * wrong: CONFIG_INVALID, see sidecar/contract.ts) or a master that reports a lasting refusal
 * (changed or unknown host key, refused key) fails the spawn at once with that code; a master
 * that cannot connect fails it after `startTimeoutMs`. A sidecar that goes away fails everything with
 * SIDECAR_UNAVAILABLE.
 */
import { join } from 'node:path';
import type { Readable } from 'node:stream';

import { ERROR_CODES, type ErrorCode, isLastingSshFailure, isPglogError, PglogError } from '@pglog/common/errors.ts';
import { type StatusError, streamFifos } from '@pglog/common/sidecar/contract.ts';

import { openFifoReader } from './fifo-reader.ts';
import type { RemoteExit, RemoteProcess, RemoteShell } from './remote-shell.ts';
import type { SidecarClient } from './sidecar-client.ts';

export interface ProxyShellOptions {
  client: SidecarClient;
  /** The server's name in desired.json (the target name). */
  server: string;
  /** Describes the server in messages (`host:port`). */
  endpoint: string;
  /** Longest wait for the sidecar to start a stream (its master connecting). Default 30000 ms. */
  startTimeoutMs?: number;
  /** Longest wait for an unavailable sidecar to come (back) before a spawn fails. Default 10000 ms. */
  availableTimeoutMs?: number;
  /** After the exit is known, how long an output FIFO that never had a writer may stay open. Default 1000 ms. */
  writerGraceMs?: number;
}

export class ProxyShell implements RemoteShell {
  private readonly o: ProxyShellOptions;

  constructor(options: ProxyShellOptions) {
    this.o = options;
  }

  async spawn(command: string, options?: { signal?: AbortSignal | undefined }): Promise<RemoteProcess> {
    const { client } = this.o;
    const signal = options?.signal;
    // A sidecar that is starting (or starting again) is waited for a little, rather than
    // failing every stream of a pinned target while it writes its first status.
    if (!client.available()) await this.waitAvailable(signal);
    const instance = client.status?.instance ?? '';
    const id = client.addStream(this.o.server, command);
    try {
      await this.waitStarted(id, instance, signal);
      const fifos = streamFifos(id);
      const stdout = openFifoReader(join(client.dir, fifos.out));
      let stderr: Readable;
      try {
        stderr = openFifoReader(join(client.dir, fifos.err));
      } catch (e) {
        stdout.destroy();
        throw e;
      }
      return new ProxyProcess(this.o, id, instance, stdout, stderr);
    } catch (e) {
      client.removeStream(id);
      if (isPglogError(e)) throw e;
      throw new PglogError('SIDECAR_UNAVAILABLE', `${this.o.server}: cannot read the sidecar's stream ${id}: ${(e as Error).message}`, { cause: e });
    }
  }

  private waitAvailable(signal: AbortSignal | undefined): Promise<void> {
    const { client } = this.o;
    const timeoutMs = this.o.availableTimeoutMs ?? 10_000;
    return new Promise<void>((resolve, reject) => {
      const finish = (ok: boolean): void => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener('abort', onAbort);
        if (ok) resolve();
        else reject(new PglogError('SIDECAR_UNAVAILABLE', `${this.o.server}: cannot start a stream through the sidecar: ${client.unavailableReason()}`));
      };
      const onAbort = (): void => finish(false);
      const timer = setTimeout(() => finish(false), timeoutMs);
      const unsubscribe = client.onChange(() => {
        if (client.available()) finish(true);
      });
      if (signal?.aborted === true) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Waits until the sidecar has the stream's FIFOs and ssh client ready (or says why not). */
  private waitStarted(id: string, instance: string, signal: AbortSignal | undefined): Promise<void> {
    const { client } = this.o;
    const timeoutMs = this.o.startTimeoutMs ?? 30_000;
    return new Promise<void>((resolve, reject) => {
      let done = false;
      const finish = (error?: PglogError): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener('abort', onAbort);
        if (error === undefined) resolve();
        else reject(error);
      };
      const check = (): void => {
        const gone = sidecarGone(client, instance);
        if (gone !== null) return finish(new PglogError('SIDECAR_UNAVAILABLE', `${this.o.server}: ${gone}`));
        const st = client.streamStatus(id);
        if (st === null) {
          // Never reported because the sidecar refused the whole file holding it.
          const refused = client.desiredRefusal('stream', id);
          if (refused !== null) finish(this.errorOf(refused, 'the sidecar refused desired.json'));
          return;
        }
        if (st.state === 'running' || st.state === 'exited') return finish();
        if (st.state === 'failed') return finish(this.errorOf(st.error, `the sidecar could not start the command`));
        // Waiting for the master: a lasting refusal will not heal by waiting.
        if (st.error !== undefined && isLastingSshFailure(codeOf(st.error))) finish(this.errorOf(st.error, 'the sidecar cannot connect'));
      };
      const onAbort = (): void => finish(new PglogError('SIDECAR_UNAVAILABLE', `${this.o.server}: stream ${id} withdrawn before it started`));
      const timer = setTimeout(() => {
        const st = client.streamStatus(id);
        finish(this.errorOf(st?.error, `the sidecar did not start the command within ${timeoutMs} ms`, 'SSH_CONNECT_FAILED'));
      }, timeoutMs);
      const unsubscribe = client.onChange(check);
      if (signal?.aborted === true) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
      check();
    });
  }

  private errorOf(error: StatusError | undefined, fallback: string, fallbackCode: ErrorCode = 'SIDECAR_UNAVAILABLE'): PglogError {
    if (error === undefined) return new PglogError(fallbackCode, `${this.o.server} (${this.o.endpoint}) via sshproxy: ${fallback}`);
    return new PglogError(codeOf(error, fallbackCode), `${this.o.server} via sshproxy: ${error.message}`);
  }
}

/** A stream the sidecar runs, seen as a RemoteProcess. */
class ProxyProcess implements RemoteProcess {
  readonly stdout: Readable;
  readonly stderr: Readable;
  readonly exit: Promise<RemoteExit>;
  private readonly o: ProxyShellOptions;
  private readonly id: string;
  private closed = false;
  private unsubscribe: () => void = () => undefined;
  private graceTimer: NodeJS.Timeout | undefined;

  constructor(options: ProxyShellOptions, id: string, instance: string, stdout: Readable, stderr: Readable) {
    this.o = options;
    this.id = id;
    this.stdout = stdout;
    this.stderr = stderr;
    // A reader destroyed by close() must not crash the process; the follower sees the end.
    stdout.on('error', () => undefined);
    stderr.on('error', () => undefined);
    this.exit = new Promise<RemoteExit>((resolve, reject) => {
      const { client } = options;
      const check = (): void => {
        const gone = sidecarGone(client, instance);
        if (gone !== null) {
          this.unsubscribe();
          this.endReaders();
          reject(new PglogError('SIDECAR_UNAVAILABLE', `${options.server}: stream ${id}: ${gone}`));
          return;
        }
        const st = client.streamStatus(id);
        if (st === null || st.state === 'waiting' || st.state === 'running') return;
        this.unsubscribe();
        if (st.state === 'failed') {
          this.endReaders();
          reject(new PglogError(codeOf(st.error, 'REMOTE_COMMAND_FAILED'), `${options.server} via sshproxy: ${st.error?.message ?? 'the stream failed'}`));
          return;
        }
        this.afterExit();
        resolve({ code: st.exitCode, signal: st.signal });
      };
      this.unsubscribe = client.onChange(check);
      check();
    });
    this.exit.catch(() => undefined);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe();
    clearTimeout(this.graceTimer);
    this.o.client.removeStream(this.id);
    this.stdout.destroy();
    this.stderr.destroy();
  }

  /**
   * The command has ended. A FIFO its writer opened ends by itself once drained (the writer's
   * close is an end of file); one the writer never opened (ssh failed before it) never would,
   * so after a grace period a reader that got nothing is ended here.
   */
  private afterExit(): void {
    const untouched = [this.stdout, this.stderr].filter((r) => r.readableLength === 0 && !r.readableEnded && (r as { bytesRead?: number }).bytesRead === 0);
    if (untouched.length === 0) return;
    this.graceTimer = setTimeout(() => {
      for (const r of untouched) if (!r.readableEnded && (r as { bytesRead?: number }).bytesRead === 0) r.push(null);
    }, this.o.writerGraceMs ?? 1000);
    this.graceTimer.unref();
  }

  private endReaders(): void {
    for (const r of [this.stdout, this.stderr]) if (!r.destroyed) r.destroy();
  }
}

/** Null while the sidecar that started the stream is still the one running, else why not. */
function sidecarGone(client: SidecarClient, instance: string): string | null {
  if (!client.available()) return client.unavailableReason();
  if (instance !== '' && client.status !== null && client.status.instance !== instance) return 'the sshproxy sidecar restarted; its streams are gone';
  return null;
}

function codeOf(error: StatusError | undefined, fallback: ErrorCode = 'SIDECAR_UNAVAILABLE'): ErrorCode {
  const code = error?.code;
  return code !== undefined && (ERROR_CODES as readonly string[]).includes(code) ? (code as ErrorCode) : fallback;
}
