/**
 * A bounded SSH window for ssh2's session channels: a stream whose consumer does not read holds
 * at most `windowBytes` of the server's output in the collector, wherever those bytes are (in
 * flight, in the channel's readable buffer or its stderr's); the rest waits on the server, where
 * the remote command blocks in write(). A server that sends past the window anyway is cut off
 * (ssh-window-guard.ts), on every channel of the client.
 *
 * ssh2 (1.17) has no option for this: every channel opens with a 2 MiB window, re-granted up to
 * 2 MiB whenever it falls to 1 MiB and the readable buffer (high-water mark 2 MiB) took the last
 * packet, so a paused channel holds up to about 4 MiB, 200 MB for 50 paused streams
 * (docs/benchmarks.md). This adapter takes the window over through four ssh2 internals
 * (ADR 0016; checked by collector/test/unit/transport/ssh-window.test.ts, and the ssh2
 * version is pinned):
 *
 * - `client._protocol.session(chan, initWindow, maxPacket)`: wrapped per client so a session
 *   channel opens with `windowBytes` instead of 2 MiB.
 * - `client._chanMgr.update(id, channel)`: where ssh2 files a channel it has just created on
 *   the server's open confirmation, wrapped per client so each channel is taken over then,
 *   before any of its data is handled (data may come before the reply to exec, and the exec
 *   callback, holdWindow's, runs only after that reply).
 * - `channel.incoming.window`: ssh2's count of the window the server still has. ssh2 drops
 *   data only when it reads 0 and grants more only when it is at most 1 MiB; for a session
 *   channel we keep it at the real window plus OFFSET (1 GiB), so ssh2 never grants and never
 *   drops, and the real window is `incoming.window - OFFSET`.
 * - `client._protocol.channelWindowAdjust(id, amount)`: how we grant.
 *
 * We grant on consumption: every byte a consumer takes from a Node Readable goes through its
 * read() (flowing mode, async iteration and pipe all call it), so read() of the channel and of
 * its stderr is wrapped to top the window up to `windowBytes` minus what is still buffered,
 * once that has fallen to half. (Not ssh2's `_read`: Node calls it once and then not again
 * until the next push, so a consumer draining a full buffer would never grant again.)
 */
import { Readable } from 'node:stream';

import { PglogError } from '@pglog/common/errors.ts';
import type { Client, ClientChannel } from 'ssh2';

import { guardWindow, type WindowOverrun } from './ssh-window-guard.ts';

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
interface ChannelManagerInternals {
  update(id: number, channel: unknown): void;
}
interface ClientInternals {
  _protocol?: ProtocolInternals & { [WRAPPED]?: true };
  _chanMgr?: ChannelManagerInternals;
}
interface ChannelInternals {
  type?: unknown;
  incoming?: { window?: unknown; state?: unknown };
  outgoing?: { id?: unknown; state?: unknown };
}

const WRAPPED = Symbol('pglog.sshWindow');
/** Session channels taken over when ssh2 created them (the window holdWindow grants from). */
const held = new WeakSet<object>();

function internalsChanged(what: string): PglogError {
  return new PglogError(
    'SSH_CHANNEL_FAILED',
    `ssh2's internals changed (${what}): the bounded SSH window (collector/src/transport/ssh-window.ts, ADR 0016) needs updating for this ssh2 version`,
  );
}

/**
 * Makes every session channel `client` opens from now on start with a window of `windowBytes`,
 * and cuts off, through `onOverrun`, a server that sends past the window on any channel (call
 * once, when the client is ready; each session channel must then go through holdWindow()).
 * `onOverrun` must end the connection: the channel's further data is dropped, not delivered.
 */
export function openSessionsWithWindow(client: Client, windowBytes: number, onOverrun: (overrun: WindowOverrun) => void): void {
  const internals = client as unknown as ClientInternals;
  const protocol = internals._protocol;
  const channels = internals._chanMgr;
  if (typeof protocol?.session !== 'function' || typeof protocol.channelWindowAdjust !== 'function')
    throw internalsChanged('Client#_protocol.session / channelWindowAdjust');
  if (typeof channels?.update !== 'function') throw internalsChanged('Client#_chanMgr.update');
  if (protocol[WRAPPED] === true) return;
  const session = protocol.session.bind(protocol);
  protocol.session = (chan: number, _initWindow: number, maxPacket: number): void => session(chan, windowBytes, maxPacket);
  const update = channels.update.bind(channels);
  channels.update = (id: number, channel: unknown): void => {
    update(id, channel);
    if (channel instanceof Readable) takeOver(channel, windowBytes, onOverrun);
  };
  protocol[WRAPPED] = true;
}

/** Sets a new channel's window count and guards it, before ssh2 handles any of its data. */
function takeOver(channel: Readable & ChannelInternals, windowBytes: number, onOverrun: (overrun: WindowOverrun) => void): void {
  const incoming = channel.incoming;
  const initialWindow = incoming?.window;
  if (incoming === undefined || typeof initialWindow !== 'number') return; // not a channel holdWindow could take either: it refuses it
  // Every session channel of this client was opened with windowBytes (session() above); ssh2
  // counts the 2 MiB it believes it offered. Other channels (the SQL socket forwards) keep
  // ssh2's own window and grants, and only get the guard.
  const isSession = channel.type === 'session';
  const offset = isSession ? OFFSET : 0;
  if (isSession) {
    incoming.window = windowBytes + OFFSET;
    held.add(channel);
  }
  guardWindow(channel, {
    channelType: typeof channel.type === 'string' ? channel.type : 'unknown',
    windowBytes: isSession ? windowBytes : initialWindow,
    excess: () => offset - (incoming.window as number),
    onOverrun,
  });
}

/**
 * Grants `channel`'s window on consumption: `channel` was just opened by `client` (whose
 * session channels openSessionsWithWindow set up) and handed over by ssh2's exec callback.
 */
export function holdWindow(client: Client, channel: ClientChannel, windowBytes: number): ClientChannel {
  const protocol = (client as unknown as ClientInternals)._protocol;
  const ch = channel as unknown as ChannelInternals;
  const incoming = ch.incoming;
  const outgoing = ch.outgoing;
  if (protocol?.[WRAPPED] !== true) throw internalsChanged('the client was not set up by openSessionsWithWindow');
  if (typeof incoming?.window !== 'number' || typeof outgoing?.id !== 'number') throw internalsChanged('Channel#incoming.window / outgoing.id');
  if (!held.has(channel)) throw internalsChanged('Client#_chanMgr.update did not hand the session channel over when ssh2 created it');
  const remoteId = outgoing.id;
  const stderr = channel.stderr;
  const grant = (): void => {
    if (outgoing.state !== 'open' || incoming.state !== 'open') return;
    const window = (incoming.window as number) - OFFSET;
    // Past the window the server is being cut off (ssh-window-guard.ts): never grant it more.
    if (window < 0) return;
    const heldBytes = window + channel.readableLength + stderr.readableLength;
    if (heldBytes > windowBytes / 2) return;
    const amount = windowBytes - heldBytes;
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
