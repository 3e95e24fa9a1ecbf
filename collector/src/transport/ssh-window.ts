/**
 * A bounded SSH window for ssh2's session channels: a stream whose consumer does not read holds
 * at most `windowBytes` of the server's output in the collector, wherever those bytes are (in
 * flight, in the channel's readable buffer or its stderr's); the rest waits on the server, where
 * the remote command blocks in write().
 *
 * ssh2 (1.17) has no option for this: every channel opens with a 2 MiB window, re-granted up to
 * 2 MiB whenever it falls to 1 MiB and the readable buffer (high-water mark 2 MiB) took the last
 * packet, so a paused channel holds up to about 4 MiB, 200 MB for 50 paused streams
 * (docs/benchmarks.md). This adapter takes the window over through three ssh2 internals
 * (ADR 0016; checked by checkWindowInternals at every connection, and the ssh2 version is
 * pinned):
 *
 * - `client._protocol.session(chan, initWindow, maxPacket)`: wrapped per client so a session
 *   channel opens with `windowBytes` instead of 2 MiB.
 * - `channel.incoming.window`: ssh2's count of the window the server still has. ssh2 drops
 *   data only when it reads 0 and grants more only when it is at most 1 MiB; we keep it at the
 *   real window plus OFFSET (1 GiB), so ssh2 never grants and never drops, and the real window
 *   is `incoming.window - OFFSET`.
 * - `client._protocol.channelWindowAdjust(id, amount)`: how we grant.
 *
 * We grant on consumption: every byte a consumer takes from a Node Readable goes through its
 * read() (flowing mode, async iteration and pipe all call it), so read() of the channel and of
 * its stderr is wrapped to top the window up to `windowBytes` minus what is still buffered,
 * once that has fallen to half. (Not ssh2's `_read`: Node calls it once and then not again
 * until the next push, so a consumer draining a full buffer would never grant again.)
 */
import type { Readable } from 'node:stream';

import { PglogError } from '@pglog/common/errors.ts';
import type { Client, ClientChannel } from 'ssh2';

/** The default window per session channel: at 0.5 MB/s a stream, a second of log. */
export const DEFAULT_CHANNEL_WINDOW_BYTES = 512 * 1024;
/** Window bounds: at least two full packets (ssh2's 32 KiB), at most ssh2's own 2 MiB. */
export const MIN_CHANNEL_WINDOW_BYTES = 64 * 1024;
export const MAX_CHANNEL_WINDOW_BYTES = 2 * 1024 * 1024;

/** Added to ssh2's window count so that it never falls to ssh2's own re-grant threshold (1 MiB) or to 0. */
const OFFSET = 2 ** 30;

/** The ssh2 internals used here, as ssh2 1.17 has them. */
interface ProtocolInternals {
  session(chan: number, initWindow: number, maxPacket: number): void;
  channelWindowAdjust(chan: number, amount: number): void;
}
interface ClientInternals {
  _protocol?: ProtocolInternals & { [WRAPPED]?: true };
}
interface ChannelInternals {
  incoming?: { window?: unknown; state?: unknown };
  outgoing?: { id?: unknown; state?: unknown };
}

const WRAPPED = Symbol('pglog.sshWindow');

function internalsChanged(what: string): PglogError {
  return new PglogError(
    'SSH_CHANNEL_FAILED',
    `ssh2's internals changed (${what}): the bounded SSH window (collector/src/transport/ssh-window.ts, ADR 0016) needs updating for this ssh2 version`,
  );
}

/**
 * Makes every session channel `client` opens from now on start with a window of `windowBytes`
 * (call once, when the client is ready; each channel must then go through holdWindow()).
 */
export function openSessionsWithWindow(client: Client, windowBytes: number): void {
  const protocol = (client as unknown as ClientInternals)._protocol;
  if (typeof protocol?.session !== 'function' || typeof protocol.channelWindowAdjust !== 'function')
    throw internalsChanged('Client#_protocol.session / channelWindowAdjust');
  if (protocol[WRAPPED] === true) return;
  const session = protocol.session.bind(protocol);
  protocol.session = (chan: number, _initWindow: number, maxPacket: number): void => session(chan, windowBytes, maxPacket);
  protocol[WRAPPED] = true;
}

/**
 * Takes over the window of `channel`, just opened by `client` (openSessionsWithWindow) and
 * handed over by ssh2's exec callback: synchronously there, before any of its data is handled.
 */
export function holdWindow(client: Client, channel: ClientChannel, windowBytes: number): ClientChannel {
  const protocol = (client as unknown as ClientInternals)._protocol;
  const ch = channel as unknown as ChannelInternals;
  const incoming = ch.incoming;
  const outgoing = ch.outgoing;
  if (protocol?.[WRAPPED] !== true) throw internalsChanged('the client was not set up by openSessionsWithWindow');
  if (typeof incoming?.window !== 'number' || typeof outgoing?.id !== 'number') throw internalsChanged('Channel#incoming.window / outgoing.id');
  // ssh2 counts the window it believes it opened with (2 MiB); the server was given windowBytes.
  incoming.window = windowBytes + OFFSET;
  const remoteId = outgoing.id;
  const stderr = channel.stderr;
  const grant = (): void => {
    if (outgoing.state !== 'open' || incoming.state !== 'open') return;
    const window = (incoming.window as number) - OFFSET;
    const held = window + channel.readableLength + stderr.readableLength;
    if (held > windowBytes / 2) return;
    const amount = windowBytes - held;
    incoming.window = (incoming.window as number) + amount;
    protocol.channelWindowAdjust(remoteId, amount);
  };
  for (const stream of [channel, stderr] as Readable[]) {
    const read = stream.read.bind(stream);
    stream.read = (size?: number): unknown => {
      const chunk: unknown = read(size);
      grant();
      return chunk;
    };
  }
  return channel;
}

/** The bytes the server may still send on `channel` before it must wait (tests). */
export function remainingWindow(channel: ClientChannel): number {
  const window = (channel as unknown as ChannelInternals).incoming?.window;
  return typeof window === 'number' ? window - OFFSET : NaN;
}
