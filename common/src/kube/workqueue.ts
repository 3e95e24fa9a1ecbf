/**
 * A work queue of keys like client-go's: a key queued many times is handed out once; a key
 * being processed goes to no other worker, and if it is added meanwhile it is queued again
 * when its worker calls done(). Delayed adds and per-key exponential backoff sit in front.
 * Time comes from an injectable clock so the logic tests without real timers.
 */

export interface QueueClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: QueueClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    // A queue's timer alone does not keep the process alive.
    t.unref();
    return t;
  },
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface WorkQueueOptions {
  clock?: QueueClock;
  /** First retry delay of addRateLimited; doubles per failure. Default 5 ms. */
  baseDelayMs?: number;
  /** Largest per-key retry delay. Default 60 s. */
  maxDelayMs?: number;
  /** Overall token bucket for addRateLimited (client-go: 10 per second, burst 100); none by default. */
  bucket?: { perSecond: number; burst: number };
}

export class WorkQueue<K extends string = string> {
  private readonly clock: QueueClock;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly bucket: { perSecond: number; burst: number } | undefined;
  /** Keys ready to hand out, in order. */
  private readonly queue: K[] = [];
  /** Keys that need processing (queued, or added again while processing). */
  private readonly dirty = new Set<K>();
  private readonly processing = new Set<K>();
  /** Delayed adds: one timer per key, the earliest wins. */
  private readonly delayed = new Map<K, { at: number; handle: unknown }>();
  private readonly failures = new Map<K, number>();
  private readonly waiters: Array<(key: K | null) => void> = [];
  private bucketTokens: number;
  private bucketAt: number;
  private stopped = false;

  constructor(options: WorkQueueOptions = {}) {
    this.clock = options.clock ?? systemClock;
    this.baseDelayMs = options.baseDelayMs ?? 5;
    this.maxDelayMs = options.maxDelayMs ?? 60_000;
    this.bucket = options.bucket;
    this.bucketTokens = options.bucket?.burst ?? 0;
    this.bucketAt = this.clock.now();
  }

  /** Keys waiting to be handed out (not the delayed ones, not those being processed). */
  get length(): number {
    return this.queue.length;
  }

  isShutDown(): boolean {
    return this.stopped;
  }

  add(key: K): void {
    if (this.stopped || this.dirty.has(key)) return;
    this.dirty.add(key);
    // Being processed: done() queues it again.
    if (this.processing.has(key)) return;
    this.queue.push(key);
    this.dispatch();
  }

  /** Adds the key after `ms`; a key already waiting keeps the earlier time. */
  addAfter(key: K, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.clock.now() + ms;
    const existing = this.delayed.get(key);
    if (existing !== undefined) {
      if (existing.at <= at) return;
      this.clock.clearTimeout(existing.handle);
    }
    const handle = this.clock.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, handle });
  }

  /** Adds the key after its backoff: base·2^failures (capped), and the bucket's wait if there is one. */
  addRateLimited(key: K): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.addAfter(key, Math.max(this.backoffMs(n), this.bucketDelayMs()));
  }

  /** How many times the key was rate-limited since the last forget(). */
  numRequeues(key: K): number {
    return this.failures.get(key) ?? 0;
  }

  /** Clears the key's backoff (it succeeded). */
  forget(key: K): void {
    this.failures.delete(key);
  }

  /** The next key; null once the queue is shut down or `signal` aborts. Call done(key) after processing. */
  get(signal?: AbortSignal): Promise<K | null> {
    if (this.stopped || signal?.aborted === true) return Promise.resolve(null);
    const key = this.queue.shift();
    if (key !== undefined) return Promise.resolve(this.take(key));
    return new Promise<K | null>((resolve) => {
      const waiter = (k: K | null): void => {
        signal?.removeEventListener('abort', onAbort);
        resolve(k);
      };
      const onAbort = (): void => {
        const i = this.waiters.indexOf(waiter);
        if (i !== -1) this.waiters.splice(i, 1);
        resolve(null);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** The worker finished the key; if it was added meanwhile it is queued again. */
  done(key: K): void {
    if (!this.processing.delete(key)) return;
    if (this.dirty.has(key) && !this.stopped) {
      this.queue.push(key);
      this.dispatch();
    }
  }

  /** Stops handing out keys: waiting and later get() calls resolve null; delayed adds are dropped. */
  shutDown(): void {
    if (this.stopped) return;
    this.stopped = true;
    for (const { handle } of this.delayed.values()) this.clock.clearTimeout(handle);
    this.delayed.clear();
    this.queue.length = 0;
    for (const w of this.waiters.splice(0)) w(null);
  }

  private take(key: K): K {
    this.dirty.delete(key);
    this.processing.add(key);
    return key;
  }

  private dispatch(): void {
    while (this.waiters.length > 0 && this.queue.length > 0) {
      const waiter = this.waiters.shift()!;
      waiter(this.take(this.queue.shift()!));
    }
  }

  private backoffMs(failures: number): number {
    // 2^failures overflows to Infinity long after the cap; min() keeps it finite.
    return Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** failures);
  }

  /** Reserves a token of the overall bucket; the wait until it is there. */
  private bucketDelayMs(): number {
    if (this.bucket === undefined) return 0;
    const now = this.clock.now();
    const refill = ((now - this.bucketAt) / 1000) * this.bucket.perSecond;
    this.bucketTokens = Math.min(this.bucket.burst, this.bucketTokens + refill);
    this.bucketAt = now;
    this.bucketTokens -= 1;
    return this.bucketTokens >= 0 ? 0 : Math.ceil((-this.bucketTokens / this.bucket.perSecond) * 1000);
  }
}
