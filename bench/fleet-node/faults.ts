/**
 * The soak's faults (bench/fleet-node.ts --soak-minutes): while the fleet keeps writing, one
 * fault every few minutes, drawn with a seed from a shuffled deck of the six kinds (each kind
 * comes once before any comes twice), each said with its time as it happens, and after it the
 * time until every server it touched streams again:
 *   pod-kill        a collector pod crashes (collector and sidecar SIGKILLed through containerd)
 *   sshd-restart    sshd killed on a random tenth of the servers, started again 10 s later
 *   store-restart   the store stopped (fast) and started again 10 s later
 *   network-cut     a random 5 % of the servers cut off (iptables DROP on their port in the
 *                   host's INPUT chain, where the pods' packets to them arrive) for 60-120 s
 *   rotation-storm  every server's log rotated at once
 *   scale-step      the pool one pod larger (smaller at the HPA's maximum) for 2 minutes,
 *                   through the HPA's bounds (kubectl scale without one), then back
 */
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';

import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_POOLS } from '@pglog/common/kube/resources.ts';
import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import type { StreamingTimes } from '@pglog/test-support/fleet-sim/streaming.ts';
import { Rng } from '@pglog/test-support/statement-log.ts';

import { type FleetNode, NAMESPACE } from '../../operator/test/helpers/fleet-node/fleet-node.ts';
import { setHpaBounds } from '../../operator/test/helpers/fleet-node/hpa.ts';
import { untilStreaming } from '../../operator/test/helpers/fleet-node/measure.ts';
import { FLEET_PORT, POOL } from '../../operator/test/helpers/fleet-node/objects.ts';

const run = promisify(execFile);

