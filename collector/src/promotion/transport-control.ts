/**
 * The promotion loop: once a second, sample every target's smoothed rate, ask the pure
 * policy (policy.ts) which targets should move, and move them. Pinned targets
 * (`spec.transport: inproc|proxy`) are moved to their pin; targets whose switch is still
 * running are left out of the round.
 */
import type { ActiveTransport, Transport } from '@pglog/common/api/postgres-target.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';
import { decideTransports, type PolicySettings, type ServerTransportState } from '@pglog/common/promotion/policy.ts';
import { pause } from '@pglog/common/time/clock.ts';

import type { CollectorMetrics } from '../observability/metrics.ts';
import type { SidecarClient } from '../transport/sidecar-client.ts';
import type { RateMeter } from './rate-meter.ts';

/**
 * What the loop needs of a running target (collect/target-streams.ts is the one there is),
 * declared here so promotion does not depend on the log engine that depends on it.
 */
export interface PromotableTarget {
  readonly name: string;
  readonly meter: RateMeter;
  readonly transport: ActiveTransport;
  readonly pinned: Transport;
  /** When the target last moved (ms since the epoch). */
  readonly since: number;
  readonly isSwitching: boolean;
  /** Starts a move; null when none is started (already there, one running, no sidecar). */
  switchTo(to: ActiveTransport, reason: string): Promise<void> | null;
}

export interface TransportControlOptions {
  /** The targets now running, asked every round: in cluster mode the set changes at run time. */
  targets: () => Iterable<PromotableTarget>;
  settings: PolicySettings;
  /** Null when there is no sidecar: nothing is ever promoted. */
  sidecar: SidecarClient | null;
  metrics: CollectorMetrics;
  log: Logger;
  /** Default 1000 ms. */
  intervalMs?: number;
  now?: () => number;
}

export class TransportControl {
  private readonly o: TransportControlOptions;
  private readonly now: () => number;
  private readonly switches = new Set<Promise<void>>();
  private wasAvailable: boolean | null = null;

  constructor(options: TransportControlOptions) {
    this.o = options;
    this.now = options.now ?? (() => performance.now());
  }

  /** Runs rounds until `signal` aborts, then waits for switches in flight. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      this.round();
      await pause(this.o.intervalMs ?? 1000, signal);
    }
    await Promise.allSettled([...this.switches]);
  }

  /** One decision round (public for tests). */
  round(): void {
    const { metrics, log, sidecar } = this.o;
    const now = this.now();
    const available = sidecar?.available() ?? false;
    // With --sshproxy off there is no sidecar to be up or down: no series, so no alert fires on it.
    if (sidecar !== null) metrics.sidecarUp(available);
    if (sidecar !== null && available !== this.wasAvailable) {
      if (available) log.info({ dir: sidecar.dir }, 'sshproxy sidecar is up');
      else if (this.wasAvailable === true)
        log.warn({ code: 'SIDECAR_UNAVAILABLE', dir: sidecar.dir }, `sshproxy sidecar unavailable: ${sidecar.unavailableReason()}`);
      this.wasAvailable = available;
    }
    const states: ServerTransportState[] = [];
    const byName = new Map<string, PromotableTarget>();
    for (const t of this.o.targets()) {
      const rate = t.meter.sample(now);
      metrics.targetRate(t.name, rate);
      if (t.transport === 'proxy')
        metrics.targetConnected(t.name, available && (sidecar?.status?.masters.some((m) => m.server === t.name && m.state === 'up') ?? false));
      if (t.isSwitching) continue;
      byName.set(t.name, t);
      // Without a sidecar a pinned proxy cannot be honoured: it stays where it is.
      const pinned = sidecar === null && t.pinned === 'proxy' ? 'inproc' : t.pinned;
      states.push({ name: t.name, pinned, current: t.transport, rateBitsPerS: rate, since: t.since });
    }
    for (const s of decideTransports(states, { ...this.o.settings, proxyAvailable: available }, now)) {
      const move = byName.get(s.name)?.switchTo(s.to, s.reason);
      if (move === undefined || move === null) continue;
      const tracked = move
        .catch((e: unknown) => {
          log.error({ target: s.name, err: e }, `${s.name}: moving to ${s.to} failed: ${(e as Error).message}`);
        })
        .finally(() => this.switches.delete(tracked));
      this.switches.add(tracked);
    }
  }
}
