// One manual clock for both clock interfaces: the collector's Clock (now, sleep: backoff, connect
// pacing) and the Kubernetes layer's QueueClock (now, setTimeout, clearTimeout: queue, informer,
// leader election). Time moves only when a test advances it; timers fire in order of their due
// time (equal times in the order they were set).
import { setImmediate as turn } from 'node:timers/promises';

import type { QueueClock } from '@pglog/common/kube/workqueue.ts';
import type { Clock } from '@pglog/common/time/clock.ts';

interface Timer {
  at: number;
  fn: () => void;
}

export class FakeClock implements Clock, QueueClock {
  private time = 0;
  private nextId = 0;
  private readonly timers = new Map<number, Timer>();

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted === true) {
        reject(signal.reason as Error);
        return;
      }
      const id = this.setTimeout(resolve, ms);
      signal?.addEventListener(
        'abort',
        () => {
          this.clearTimeout(id);
          reject(signal.reason as Error);
        },
        { once: true },
      );
    });
  }

  /** Timers not yet fired. */
  pending(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms`, firing due timers in order (and those they set that fall due). */
  advance(ms: number): void {
    const end = this.time + ms;
    for (let next = this.nextDue(end); next !== undefined; next = this.nextDue(end)) this.fire(next);
    this.time = end;
  }

  /**
   * As advance(), for code that awaits its sleeps: a turn of the event loop before, between and
   * after the firings, so what a resolved sleep continues with runs before the next one is due.
   */
  async advanceSettled(ms: number): Promise<void> {
    const end = this.time + ms;
    await turn();
    for (let next = this.nextDue(end); next !== undefined; next = this.nextDue(end)) {
      this.fire(next);
      await turn();
    }
    this.time = end;
    await turn();
  }

  private nextDue(end: number): [number, Timer] | undefined {
    let next: [number, Timer] | undefined;
    for (const entry of this.timers) if (entry[1].at <= end && (next === undefined || entry[1].at < next[1].at)) next = entry;
    return next;
  }

  private fire([id, timer]: [number, Timer]): void {
    this.timers.delete(id);
    this.time = timer.at;
    timer.fn();
  }
}
