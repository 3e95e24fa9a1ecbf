/**
 * Connection messages (log_connections, log_disconnections):
 *
 *   connection received: host=10.0.0.1 port=51234          (host=[local] for a Unix socket)
 *   connection authenticated: identity="alice" method=scram-sha-256 (/etc/postgresql/pg_hba.conf:98)   (PG14+)
 *   connection authorized: user=alice database=app application_name=psql SSL enabled (protocol=TLSv1.3, ...)
 *   replication connection authorized: user=repl application_name=walreceiver
 *   connection ready: setup total=12.345 ms, fork=1.234 ms, authentication=5.678 ms   (newest servers)
 *   disconnection: session time: 0:00:01.234 user=alice database=app host=10.0.0.1 port=51234
 */
import type { ConnectionEvent, EventCommon } from '../events.ts';
import { num } from './text.ts';

/** A connection event's own fields. */
export type ConnectionMessage = Omit<ConnectionEvent, keyof EventCommon | 'kind'>;

export interface DisconnectionMessage {
  sessionMs: number;
  host: string | null;
  port: string | null;
}

const HOST = /(?:^| )host=(\S+)/;
const PORT = /(?:^| )port=(\S+)/;
const IDENTITY = /^identity="(.*)" method=/;
const METHOD = /(?:^| )method=(\S+)/;
const SESSION = /^session time: (\d+):(\d+):(\d+(?:\.\d+)?)/;

const PHASES: readonly (readonly [string, ConnectionMessage['phase']])[] = [
  ['connection received: ', 'received'],
  ['connection authenticated: ', 'authenticated'],
  ['connection authorized: ', 'authorized'],
  ['replication connection authorized: ', 'authorized'],
  ['connection ready: ', 'ready'],
];

export function parseConnection(message: string): ConnectionMessage | null {
  for (const [prefix, phase] of PHASES) {
    if (!message.startsWith(prefix)) continue;
    const details = message.slice(prefix.length);
    const host = phase === 'received' ? HOST.exec(details) : null;
    const port = phase === 'received' ? PORT.exec(details) : null;
    const identity = phase === 'authenticated' ? IDENTITY.exec(details) : null;
    const method = phase === 'authenticated' ? METHOD.exec(details) : null;
    return {
      phase,
      host: host?.[1] ?? null,
      port: port?.[1] ?? null,
      identity: identity?.[1] ?? null,
      method: method?.[1] ?? null,
      details,
    };
  }
  return null;
}

export function parseDisconnection(message: string): DisconnectionMessage | null {
  if (!message.startsWith('disconnection: ')) return null;
  const rest = message.slice(15);
  const s = SESSION.exec(rest);
  if (s === null) return null;
  const h = num(s[1]);
  const m = num(s[2]);
  const sec = num(s[3]);
  if (h === null || m === null || sec === null) return null;
  const sessionMs = Math.round(((h * 60 + m) * 60 + sec) * 1e6) / 1e3;
  if (!Number.isFinite(sessionMs)) return null;
  return { sessionMs, host: HOST.exec(rest)?.[1] ?? null, port: PORT.exec(rest)?.[1] ?? null };
}
