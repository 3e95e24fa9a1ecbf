/**
 * The measurements and checks of a fleet run (fleet-node.ts), shared by the benchmark and the
 * end-to-end test: every server streaming after a moment; a collector pod crashed and its
 * targets streaming again; what each pod holds (SSH connections, store connections, memory,
 * CPU); and, once writing stopped, every marker of every server in the store exactly once.
 */
import { compareFleet, type FleetCheck, formatFleetCheck, storedByTarget } from '@pglog/test-support/fleet-sim/check.ts';
import type { WriterTotals } from '@pglog/test-support/fleet-sim/log-writer.ts';
import { MAX_STARTUPS_REFUSAL } from '@pglog/test-support/fleet-sim/servers.ts';
import { isStoreAway, MarkerFingerprint, newestMarkersOf, type StreamingTimes, untilEveryServerStreams } from '@pglog/test-support/fleet-sim/streaming.ts';

import type { FleetNode } from './fleet-node.ts';
import { FLEET_ADDRESS_BASE, FLEET_PORT } from './objects.ts';
import { connectionsToPort, type PodObject, type PodUsage, podUsage, storeConnections } from './observe.ts';
import { checkRealServers, type RealCheck } from './real-postgres.ts';

/** Until every simulated server (or those of `names`) has a marker written after `since` stored. */
export function untilStreaming(
  node: FleetNode,
  since: number,
  timeoutMs: number,
  options: { names?: readonly string[]; progress?: (streaming: number, total: number) => void; signal?: AbortSignal } = {},
): Promise<StreamingTimes> {
  return untilEveryServerStreams(node.storePool, node.fleet, since, timeoutMs, { ...options, names: options.names ?? node.names, pollMs: 1000 });
}

export interface KillResult {
  pod: string;
  /** The simulated servers of its shard. */
  targets: number;
  killedAt: number;
  times: StreamingTimes;
}

/** Crashes `pod` (every container SIGKILLed) and waits until every simulated server of its shard streams again. */
export async function killAndRecover(node: FleetNode, pod: PodObject, timeoutMs: number, progress?: (n: number, of: number) => void): Promise<KillResult> {
  const index = Number(/-(\d+)$/.exec(pod.metadata.name)?.[1]);
  const simulated = new Set(node.names);
  const targets = (await node.shardTargets(index)).filter((n) => simulated.has(n));
  const killedAt = Date.now();
  await node.killPod(pod);
  const times = await untilStreaming(node, killedAt, timeoutMs, { names: targets, ...(progress === undefined ? {} : { progress }) });
  return { pod: pod.metadata.name, targets: targets.length, killedAt, times };
}

export interface PodView {
  pod: string;
  ip: string;
  sshConnections: number;
  storeConnections: number;
  usage: PodUsage | undefined;
}

export interface Holdings {
  pods: PodView[];
  /** SSH connections to the fleet's servers from no pod (none expected). */
  otherSsh: number;
  storeTotal: number;
}

/** Each pod's SSH and store connections, memory and CPU, now. */
export async function holdings(node: FleetNode): Promise<Holdings> {
  const [pods, ssh, store] = await Promise.all([node.pods(), connectionsToPort(FLEET_PORT, `${FLEET_ADDRESS_BASE}.`), storeConnections(node.storePool)]);
  const views = pods.map((p) => {
    const ip = p.status?.podIP ?? '';
    return { pod: p.metadata.name, ip, sshConnections: ssh.get(ip) ?? 0, storeConnections: store.byAddress.get(ip) ?? 0, usage: podUsage(p) };
  });
  const ips = new Set(views.map((v) => v.ip));
  const otherSsh = [...ssh].filter(([ip]) => !ips.has(ip)).reduce((s, [, n]) => s + n, 0);
  return { pods: views, otherSsh, storeTotal: store.total };
}

export interface FinalCheck {
  fleet: FleetCheck;
  line: string;
  real: RealCheck[];
  refusedHandshakes: number;
  /** Seconds from the end of writing until the store held every server's last marker (null: not within the wait). */
  drainedSeconds: number | null;
  ok: boolean;
}

/**
 * With writing stopped (`totals` final): waits until every server's last marker is stored (a
 * cheap look at the newest markers), then counts every target's markers and rows in one pass
 * and checks the real servers' statements and snapshots.
 */
export async function finalCheck(node: FleetNode, totals: WriterTotals, stoppedAt: number, timeoutMs: number): Promise<FinalCheck> {
  const written = node.fleet.written(totals).slice(0, node.names.length);
  const last = new Map(written.map((w) => [w.name, w.markers]));
  const fingerprint = new MarkerFingerprint();
  const deadline = Date.now() + timeoutMs;
  let drainedSeconds: number | null = null;
  let waiting = [...node.names];
  while (waiting.length > 0 && Date.now() < deadline) {
    try {
      const newest = await newestMarkersOf(node.storePool, fingerprint, waiting, stoppedAt - 60_000);
      waiting = waiting.filter((n) => (newest.get(n) ?? 0) < (last.get(n) ?? 0));
    } catch (e) {
      if (!isStoreAway(e)) throw e;
    }
    if (waiting.length === 0) drainedSeconds = (Date.now() - stoppedAt) / 1000;
    else await new Promise((r) => setTimeout(r, 1000));
  }
  const fleet = compareFleet(written, await storedByTarget(node.storePool));
  let real = await checkRealServers(node.storePool, node.real);
  // Snapshots run every 15 s: a short run may end before the first.
  while (real.some((r) => r.lost > 0 || r.snapshots === 0) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 2000));
    real = await checkRealServers(node.storePool, node.real);
  }
  const refusedHandshakes = node.fleet.servers.countLogLines(MAX_STARTUPS_REFUSAL);
  const realOk = real.every((r) => r.lost === 0 && r.duplicated === 0 && r.logged > 0 && r.snapshots > 0);
  return {
    fleet,
    line: formatFleetCheck(fleet),
    real,
    refusedHandshakes,
    drainedSeconds,
    ok: fleet.whole === fleet.targets && fleet.lostMarkers === 0 && fleet.duplicatedMarkers === 0 && realOk && refusedHandshakes === 0,
  };
}
