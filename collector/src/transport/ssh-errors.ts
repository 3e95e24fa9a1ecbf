/**
 * ssh2 reports failures as plain Errors tagged with a `level` (`client-socket`,
 * `client-timeout`, `client-authentication`, `handshake`, `protocol`, `client-dns`) and, for
 * channels, a `reason`. This maps them to pglog's stable codes with messages that name the
 * target and host:port. Pure; never includes key material (ssh2's key parser messages name
 * the problem, not the key, and are the only ssh2 text passed through for keys).
 */
import { type ErrorCode, isPglogError, PglogError } from '@pglog/common/errors.ts';

import type { WindowOverrun } from './ssh-window-guard.ts';

export interface SshEndpoint {
  target: string;
  host: string;
  port: number;
  username: string;
}

/** `target db1 (postgres@10.0.0.5:22)`: the prefix of every transport message. */
export function describeEndpoint(e: SshEndpoint): string {
  return `target ${e.target} (${e.username}@${e.host}:${e.port})`;
}

interface Ssh2Error {
  message: string;
  level?: unknown;
  code?: unknown;
  reason?: unknown;
}

function asSsh2Error(e: unknown): Ssh2Error {
  if (e instanceof Error) return e;
  return { message: String(e) };
}

/** ssh2's CHANNEL_OPEN_FAILURE reason codes (RFC 4254 §5.1). */
const CHANNEL_OPEN_REASONS: Record<number, string> = {
  1: 'administratively prohibited',
  2: 'connect failed',
  3: 'unknown channel type',
  4: 'resource shortage',
};

/** Whether ssh2 threw this while parsing the private key (Client.connect throws it synchronously). */
export function isKeyParseError(e: unknown): boolean {
  const m = asSsh2Error(e).message;
  return m.startsWith('Cannot parse privateKey') || m.startsWith('privateKey value does not contain');
}

/** Whether the server refused to open a channel (CHANNEL_OPEN_FAILURE), as opposed to refusing a request on it. */
export function isChannelOpenRefusal(e: unknown): boolean {
  const err = asSsh2Error(e);
  return typeof err.reason === 'number' || err.message.startsWith('(SSH) Channel open failure');
}

/**
 * A server that sent past the SSH window on a channel (ssh-window-guard.ts): sizes only, the
 * data itself is never shown.
 */
export function windowExceededError(where: SshEndpoint, o: WindowOverrun): PglogError {
  const stream = o.stream === 'stderr' ? ' (its stderr)' : '';
  return new PglogError(
    'SSH_WINDOW_EXCEEDED',
    `${describeEndpoint(where)}: the server sent ${o.excessBytes} bytes beyond the SSH window on a ${o.channelType} channel${stream} ` +
      `(window ${o.windowBytes} bytes): it ignores flow control, so the connection was cut instead of buffering its output without limit`,
  );
}

/** Maps an error from ssh2's Client (connect, keepalive, exec) to a PglogError. */
export function toSshError(e: unknown, where: SshEndpoint, keySource: string): PglogError {
  if (isPglogError(e)) return e;
  const err = asSsh2Error(e);
  const at = describeEndpoint(where);
  const make = (code: ErrorCode, message: string): PglogError => new PglogError(code, `${at}: ${message}`, { cause: e });
  if (isKeyParseError(e)) {
    const why = err.message.replace(/^Cannot parse privateKey:\s*/, '');
    return make('SSH_KEY_INVALID', `the private key (${keySource}) cannot be used: ${why}`);
  }
  if (isChannelOpenRefusal(e)) {
    const reason = typeof err.reason === 'number' ? (CHANNEL_OPEN_REASONS[err.reason] ?? `reason ${err.reason}`) : 'refused';
    return make('SSH_CHANNEL_FAILED', `the server refused a session channel (${reason}); its MaxSessions may be below the configured maxSessions`);
  }
  if (err.message === 'Unable to exec' || err.message === 'Channel is not open') {
    return make('SSH_CHANNEL_FAILED', `the server refused to run a command on a session channel (${err.message})`);
  }
  switch (err.level) {
    case 'client-authentication':
      return make('SSH_AUTH_FAILED', `the server refused the private key (${keySource}) for user ${where.username}`);
    case 'client-timeout':
      return make(
        'SSH_TIMEOUT',
        err.message === 'Keepalive timeout'
          ? 'the server stopped answering keepalives (connection lost or server hung)'
          : `no SSH handshake within the ready timeout (${err.message})`,
      );
    case 'client-socket': {
      const code = typeof err.code === 'string' ? `${err.code}: ` : '';
      return make('SSH_CONNECT_FAILED', `connection failed (${code}${err.message})`);
    }
    case 'client-dns':
      return make('SSH_CONNECT_FAILED', `host name cannot be resolved (${err.message})`);
    case 'handshake':
      return make('SSH_CONNECT_FAILED', `key exchange failed (${err.message})`);
    case 'protocol':
      return make('SSH_CONNECT_FAILED', `SSH protocol error (${err.message})`);
    default:
      return make('SSH_CONNECT_FAILED', err.message === '' ? 'connection failed' : err.message);
  }
}
