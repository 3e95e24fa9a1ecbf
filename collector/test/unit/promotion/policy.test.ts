// Transport promotion and demotion (docs/decisions/0007-transport-promotion.md), a pure
// decision over a fleet: option checks, each rule on hand-built fleets (dwell, pins, capacity,
// swaps, no sidecar), fast-check properties over random fleets and options (capacity, reasons
// that hold, idempotence, order independence), and a second-by-second simulation with a real
// RateMeter: no flapping between close rates, one promotion and one demotion for a burst.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { ActiveTransport, Transport } from '@pglog/common/api/postgres-target.ts';
import {
  decideTransports,
  DEFAULT_POLICY_SETTINGS,
  type PolicyOptions,
  type ServerTransportState,
  type Switch,
  validatePolicyOptions,
} from '@pglog/common/promotion/policy.ts';
import fc from 'fast-check';

import { RateMeter } from '../../../src/promotion/rate-meter.ts';

const NOW = 10_000_000;
const DEFAULTS: PolicyOptions = { ...validatePolicyOptions(), proxyAvailable: true };

function server(name: string, pinned: Transport, current: ActiveTransport, mbit: number, dweltMs = 3_600_000): ServerTransportState {
  return { name, pinned, current, rateBitsPerS: mbit * 1e6, since: NOW - dweltMs };
}

/** The fleet once the switches are made at `nowMs`. */
function apply(servers: readonly ServerTransportState[], switches: readonly Switch[], nowMs: number): ServerTransportState[] {
  const byName = new Map(switches.map((s) => [s.name, s]));
  return servers.map((s) => {
    const sw = byName.get(s.name);
    return sw === undefined ? s : { ...s, current: sw.to, since: nowMs };
  });
}

const proxyCount = (servers: readonly ServerTransportState[]): number => servers.filter((s) => s.current === 'proxy').length;
const brief = (switches: readonly Switch[]): string[] => switches.map((s) => `${s.name}:${s.from}->${s.to}:${s.reason}`);

describe('validatePolicyOptions', () => {
  it('applies the defaults of ADR 0007', () => {
    assert.deepEqual(validatePolicyOptions(), {
      promoteAboveBitsPerS: 1.25e6,
      demoteBelowBitsPerS: 0.75e6,
      minDwellMs: 60_000,
      proxyCapacity: 64,
      swapFactor: 0,
    });
    assert.deepEqual(validatePolicyOptions({ proxyCapacity: 0, swapFactor: 2 }), { ...DEFAULT_POLICY_SETTINGS, proxyCapacity: 0, swapFactor: 2 });
  });

  it('rejects options that would flap or make no sense, naming the option', () => {
    assert.throws(
      () => validatePolicyOptions({ promoteAboveBitsPerS: 0.75e6 }),
      /promoteAboveBitsPerS \(750000\) must be greater than demoteBelowBitsPerS \(750000\)/,
    );
    assert.throws(() => validatePolicyOptions({ promoteAboveBitsPerS: 1e6, demoteBelowBitsPerS: 2e6 }), /must be greater than demoteBelowBitsPerS/);
    assert.throws(() => validatePolicyOptions({ demoteBelowBitsPerS: -1 }), /demoteBelowBitsPerS must be a non-negative number/);
    assert.throws(() => validatePolicyOptions({ promoteAboveBitsPerS: Number.NaN }), /promoteAboveBitsPerS must be/);
    assert.throws(() => validatePolicyOptions({ minDwellMs: -5 }), /minDwellMs must be a non-negative number of milliseconds/);
    assert.throws(() => validatePolicyOptions({ proxyCapacity: -1 }), /proxyCapacity must be a whole number >= 0, got -1/);
    assert.throws(() => validatePolicyOptions({ proxyCapacity: 1.5 }), /proxyCapacity/);
    assert.throws(() => validatePolicyOptions({ swapFactor: 1 }), /swapFactor must be 0 \(no swaps\) or a number greater than 1/);
    assert.throws(() => validatePolicyOptions({ swapFactor: Number.POSITIVE_INFINITY }), /swapFactor/);
  });
});

