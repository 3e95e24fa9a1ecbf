/**
 * Leader election on a coordination.k8s.io/v1 Lease, like client-go's leaderelection: a
 * candidate takes the lease when its holder has not renewed it for leaseDuration (measured on
 * the candidate's own clock from when it last saw the record change, so clocks need not
 * agree), the leader renews every retryPeriod and stops leading when it could not renew for
 * renewDeadline (before others may take over), and gives the lease up on a clean stop.
 * Writes are optimistic: a 409 means someone else wrote first; read again next round.
 */
import { setTimeout as sleep } from 'node:timers/promises';

import type { OwnerReference } from '../api/common.ts';
import type { KubeClient, KubeObject } from './client-types.ts';
import { isKubeError } from './errors.ts';
import { LEASES } from './resources.ts';

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

export type LeaderLog = (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown>) => void;

export interface LeaderElectorOptions {
  namespace: string;
  name: string;
  /** This candidate (pod name): unique among candidates. */
  identity: string;
  /** How long others wait after the last renewal before taking over. Default 15 s. */
  leaseDurationMs?: number;
  /** The leader stops leading when it could not renew for this long. Default 10 s (< leaseDurationMs). */
  renewDeadlineMs?: number;
  /** Between attempts to acquire or renew. Default 2 s. */
  retryPeriodMs?: number;
  /** Give the lease up when run() is aborted. Default true. */
  releaseOnCancel?: boolean;
  /**
   * Owners of the Lease object (the operator's Deployment): the garbage collector deletes the
   * Lease with them, so an uninstall leaves no Lease behind even when the last leader could
   * not give it up. Set when the Lease is created, and added when a leader takes an existing
   * Lease that has none. Resolved lazily: called on each write until it returns a value.
   */
  ownerReferences?: () => Promise<OwnerReference[] | undefined>;
  log?: LeaderLog;
  /** Time for the expiry math (tests). */
  clock?: { now(): number };
}

export interface LeaderCallbacks {
  /** Called when this candidate becomes leader; `leading` aborts when it stops being leader. */
  onStartedLeading(leading: AbortSignal): void;
  onStoppedLeading?(): void;
}

/** RFC 3339 with microseconds, the format of a MicroTime. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** When we last saw the lease record change, by our clock. */
export interface Observation {
  /** The record as a string, to see whether it changed. */
  record: string;
  at: number;
}

/** Observes `spec`: keeps the earlier observation when nothing changed. */
export function observe(previous: Observation | undefined, spec: LeaseSpec | undefined, now: number): Observation {
  const record = JSON.stringify([spec?.holderIdentity ?? '', spec?.renewTime ?? '', spec?.leaseDurationSeconds ?? 0, spec?.leaseTransitions ?? 0]);
  return previous !== undefined && previous.record === record ? previous : { record, at: now };
}

/** Whether `identity` may write itself into the lease now. */
export function mayAcquire(spec: LeaseSpec | undefined, observed: Observation, now: number, identity: string, defaultDurationMs: number): boolean {
  const holder = spec?.holderIdentity ?? '';
  if (holder === '' || holder === identity) return true;
  const durationMs = spec?.leaseDurationSeconds !== undefined ? spec.leaseDurationSeconds * 1000 : defaultDurationMs;
  return observed.at + durationMs <= now;
}

/** The spec that makes `identity` the holder (renewal keeps acquireTime and transitions). */
export function takeLease(spec: LeaseSpec | undefined, identity: string, now: number, leaseDurationMs: number): LeaseSpec {
  const renewing = spec?.holderIdentity === identity;
  return {
    holderIdentity: identity,
    leaseDurationSeconds: Math.max(1, Math.ceil(leaseDurationMs / 1000)),
    acquireTime: renewing && spec?.acquireTime !== undefined ? spec.acquireTime : microTime(now),
    renewTime: microTime(now),
    // Like client-go: every change of holder counts, taking a released lease too.
    leaseTransitions: spec === undefined ? 0 : (spec.leaseTransitions ?? 0) + (renewing ? 0 : 1),
  };
}

export class LeaderElector {
  private readonly client: KubeClient;
  private readonly namespace: string;
  private readonly name: string;
  private readonly identity: string;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly releaseOnCancel: boolean;
  private readonly log: LeaderLog;
  private readonly clock: { now(): number };
  private observed: Observation | undefined;
  private leader = false;

  private readonly resolveOwners: (() => Promise<OwnerReference[] | undefined>) | undefined;
  constructor(client: KubeClient, options: LeaderElectorOptions) {
    this.client = client;
    this.namespace = options.namespace;
    this.name = options.name;
    this.identity = options.identity;
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    this.releaseOnCancel = options.releaseOnCancel ?? true;
    this.log = options.log ?? (() => undefined);
    this.clock = options.clock ?? { now: () => Date.now() };
    this.resolveOwners = options.ownerReferences;
    if (this.renewDeadlineMs >= this.leaseDurationMs)
      throw new RangeError(`renewDeadlineMs (${this.renewDeadlineMs}) must be below leaseDurationMs (${this.leaseDurationMs})`);
  }

