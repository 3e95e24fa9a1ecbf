// The sidecar's reconcile (desired.json vs running masters and streams → a plan), on examples
// of slot packing, master restarts and reserved sessions, then fast-check properties over random
// histories of desired states, masters going up and down and streams ending: idempotent, no
// stream outside desired.json, slots within maxSessions, streams only on a master that is up.
import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import type { DesiredServer, DesiredState, DesiredStream } from '@pglog/common/sidecar/contract.ts';
import fc from 'fast-check';

import { serverFingerprint } from '../../../src/sidecar/openssh-args.ts';
import { applyPlan, isEmptyPlan, reconcile, type Snapshot } from '../../../src/sidecar/reconcile.ts';

function server(name: string, maxSessions: number, port = 22): DesiredServer {
  return {
    name,
    host: `${name}.example`,
    port,
    user: 'postgres',
    identityFile: `${name}.key`,
    knownHostsFile: `${name}.kh`,
    maxSessions,
    serverAliveIntervalS: 5,
    connectTimeoutS: 5,
  };
}

function desired(servers: DesiredServer[], streams: DesiredStream[], generation = 1): DesiredState {
  return { version: 1, generation, servers, streams, forwards: [] };
}

const streamsOf = (serverName: string, n: number, prefix = 'x'): DesiredStream[] =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, server: serverName, command: `tail ${i}` }));

const EMPTY: Snapshot = { masters: [], streams: [] };

/** Marks every master up. */
const allUp = (s: Snapshot): Snapshot => ({ ...s, masters: s.masters.map((m) => ({ ...m, up: true })) });

