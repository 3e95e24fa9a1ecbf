/**
 * Paces SSH handshakes across the whole process. Key exchange costs CPU on both ends (and on
 * the collector's single event loop); a pod that starts with hundreds of targets, or that lost
 * and regained its network, must not key-exchange with all of them at once. One limiter is
 * shared by every connection of a collector, in two stages:
 * - at most `maxConnecting` connections between the TCP connect and their handshake slot
 *   (ssh-socket.ts: the server must have identified itself first), so a dead or hung server
 *   waits out its own connect timeout without holding a handshake slot, and the fleet's
 *   servers never see more of our unauthenticated connections than that;
 * - at most `maxConcurrent` handshakes in flight (key exchange to authenticated);
 * - at least `minSpacingMs` between the starts of two handshakes;
 * - a random delay in [0, spreadMs) before a connection's very first attempt, so targets
 *   configured together spread out even before the other limits apply.
 */
import { type Clock, realClock } from '@pglog/common/time/clock.ts';

import { type Release, Semaphore } from './semaphore.ts';

export interface ConnectLimiterOptions {
  /** Connections opened and waiting for a handshake slot, at once. Default 32. */
  maxConnecting?: number;
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
  private readonly sockets: Semaphore;
  private readonly slots: Semaphore;
  private readonly minSpacingMs: number;
  private readonly spreadMs: number;
  private readonly random: () => number;
  private readonly clock: Clock;
  /** Earliest time the next handshake may start. */
  private nextStartAt = -Infinity;

  constructor(options: ConnectLimiterOptions = {}) {
    this.sockets = new Semaphore(options.maxConnecting ?? 32);
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

  /** Connections waiting for their turn (to connect, or to key-exchange). */
  get waiting(): number {
    return this.sockets.waiting + this.slots.waiting;
  }

  /** Connections opened (or opening) and not yet past their handshake slot. */
  get connecting(): number {
    return this.sockets.inUse;
  }

  /** Waits for the right to open a connection; release it once the handshake slot is held (or the attempt failed). */
  acquireConnect(signal?: AbortSignal): Promise<Release> {
    return this.sockets.acquire(signal);
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
