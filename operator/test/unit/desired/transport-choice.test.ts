// The operator's per-shard transport choice, one target stepped through time with each
// choice fed back: promotion and demotion after the dwell, new and moved targets, pins,
// unmeasured rates, capacity; fast-check properties that rates inside the band never switch
// and auto targets stay within the capacity the pins leave.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { PoolTransport } from '@pglog/common/api/collector-pool.ts';
import fc from 'fast-check';

import { chooseTransports, type TransportCandidate, type TransportChoice } from '../../../src/desired/transport-choice.ts';

const SETTINGS: PoolTransport = { promoteAboveBitsPerSecond: 1_250_000, demoteBelowBitsPerSecond: 750_000, minDwellSeconds: 60, proxyCapacityPerPod: 64 };
const T0 = 1_800_000_000_000;

/** Runs one target through a sequence of (time, rate), feeding each choice back as the next input. */
function run(
  steps: Array<{ at: number; bits: number | null }>,
  start: TransportChoice,
  pinned: TransportCandidate['pinned'] = 'auto',
  settings = SETTINGS,
): TransportChoice[] {
  let state = start;
  return steps.map(({ at, bits }) => {
    state = chooseTransports({ targets: [{ name: 't', pinned, current: state.transport, since: state.since, bitsPerSecond: bits }], settings, nowMs: at }).get(
      't',
    )!;
    return state;
  });
}

describe('chooseTransports', () => {
  it('promotes above the upper threshold once dwelt, demotes below the lower one only after the dwell', () => {
    const out = run(
      [
        { at: T0 + 10_000, bits: 2e6 }, // hot, but only 10 s on inproc: stays
        { at: T0 + 60_000, bits: 2e6 }, // dwelt: promoted
        { at: T0 + 90_000, bits: 1e5 }, // cold, 30 s in proxy: stays
        { at: T0 + 119_999, bits: 1e5 }, // 1 ms short of the dwell: stays
        { at: T0 + 120_000, bits: 1e5 }, // dwelt: demoted
      ],
      { transport: 'inproc', since: T0 },
    );
    assert.deepEqual(
      out.map((c) => c.transport),
      ['inproc', 'proxy', 'proxy', 'proxy', 'inproc'],
    );
    assert.equal(out[1]!.since, T0 + 60_000, 'since is the time of the switch');
    assert.equal(out[3]!.since, T0 + 60_000);
    assert.equal(out[4]!.since, T0 + 120_000);
  });
  it('a target new to the shard starts on inproc (auto) or its pin, its dwell starting now', () => {
    const out = chooseTransports({
      targets: [
        { name: 'a', pinned: 'auto', current: null, since: null, bitsPerSecond: 9e9 },
        { name: 'b', pinned: 'proxy', current: null, since: null, bitsPerSecond: null },
        { name: 'c', pinned: 'inproc', current: null, since: null, bitsPerSecond: 9e9 },
      ],
      settings: SETTINGS,
      nowMs: T0,
    });
    assert.deepEqual(
      [...out],
      [
        ['a', { transport: 'inproc', since: T0 }],
        ['b', { transport: 'proxy', since: T0 }],
        ['c', { transport: 'inproc', since: T0 }],
      ],
    );
  });
  it('a moved target keeps its transport with a fresh dwell (since null)', () => {
    const out = chooseTransports({ targets: [{ name: 'a', pinned: 'auto', current: 'proxy', since: null, bitsPerSecond: 1 }], settings: SETTINGS, nowMs: T0 });
    assert.deepEqual(out.get('a'), { transport: 'proxy', since: T0 });
  });
  it('pins take effect at once, whatever the dwell or rate', () => {
    const out = chooseTransports({
      targets: [
        { name: 'a', pinned: 'proxy', current: 'inproc', since: T0, bitsPerSecond: 0 },
        { name: 'b', pinned: 'inproc', current: 'proxy', since: T0, bitsPerSecond: 9e9 },
      ],
      settings: SETTINGS,
      nowMs: T0 + 1,
    });
    assert.deepEqual(out.get('a'), { transport: 'proxy', since: T0 + 1 });
    assert.deepEqual(out.get('b'), { transport: 'inproc', since: T0 + 1 });
  });
  it('an unmeasured rate never switches an auto target', () => {
    assert.deepEqual(run([{ at: T0 + 3_600_000, bits: null }], { transport: 'proxy', since: T0 })[0], { transport: 'proxy', since: T0 });
  });
  it('capacity: the hottest are promoted; a lowered capacity demotes the coldest at once', () => {
    const targets: TransportCandidate[] = [1, 2, 3, 4].map((i) => ({ name: `t${i}`, pinned: 'auto', current: 'inproc', since: T0, bitsPerSecond: i * 2e6 }));
    const out = chooseTransports({ targets, settings: { ...SETTINGS, proxyCapacityPerPod: 2 }, nowMs: T0 + 60_000 });
    assert.deepEqual(
      [...out].filter(([, c]) => c.transport === 'proxy').map(([n]) => n),
      ['t3', 't4'],
    );
    const inProxy: TransportCandidate[] = targets.map((t) => ({ ...t, current: 'proxy', since: T0 + 59_000 }));
    const lowered = chooseTransports({ targets: inProxy, settings: { ...SETTINGS, proxyCapacityPerPod: 1 }, nowMs: T0 + 60_000 });
    assert.deepEqual(
      [...lowered].filter(([, c]) => c.transport === 'proxy').map(([n]) => n),
      ['t4'],
    );
  });
  it('settings that make no sense are CONFIG_INVALID', () => {
    assert.throws(() => chooseTransports({ targets: [], settings: { ...SETTINGS, demoteBelowBitsPerSecond: 2e6 }, nowMs: T0 }), { code: 'CONFIG_INVALID' });
    assert.throws(() => chooseTransports({ targets: [], settings: { ...SETTINGS, proxyCapacityPerPod: 1.5 }, nowMs: T0 }), { code: 'CONFIG_INVALID' });
  });
});

