/**
 * Which transport each target's streams should use: promotion of hot targets to the sshproxy
 * sidecar and demotion of cold ones back to the in-process client, with hysteresis, a minimum
 * dwell time and a per-process capacity (docs/decisions/0007-transport-promotion.md).
 *
 * Pure: the caller passes the servers' state, the options and the time; the result is the
 * list of switches to make. The caller makes them (stop the old stream at a committed offset,
 * start the new one there) and sets the server's `since` to the time of the switch.
 *
 * Rules, in order:
 * 1. A pinned server (`inproc` or `proxy`) goes to its pin at once, whatever its dwell, rate
 *    or the capacity. A server pinned to `proxy` goes there even while the sidecar is down:
 *    its streams wait for it.
 * 2. While the sidecar is unavailable, every `auto` server in `proxy` goes back to `inproc`
 *    at once (its streams cannot run), and nothing is promoted.
 * 3. An `auto` server in `proxy` that has dwelt and whose rate is below `demoteBelowBitsPerS`
 *    is demoted.
 * 4. If more servers are in `proxy` than `proxyCapacity` (pins added, for example), the
 *    coldest `auto` servers in `proxy` that have dwelt are demoted until it fits.
 * 5. `auto` servers in `inproc` that have dwelt and whose rate is above `promoteAboveBitsPerS`
 *    are promoted, hottest first, while fewer than `proxyCapacity` servers are in `proxy`
 *    (pinned ones included, after steps 1-4).
 * 6. Optional (`swapFactor` > 0; off by default): at capacity, the hottest remaining candidate
 *    of step 5 trades places with the coldest `auto` server in `proxy` that has dwelt, if it is
 *    at least `swapFactor` times hotter; repeated pairwise while that holds.
 *
 * "Dwelt" means `nowMs - since >= minDwellMs`. A rate between the thresholds (inclusive)
 * never switches a server by itself; only steps 2, 4 and 6 can move such a server. A rate
 * that is NaN never switches a server by rate.
 */
import type { ActiveTransport, Transport } from '../api/postgres-target.ts';

/** One server (target) as the policy sees it. */
export interface ServerTransportState {
  /** Target name; switches name it. */
  name: string;
  /** The configured transport: `auto` lets the policy choose; `inproc`/`proxy` pin it. */
  pinned: Transport;
  /** The transport its streams use now. */
  current: ActiveTransport;
  /** Smoothed read rate over all its instances, bits per second (`RateMeter.bitsPerS`). */
  rateBitsPerS: number;
  /** Time (ms, same scale as `nowMs`) of its last switch, or of its start. */
  since: number;
}

/** The configured part of the options: validated once, see `validatePolicyOptions`. */
export interface PolicySettings {
  /** An `auto` server above this rate (bits/s) is promoted. Default 1.25e6. */
  promoteAboveBitsPerS: number;
  /** An `auto` server below this rate (bits/s) is demoted. Default 0.75e6. */
  demoteBelowBitsPerS: number;
  /** Minimum time (ms) between two switches of an `auto` server. Default 60000. */
  minDwellMs: number;
  /** Most servers in `proxy` in this process (pinned ones included). Default 64. */
  proxyCapacity: number;
  /**
   * At capacity, an `auto` candidate for promotion at least this many times hotter than the
   * coldest `auto` server in `proxy` trades places with it (both must have dwelt). 0 turns
   * swapping off; otherwise it must be greater than 1. Default 0 (off).
   */
  swapFactor: number;
}

/** Everything `decideTransports` needs: the settings and whether the sidecar is up now. */
export interface PolicyOptions extends PolicySettings {
  /** Whether the sshproxy sidecar is up. When false nothing is promoted and `auto` servers leave `proxy`. */
  proxyAvailable: boolean;
}

export const DEFAULT_POLICY_SETTINGS: Readonly<PolicySettings> = Object.freeze({
  promoteAboveBitsPerS: 1.25e6,
  demoteBelowBitsPerS: 0.75e6,
  minDwellMs: 60_000,
  proxyCapacity: 64,
  swapFactor: 0,
});

export type SwitchReason = 'pinned' | 'promote' | 'demote' | 'over-capacity' | 'proxy-unavailable' | 'swap';

/** One transport change to make. */
export interface Switch {
  name: string;
  from: ActiveTransport;
  to: ActiveTransport;
  reason: SwitchReason;
}

/**
 * Apply the defaults to `input` and check the result; throws an Error naming the bad option
 * (the CLI reports it as a usage error). Call once, when the configuration is read.
 */
