/**
 * A Duplex that node-postgres can use as its connection (`new pg.Client({ stream })`) while the
 * real byte stream is opened asynchronously: an ssh2 `direct-streamlocal` channel to the
 * server's Unix socket, or a Unix socket of the sidecar's OpenSSH forward.
 *
 * pg treats its stream like a net.Socket: it calls setNoDelay() and connect(port, host), waits
 * for 'connect', then writes the startup message; it reads 'data', and takes 'close' as the end
 * of the connection. Here connect() ignores its arguments and calls `open`; what `open`
 * resolves with is wired through with backpressure in both directions, and a failure to open
 * destroys this stream with that error (pg then rejects connect() with it).
 */
import { Duplex } from 'node:stream';

export type OpenStream = () => Promise<Duplex>;

export class DeferredSocket extends Duplex {
  private readonly open: OpenStream;
  private inner: Duplex | null = null;
  private opening = false;

  constructor(open: OpenStream) {
    // Half-open makes no sense for a PostgreSQL session: when the server ends, we end.
    super({ allowHalfOpen: false });
    this.open = open;
  }

  /** Starts opening the stream; 'connect' follows once it is open. Arguments are ignored. */
  connect(): this {
    if (this.opening) return this;
    this.opening = true;
    this.open().then(
      (inner) => {
        if (this.destroyed) {
          inner.destroy();
          return;
        }
        this.attach(inner);
        this.emit('connect');
      },
      (e: unknown) => {
        this.destroy(e instanceof Error ? e : new Error(String(e)));
      },
    );
    return this;
  }

  // net.Socket methods pg calls; meaningless on a forwarded stream.
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }

  private attach(inner: Duplex): void {
    this.inner = inner;
    inner.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) inner.pause();
    });
    inner.once('end', () => this.push(null));
    inner.once('error', (e: Error) => this.destroy(e));
    inner.once('close', () => {
      // A channel closed without 'end' (connection lost): no more data will come.
      if (!this.destroyed) this.push(null);
    });
  }

  override _read(): void {
    this.inner?.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.inner === null) {
      callback(new Error('write before the forwarded stream was open'));
      return;
    }
    this.inner.write(chunk, callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.inner?.end();
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.inner?.destroy();
    callback(error);
  }
}