describe('reconcile: examples', () => {
  test('12 streams on a server with maxSessions 5: slots 5+5+2, three masters, streams start once their master is up', () => {
    const d = desired([server('db', 5)], streamsOf('db', 12));
    const plan = reconcile(d, EMPTY);
    assert.deepEqual(
      plan.addStreams.map((a) => a.slot),
      [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2],
    );
    assert.deepEqual(plan.startMasters.map((m) => m.slot).sort(), [0, 1, 2]);
    assert.deepEqual(plan.startStreams, [], 'no master is up yet');
    const after = applyPlan(EMPTY, plan);
    const next = reconcile(d, allUp(after));
    assert.equal(next.startStreams.length, 12);
    assert.deepEqual(next.startMasters, []);
  });

  test('a new stream fills the lowest slot with room; running streams keep theirs', () => {
    const d = desired([server('db', 2)], streamsOf('db', 4));
    let snap = allUp(applyPlan(EMPTY, reconcile(d, EMPTY)));
    snap = applyPlan(snap, reconcile(d, snap));
    // x0 ends and is replaced by y0.
    snap = { ...snap, streams: snap.streams.map((s) => (s.id === 'x0' ? { ...s, phase: 'done' } : s)) };
    const d2 = desired(d.servers, [...d.streams.filter((s) => s.id !== 'x0'), { id: 'y0', server: 'db', command: 'tail y' }]);
    const plan = reconcile(d2, snap);
    assert.deepEqual(plan.removeStreams, ['x0']);
    assert.deepEqual(plan.addStreams, [{ id: 'y0', server: 'db', command: 'tail y', slot: 0 }]);
    assert.deepEqual(plan.startStreams, ['y0']);
    assert.deepEqual(plan.stopMasters, []);
  });

  test('masters stop when their slot has no stream left; slot 0 stays while the server has streams', () => {
    const d = desired([server('db', 1)], streamsOf('db', 3));
    let snap = allUp(applyPlan(EMPTY, reconcile(d, EMPTY)));
    snap = applyPlan(snap, reconcile(d, snap));
    snap = { ...snap, streams: snap.streams.map((s) => ({ ...s, phase: 'done' as const })) };
    const plan = reconcile(d, snap);
    assert.deepEqual(plan.stopMasters.map((m) => m.slot).sort(), [1, 2]);
    assert.deepEqual(plan.startMasters, []);
    const gone = reconcile(desired([server('db', 1)], []), applyPlan(snap, plan));
    assert.deepEqual(gone.removeStreams.sort(), ['x0', 'x1', 'x2']);
    assert.deepEqual(gone.stopMasters, [{ server: 'db', slot: 0 }]);
  });

  test('a changed connection restarts every master of the server, and nothing starts on the new ones before they are up', () => {
    const d = desired([server('db', 2), server('other', 2)], [...streamsOf('db', 3), ...streamsOf('other', 1, 'o')]);
    let snap = allUp(applyPlan(EMPTY, reconcile(d, EMPTY)));
    snap = applyPlan(snap, reconcile(d, snap));
    const moved = server('db', 2, 2222);
    const d2 = desired([moved, server('other', 2)], d.streams.concat({ id: 'late', server: 'db', command: 'tail late' }));
    const plan = reconcile(d2, snap);
    assert.deepEqual(
      plan.stopMasters.sort((a, b) => a.slot - b.slot),
      [
        { server: 'db', slot: 0 },
        { server: 'db', slot: 1 },
      ],
    );
    assert.deepEqual(
      plan.startMasters.map((m) => [m.server, m.slot, m.fingerprint]),
      [
        ['db', 0, serverFingerprint(moved)],
        ['db', 1, serverFingerprint(moved)],
      ],
    );
    assert.deepEqual(plan.startStreams, []);
    assert.ok(isEmptyPlan(reconcile(d2, applyPlan(snap, plan))));
  });

  test('a lowered maxSessions moves waiting streams off a full slot, never running ones', () => {
    const d = desired([server('db', 4)], streamsOf('db', 4));
    let snap = applyPlan(EMPTY, reconcile(d, EMPTY));
    // x0 and x1 are running, x2 and x3 still wait.
    snap = { ...snap, streams: snap.streams.map((s) => (s.id === 'x0' || s.id === 'x1' ? { ...s, phase: 'running' as const } : s)) };
    const d2 = desired([server('db', 2)], d.streams);
    const plan = reconcile(d2, snap);
    assert.deepEqual(
      plan.moveStreams.sort((a, b) => (a.id < b.id ? -1 : 1)),
      [
        { id: 'x2', slot: 1 },
        { id: 'x3', slot: 1 },
      ],
    );
    assert.deepEqual(
      plan.startMasters.map((m) => m.slot),
      [1],
    );
  });

  test('the session of a stream killed a moment ago still counts: its replacement goes to the next slot until it is free', () => {
    const d = desired([server('db', 2)], streamsOf('db', 2));
    let snap = allUp(applyPlan(EMPTY, reconcile(d, EMPTY)));
    snap = applyPlan(snap, reconcile(d, snap));
    // x1 (running) is withdrawn and `next` asked for in the same write.
    const d2 = desired(d.servers, [d.streams[0]!, { id: 'next', server: 'db', command: 'tail next' }]);
    const plan = reconcile(d2, snap);
    assert.deepEqual(plan.removeStreams, ['x1']);
    assert.deepEqual(
      plan.addStreams.map((a) => a.slot),
      [1],
    );
    // The supervisor then reserves x1's session; once the reservation lapses slot 0 has room.
    const held = { ...applyPlan(snap, plan), reserved: [{ server: 'db', slot: 0 }] };
    assert.ok(isEmptyPlan(reconcile(d2, held)));
    const d3 = desired(d.servers, [...d2.streams, { id: 'later', server: 'db', command: 'tail later' }]);
    assert.deepEqual(
      reconcile(d3, held).addStreams.map((a) => a.slot),
      [1],
    );
    assert.deepEqual(
      reconcile(d3, { ...held, reserved: [] }).addStreams.map((a) => a.slot),
      [0],
    );
  });

  test('a stream whose command changed under the same id is replaced', () => {
    const d = desired([server('db', 2)], streamsOf('db', 1));
    const snap = applyPlan(EMPTY, reconcile(d, EMPTY));
    const plan = reconcile(desired(d.servers, [{ id: 'x0', server: 'db', command: 'other' }]), snap);
    assert.deepEqual(plan.removeStreams, ['x0']);
    assert.equal(plan.addStreams[0]?.command, 'other');
  });
});