export function validatePolicyOptions(input: Partial<PolicySettings> = {}): PolicySettings {
  const s: PolicySettings = {
    promoteAboveBitsPerS: input.promoteAboveBitsPerS ?? DEFAULT_POLICY_SETTINGS.promoteAboveBitsPerS,
    demoteBelowBitsPerS: input.demoteBelowBitsPerS ?? DEFAULT_POLICY_SETTINGS.demoteBelowBitsPerS,
    minDwellMs: input.minDwellMs ?? DEFAULT_POLICY_SETTINGS.minDwellMs,
    proxyCapacity: input.proxyCapacity ?? DEFAULT_POLICY_SETTINGS.proxyCapacity,
    swapFactor: input.swapFactor ?? DEFAULT_POLICY_SETTINGS.swapFactor,
  };
  const nonNegative = (key: keyof PolicySettings, unit: string): void => {
    const v = s[key];
    if (!Number.isFinite(v) || v < 0) throw new Error(`transport policy: ${key} must be a non-negative number of ${unit}, got ${String(v)}`);
  };
  nonNegative('demoteBelowBitsPerS', 'bits per second');
  nonNegative('promoteAboveBitsPerS', 'bits per second');
  nonNegative('minDwellMs', 'milliseconds');
  if (!(s.promoteAboveBitsPerS > s.demoteBelowBitsPerS)) {
    throw new Error(
      `transport policy: promoteAboveBitsPerS (${s.promoteAboveBitsPerS}) must be greater than demoteBelowBitsPerS (${s.demoteBelowBitsPerS}), or servers between them would flap`,
    );
  }
  if (!Number.isSafeInteger(s.proxyCapacity) || s.proxyCapacity < 0) {
    throw new Error(`transport policy: proxyCapacity must be a whole number >= 0, got ${String(s.proxyCapacity)}`);
  }
  if (!(s.swapFactor === 0 || (Number.isFinite(s.swapFactor) && s.swapFactor > 1))) {
    throw new Error(`transport policy: swapFactor must be 0 (no swaps) or a number greater than 1, got ${String(s.swapFactor)}`);
  }
  return s;
}

/** Hottest first; ties by name, so the result does not depend on the input order. */
function hotterFirst(a: ServerTransportState, b: ServerTransportState): number {
  if (a.rateBitsPerS !== b.rateBitsPerS) return a.rateBitsPerS > b.rateBitsPerS ? -1 : 1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/**
 * The switches to make now. Switches to `inproc` come before switches to `proxy`, so a
 * caller that applies them in order frees sidecar slots before it fills them. Options are
 * assumed valid (`validatePolicyOptions`).
 */
export function decideTransports(servers: readonly ServerTransportState[], options: PolicyOptions, nowMs: number): Switch[] {
  const leaving: Switch[] = [];
  const entering: Switch[] = [];
  const move = (s: ServerTransportState, to: ActiveTransport, reason: SwitchReason): void => {
    (to === 'inproc' ? leaving : entering).push({ name: s.name, from: s.current, to, reason });
  };
  const dwelt = (s: ServerTransportState): boolean => nowMs - s.since >= options.minDwellMs;

  let inProxy = 0; // servers in proxy once the switches decided so far are made
  const candidates: ServerTransportState[] = []; // auto, inproc, dwelt, hot
  const movable: ServerTransportState[] = []; // auto, staying in proxy, dwelt, not cold

  for (const s of servers) {
    if (s.pinned !== 'auto') {
      if (s.current !== s.pinned) move(s, s.pinned, 'pinned');
      if (s.pinned === 'proxy') inProxy++;
    } else if (s.current === 'proxy') {
      if (!options.proxyAvailable) {
        move(s, 'inproc', 'proxy-unavailable');
      } else if (dwelt(s) && s.rateBitsPerS < options.demoteBelowBitsPerS) {
        move(s, 'inproc', 'demote');
      } else {
        inProxy++;
        if (dwelt(s) && s.rateBitsPerS >= options.demoteBelowBitsPerS) movable.push(s);
      }
    } else if (options.proxyAvailable && dwelt(s) && s.rateBitsPerS > options.promoteAboveBitsPerS) {
      candidates.push(s);
    }
  }

  candidates.sort(hotterFirst);
  movable.sort((a, b) => hotterFirst(b, a));
  let hot = 0;
  let cold = 0;
  for (; inProxy > options.proxyCapacity && cold < movable.length; cold++, inProxy--) {
    move(movable[cold]!, 'inproc', 'over-capacity');
  }
  for (; inProxy < options.proxyCapacity && hot < candidates.length; hot++, inProxy++) {
    move(candidates[hot]!, 'proxy', 'promote');
  }
  if (options.swapFactor > 0) {
    for (; hot < candidates.length && cold < movable.length; hot++, cold++) {
      const h = candidates[hot]!;
      const c = movable[cold]!;
      if (!(h.rateBitsPerS >= options.swapFactor * c.rateBitsPerS)) break;
      move(c, 'inproc', 'swap');
      move(h, 'proxy', 'swap');
    }
  }
  return [...leaving, ...entering];
}