describe('decideTransports: rules', () => {
  it('promotes a hot auto server that has dwelt and demotes a cold one; thresholds are exclusive', () => {
    const fleet = [
      server('hot', 'auto', 'inproc', 1.3),
      server('at-promote', 'auto', 'inproc', 1.25),
      server('cold', 'auto', 'proxy', 0.7),
      server('at-demote', 'auto', 'proxy', 0.75),
      server('warm-in', 'auto', 'inproc', 1.0),
      server('warm-out', 'auto', 'proxy', 1.0),
    ];
    assert.deepEqual(brief(decideTransports(fleet, DEFAULTS, NOW)), ['cold:proxy->inproc:demote', 'hot:inproc->proxy:promote']);
  });

  it('waits for the minimum dwell (exactly minDwellMs is enough)', () => {
    const fleet = [
      server('hot-new', 'auto', 'inproc', 5, 59_999),
      server('cold-new', 'auto', 'proxy', 0, 59_999),
      server('hot-dwelt', 'auto', 'inproc', 5, 60_000),
      server('cold-dwelt', 'auto', 'proxy', 0, 60_000),
    ];
    assert.deepEqual(brief(decideTransports(fleet, DEFAULTS, NOW)), ['cold-dwelt:proxy->inproc:demote', 'hot-dwelt:inproc->proxy:promote']);
  });

  it('moves pinned servers to their pin at once, ignoring dwell, rate and capacity', () => {
    const fleet = [
      server('p-in', 'inproc', 'proxy', 9, 0),
      server('p-out', 'proxy', 'inproc', 0, 0),
      server('p-out-2', 'proxy', 'inproc', 0, 0),
      server('p-stay', 'proxy', 'proxy', 0, 0),
    ];
    assert.deepEqual(brief(decideTransports(fleet, { ...DEFAULTS, proxyCapacity: 1 }, NOW)), [
      'p-in:proxy->inproc:pinned',
      'p-out:inproc->proxy:pinned',
      'p-out-2:inproc->proxy:pinned',
    ]);
  });

  it('without the sidecar: demotes auto proxies at once, promotes nothing, and pinned proxies go or stay there to wait', () => {
    const fleet = [
      server('auto-new', 'auto', 'proxy', 9, 0),
      server('auto-hot', 'auto', 'inproc', 9),
      server('pinned-stays', 'proxy', 'proxy', 9, 0),
      server('pinned-goes', 'proxy', 'inproc', 9, 0),
    ];
    assert.deepEqual(brief(decideTransports(fleet, { ...DEFAULTS, proxyAvailable: false }, NOW)), [
      'auto-new:proxy->inproc:proxy-unavailable',
      'pinned-goes:inproc->proxy:pinned',
    ]);
  });

  it('promotes the hottest first up to the capacity, pinned proxies included', () => {
    const fleet = [
      server('a', 'auto', 'inproc', 2),
      server('b', 'auto', 'inproc', 4),
      server('c', 'auto', 'inproc', 3),
      server('d', 'auto', 'inproc', 3),
      server('pin', 'proxy', 'proxy', 0),
    ];
    assert.deepEqual(brief(decideTransports(fleet, { ...DEFAULTS, proxyCapacity: 3 }, NOW)), ['b:inproc->proxy:promote', 'c:inproc->proxy:promote']);
    // A demotion frees its slot for a promotion in the same decision.
    const full = [server('in', 'auto', 'inproc', 2), server('out', 'auto', 'proxy', 0.1)];
    assert.deepEqual(brief(decideTransports(full, { ...DEFAULTS, proxyCapacity: 1 }, NOW)), ['out:proxy->inproc:demote', 'in:inproc->proxy:promote']);
  });

  it('promotes no auto server when pinned proxies alone fill the capacity, and demotes dwelt auto proxies over it, coldest first', () => {
    const fleet = [
      server('pin1', 'proxy', 'proxy', 0),
      server('pin2', 'proxy', 'inproc', 0),
      server('hot', 'auto', 'inproc', 9),
      server('warm', 'auto', 'proxy', 1.0),
      server('warmer', 'auto', 'proxy', 1.2),
      server('new', 'auto', 'proxy', 1.0, 1000),
    ];
    assert.deepEqual(brief(decideTransports(fleet, { ...DEFAULTS, proxyCapacity: 2 }, NOW)), [
      'warm:proxy->inproc:over-capacity',
      'warmer:proxy->inproc:over-capacity',
      'pin2:inproc->proxy:pinned',
    ]);
    assert.deepEqual(brief(decideTransports(fleet, { ...DEFAULTS, proxyCapacity: 4 }, NOW)), ['warm:proxy->inproc:over-capacity', 'pin2:inproc->proxy:pinned']);
  });

  it('swaps at capacity only when enabled, both have dwelt, and the candidate is swapFactor times hotter', () => {
    const fleet = [server('lukewarm', 'auto', 'proxy', 1.0), server('hot', 'auto', 'inproc', 2.0)];
    const atCap = { ...DEFAULTS, proxyCapacity: 1 };
    assert.deepEqual(brief(decideTransports(fleet, atCap, NOW)), []);
    assert.deepEqual(brief(decideTransports(fleet, { ...atCap, swapFactor: 2 }, NOW)), ['lukewarm:proxy->inproc:swap', 'hot:inproc->proxy:swap']);
    assert.deepEqual(brief(decideTransports(fleet, { ...atCap, swapFactor: 2.01 }, NOW)), []);
    const young = [server('lukewarm', 'auto', 'proxy', 1.0, 1000), server('hot', 'auto', 'inproc', 9)];
    assert.deepEqual(brief(decideTransports(young, { ...atCap, swapFactor: 2 }, NOW)), []);
    // Pairwise, hottest with coldest, until the factor no longer holds.
    const many = [
      server('p1', 'auto', 'proxy', 1.0),
      server('p2', 'auto', 'proxy', 1.5),
      server('p3', 'auto', 'proxy', 3),
      server('i1', 'auto', 'inproc', 5),
      server('i2', 'auto', 'inproc', 3.1),
      server('i3', 'auto', 'inproc', 2.9),
    ];
    assert.deepEqual(brief(decideTransports(many, { ...DEFAULTS, proxyCapacity: 3, swapFactor: 2 }, NOW)), [
      'p1:proxy->inproc:swap',
      'p2:proxy->inproc:swap',
      'i1:inproc->proxy:swap',
      'i2:inproc->proxy:swap',
    ]);
  });

  it('never switches a server by a rate that is NaN', () => {
    const fleet = [server('a', 'auto', 'proxy', Number.NaN), server('b', 'auto', 'inproc', Number.NaN)];
    assert.deepEqual(decideTransports(fleet, { ...DEFAULTS, proxyCapacity: 0, swapFactor: 2 }, NOW), []);
  });
});

