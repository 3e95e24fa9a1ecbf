/**
 * Time as the transport's pure parts see it, so tests can drive backoff and connect pacing
 * with a fake clock instead of waiting.
 */

export interface Clock {
  /** Milliseconds on a monotonic scale. */
  now(): number;
  /** Resolves after `ms`; rejects with `signal.reason` if aborted first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const realClock: Clock = {
  now: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted === true) {
        reject(signal.reason as Error);
        return;
      }
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason as Error);
      };
      const timer = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

/**
 * Resolves after `ms`, or at once when `signal` aborts; never rejects. For loops that wait
 * between attempts and simply stop when told to (followers, streams, the collector).
 */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted === true) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Resolves when `promise` settles, fulfilled or rejected: for waits that must not throw. */
export function settled(promise: Promise<unknown>): Promise<void> {
  return promise.then(
    () => undefined,
    () => undefined,
  );
}

/** Waits for `promise`, or until `signal` aborts, whichever is first; never rejects. */
export async function untilAborted(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return;
  let onAbort: () => void = () => undefined;
  const aborted = new Promise<void>((resolve) => {
    onAbort = resolve;
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    await Promise.race([settled(promise), aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}
