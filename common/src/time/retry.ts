// Retry and shutdown timing shared by the collector's long-running parts (instance streams,
// the batcher, the sidecar child, the cluster launcher): when to try a failed step again,
// and how long to wait for a part while stopping before moving on without it.
import { fullJitterDelay } from './backoff.ts';
import { settled } from './clock.ts';

/**
 * The wait before retry number `attempt` (1, 2, ...): capped exponential backoff with full
 * jitter (the transport's), so that many streams failing at the same moment (a store restart,
 * a network blip) do not retry in lockstep.
 */
export function backoffDelay(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  return fullJitterDelay(Math.max(0, attempt - 1), baseMs, capMs, random);
}

/**
 * Waits for `promise` at most `ms`; resolves either way (a stop that must not hang on one
 * part). The timer is cleared when the promise wins, so nothing keeps the process alive.
 */
export async function settleWithin(promise: Promise<unknown> | undefined, ms: number): Promise<void> {
  if (promise === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, ms));
  });
  try {
    await Promise.race([settled(promise), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
