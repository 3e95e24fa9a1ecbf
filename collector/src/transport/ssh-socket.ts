/**
 * The first step of an SSH connection, before any key exchange: a TCP connection on which the
 * server has already said something (its identification line, RFC 4253 §4.2). Only then does a
 * connection take one of the process's few handshake slots (connect-limiter.ts), so a server
 * that is down, filtered (its SYNs dropped), hung (TCP accepted by the kernel, nothing said) or
 * refusing (sshd's MaxStartups closes at once) costs a wait of its own, never a slot the rest of
 * the fleet needs (issue 46: eight dead hosts held all eight slots for 20 s each).
 *
 * The bytes received are put back (`unshift`) and the socket paused, so ssh2 reads the
 * identification line as if it had connected itself.
 */
import { connect, type Socket } from 'node:net';

import { PglogError } from '@pglog/common/errors.ts';

import { describeEndpoint, type SshEndpoint } from './ssh-errors.ts';

/** Connects to the endpoint and waits for the server's first bytes, at most `timeoutMs` in all. */
export function openSshSocket(endpoint: SshEndpoint, timeoutMs: number, signal: AbortSignal): Promise<Socket> {
  const at = describeEndpoint(endpoint);
  return new Promise<Socket>((resolve, reject) => {
    const socket = connect({ host: endpoint.host, port: endpoint.port });
    let connected = false;
    const finish = (error: PglogError | null): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      socket.off('data', onData);
      socket.off('error', onError);
      socket.off('close', onClose);
      socket.off('connect', onConnect);
      if (error === null) {
        resolve(socket);
        return;
      }
      socket.destroy();
      reject(error);
    };
    const onConnect = (): void => {
      connected = true;
    };
    const onData = (chunk: Buffer): void => {
      socket.pause();
      socket.unshift(chunk);
      finish(null);
    };
    const onError = (e: NodeJS.ErrnoException): void => {
      finish(new PglogError('SSH_CONNECT_FAILED', `${at}: connection failed (${e.code === undefined ? '' : `${e.code}: `}${e.message})`, { cause: e }));
    };
    const onClose = (): void => {
      finish(
        new PglogError(
          'SSH_CONNECT_FAILED',
          `${at}: the server closed the connection before identifying itself (sshd refusing new connections: MaxStartups, or a TCP wrapper)`,
        ),
      );
    };
    const onAbort = (): void => finish(signal.reason instanceof PglogError ? signal.reason : new PglogError('SSH_CONNECT_FAILED', `${at}: connect aborted`));
    const timer = setTimeout(() => {
      finish(
        new PglogError(
          'SSH_TIMEOUT',
          connected
            ? `${at}: the server accepted the TCP connection but sent no SSH identification within ${timeoutMs} ms (sshd hung, or not an SSH server)`
            : `${at}: no TCP connection within ${timeoutMs} ms (host down, or packets dropped on the way)`,
        ),
      );
    }, timeoutMs);
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', onConnect);
    socket.on('data', onData);
    socket.once('error', onError);
    socket.once('close', onClose);
  });
}