// ---- properties over random histories ----

const SERVER_NAMES = ['a', 'b', 'c'];
const STREAM_IDS = Array.from({ length: 24 }, (_, i) => `s${i}`);

const desiredArb = fc
  .record({
    servers: fc.tuple(...SERVER_NAMES.map(() => fc.record({ maxSessions: fc.integer({ min: 1, max: 4 }), port: fc.constantFrom(22, 2222) }))),
    streams: fc.subarray(STREAM_IDS.map((id, i) => ({ id, server: SERVER_NAMES[i % SERVER_NAMES.length]! }))),
  })
  .map(({ servers, streams }) =>
    desired(
      servers.map((s, i) => server(SERVER_NAMES[i]!, s.maxSessions, s.port)),
      streams.map((s) => ({ ...s, command: `tail ${s.id}` })),
    ),
  );

type Step = { kind: 'desired'; state: DesiredState } | { kind: 'masterUp' | 'masterDown' | 'streamDone'; pick: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  desiredArb.map((state) => ({ kind: 'desired' as const, state })),
  fc.record({ kind: fc.constantFrom('masterUp' as const, 'masterDown' as const, 'streamDone' as const), pick: fc.nat() }),
);

/** Keeps each server's maxSessions as first drawn, for the strict occupancy property. */
function fixedSessions(steps: Step[]): Step[] {
  return steps.map((s) =>
    s.kind !== 'desired'
      ? s
      : {
          kind: 'desired' as const,
          state: { ...s.state, servers: s.state.servers.map((sv, i) => ({ ...sv, maxSessions: i + 2 })) },
        },
  );
}

function live(snap: Snapshot): Map<string, { running: number; waiting: number }> {
  const out = new Map<string, { running: number; waiting: number }>();
  for (const s of snap.streams) {
    if (s.phase === 'done') continue;
    const k = `${s.server}/${s.slot}`;
    const c = out.get(k) ?? { running: 0, waiting: 0 };
    if (s.phase === 'running') c.running++;
    else c.waiting++;
    out.set(k, c);
  }
  return out;
}

/**
 * Runs a history; `check` sees every plan with the snapshots around it. As the supervisor does,
 * a running stream that is killed leaves its session reserved, here for the next 3 steps.
 */
function simulate(steps: Step[], check: (d: DesiredState, before: Snapshot, plan: ReturnType<typeof reconcile>, after: Snapshot) => void): void {
  let d = desired([], []);
  let snap: Snapshot = EMPTY;
  let reservations: { server: string; slot: number; ttl: number }[] = [];
  for (const step of steps) {
    if (step.kind === 'desired') d = step.state;
    else if (step.kind === 'streamDone') {
      const running = snap.streams.filter((s) => s.phase === 'running');
      const victim = running[step.pick % Math.max(1, running.length)];
      snap = { ...snap, streams: snap.streams.map((s) => (s === victim ? { ...s, phase: 'done' as const } : s)) };
    } else {
      const m = snap.masters[step.pick % Math.max(1, snap.masters.length)];
      snap = { ...snap, masters: snap.masters.map((x) => (x === m ? { ...x, up: step.kind === 'masterUp' } : x)) };
    }
    reservations = reservations.map((r) => ({ ...r, ttl: r.ttl - 1 })).filter((r) => r.ttl > 0);
    snap = { ...snap, reserved: reservations.map((r) => ({ server: r.server, slot: r.slot })) };
    const plan = reconcile(d, snap);
    for (const id of plan.removeStreams) {
      const s = snap.streams.find((x) => x.id === id);
      if (s?.phase === 'running') reservations.push({ server: s.server, slot: s.slot, ttl: 3 });
    }
    const after = { ...applyPlan(snap, plan), reserved: reservations.map((r) => ({ server: r.server, slot: r.slot })) };
    check(d, snap, plan, after);
    snap = after;
  }
}

