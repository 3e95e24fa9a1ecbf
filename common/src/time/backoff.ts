/**
 * Reconnect backoff for one SSH connection: capped exponential with full jitter (AWS
 * architecture blog, "Exponential Backoff And Jitter"), so a fleet that lost its network at
 * once does not reconnect in lockstep. Pure: the caller passes times, randomness is injected.
 */

export interface BackoffOptions {
  /** Delay ceiling of the first retry; doubles per failure. Default 1000 ms. */
  baseMs?: number;
  /** Largest delay. Default 60000 ms. */
  capMs?: number;
  /**
   * A connection that stayed up at least this long resets the failure count, so one loss
   * after a day of service retries quickly, while a connection that flaps keeps backing off.
   * Default 60000 ms.
   */
  resetAfterMs?: number;
  /** Uniform random number in [0, 1). Default Math.random. */
  random?: () => number;
}

/** Full jitter: uniform in [0, min(cap, base * 2^attempt)). */
export function fullJitterDelay(attempt: number, baseMs: number, capMs: number, random: () => number): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 52));
  return Math.floor(random() * ceiling);
}

export class Backoff {
  private readonly baseMs: number;
  private readonly capMs: number;
  private readonly resetAfterMs: number;
  private readonly random: () => number;
  private failures = 0;
  private upSince: number | null = null;

  constructor(options: BackoffOptions = {}) {
    this.baseMs = options.baseMs ?? 1000;
    this.capMs = options.capMs ?? 60_000;
    this.resetAfterMs = options.resetAfterMs ?? 60_000;
    this.random = options.random ?? Math.random;
    if (!(this.baseMs > 0) || !(this.capMs >= this.baseMs)) throw new RangeError(`backoff needs 0 < baseMs <= capMs, got ${this.baseMs} and ${this.capMs}`);
  }

  /** Failures counted since the last reset. */
  get attempts(): number {
    return this.failures;
  }

  /** Delay before the next attempt after a failure that may be transient (refused, reset, timeout). */
  next(): number {
    return fullJitterDelay(this.failures++, this.baseMs, this.capMs, this.random);
  }

  /**
   * Delay after a failure that retrying soon cannot fix (host key refused, authentication
   * failed, key unreadable): straight to the cap. Half of it is fixed and half jittered, so
   * a refused server is never hammered, yet a fleet refused at once still spreads out.
   */
  nextAtCap(): number {
    this.failures++;
    return Math.floor(this.capMs / 2 + this.random() * (this.capMs / 2));
  }

  /** The connection came up at `nowMs`. */
  connected(nowMs: number): void {
    this.upSince = nowMs;
  }

  /** The connection went down at `nowMs`; resets the count if it had stayed up long enough. */
  disconnected(nowMs: number): void {
    if (this.upSince !== null && nowMs - this.upSince >= this.resetAfterMs) this.failures = 0;
    this.upSince = null;
  }
}
