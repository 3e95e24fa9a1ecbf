/**
 * A counting semaphore whose waiters are served strictly in arrival order (a log stream that
 * asked first gets the next SSH session first, so none starves), abortable per waiter.
 */

/** Gives the permit back; calling it again does nothing. */
export type Release = () => void;

interface Waiter {
  grant: (release: Release) => void;
  fail: (error: Error) => void;
}

export class Semaphore {
  private readonly limit: number;
  private held = 0;
  private readonly waiters: Waiter[] = [];

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`a semaphore needs a positive integer limit, got ${limit}`);
    this.limit = limit;
  }

  /** Permits in use. */
  get inUse(): number {
    return this.held;
  }

  /** Callers waiting for a permit. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Resolves with a release function once a permit is free; rejects with `signal.reason` if aborted first. */
  acquire(signal?: AbortSignal): Promise<Release> {
    if (signal?.aborted === true) return Promise.reject(signal.reason as Error);
    if (this.held < this.limit && this.waiters.length === 0) {
      this.held++;
      return Promise.resolve(this.releaser());
    }
    return new Promise<Release>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal?.reason as Error);
      };
      const waiter: Waiter = {
        grant: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
        fail: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      this.waiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Rejects every waiter with `error` (shutdown); permits already held stay held. */
  rejectWaiters(error: Error): void {
    for (const w of this.waiters.splice(0)) w.fail(error);
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      // Hand the permit straight to the next waiter, so a newcomer cannot overtake it.
      if (next !== undefined) next.grant(this.releaser());
      else this.held--;
    };
  }
}
