/**
 * The collector's wait for an SQL forward of the sshproxy sidecar (sidecar-client.ts writes it
 * into desired.json): resolves with the local directory to give pg as `host` once status.json
 * reports the forward `ready`, or rejects with the code the sidecar reported.
 *
 * A status counts only once it comes from a fresh sidecar that has applied the desired.json
 * generation holding this forward, and only for the same server, remote socket and port: a
 * status written before (by an earlier sidecar instance, or before the forward was asked for)
 * never makes a stale `ready`. After a sidecar restart or a lost master, the forward is
 * `pending` again and a new call waits for the new master to have it.
 */
import { createHash } from 'node:crypto';

import { ERROR_CODES, type ErrorCode, isLastingSshFailure, PglogError } from '@pglog/common/errors.ts';
import type { DesiredForward, ForwardStatus, SidecarStatus, StatusError } from '@pglog/common/sidecar/contract.ts';

/** How long `forward()` waits for `ready` by default. */
export const DEFAULT_FORWARD_TIMEOUT_MS = 30_000;

/**
 * The forward's id: the same for the same server, remote socket and port, so every session to
 * one instance shares one forward, and a collector that restarts asks for the same directory.
 * 16 characters: the local socket path must fit sun_path (sidecar/contract.ts).
 */
export function forwardId(server: string, remoteSocket: string, port: number): string {
  return `f${createHash('sha256').update(`${server}\0${remoteSocket}\0${port}`).digest('hex').slice(0, 15)}`;
}

/** What the wait reads of the sidecar client (sidecar-client.ts), declared here so the two files do not import each other. */
export interface ForwardClient {
  readonly status: SidecarStatus | null;
  readonly lastWriteError: Error | null;
  available(): boolean;
  unavailableReason(): string;
  forwardGeneration(id: string): number | undefined;
  desiredRefusal(kind: 'stream' | 'forward', id: string): StatusError | null;
  onChange(listener: () => void): () => void;
}

export interface ForwardWait {
  client: ForwardClient;
  spec: DesiredForward;
  timeoutMs: number;
  signal?: AbortSignal;
}

export function waitForwardReady(w: ForwardWait): Promise<string> {
  const { client, spec } = w;
  const what = `${spec.server}: SQL forward of ${spec.remoteSocket} via sshproxy`;
  return new Promise<string>((resolve, reject) => {
    let done = false;
    /** What it still waits for, for the timeout's message. */
    let waitingFor = 'desired.json to be written';
    let lastError: StatusError | undefined;
    const finish = (result: { dir: string } | { error: Error }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      unsubscribe();
      w.signal?.removeEventListener('abort', onAbort);
      if ('dir' in result) resolve(result.dir);
      else reject(result.error);
    };
    const check = (): void => {
      const writeError = client.lastWriteError;
      if (writeError !== null) return finish({ error: writeError });
      const generation = client.forwardGeneration(spec.id);
      if (generation === undefined) return;
      if (!client.available()) {
        waitingFor = client.unavailableReason();
        return;
      }
      // A whole desired.json refused is never applied: its generation would be waited for in vain.
      const refused = client.desiredRefusal('forward', spec.id);
      if (refused !== null) return finish({ error: errorOf(what, refused, 'the sidecar refused desired.json') });
      const status = client.status;
      if (status === null || status.appliedGeneration < generation) {
        waitingFor = `the sidecar to apply desired.json generation ${generation}`;
        return;
      }
      const f: ForwardStatus | undefined = status.forwards[spec.id];
      if (f === undefined || f.server !== spec.server || f.remoteSocket !== spec.remoteSocket || f.port !== spec.port) {
        waitingFor = 'the sidecar to report the forward';
        return;
      }
      lastError = f.error;
      if (f.state === 'ready') return finish({ dir: f.localDir });
      if (f.state === 'failed') return finish({ error: errorOf(what, f.error, 'the sidecar could not set it up') });
      waitingFor = f.error === undefined ? "the server's master connection to come up" : `the server's master connection (down: ${f.error.message})`;
      // A lasting refusal of the master (host key, key) will not heal by waiting.
      if (f.error !== undefined && isLastingSshFailure(codeOf(f.error))) finish({ error: errorOf(what, f.error, 'the sidecar cannot connect') });
    };
    const onAbort = (): void => {
      const reason: unknown = w.signal?.reason;
      finish({ error: reason instanceof Error ? reason : new PglogError('SIDECAR_UNAVAILABLE', `${what}: aborted`) });
    };
    const timer = setTimeout(() => {
      const message = `not ready within ${w.timeoutMs} ms; waited for ${waitingFor}`;
      // The master's failure, when there is one, says more than the wait did.
      finish({
        error:
          lastError === undefined
            ? new PglogError('SIDECAR_UNAVAILABLE', `${what}: ${message}`)
            : new PglogError(codeOf(lastError), `${what}: not ready within ${w.timeoutMs} ms: ${lastError.message}`),
      });
    }, w.timeoutMs);
    const unsubscribe = client.onChange(check);
    if (w.signal?.aborted === true) onAbort();
    else w.signal?.addEventListener('abort', onAbort, { once: true });
    check();
  });
}

function errorOf(what: string, error: StatusError | undefined, fallback: string): PglogError {
  if (error === undefined) return new PglogError('SIDECAR_UNAVAILABLE', `${what}: ${fallback}`);
  return new PglogError(codeOf(error), `${what}: ${error.message}`);
}

function codeOf(error: StatusError): ErrorCode {
  return (ERROR_CODES as readonly string[]).includes(error.code) ? (error.code as ErrorCode) : 'SIDECAR_UNAVAILABLE';
}
