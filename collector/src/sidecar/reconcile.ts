/**
 * The sidecar's decisions, apart from doing them: given desired.json and what runs now, which
 * masters to start and stop, where new streams go, which streams to start and which to kill.
 * Pure and total; the supervisor (sidecar.ts) applies the plan and calls this again after
 * every event, so a plan only has to be right for the moment it is made.
 *
 * Slots: a server's streams are spread over masters 0, 1, ... with at most maxSessions
 * streams on each (OpenSSH refuses the session beyond the server's MaxSessions). A stream
 * keeps its slot for its whole life, since a running one cannot move to another connection;
 * a new stream goes to the lowest slot with room. A stream that has ended (`done`) no longer
 * holds room. Slot 0 stays up while the server has any stream or forward in desired.json, so
 * a collector replacing an ended stream with the next one does not reconnect.
 *
 * A server whose connection changed (serverFingerprint) gets new masters: the plan stops the
 * old ones and starts new ones on the same slots. Streams running on an old master end with
 * it (ssh exit status 255); the sidecar never re-runs them (only the collector knows where
 * a new run must start).
 */
import type { DesiredState } from '@pglog/common/sidecar/contract.ts';

import { serverFingerprint } from './openssh-args.ts';

export type StreamPhase = 'waiting' | 'running' | 'done';

export interface MasterSnapshot {
  server: string;
  slot: number;
  fingerprint: string;
  /** Its control socket accepts streams. */
  up: boolean;
}

export interface StreamSnapshot {
  id: string;
  server: string;
  command: string;
  slot: number;
  /** `running` from the moment the sidecar began starting it; `done` once exited or failed. */
  phase: StreamPhase;
}

export interface Snapshot {
  masters: readonly MasterSnapshot[];
  streams: readonly StreamSnapshot[];
  /**
   * Sessions the server may still hold for streams killed a moment ago: sshd keeps a session
   * until its command exits, and a command notices the closed channel only at its next write
   * (the collector's follow loops write a heartbeat every 2 s). They count as occupied, so a
   * new stream is not refused by the server's MaxSessions in the meantime.
   */
  reserved?: readonly MasterRef[];
}

export interface MasterRef {
  server: string;
  slot: number;
}

export interface Plan {
  /** Kill (process group), remove the FIFOs, forget. */
  removeStreams: string[];
  /** New streams, `waiting` on their slot. */
  addStreams: { id: string; server: string; command: string; slot: number }[];
  /** Waiting streams moved off a slot that has more than maxSessions (maxSessions went down). */
  moveStreams: { id: string; slot: number }[];
  /** Stopped before the starts (a restart is a stop and a start of the same slot). */
  stopMasters: MasterRef[];
  startMasters: (MasterRef & { fingerprint: string })[];
  /** Waiting (or just added) streams whose master is up. */
  startStreams: string[];
}

export const EMPTY_DESIRED: DesiredState = { version: 1, generation: -1, servers: [], streams: [], forwards: [] };

export function isEmptyPlan(p: Plan): boolean {
  return (
    p.removeStreams.length === 0 &&
    p.addStreams.length === 0 &&
    p.moveStreams.length === 0 &&
    p.stopMasters.length === 0 &&
    p.startMasters.length === 0 &&
    p.startStreams.length === 0
  );
}

const key = (server: string, slot: number): string => `${server}\0${slot}`;

