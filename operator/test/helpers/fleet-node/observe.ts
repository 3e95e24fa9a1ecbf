/**
 * What a fleet run reads of the real node while it runs: the pool's collector pods, each pod's
 * SSH connections to the fleet (TCP connections to the servers' port, seen on the host, whose
 * addresses they are), the store's connections by client address, each pod's memory and CPU
 * from its cgroups (v1, the kubelet's cgroupfs driver), restarts and OOM kills, and the errors
 * the collectors logged.
 */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { PODS } from '@pglog/common/kube/resources.ts';
import type { PodLogKeeper } from '@pglog/test-support/pod-logs.ts';
import type pg from 'pg';

const run = promisify(execFile);

export interface ContainerStatus {
  name: string;
  containerID?: string;
  restartCount: number;
  ready?: boolean;
  lastState?: { terminated?: { reason?: string; exitCode?: number } };
  state?: { running?: { startedAt: string }; terminated?: { reason?: string } };
}

export interface PodObject extends KubeObject {
  status?: {
    phase?: string;
    podIP?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: ContainerStatus[];
    initContainerStatuses?: ContainerStatus[];
  };
}

export const isReady = (p: PodObject): boolean => p.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';

/** Every container status of a pod, the native sidecar's (an init container) included. */
export function containersOf(p: PodObject): ContainerStatus[] {
  return [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])];
}

/** The pool's pods that are not going away, by name. */
export async function collectorPods(client: KubeClient, namespace: string, pool: string): Promise<PodObject[]> {
  const { items } = await client.list<PodObject>(PODS, namespace, { labelSelector: `pglog.io/pool=${pool}` });
  return items
    .filter((p) => p.metadata.deletionTimestamp === undefined)
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name, 'en', { numeric: true }));
}

/**
 * Established TCP connections to local `port` on addresses starting with `localPrefix` (the
 * fleet's: other fleets on this machine may use the same port), counted by the peer's address
 * (a pod's IP), from `ss` on the host.
 */
export async function connectionsToPort(port: number, localPrefix: string): Promise<Map<string, number>> {
  const { stdout } = await run('ss', ['-Htn', 'state', 'established', `( sport = :${port} )`], { maxBuffer: 64 * 1024 * 1024 });
  const byPeer = new Map<string, number>();
  for (const line of stdout.split('\n')) {
    const fields = line.trim().split(/\s+/);
    const local = fields[fields.length - 2];
    const peer = fields[fields.length - 1];
    if (peer === undefined || peer === '' || local?.replace(/^\[?(?:::ffff:)?/, '').startsWith(localPrefix) !== true) continue;
    const address = peer
      .slice(0, peer.lastIndexOf(':'))
      .replace(/^\[|\]$/g, '')
      .replace(/^::ffff:/, '');
    byPeer.set(address, (byPeer.get(address) ?? 0) + 1);
  }
  return byPeer;
}

/** The store's client connections (over TCP: the pods'), in all and by client address. */
export async function storeConnections(store: pg.Pool): Promise<{ total: number; byAddress: Map<string, number> }> {
  const { rows } = await store.query<{ addr: string; n: string }>(
    `SELECT host(client_addr) AS addr, count(*) AS n FROM pg_stat_activity
     WHERE backend_type = 'client backend' AND client_addr IS NOT NULL GROUP BY 1`,
  );
  const byAddress = new Map(rows.map((r) => [r.addr, Number(r.n)]));
  return { total: [...byAddress.values()].reduce((a, b) => a + b, 0), byAddress };
}

const CGROUP_ROOT = '/sys/fs/cgroup';

/** The pod's cgroup directory under `controller` (memory, cpuacct), whatever its QoS class. */
export function podCgroup(controller: string, uid: string): string | undefined {
  for (const qos of ['', 'burstable', 'besteffort']) {
    const dir = join(CGROUP_ROOT, controller, 'kubepods', qos, `pod${uid}`);
    try {
      readdirSync(dir);
      return dir;
    } catch {
      /* not this class */
    }
  }
  return undefined;
}

function readNumber(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8').trim());
  } catch {
    return undefined;
  }
}

function statRss(dir: string): number | undefined {
  try {
    const m = /^total_rss (\d+)$/m.exec(readFileSync(join(dir, 'memory.stat'), 'utf8'));
    return m === null ? undefined : Number(m[1]);
  } catch {
    return undefined;
  }
}

export interface PodUsage {
  pod: string;
  /** Anonymous memory (memory.stat total_rss) of the pod, of its collector and of its sidecar, bytes. */
  rss: number;
  collectorRss: number;
  sidecarRss: number;
  /** The pod cgroup's peak usage (memory.max_usage_in_bytes: the tmpfs of the shared directory included), bytes. */
  peak: number;
  /** CPU seconds the pod used since it started (cpuacct.usage). */
  cpuSeconds: number;
}

