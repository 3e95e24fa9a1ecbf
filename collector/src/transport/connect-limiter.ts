/**
 * Paces SSH handshakes across the whole process. Key exchange costs CPU on both ends (and on
 * the collector's single event loop); a pod that starts with hundreds of targets, or that lost
 * and regained its network, must not key-exchange with all of them at once. One limiter is
 * shared by every connection of a collector:
 * - at most `maxConcurrent` handshakes in flight (TCP connect to authenticated);
 * - at least `minSpacingMs` between the starts of two handshakes;
 * - a random delay in [0, spreadMs) before a connection's very first attempt, so targets
 *   configured together spread out even before the other two limits apply.
 */
import { type Clock, realClock } from '@pglog/common/time/clock.ts';

import { type Release, Semaphore } from './semaphore.ts';

export interface ConnectLimiterOptions {
  /** Handshakes in flight at once. Default 8. */
  maxConcurrent?: number;
  /** Minimum time between two handshake starts. Default 20 ms. */
  minSpacingMs?: number;
  /** Upper bound of the random delay before a connection's first attempt. Default 1000 ms. */
  spreadMs?: number;
  random?: () => number;
  clock?: Clock;
}

export class ConnectLimiter {
  private readonly slots: Semaphore;
  private readonly minSpacingMs: number;
  private readonly spreadMs: number;
  private readonly random: () => number;
  private readonly clock: Clock;
  /** Earliest time the next handshake may start. */
  private nextStartAt = -Infinity;

  constructor(options: ConnectLimiterOptions = {}) {
    this.slots = new Semaphore(options.maxConcurrent ?? 8);
    this.minSpacingMs = options.minSpacingMs ?? 20;
    this.spreadMs = options.spreadMs ?? 1000;
    this.random = options.random ?? Math.random;
    this.clock = options.clock ?? realClock;
  }

  /** Handshakes in flight. */
  get active(): number {
    return this.slots.inUse;
  }

  /** Connections waiting for their turn. */
  get waiting(): number {
    return this.slots.waiting;
  }

  /** The random delay a connection waits before its first attempt. */
  initialDelayMs(): number {
    return Math.floor(this.random() * this.spreadMs);
  }

  /**
   * Waits for a handshake slot and for the spacing after the previous start. Resolves with the
   * function that frees the slot (call it when the handshake succeeded or failed).
   */
  async acquire(signal?: AbortSignal): Promise<Release> {
    const release = await this.slots.acquire(signal);
    // Reserve the start time synchronously at the grant: grants come in arrival order, so
    // start times do too, each minSpacingMs after the one before.
    const now = this.clock.now();
    const startAt = Math.max(now, this.nextStartAt);
    this.nextStartAt = startAt + this.minSpacingMs;
    if (startAt > now) {
      try {
        await this.clock.sleep(startAt - now, signal);
      } catch (e) {
        release();
        throw e;
      }
    }
    return release;
  }
}
