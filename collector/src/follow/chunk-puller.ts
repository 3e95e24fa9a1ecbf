/**
 * A Readable's chunks one at a time, each as it was pushed, when its consumer asks: the stream
 * is paused while a chunk waits for the consumer, so the transport's backpressure (the SSH
 * window, the FIFO) holds the rest, as with async iteration.
 *
 * Not async iteration: its read() joins everything the stream has buffered into a new Buffer
 * whenever more than one chunk waits (a round of the segment loop that came as two or more SSH
 * packets). That copy was a third of the ArrayBuffers the collector allocated (issue 15, ADR
 * 0023), external memory that V8 counts towards its next mark-compact. In flowing mode Node
 * hands each buffered chunk out as it is (a `data` read takes the first one only).
 */
import { finished, type Readable } from 'node:stream';

export type Pulled = { done: false; value: Buffer } | { done: true; value: undefined };

export class ChunkPuller {
  private readonly stream: Readable;
  private readonly unwatch: () => void;

  /**
   * `onPulled` gets one chunk after each next(), and the end after the last chunk (at once, or
   * after one more next()); `onError` a failure or a close before the end.
   */
  constructor(stream: Readable, onPulled: (pulled: Pulled) => void, onError: (error: unknown) => void) {
    this.stream = stream;
    stream.pause();
    const onData = (chunk: Buffer): void => {
      stream.pause();
      onPulled({ done: false, value: chunk });
    };
    stream.on('data', onData);
    // The readable side only: a channel's stdin may stay open (async iteration does the same).
    const stopFinished = finished(stream, { writable: false }, (error) => {
      if (error === undefined || error === null) onPulled({ done: true, value: undefined });
      else onError(error);
    });
    this.unwatch = (): void => {
      stopFinished();
      stream.off('data', onData);
    };
  }

  /** Lets the next chunk (or the end) come; once for each one received. */
  next(): void {
    this.stream.resume();
  }

  /** Stops listening (the caller ends the stream). */
  close(): void {
    this.unwatch();
  }
}
