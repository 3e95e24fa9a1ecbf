/**
 * The operator's transport choice for one shard (one pod, one sidecar): the collector's own
 * promotion policy (common/src/promotion/policy.ts: hysteresis, dwell, capacity),
 * applied to the rates the collector reported, plus the bookkeeping the policy leaves to its
 * caller (the transport of a target new to the shard, the time of each switch). Pure.
 *
 * The sidecar counts as available: whether it runs is the pod's business. The collector falls
 * back to `inproc` on its own while its sidecar is down and reports that in its status; the
 * operator's choice is what the shard should run once it is up again.
 */
import type { PoolTransport } from '@pglog/common/api/collector-pool.ts';
import type { ActiveTransport, Transport } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';
import { decideTransports, type PolicySettings, type ServerTransportState, validatePolicyOptions } from '@pglog/common/promotion/policy.ts';

export interface TransportCandidate {
  name: string;
  /** `spec.transport` of the target: `auto`, or a pin. */
  pinned: Transport;
  /** The transport the shard's spec gives it now; null when the target is new to this shard. */
  current: ActiveTransport | null;
  /** When that transport was chosen (ms); null when unknown (the dwell then starts now). */
  since: number | null;
  /** Smoothed read rate (bits per second); null when not measured yet (never switches by rate). */
  bitsPerSecond: number | null;
}

export interface TransportChoiceInput {
  targets: readonly TransportCandidate[];
  /** `pool.spec.transport`. */
  settings: PoolTransport;
  nowMs: number;
}

export interface TransportChoice {
  transport: ActiveTransport;
  /** Time (ms) the transport was chosen: unchanged unless it switched now or the target is new here. */
  since: number;
}

/** The pool's transport settings as the collector's policy takes them; CONFIG_INVALID when they make no sense. */
export function policySettings(settings: PoolTransport): PolicySettings {
  try {
    return validatePolicyOptions({
      promoteAboveBitsPerS: settings.promoteAboveBitsPerSecond,
      demoteBelowBitsPerS: settings.demoteBelowBitsPerSecond,
      minDwellMs: settings.minDwellSeconds * 1000,
      proxyCapacity: settings.proxyCapacityPerPod,
    });
  } catch (e) {
    throw new PglogError('CONFIG_INVALID', `spec.transport: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * Target name → transport and since, for every target of one shard, in name order.
 *
 * A target new to the shard starts on its pin, or `inproc` when `auto`, with its dwell
 * starting now (a target that moved between shards keeps its transport: the caller passes it
 * as `current` with `since` null). Then the policy runs. Last, the capacity is made a hard
 * bound for `auto` targets: the policy demotes only targets that have dwelt, so a lowered
 * `proxyCapacityPerPod`, or proxied targets arriving from other shards, could leave more in
 * the sidecar than it may run; the coldest `auto` ones go back to `inproc` regardless of their
 * dwell (dwell prevents flapping by rate, it does not license overload).
 */
export function chooseTransports(input: TransportChoiceInput): Map<string, TransportChoice> {
  const policy = policySettings(input.settings);
  const { nowMs } = input;
  const servers: ServerTransportState[] = [];
  const seen = new Set<string>();
  for (const t of input.targets) {
    if (seen.has(t.name)) throw new PglogError('CONFIG_INVALID', `transport choice: target ${t.name} appears twice in one shard`);
    seen.add(t.name);
    servers.push({
      name: t.name,
      pinned: t.pinned,
      current: t.current ?? (t.pinned === 'auto' ? 'inproc' : t.pinned),
      // NaN: the policy never switches a target by a rate it does not know.
      rateBitsPerS: t.bitsPerSecond ?? Number.NaN,
      since: t.current === null || t.since === null ? nowMs : t.since,
    });
  }

  const chosen = new Map<string, TransportChoice>(servers.map((s) => [s.name, { transport: s.current, since: s.since }]));
  for (const sw of decideTransports(servers, { ...policy, proxyAvailable: true }, nowMs)) {
    chosen.set(sw.name, { transport: sw.to, since: nowMs });
  }

  const pinnedInProxy = servers.filter((s) => s.pinned === 'proxy').length;
  const autoInProxy = servers
    .filter((s) => s.pinned === 'auto' && chosen.get(s.name)!.transport === 'proxy')
    .sort((a, b) => coldness(a) - coldness(b) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const autoRoom = Math.max(0, policy.proxyCapacity - pinnedInProxy);
  for (const s of autoInProxy.slice(0, Math.max(0, autoInProxy.length - autoRoom))) {
    chosen.set(s.name, { transport: 'inproc', since: nowMs });
  }

  return new Map([...chosen].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Sort key, coldest first: an unmeasured rate counts as the coldest. */
function coldness(s: ServerTransportState): number {
  return Number.isNaN(s.rateBitsPerS) ? Number.NEGATIVE_INFINITY : s.rateBitsPerS;
}
