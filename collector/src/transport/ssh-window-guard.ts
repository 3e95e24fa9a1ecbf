/**
 * The hard bound behind the SSH window: a server that sends more than the collector granted on
 * a channel is cut off, never buffered.
 *
 * The window (ssh-window.ts) bounds what a server that follows the protocol can make the
 * collector hold. ssh2 (1.17) does not enforce it against one that does not: its data handler
 * drops a packet only when its window count is exactly 0 (a server stepping past 0 with
 * packets of another size never meets that), `push() === false` only stops its re-grants, and
 * the socket keeps being read. For the channels whose window we hold, ssh2's count carries a
 * 1 GiB offset, so even that check would need a GiB first. A compromised monitored host (its
 * sshd or root), or whoever holds its host key, could then fill the collector's heap through
 * one paused stream and take every other target of the shard down with the pod.
 *
 * ssh2 decrements its window count before it pushes a packet into the channel (or its stderr),
 * so at each push `excess()` is what the server sent beyond what was granted, this packet
 * included. Up to WINDOW_OVERRUN_TOLERANCE_BYTES passes (a server that is merely sloppy about
 * its last packet; a correct one never exceeds the window at all); the packet that crosses it
 * and everything after it on the channel are dropped, and `onOverrun` is told once, to cut the
 * connection. A channel whose consumer does not read therefore holds at most one window plus
 * the tolerance.
 */
import type { Readable } from 'node:stream';

/** Bytes a server may send beyond the window before it is cut off: one packet of the largest size we advertise (ssh2's 32 KiB). */
export const WINDOW_OVERRUN_TOLERANCE_BYTES = 32 * 1024;

/** What a server did, for the error and the log: sizes only, never the data. */
export interface WindowOverrun {
  /** The channel type (`session`, `direct-streamlocal@openssh.com`). */
  channelType: string;
  /** Which of the channel's streams the crossing packet was for. */
  stream: 'data' | 'stderr';
  /** The window the channel was opened with (and is topped up to). */
  windowBytes: number;
  /** Bytes received beyond what was granted, the crossing packet included. */
  excessBytes: number;
}

export interface WindowGuardOptions {
  channelType: string;
  windowBytes: number;
  /** Bytes the server sent beyond what it was granted, as ssh2 has counted them (negative: room left). */
  excess(): number;
  /** Called once, on the first packet past the tolerance. */
  onOverrun(overrun: WindowOverrun): void;
}

/**
 * Wraps `push` of `channel` and of its stderr (ssh2 delivers every packet through them) so that
 * data past the window and the tolerance is dropped and reported. Call when ssh2 creates the
 * channel, before any of its data is handled.
 */
export function guardWindow(channel: Readable & { stderr?: Readable }, o: WindowGuardOptions): void {
  let overrun = false;
  const guard = (stream: Readable, name: WindowOverrun['stream']): void => {
    const push = stream.push.bind(stream);
    stream.push = (chunk: unknown, encoding?: BufferEncoding): boolean => {
      // The end of the stream (ssh2 pushes null at EOF and close) always passes.
      if (chunk === null) return push(chunk, encoding);
      if (overrun) return false;
      const excessBytes = o.excess();
      if (excessBytes <= WINDOW_OVERRUN_TOLERANCE_BYTES) return push(chunk, encoding);
      overrun = true;
      o.onOverrun({ channelType: o.channelType, stream: name, windowBytes: o.windowBytes, excessBytes });
      return false;
    };
  };
  guard(channel, 'data');
  if (channel.stderr !== undefined) guard(channel.stderr, 'stderr');
}