// ---------------------------------------------------------------------------------------------
// Properties over random fleets and options.

const rateArb = fc.oneof(fc.double({ min: 0, max: 6e6, noNaN: true }), fc.constantFrom(0, 0.5e6, 0.75e6, 1e6, 1.25e6, 1.5e6, 2e6, 2.5e6, 3e6, 5e6));
const optionsArb: fc.Arbitrary<PolicyOptions> = fc
  .record({
    demote: fc.oneof(fc.constantFrom(0, 0.75e6, 1e6), fc.double({ min: 0, max: 3e6, noNaN: true })),
    gap: fc.oneof(fc.constant(0.5e6), fc.double({ min: 1, max: 2e6, noNaN: true })),
    minDwellMs: fc.oneof(fc.constantFrom(0, 60_000), fc.integer({ min: 0, max: 120_000 })),
    proxyCapacity: fc.integer({ min: 0, max: 12 }),
    swapFactor: fc.oneof(fc.constant(0), fc.constantFrom(1.5, 2), fc.double({ min: 1.01, max: 4, noNaN: true })),
    proxyAvailable: fc.oneof({ weight: 4, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
  })
  .map((o) => ({
    ...validatePolicyOptions({
      demoteBelowBitsPerS: o.demote,
      promoteAboveBitsPerS: o.demote + o.gap,
      minDwellMs: o.minDwellMs,
      proxyCapacity: o.proxyCapacity,
      swapFactor: o.swapFactor,
    }),
    proxyAvailable: o.proxyAvailable,
  }));
const fleetArb: fc.Arbitrary<ServerTransportState[]> = fc
  .array(
    fc.record({
      pinned: fc.oneof({ weight: 4, arbitrary: fc.constant<Transport>('auto') }, { weight: 1, arbitrary: fc.constantFrom<Transport>('inproc', 'proxy') }),
      current: fc.constantFrom<ActiveTransport>('inproc', 'proxy'),
      rateBitsPerS: rateArb,
      age: fc.oneof(fc.constantFrom(0, 60_000), fc.integer({ min: 0, max: 200_000 })),
    }),
    { maxLength: 30 },
  )
  .map((rows) =>
    rows.map((r, i) => ({
      name: `t${String(i).padStart(2, '0')}`,
      pinned: r.pinned,
      current: r.current,
      rateBitsPerS: r.rateBitsPerS,
      since: NOW - r.age,
    })),
  );

function checkFleet(check: (fleet: ServerTransportState[], o: PolicyOptions, switches: Switch[], after: ServerTransportState[]) => void): void {
  fc.assert(
    fc.property(fleetArb, optionsArb, (fleet, o) => {
      const switches = decideTransports(fleet, o, NOW);
      check(fleet, o, switches, apply(fleet, switches, NOW));
    }),
    { numRuns: 2000 },
  );
}

const dwelt = (s: ServerTransportState, o: PolicyOptions): boolean => NOW - s.since >= o.minDwellMs;
const between = (s: ServerTransportState, o: PolicyOptions): boolean => s.rateBitsPerS >= o.demoteBelowBitsPerS && s.rateBitsPerS <= o.promoteAboveBitsPerS;

describe('decideTransports: properties', () => {
  it('switches each server at most once, always to the other transport, leaving proxy before entering it', () => {
    checkFleet((fleet, _o, switches) => {
      assert.equal(new Set(switches.map((s) => s.name)).size, switches.length);
      const byName = new Map(fleet.map((s) => [s.name, s]));
      for (const sw of switches) {
        assert.equal(sw.from, byName.get(sw.name)?.current);
        assert.notEqual(sw.from, sw.to);
      }
      const firstEntering = switches.findIndex((s) => s.to === 'proxy');
      assert.ok(firstEntering === -1 || switches.slice(firstEntering).every((s) => s.to === 'proxy'));
    });
  });

  it('never exceeds the capacity by promoting; over it only with pinned proxies and auto proxies that have not dwelt', () => {
    checkFleet((fleet, o, switches, after) => {
      const pinnedProxies = fleet.filter((s) => s.pinned === 'proxy').length;
      const stuck = fleet.filter((s) => s.pinned === 'auto' && s.current === 'proxy' && o.proxyAvailable && !dwelt(s, o)).length;
      assert.ok(proxyCount(after) <= Math.max(o.proxyCapacity, pinnedProxies + stuck), `${proxyCount(after)} in proxy`);
      if (switches.some((s) => s.reason === 'promote')) assert.ok(proxyCount(after) <= o.proxyCapacity);
      if (pinnedProxies >= o.proxyCapacity) {
        const enteredAuto = switches.filter((s) => s.to === 'proxy' && s.reason !== 'pinned');
        assert.deepEqual(enteredAuto, []);
      }
    });
  });

  it('ends every pinned server at its pin', () => {
    checkFleet((_fleet, _o, _switches, after) => {
      for (const s of after) if (s.pinned !== 'auto') assert.equal(s.current, s.pinned, s.name);
    });
  });

  it('does not switch an auto server that has not dwelt, unless the sidecar is unavailable', () => {
    checkFleet((fleet, o, switches) => {
      const byName = new Map(fleet.map((s) => [s.name, s]));
      for (const sw of switches) {
        const s = byName.get(sw.name)!;
        if (s.pinned === 'auto' && !dwelt(s, o)) assert.equal(sw.reason, 'proxy-unavailable');
      }
    });
  });

  it('never switches an auto server by a rate between the thresholds (only an unavailable sidecar, an over-full one or a swap can move it)', () => {
    checkFleet((fleet, o, switches) => {
      const byName = new Map(fleet.map((s) => [s.name, s]));
      const proxyAfterPins = fleet.filter((s) => (s.pinned === 'auto' ? s.current : s.pinned) === 'proxy').length;
      for (const sw of switches) {
        const s = byName.get(sw.name)!;
        if (s.pinned !== 'auto' || !between(s, o)) continue;
        assert.ok(['proxy-unavailable', 'over-capacity', 'swap'].includes(sw.reason), brief([sw])[0]);
        if (sw.reason === 'proxy-unavailable') assert.equal(o.proxyAvailable, false);
        if (sw.reason === 'over-capacity') assert.ok(proxyAfterPins > o.proxyCapacity);
        if (sw.reason === 'swap') assert.ok(o.swapFactor > 0 && sw.to === 'inproc');
      }
    });
  });

  it('gives each switch a reason that holds', () => {
    checkFleet((fleet, o, switches) => {
      const byName = new Map(fleet.map((s) => [s.name, s]));
      const swaps = switches.filter((s) => s.reason === 'swap');
      for (const sw of switches) {
        const s = byName.get(sw.name)!;
        switch (sw.reason) {
          case 'pinned':
            assert.equal(sw.to, s.pinned);
            break;
          case 'promote':
            assert.ok(s.pinned === 'auto' && o.proxyAvailable && s.rateBitsPerS > o.promoteAboveBitsPerS && sw.to === 'proxy');
            break;
          case 'demote':
            assert.ok(s.pinned === 'auto' && s.rateBitsPerS < o.demoteBelowBitsPerS && sw.to === 'inproc');
            break;
          case 'over-capacity':
            assert.ok(s.pinned === 'auto' && sw.to === 'inproc');
            break;
          case 'proxy-unavailable':
            assert.ok(s.pinned === 'auto' && !o.proxyAvailable && sw.to === 'inproc');
            break;
          case 'swap':
            assert.ok(s.pinned === 'auto' && o.proxyAvailable && o.swapFactor > 0);
            break;
        }
      }
      // Swaps come in pairs, each hot one at least swapFactor times hotter than the cold one.
      const outs = swaps.filter((s) => s.to === 'inproc').map((s) => byName.get(s.name)!.rateBitsPerS);
      const ins = swaps.filter((s) => s.to === 'proxy').map((s) => byName.get(s.name)!.rateBitsPerS);
      assert.equal(outs.length, ins.length);
      for (const [i, r] of ins.entries()) {
        assert.ok(r > o.promoteAboveBitsPerS && r >= o.swapFactor * outs[i]!);
      }
    });
  });

  it('is idempotent: deciding again at the same time after the switches gives none', () => {
    checkFleet((_fleet, o, _switches, after) => {
      assert.deepEqual(decideTransports(after, o, NOW), []);
    });
  });

  it('promotes the hottest candidates first', () => {
    checkFleet((fleet, o, switches) => {
      const entered = new Set(switches.filter((s) => s.to === 'proxy' && s.reason !== 'pinned').map((s) => s.name));
      const candidates = fleet.filter(
        (s) => s.pinned === 'auto' && s.current === 'inproc' && o.proxyAvailable && dwelt(s, o) && s.rateBitsPerS > o.promoteAboveBitsPerS,
      );
      const coolestIn = Math.min(...candidates.filter((s) => entered.has(s.name)).map((s) => s.rateBitsPerS));
      for (const s of candidates) if (!entered.has(s.name)) assert.ok(s.rateBitsPerS <= coolestIn, `${s.name} left behind`);
    });
  });

  it('does not depend on the order of the servers', () => {
    checkFleet((fleet, o, switches) => {
      const key = (sws: Switch[]): string[] => brief(sws).sort();
      assert.deepEqual(key(decideTransports(fleet.toReversed(), o, NOW)), key(switches));
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Simulation: a RateMeter fed once a second, a decision once a second, the default options.

interface Timed {
  atS: number;
  sw: Switch;
}

function simulate(rateAt: (second: number) => number, seconds: number, start: ActiveTransport = 'inproc', burst = false): Timed[] {
  const meter = new RateMeter(0);
  const s: ServerTransportState = { name: 'pg1', pinned: 'auto', current: start, rateBitsPerS: 0, since: 0 };
  const out: Timed[] = [];
  for (let i = 0; i < seconds; i++) {
    const bytes = rateAt(i) / 8;
    if (burst) {
      // Reads of uneven size, as a socket delivers them.
      meter.add(bytes * 0.7);
      meter.add(bytes * 0.2);
      meter.add(bytes * 0.1);
    } else {
      meter.add(bytes);
    }
    const now = (i + 1) * 1000;
    s.rateBitsPerS = meter.sample(now);
    for (const sw of decideTransports([s], DEFAULTS, now)) {
      out.push({ atS: i + 1, sw });
      s.current = sw.to;
      s.since = now;
    }
  }
  return out;
}

describe('decideTransports: simulation with RateMeter', () => {
  it('never switches a server whose rate oscillates between 1.0 and 1.1 Mbit/s', () => {
    for (const period of [1, 7, 60, 300]) {
      for (const start of ['inproc', 'proxy'] as const) {
        const rate = (sec: number): number => (Math.floor(sec / period) % 2 === 0 ? 1.0e6 : 1.1e6);
        assert.deepEqual(simulate(rate, 3600, start, true), [], `period ${period} s, starting in ${start}`);
      }
    }
  });

  it('promotes once and demotes once a server at 2 Mbit/s for 5 minutes, then 0.1 Mbit/s', () => {
    const events = simulate((sec) => (sec < 300 ? 2e6 : 0.1e6), 1800);
    assert.deepEqual(
      events.map((e) => `${e.sw.reason}:${e.sw.to}`),
      ['promote:proxy', 'demote:inproc'],
    );
    const [up, down] = events;
    // Above 1.25 Mbit/s after about 30 s, but not before the 60 s dwell from the start.
    assert.equal(up?.atS, 60);
    // 2 Mbit/s decays below 0.75 Mbit/s about tau * ln(1.9 / 0.65) = 32 s after the drop.
    assert.ok(down !== undefined && down.atS > 300 && down.atS < 300 + 40, `demoted at ${down?.atS}`);
  });
});