describe('chooseTransports properties', () => {
  const band = fc.double({ min: SETTINGS.demoteBelowBitsPerSecond, max: SETTINGS.promoteAboveBitsPerSecond, noNaN: true });
  const steps = fc.array(fc.record({ dt: fc.integer({ min: 0, max: 600_000 }), bits: band }), { minLength: 1, maxLength: 60 });

  it('a rate anywhere inside the band [demote, promote] never switches an auto target', () => {
    fc.assert(
      fc.property(fc.constantFrom<'inproc' | 'proxy'>('inproc', 'proxy'), fc.integer({ min: 0, max: 10_000_000 }), steps, (transport, age, seq) => {
        let at = T0;
        const out = run(
          seq.map(({ dt, bits }) => ({ at: (at += dt), bits })),
          { transport, since: T0 - age },
        );
        for (const c of out) assert.deepEqual(c, { transport, since: T0 - age });
      }),
      { numRuns: 300 },
    );
  });

  it('auto targets never exceed the capacity left by pins; pins are always honoured', () => {
    const target = fc.record({
      pinned: fc.constantFrom<TransportCandidate['pinned']>('auto', 'auto', 'auto', 'inproc', 'proxy'),
      current: fc.constantFrom<TransportCandidate['current']>('inproc', 'proxy', null),
      age: fc.integer({ min: 0, max: 300_000 }),
      bits: fc.option(fc.double({ min: 0, max: 1e8, noNaN: true }), { nil: null }),
    });
    fc.assert(
      fc.property(fc.array(target, { maxLength: 40 }), fc.integer({ min: 0, max: 12 }), (list, capacity) => {
        const targets: TransportCandidate[] = list.map((t, i) => ({
          name: `t${String(i).padStart(2, '0')}`,
          pinned: t.pinned,
          current: t.current,
          since: T0 - t.age,
          bitsPerSecond: t.bits,
        }));
        const out = chooseTransports({ targets, settings: { ...SETTINGS, proxyCapacityPerPod: capacity }, nowMs: T0 });
        assert.equal(out.size, targets.length);
        const pinnedProxy = targets.filter((t) => t.pinned === 'proxy').length;
        const autoProxy = targets.filter((t) => t.pinned === 'auto' && out.get(t.name)!.transport === 'proxy').length;
        assert.ok(autoProxy <= Math.max(0, capacity - pinnedProxy), `${autoProxy} auto in proxy, ${pinnedProxy} pinned, capacity ${capacity}`);
        for (const t of targets) {
          if (t.pinned !== 'auto') assert.equal(out.get(t.name)!.transport, t.pinned);
          const c = out.get(t.name)!;
          if (t.current !== null && c.transport === t.current)
            assert.equal(c.since, T0 - list[Number(t.name.slice(1))]!.age, 'an unchanged transport keeps its since');
        }
        assert.deepEqual([...out.keys()], [...out.keys()].sort(), 'name order');
      }),
      { numRuns: 300 },
    );
  });
});