export function reconcile(desired: DesiredState, current: Snapshot): Plan {
  const plan: Plan = { removeStreams: [], addStreams: [], moveStreams: [], stopMasters: [], startMasters: [], startStreams: [] };
  const servers = new Map(desired.servers.map((s) => [s.name, s]));
  const wanted = new Map(desired.streams.map((s) => [s.id, s]));

  // Streams gone from desired.json, or (never expected: ids are not reused) changed.
  const kept = new Map<string, StreamSnapshot>();
  for (const s of current.streams) {
    const d = wanted.get(s.id);
    if (d === undefined || d.server !== s.server || d.command !== s.command) plan.removeStreams.push(s.id);
    else kept.set(s.id, { ...s });
  }

  // Slot occupancy per server: streams that are waiting or running.
  const occupancy = new Map<string, number[]>();
  const occ = (server: string): number[] => {
    let list = occupancy.get(server);
    if (list === undefined) occupancy.set(server, (list = []));
    return list;
  };
  for (const s of kept.values()) {
    if (s.phase === 'done') continue;
    const list = occ(s.server);
    list[s.slot] = (list[s.slot] ?? 0) + 1;
  }
  // Sessions the server may still hold: reserved ones, and those of the running streams this
  // plan kills (the supervisor reserves them once it has killed them).
  const removed = new Set(plan.removeStreams);
  const held = [...(current.reserved ?? []), ...current.streams.filter((s) => removed.has(s.id) && s.phase === 'running')];
  for (const r of held) {
    const list = occ(r.server);
    list[r.slot] = (list[r.slot] ?? 0) + 1;
  }
  const lowestWithRoom = (server: string, max: number): number => {
    const list = occ(server);
    let slot = 0;
    while ((list[slot] ?? 0) >= max) slot++;
    list[slot] = (list[slot] ?? 0) + 1;
    return slot;
  };

  // A lowered maxSessions: waiting streams leave over-full slots (running ones cannot).
  const byIdDescending = [...kept.values()].sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  for (const s of byIdDescending) {
    const server = servers.get(s.server);
    if (server === undefined || s.phase !== 'waiting') continue;
    const list = occ(s.server);
    if ((list[s.slot] ?? 0) <= server.maxSessions) continue;
    list[s.slot] = (list[s.slot] ?? 0) - 1;
    s.slot = lowestWithRoom(s.server, server.maxSessions);
    plan.moveStreams.push({ id: s.id, slot: s.slot });
  }

  // New streams, in the order desired.json lists them.
  for (const d of desired.streams) {
    if (kept.has(d.id)) continue;
    const server = servers.get(d.server);
    if (server === undefined) continue; // parseDesiredState rules this out
    const s: StreamSnapshot = { id: d.id, server: d.server, command: d.command, slot: lowestWithRoom(d.server, server.maxSessions), phase: 'waiting' };
    kept.set(s.id, s);
    plan.addStreams.push({ id: s.id, server: s.server, command: s.command, slot: s.slot });
  }

  // Masters needed: every slot holding a live stream, and slot 0 while the server has streams.
  const needed = new Map<string, MasterRef & { fingerprint: string }>();
  for (const s of kept.values()) {
    const server = servers.get(s.server);
    if (server === undefined) continue;
    const fingerprint = serverFingerprint(server);
    if (s.phase !== 'done') needed.set(key(s.server, s.slot), { server: s.server, slot: s.slot, fingerprint });
    needed.set(key(s.server, 0), { server: s.server, slot: 0, fingerprint });
  }
  // Forwards live on slot 0: a forwarded connection is a channel, not a session, so it takes
  // no room of MaxSessions (forward-plan.ts decides the rest).
  for (const f of desired.forwards) {
    const server = servers.get(f.server);
    if (server !== undefined) needed.set(key(f.server, 0), { server: f.server, slot: 0, fingerprint: serverFingerprint(server) });
  }
  const upNow = new Set<string>();
  const present = new Set<string>();
  for (const m of current.masters) {
    const want = needed.get(key(m.server, m.slot));
    if (want === undefined || want.fingerprint !== m.fingerprint) {
      plan.stopMasters.push({ server: m.server, slot: m.slot });
      continue;
    }
    present.add(key(m.server, m.slot));
    if (m.up) upNow.add(key(m.server, m.slot));
  }
  for (const [k, want] of needed) {
    if (!present.has(k)) plan.startMasters.push(want);
  }

  for (const s of kept.values()) {
    if (s.phase === 'waiting' && upNow.has(key(s.server, s.slot))) plan.startStreams.push(s.id);
  }
  return plan;
}

/** The snapshot after a plan is carried out and before anything else happens (for tests and checks). */
export function applyPlan(current: Snapshot, plan: Plan): Snapshot {
  const removed = new Set(plan.removeStreams);
  const moved = new Map(plan.moveStreams.map((m) => [m.id, m.slot]));
  const started = new Set(plan.startStreams);
  const streams: StreamSnapshot[] = current.streams.filter((s) => !removed.has(s.id)).map((s) => ({ ...s, slot: moved.get(s.id) ?? s.slot }));
  for (const a of plan.addStreams) streams.push({ ...a, phase: 'waiting' });
  for (const s of streams) if (started.has(s.id)) s.phase = 'running';
  const stopped = new Set(plan.stopMasters.map((m) => key(m.server, m.slot)));
  const masters: MasterSnapshot[] = current.masters.filter((m) => !stopped.has(key(m.server, m.slot)));
  for (const m of plan.startMasters) masters.push({ ...m, up: false });
  return { masters, streams, ...(current.reserved === undefined ? {} : { reserved: current.reserved }) };
}
