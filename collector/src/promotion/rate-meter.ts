/**
 * A smoothed read rate for one target: the input of transport promotion (see
 * `policy.ts` and docs/decisions/0007-transport-promotion.md). Pure: the caller
 * passes times from a monotonic clock; nothing here reads a clock.
 *
 * `add(bytes)` is called on every read and only adds to a counter. `sample(nowMs)`, called
 * about once a second, turns the bytes counted since the previous sample into the average
 * rate `x` of that interval and folds it into an exponentially weighted moving average with
 * time constant `tau`:
 *
 *     alpha = 1 - exp(-dt / tau),   rate += alpha * (x - rate)
 *
 * That is the exact solution of the continuous smoother `d rate/dt = (x - rate) / tau` for an
 * input that is constant over the interval, so the result does not depend on how the time is
 * cut into samples: irregular or late samples give the same rate as regular ones for a steady
 * input, and a step reaches 63 % of its height after one `tau`.
 *
 * A burst never makes a spike: one sample raises the rate by at most
 * `alpha * x = (1 - exp(-dt/tau)) / dt * 8 * bytes <= 8 * bytes / tau`, however short the
 * interval the bytes arrived in.
 *
 * The first interval runs from the time given to the constructor (when the meter started
 * counting) to the first sample, and is treated like any other: the rate starts at 0, not at
 * the first interval's rate. A quiet start followed by a burst is therefore averaged over
 * the whole quiet time, and a target that is hot from the start reaches its true rate in a
 * few `tau` (63 % after one), never overshooting it. A meter given an initial rate (a known
 * rate measured elsewhere) starts from that instead.
 */

/** Default time constant of the smoothing: 30 s. */
export const DEFAULT_RATE_TIME_CONSTANT_MS = 30_000;

export interface RateMeterOptions {
  /** Time constant `tau` of the moving average, in ms (> 0). Default 30000. */
  timeConstantMs?: number;
  /**
   * The rate to start from, bits per second (default 0): a target that moves to another
   * collector starts at the rate its previous owner measured instead of climbing from 0 for
   * a few `tau`, during which it would look lighter than it is to sharding and promotion.
   */
  initialBitsPerS?: number;
}

export class RateMeter {
  /** The time constant `tau` in ms. */
  readonly timeConstantMs: number;
  private pendingBytes = 0;
  private lastSampleMs: number;
  private smoothedBitsPerS = 0;

  /** `startMs`: when counting starts (on the same monotonic scale as `sample`'s times). */
  constructor(startMs: number, options: RateMeterOptions = {}) {
    const tau = options.timeConstantMs ?? DEFAULT_RATE_TIME_CONSTANT_MS;
    if (!Number.isFinite(tau) || tau <= 0) {
      throw new Error(`rate meter: the time constant must be a positive number of milliseconds, got ${String(tau)}`);
    }
    if (!Number.isFinite(startMs)) throw new Error(`rate meter: the start time must be a finite number of milliseconds, got ${String(startMs)}`);
    this.timeConstantMs = tau;
    this.lastSampleMs = startMs;
    const initial = options.initialBitsPerS ?? 0;
    if (!Number.isFinite(initial) || initial < 0) throw new Error(`rate meter: the initial rate must be a finite number >= 0, got ${String(initial)}`);
    this.smoothedBitsPerS = initial;
  }

  /**
   * Count `bytes` read; a negative count takes back bytes counted before (a backlog that
   * shrank: they were written earlier), in full. Hot path: one addition.
   */
  add(bytes: number): void {
    this.pendingBytes += bytes;
  }

  /**
   * Fold the bytes counted since the previous sample into the average and return the
   * smoothed rate in bits per second. A sample at the same time as the previous one changes
   * nothing (the bytes wait for the next interval); so does a time that is not finite. A time before the previous sample (a
   * clock that is not monotonic) only moves the reference time; the bytes wait, and by the
   * bound above they can raise the rate by at most `8 * bytes / tau` when they are counted.
   */
  sample(nowMs: number): number {
    const dt = nowMs - this.lastSampleMs;
    if (dt === 0 || !Number.isFinite(nowMs)) return this.smoothedBitsPerS;
    this.lastSampleMs = nowMs;
    if (dt < 0) return this.bitsPerS;
    // Bytes taken back may outweigh an interval's reads (a backlog's `size` arrives after the
    // reads that shrank it, up to 10 s later): that interval counts below nothing, so the
    // average, being linear, takes back what those reads added. Cut at 0 here, it kept them:
    // a restarted collector reading a 600 kB backlog of a 2 kB/s log showed 16 kB/s (the fleet
    // soak: catching-up shards looked twice as loaded and shed their targets to the others).
    const intervalBitsPerS = (this.pendingBytes * 8000) / dt;
    const alpha = -Math.expm1(-dt / this.timeConstantMs);
    this.smoothedBitsPerS += alpha * (intervalBitsPerS - this.smoothedBitsPerS);
    this.pendingBytes = 0;
    return this.bitsPerS;
  }

  /** The smoothed rate in bits per second as of the last sample (0 before the first; never below 0). */
  get bitsPerS(): number {
    return Math.max(0, this.smoothedBitsPerS);
  }

  /** The smoothed rate in bytes per second as of the last sample (for `status.rates`). */
  get bytesPerS(): number {
    return this.bitsPerS / 8;
  }
}