/** Memory and CPU of a pod from its cgroups; undefined when they are gone. */
export function podUsage(p: PodObject): PodUsage | undefined {
  const uid = p.metadata.uid ?? '';
  const mem = podCgroup('memory', uid);
  const cpu = podCgroup('cpuacct', uid);
  if (mem === undefined) return undefined;
  const idOf = (name: string): string =>
    containersOf(p)
      .find((c) => c.name === name)
      ?.containerID?.replace(/^containerd:\/\//, '') ?? '-';
  return {
    pod: p.metadata.name,
    rss: statRss(mem) ?? 0,
    collectorRss: statRss(join(mem, idOf('collector'))) ?? 0,
    sidecarRss: statRss(join(mem, idOf('sshproxy'))) ?? 0,
    peak: readNumber(join(mem, 'memory.max_usage_in_bytes')) ?? 0,
    cpuSeconds: cpu === undefined ? 0 : (readNumber(join(cpu, 'cpuacct.usage')) ?? 0) / 1e9,
  };
}

/** Restarts and OOM kills seen on pods, kept by pod and container across looks (pods may go). */
export class RestartLog {
  private readonly seen = new Map<string, { restarts: number; reasons: Set<string> }>();

  note(pods: readonly PodObject[]): void {
    for (const p of pods) {
      for (const c of containersOf(p)) {
        const key = `${p.metadata.name}/${c.name}@${p.metadata.uid ?? ''}`;
        const entry = this.seen.get(key) ?? { restarts: 0, reasons: new Set<string>() };
        entry.restarts = Math.max(entry.restarts, c.restartCount);
        const reason = c.lastState?.terminated?.reason;
        if (reason !== undefined) entry.reasons.add(reason);
        if (c.state?.terminated?.reason !== undefined) entry.reasons.add(c.state.terminated.reason);
        this.seen.set(key, entry);
      }
    }
  }

  /** `pod/container: N restart(s) (reasons)` for every container that restarted. */
  restarts(): string[] {
    return [...this.seen]
      .filter(([, e]) => e.restarts > 0)
      .map(([k, e]) => `${k.slice(0, k.indexOf('@'))}: ${e.restarts} restart(s)${e.reasons.size > 0 ? ` (${[...e.reasons].join(', ')})` : ''}`);
  }

  total(): number {
    return [...this.seen.values()].reduce((s, e) => s + e.restarts, 0);
  }

  oomKills(): number {
    return [...this.seen.values()].filter((e) => e.reasons.has('OOMKilled')).length;
  }
}

/** JSON records of the pool's collector containers (every one that ran, kept beyond its pod). */
export function collectorRecords(logs: PodLogKeeper, namespace: string, pool: string): Array<Record<string, unknown>> {
  const re = new RegExp(`^${pool}-\\d+$`);
  return logs.lines({ namespace, pod: (n) => re.test(n), container: 'collector' }).flatMap((l) => {
    try {
      return l.startsWith('{') ? [JSON.parse(l) as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });
}

const LEVELS: Readonly<Record<string, number>> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

/** A record's level as pino's number, whether it was written as the number or its label. */
export function levelOf(level: unknown): number {
  return typeof level === 'string' ? (LEVELS[level] ?? Number(level)) : Number(level);
}

/** A message with what varies by server (target names, addresses, numbers) replaced, so that like messages count together. */
export function messageShape(msg: string): string {
  return msg
    .replace(/\bstream [0-9a-f]+-\S+/g, 'stream <id>')
    .replace(/\b(?:db\d{5}|pg\d+)\b/g, '<target>')
    .replace(/\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b/g, '<address>')
    .replace(/\/[^\s:()]*\/[^\s:()]*/g, '<path>')
    .replace(/\d+/g, 'N');
}

/** Records at warn (40) or above, counted by level, code and message shape (messageShape), most frequent first. */
export function problemCounts(records: ReadonlyArray<Record<string, unknown>>, minLevel = 40): Array<{ line: string; count: number; level: number }> {
  const counts = new Map<string, { count: number; level: number }>();
  for (const r of records) {
    const level = levelOf(r['level']);
    if (!(level >= minLevel)) continue;
    const text = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? ''));
    const key = `${level >= 50 ? 'error' : 'warn'} ${r['code'] === undefined ? '-' : text(r['code'])} ${messageShape(text(r['msg']))}`;
    const entry = counts.get(key) ?? { count: 0, level };
    entry.count++;
    counts.set(key, entry);
  }
  return [...counts].map(([line, e]) => ({ line, count: e.count, level: e.level })).sort((a, b) => b.count - a.count);
}

/** The operator's counters of a pool, summed over its pods (the standby's are 0): target moves, promotions, demotions. */
export async function operatorCounters(
  client: KubeClient,
  namespace: string,
  pool: string,
  port = 8080,
): Promise<{ moves: number; promotions: number; demotions: number }> {
  const { items } = await client.list<PodObject>(PODS, namespace, { labelSelector: 'app.kubernetes.io/component=operator' });
  const sum = { moves: 0, promotions: 0, demotions: 0 };
  const names = { moves: 'target_moves', promotions: 'transport_promotions', demotions: 'transport_demotions' } as const;
  for (const p of items) {
    if (p.status?.podIP === undefined) continue;
    let text = '';
    try {
      text = await (await fetch(`http://${p.status.podIP}:${port}/metrics`, { signal: AbortSignal.timeout(3000) })).text();
    } catch {
      continue;
    }
    for (const key of Object.keys(names) as Array<keyof typeof names>) {
      const m = new RegExp(`^pglog_operator_${names[key]}_total\\{[^}]*pool="${pool}"[^}]*\\} (\\S+)$`, 'm').exec(text);
      if (m !== null) sum[key] += Number(m[1]);
    }
  }
  return sum;
}

/** How often the collectors' processes stopped to start again with a new tuning (their launcher's log line). */
export function tuningRestarts(records: ReadonlyArray<Record<string, unknown>>): number {
  return records.filter((r) => typeof r['msg'] === 'string' && /tuning changed; stopping cleanly/.test(r['msg'])).length;
}