  isLeader(): boolean {
    return this.leader;
  }

  /** Campaigns, leads, campaigns again after losing the lease, until `signal` aborts. Never rejects. */
  async run(signal: AbortSignal, callbacks: LeaderCallbacks): Promise<void> {
    const fields = { lease: `${this.namespace}/${this.name}`, identity: this.identity };
    while (!signal.aborted) {
      if (!(await this.tryAcquireOrRenew())) {
        if (!(await this.pause(this.retryPeriodMs * (1 + Math.random() * 0.1), signal))) break;
        continue;
      }
      this.leader = true;
      const leading = new AbortController();
      this.log('info', 'started leading', fields);
      try {
        callbacks.onStartedLeading(leading.signal);
      } catch (e) {
        this.log('error', 'onStartedLeading threw', { ...fields, error: String(e) });
      }
      let renewedAt = this.clock.now();
      while (!signal.aborted) {
        if (!(await this.pause(this.retryPeriodMs, signal))) break;
        const deadline = renewedAt + this.renewDeadlineMs;
        // A hanging request must not keep us leading past the deadline.
        const timer = new AbortController();
        const renewed = await Promise.race([
          this.tryAcquireOrRenew(),
          sleep(Math.max(0, deadline - this.clock.now()), false, { signal: timer.signal }).catch(() => false),
        ]);
        timer.abort();
        if (renewed) renewedAt = this.clock.now();
        else if (this.clock.now() >= deadline) {
          this.log('warn', 'could not renew the lease within the renew deadline: stopped leading', { ...fields, renewDeadlineMs: this.renewDeadlineMs });
          break;
        }
      }
      this.leader = false;
      leading.abort();
      try {
        callbacks.onStoppedLeading?.();
      } catch (e) {
        this.log('error', 'onStoppedLeading threw', { ...fields, error: String(e) });
      }
      if (signal.aborted) {
        if (this.releaseOnCancel) await this.release();
        this.log('info', 'stopped leading', fields);
      }
    }
  }

  private async pause(ms: number, signal: AbortSignal): Promise<boolean> {
    try {
      await sleep(ms, undefined, { signal });
      return true;
    } catch {
      return false;
    }
  }

  /** The Lease's owners, or undefined (none configured, or not resolvable now: logged). */
  private async owners(): Promise<OwnerReference[] | undefined> {
    if (this.resolveOwners === undefined) return undefined;
    try {
      return await this.resolveOwners();
    } catch (e) {
      this.log('warn', 'cannot resolve the owner of the Lease; writing it without one', {
        lease: `${this.namespace}/${this.name}`,
        error: e instanceof Error ? e.message : String(e),
      });
      return undefined;
    }
  }

  /** One round: read the lease, take or renew it if we may. False when held by another or on any error. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    try {
      const now = this.clock.now();
      const lease = await this.client.get<Lease>(LEASES, this.namespace, this.name);
      if (lease === null) {
        const owners = await this.owners();
        const created = await this.client.create<Lease>(LEASES, {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.name, namespace: this.namespace, ...(owners === undefined ? {} : { ownerReferences: owners }) },
          spec: takeLease(undefined, this.identity, now, this.leaseDurationMs),
        });
        this.observed = observe(undefined, created.spec, now);
        return true;
      }
      this.observed = observe(this.observed, lease.spec, now);
      if (!mayAcquire(lease.spec, this.observed, now, this.identity, this.leaseDurationMs)) return false;
      const owners = lease.metadata.ownerReferences === undefined || lease.metadata.ownerReferences.length === 0 ? await this.owners() : undefined;
      const metadata = owners === undefined ? lease.metadata : { ...lease.metadata, ownerReferences: owners };
      const updated = await this.client.replace<Lease>(LEASES, { ...lease, metadata, spec: takeLease(lease.spec, this.identity, now, this.leaseDurationMs) });
      this.observed = observe(undefined, updated.spec, now);
      return true;
    } catch (e) {
      // 409: another candidate wrote first (AlreadyExists or Conflict): read again next round.
      if (!isKubeError(e, 'KUBE_CONFLICT')) {
        this.log('warn', 'lease read or write failed', { lease: `${this.namespace}/${this.name}`, error: e instanceof Error ? e.message : String(e) });
      }
      return false;
    }
  }

  /** Gives the lease up so another candidate takes over at once (only if we still hold it). */
  private async release(): Promise<void> {
    try {
      const lease = await this.client.get<Lease>(LEASES, this.namespace, this.name);
      if (lease?.spec?.holderIdentity !== this.identity) return;
      const now = microTime(this.clock.now());
      await this.client.replace<Lease>(LEASES, {
        ...lease,
        spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: now, acquireTime: now },
      });
    } catch (e) {
      this.log('warn', 'could not release the lease', { lease: `${this.namespace}/${this.name}`, error: e instanceof Error ? e.message : String(e) });
    }
  }
}