export const FAULT_KINDS = ['pod-kill', 'sshd-restart', 'store-restart', 'network-cut', 'rotation-storm', 'scale-step'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultRecord {
  kind: FaultKind;
  /** Seconds since the install when it began. */
  t: number;
  detail: string;
  /** Servers it touched. */
  servers: number;
  /** Seconds from the fault's end (the servers back, the store up, ...) until every touched server streamed again; null: not within the wait. */
  recovery: number | null;
}

export interface SoakOptions {
  node: FleetNode;
  minutes: number;
  /** Mean time between fault starts; each gap drawn within ±30 %. */
  everyMinutes: number;
  seed: number;
  installedAt: number;
  /** The kinds drawn from (default all). */
  kinds?: readonly FaultKind[];
  /** The HPA's bounds (null: no HPA; the scale step uses kubectl scale). */
  hpa: { min: number; max: number } | null;
  /** How long a recovery may take before it is recorded as not recovered. */
  recoveryTimeoutMs: number;
  say: (line: string) => void;
  /** Receives each fault's record as it completes (an interrupted run still charts them). */
  onRecord?: (record: FaultRecord) => void;
}

/** Random picks from a seeded generator. */
class Picker {
  private readonly rng: Rng;
  private readonly kinds: readonly FaultKind[];
  private deck: FaultKind[] = [];

  constructor(seed: number, kinds: readonly FaultKind[]) {
    this.rng = new Rng(seed);
    this.kinds = kinds;
  }

  /** A uniform number in [0, 1). */
  unit(): number {
    return this.rng.next() / 4294967296;
  }

  between(lo: number, hi: number): number {
    return lo + (hi - lo) * this.unit();
  }

  /** `count` distinct indices of 0 .. n-1. */
  some(n: number, count: number): number[] {
    const all = Array.from({ length: n }, (_, i) => i);
    for (let i = all.length - 1; i > 0; i--) {
      const j = this.rng.int(i + 1);
      [all[i], all[j]] = [all[j]!, all[i]!];
    }
    return all.slice(0, Math.max(1, Math.min(n, count))).sort((a, b) => a - b);
  }

  nextKind(): FaultKind {
    if (this.deck.length === 0) this.deck = this.some(this.kinds.length, this.kinds.length).map((i) => this.kinds[i]!);
    const k = this.rng.int(this.deck.length);
    return this.deck.splice(k, 1)[0]!;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** iptables DROP rules for the servers' port on these addresses, removed by `lift` (and on exit). */
async function cutOff(hosts: readonly string[]): Promise<{ lift: () => Promise<void> }> {
  const rule = (op: '-I' | '-D', host: string): string[] => [op, 'INPUT', '-d', host, '-p', 'tcp', '--dport', String(FLEET_PORT), '-j', 'DROP'];
  const forget = onProcessExit(() => {
    for (const h of hosts) {
      try {
        execFileSync('iptables', rule('-D', h), { stdio: 'ignore' });
      } catch {
        /* lifted already */
      }
    }
  });
  for (const h of hosts) await run('iptables', rule('-I', h));
  return {
    lift: async () => {
      for (const h of hosts) await run('iptables', rule('-D', h)).catch(() => undefined);
      forget();
    },
  };
}

async function poolReplicas(node: FleetNode): Promise<number> {
  return (await node.cluster.client.get<KubeObject & { spec: { replicas: number } }>(COLLECTOR_POOLS, NAMESPACE, POOL))?.spec.replicas ?? 0;
}

/** A fault done: what it was, the servers it touched, when its last step was undone (recovery is measured from there), or its recovery when measured already. */
interface Injected {
  detail: string;
  names: readonly string[];
  end: number;
  times?: StreamingTimes;
}

/** Runs one fault. */
async function inject(kind: FaultKind, o: SoakOptions, pick: Picker): Promise<Injected> {
  const { node } = o;
  const servers = node.fleet.servers.servers;
  const all = node.names;
  switch (kind) {
    case 'pod-kill': {
      const pods = await node.pods();
      const pod = pods[pick.some(pods.length, 1)[0]!]!;
      const simulated = new Set(all);
      const names = (await node.shardTargets(Number(/-(\d+)$/.exec(pod.metadata.name)?.[1]))).filter((n) => simulated.has(n));
      const end = Date.now();
      await node.killPod(pod);
      return { detail: `${pod.metadata.name} killed`, names, end };
    }
    case 'sshd-restart': {
      const idx = pick.some(all.length, Math.round(all.length / 10));
      await node.fleet.servers.kill(idx);
      await sleep(10_000);
      await node.fleet.servers.start(idx);
      return { detail: `sshd of ${idx.length} servers killed, started 10 s later`, names: idx.map((i) => all[i]!), end: Date.now() };
    }
    case 'store-restart': {
      await node.store.stopServer();
      await sleep(10_000);
      await node.store.startServer();
      return { detail: 'store stopped, started 10 s later', names: all, end: Date.now() };
    }
    case 'network-cut': {
      const idx = pick.some(all.length, Math.round(all.length / 20));
      const hold = Math.round(pick.between(60, 120));
      const cut = await cutOff(idx.map((i) => servers[i]!.host));
      await sleep(hold * 1000);
      await cut.lift();
      return { detail: `${idx.length} servers cut off (iptables DROP) for ${hold} s`, names: idx.map((i) => all[i]!), end: Date.now() };
    }
    case 'rotation-storm': {
      await node.fleet.rotate();
      return { detail: 'every log rotated at once', names: all, end: Date.now() };
    }
    case 'scale-step':
      return scaleStep(o);
  }
}

/** One pod more (or less, at the HPA's maximum) for 2 minutes (the HPA held at that size), then the bounds (or the size) as they were. */
async function scaleStep(o: SoakOptions): Promise<Injected> {
  const { node, hpa } = o;
  const now = await poolReplicas(node);
  const to = hpa === null || now < hpa.max ? now + 1 : now - 1;
  const set = async (n: number, bounds: { min: number; max: number } | null): Promise<void> => {
    if (hpa === null) await node.cluster.kubectl(['scale', `collectorpool/${POOL}`, '--replicas', String(n)]);
    else await setHpaBounds(node.cluster.client, NAMESPACE, POOL, bounds!.min, bounds!.max);
  };
  const t0 = Date.now();
  await set(to, { min: to, max: to });
  const first = await untilStreaming(node, t0, o.recoveryTimeoutMs);
  o.say(`  scale ${now} -> ${to}: every server streaming ${first.all?.toFixed(1) ?? 'not'} s after the change`);
  await sleep(Math.max(0, 120_000 - (Date.now() - t0)));
  const t1 = Date.now();
  await set(now, hpa);
  if (hpa === null) {
    const back = await untilStreaming(node, t1, o.recoveryTimeoutMs);
    o.say(`  scale ${to} -> ${now}: every server streaming ${back.all?.toFixed(1) ?? 'not'} s after the change`);
  }
  // Its recovery is the first change's (measured then: a baseline taken now would be 2 minutes late).
  return { detail: `${now} -> ${to} pods for 2 min, then back${hpa === null ? '' : ' (the HPA decides when)'}`, names: node.names, end: t0, times: first };
}

/** Fault kinds from a comma-separated list (`all`: every kind). */
export function parseFaultKinds(list: string): FaultKind[] {
  if (list === 'all') return [...FAULT_KINDS];
  const kinds = list.split(',').map((k) => k.trim());
  const unknown = kinds.filter((k) => !(FAULT_KINDS as readonly string[]).includes(k));
  if (unknown.length > 0 || kinds.length === 0) throw new Error(`--faults: ${unknown.join(', ') || '(none)'}: not among ${FAULT_KINDS.join(', ')}`);
  return kinds as FaultKind[];
}

/** The soak: faults until `minutes` have passed since its start; the records, in order. */
export async function soak(o: SoakOptions): Promise<FaultRecord[]> {
  const pick = new Picker(o.seed, o.kinds ?? FAULT_KINDS);
  const records: FaultRecord[] = [];
  const until = Date.now() + o.minutes * 60_000;
  const at = (): number => (Date.now() - o.installedAt) / 1000;
  for (;;) {
    const gap = o.everyMinutes * 60_000 * pick.between(0.7, 1.3);
    if (Date.now() + gap > until) break;
    await sleep(gap);
    const kind = pick.nextKind();
    const t = at();
    o.say(`fault: ${kind} (${t.toFixed(0)} s after the install)`);
    const f = await inject(kind, o, pick);
    const times = f.times ?? (await untilStreaming(o.node, f.end, o.recoveryTimeoutMs, { names: f.names }));
    const record: FaultRecord = { kind, t, detail: f.detail, servers: f.names.length, recovery: times.all };
    records.push(record);
    o.onRecord?.(record);
    o.say(
      `${kind}: ${f.detail}; ${f.names.length} servers streaming again ${times.all === null ? `NOT within ${o.recoveryTimeoutMs / 1000} s (${times.missing.length} missing)` : `${times.all.toFixed(1)} s after`}`,
    );
  }
  await sleep(Math.max(0, until - Date.now()));
  return records;
}
