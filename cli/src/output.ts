/**
 * Buffered text output that honours backpressure: callers append synchronously while
 * parsing a chunk, then `await flushIfFull()` before reading the next one, so a slow
 * consumer of `pglog parse --events | ...` slows the reader instead of growing memory.
 */
import type { Writable } from 'node:stream';

const FLUSH_AT = 256 * 1024;

export class BufferedOutput {
  private parts: string[] = [];
  private size = 0;
  private readonly out: Writable;

  constructor(out: Writable) {
    this.out = out;
  }

  append(text: string): void {
    this.parts.push(text);
    this.size += text.length;
  }

  async flushIfFull(): Promise<void> {
    if (this.size >= FLUSH_AT) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.size === 0) return;
    const text = this.parts.join('');
    this.parts = [];
    this.size = 0;
    if (!this.out.write(text)) {
      await new Promise<void>((resolve, reject) => {
        const onDrain = (): void => {
          this.out.off('error', onError);
          resolve();
        };
        const onError = (e: Error): void => {
          this.out.off('drain', onDrain);
          reject(e);
        };
        this.out.once('drain', onDrain).once('error', onError);
      });
    }
  }
}