describe('reconcile: properties', () => {
  test('idempotent: after its plan is carried out, reconciling again does nothing', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
        simulate(steps, (d, _before, _plan, after) => {
          const again = reconcile(d, after);
          assert.ok(isEmptyPlan(again), JSON.stringify(again));
        });
      }),
      { numRuns: 300 },
    );
  });

  test('streams no longer desired are always killed; no stream outside desired.json survives', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
        simulate(steps, (d, before, plan, after) => {
          const ids = new Set(d.streams.map((s) => s.id));
          for (const s of before.streams) if (!ids.has(s.id)) assert.ok(plan.removeStreams.includes(s.id), `${s.id} not killed`);
          for (const s of after.streams) assert.ok(ids.has(s.id));
          assert.deepEqual(after.streams.map((s) => s.id).sort(), [...ids].sort(), 'every desired stream is tracked');
        });
      }),
      { numRuns: 300 },
    );
  });

  test('with a fixed maxSessions, a slot never holds more than maxSessions waiting or running streams and sessions still held', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 30 }).map(fixedSessions), (steps) => {
        simulate(steps, (d, _before, _plan, after) => {
          const max = new Map(d.servers.map((s) => [s.name, s.maxSessions]));
          const held = new Map<string, number>();
          for (const r of after.reserved ?? []) held.set(`${r.server}/${r.slot}`, (held.get(`${r.server}/${r.slot}`) ?? 0) + 1);
          for (const [k, c] of live(after)) {
            const server = k.split('/')[0]!;
            if (!max.has(server)) continue;
            assert.ok(c.running + c.waiting + (held.get(k) ?? 0) <= max.get(server)!, `${k}: ${JSON.stringify(c)} + ${held.get(k) ?? 0} held`);
          }
        });
      }),
      { numRuns: 300 },
    );
  });

  test('whatever maxSessions does, starting streams never takes a slot past maxSessions running', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
        simulate(steps, (d, before, plan, after) => {
          const max = new Map(d.servers.map((s) => [s.name, s.maxSessions]));
          const was = live(before);
          for (const [k, c] of live(after)) {
            const limit = Math.max(max.get(k.split('/')[0]!)!, was.get(k)?.running ?? 0);
            assert.ok(c.running <= limit, `${k}: ${c.running} running, limit ${limit}`);
          }
          // Streams start only on a master that is up and stays.
          const stopped = new Set(plan.stopMasters.map((m) => `${m.server}/${m.slot}`));
          for (const id of plan.startStreams) {
            const s = after.streams.find((x) => x.id === id)!;
            const m = before.masters.find((x) => x.server === s.server && x.slot === s.slot);
            assert.ok(m?.up === true && !stopped.has(`${s.server}/${s.slot}`), `${id} started without its master`);
          }
        });
      }),
      { numRuns: 300 },
    );
  });

  test('running streams keep their slot; every live stream has a master, and only needed masters exist', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 30 }), (steps) => {
        simulate(steps, (d, before, _plan, after) => {
          for (const s of before.streams) {
            const a = after.streams.find((x) => x.id === s.id);
            if (s.phase === 'running' && a !== undefined) assert.equal(a.slot, s.slot);
          }
          const masters = new Set(after.masters.map((m) => `${m.server}/${m.slot}`));
          assert.equal(masters.size, after.masters.length, 'one master per slot');
          const needed = new Set<string>();
          for (const s of after.streams) {
            if (s.phase !== 'done') needed.add(`${s.server}/${s.slot}`);
            needed.add(`${s.server}/0`);
          }
          assert.deepEqual([...masters].sort(), [...needed].sort());
          const fingerprints = new Map(d.servers.map((s) => [s.name, serverFingerprint(s)]));
          for (const m of after.masters) assert.equal(m.fingerprint, fingerprints.get(m.server));
        });
      }),
      { numRuns: 300 },
    );
  });
});
