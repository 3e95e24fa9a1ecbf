/**
 * The streams of one target (one SSH server) and the transport they read through.
 *
 * Every instance of a server moves together: the rate that decides is the server's, and one
 * master connection in the sidecar serves them all. A switch moves each stream with
 * InstanceStream.switchFollower (end at the committed boundary, start there on the other
 * transport), all of them at once.
 */
import type { ActiveTransport, PostgresInstance, PostgresTarget, StartPoint, Transport } from '@pglog/common/api/postgres-target.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';

import { LogFollower } from '../follow/follower.ts';
import type { CollectorMetrics } from '../observability/metrics.ts';
import { RateMeter } from '../promotion/rate-meter.ts';
import type { RemoteShell } from '../transport/remote-shell.ts';
import type { InstanceStream } from './instance-stream.ts';

export interface TargetStreamsOptions {
  target: PostgresTarget;
  /** The in-process transport (connects on first use). */
  inproc: RemoteShell;
  /** The sidecar transport, or null when there is no sidecar (--sshproxy off). */
  proxy: RemoteShell | null;
  /** Where a log never collected starts when neither the instance nor the target says (--start-at). */
  startAt: StartPoint;
  rateTimeConstantMs: number;
  /** Bytes per second to start the rate from (the rate measured before, elsewhere); default 0. */
  initialBytesPerSecond?: number;
  metrics: CollectorMetrics;
  log: Logger;
  now?: () => number;
}

export class TargetStreams {
  readonly name: string;
  readonly target: PostgresTarget;
  /** Bytes read by every instance of the server (fed by the streams' progress hooks). */
  readonly meter: RateMeter;
  private readonly o: TargetStreamsOptions;
  private readonly now: () => number;
  private readonly streams = new Map<string, InstanceStream>();
  private active: ActiveTransport;
  private changedAt: number;
  private switching: Promise<void> | null = null;
  private pin: Transport;

  constructor(options: TargetStreamsOptions) {
    this.o = options;
    this.target = options.target;
    this.name = options.target.metadata.name;
    this.now = options.now ?? (() => performance.now());
    this.changedAt = this.now();
    this.pin = options.target.spec.transport;
    this.meter = new RateMeter(this.changedAt, { timeConstantMs: options.rateTimeConstantMs, initialBitsPerS: (options.initialBytesPerSecond ?? 0) * 8 });
    // A pinned proxy starts there; `auto` starts in-process until its rate is known.
    this.active = options.target.spec.transport === 'proxy' && options.proxy !== null ? 'proxy' : 'inproc';
    options.metrics.targetTransport(this.name, this.active);
  }

  get transport(): ActiveTransport {
    return this.active;
  }

  /** When the last switch (or the start) happened, on the `now` scale. */
  get since(): number {
    return this.changedAt;
  }

  /** `spec.transport`: `auto`, or the transport the target is pinned to. */
  get pinned(): Transport {
    return this.pin;
  }

  /** A new `spec.transport` (targets file reloaded): the next policy round moves the target to its pin. */
  setPinned(transport: Transport): void {
    if (transport === this.pin) return;
    this.o.log.info({ target: this.name, from: this.pin, to: transport }, `${this.name}: spec.transport is now ${transport}`);
    this.pin = transport;
  }

  get isSwitching(): boolean {
    return this.switching !== null;
  }

  /** A follower for `instance` over the transport now active. */
  follower(instance: PostgresInstance): LogFollower {
    return this.followerOn(instance, this.active);
  }

  add(instance: string, stream: InstanceStream): void {
    this.streams.set(instance, stream);
  }

  /**
   * Moves every stream to `to`; resolves once each reads again on it. A switch asked for
   * while one runs is refused (the policy asks again on its next round).
   */
  switchTo(to: ActiveTransport, reason: string): Promise<void> | null {
    if (this.switching !== null || to === this.active) return null;
    if (to === 'proxy' && this.o.proxy === null) return null;
    const from = this.active;
    this.active = to;
    this.changedAt = this.now();
    const { metrics, log } = this.o;
    metrics.transportSwitch(this.name, to);
    metrics.targetTransport(this.name, to);
    const rate = Math.round(this.meter.bitsPerS);
    log.info(
      { target: this.name, from, to, reason, rateBitsPerS: rate },
      `${this.name}: moving from ${from} to ${to} (${reason}, ${(rate / 1e6).toFixed(2)} Mbit/s)`,
    );
    const started = this.now();
    const moves = [...this.streams.entries()].map(([name, stream]) => {
      const instance = this.target.spec.instances.find((i) => i.name === name)!;
      return stream.switchFollower(this.followerOn(instance, to));
    });
    this.switching = Promise.all(moves)
      .then(() => {
        const ms = Math.round(this.now() - started);
        log.info({ target: this.name, from, to, switchMs: ms }, `${this.name}: reading through ${to} again after ${ms} ms`);
      })
      .finally(() => {
        this.switching = null;
      });
    return this.switching;
  }

  private followerOn(instance: PostgresInstance, transport: ActiveTransport): LogFollower {
    const shell = transport === 'proxy' && this.o.proxy !== null ? this.o.proxy : this.o.inproc;
    return new LogFollower(shell, {
      target: this.name,
      instance: instance.name,
      dataDirectory: instance.dataDirectory,
      logDirectory: instance.logDirectory,
      logFormat: instance.logFormat,
      startAt: instance.startAt ?? this.target.spec.startAt ?? this.o.startAt,
    });
  }
}
