/**
 * The fleet run's time series (bench/fleet-node.ts): every 10 s, how far behind the store is
 * (each simulated server's newest stored marker against now: p95 and max), the connections
 * the pods hold, and each collector pod's memory and CPU from its cgroups. Written as a CSV
 * (one row a sample, one column a pod's value) and drawn by chart.ts.
 */
import { FleetLag } from '@pglog/test-support/fleet-sim/lag.ts';

import type { FleetNode } from '../../operator/test/helpers/fleet-node/fleet-node.ts';
import { holdings } from '../../operator/test/helpers/fleet-node/measure.ts';

export interface PodPoint {
  pod: string;
  /** The pod's anonymous memory (collector and sidecar), MiB. */
  rssMiB: number;
  /** CPU cores the pod used since the sample before. */
  cores: number;
}

export interface Sample {
  /** Seconds since the install. */
  t: number;
  lagP95: number;
  lagMax: number;
  /** Servers with no marker stored since the install. */
  lagNone: number;
  sshConnections: number;
  storeConnections: number;
  pods: PodPoint[];
}

const MiB = 2 ** 20;

export class Sampler {
  readonly samples: Sample[] = [];
  private readonly node: FleetNode;
  private readonly since: number;
  private readonly lag: FleetLag;
  private readonly cpu = new Map<string, { at: number; seconds: number }>();
  private timer: NodeJS.Timeout | undefined;
  private busy: Promise<void> = Promise.resolve();
  private failures = 0;

  constructor(node: FleetNode, since: number) {
    this.node = node;
    this.since = since;
    // A 30 s window: every server writes a marker each tick; those further behind are looked up apart.
    this.lag = new FleetLag(node.storePool, node.names, since, 30_000);
  }

  start(everyMs = 10_000): void {
    const tick = (): void => {
      this.busy = this.busy
        .then(() => this.take())
        .catch(() => {
          this.failures++;
        });
    };
    tick();
    this.timer = setInterval(tick, everyMs);
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    await this.busy;
  }

  /** Samples that could not be taken (the store or the API away). */
  failed(): number {
    return this.failures;
  }

  latest(): Sample | undefined {
    return this.samples.at(-1);
  }

  private async take(): Promise<void> {
    const [lag, h] = await Promise.all([this.lag.sample(), holdings(this.node)]);
    const now = Date.now();
    const pods = h.pods.map((p) => {
      const before = this.cpu.get(p.pod);
      const seconds = p.usage?.cpuSeconds ?? 0;
      this.cpu.set(p.pod, { at: now, seconds });
      const cores = before === undefined || seconds < before.seconds ? 0 : (seconds - before.seconds) / ((now - before.at) / 1000);
      return { pod: p.pod, rssMiB: (p.usage?.rss ?? 0) / MiB, cores };
    });
    this.samples.push({
      t: (now - this.since) / 1000,
      lagP95: lag.p95,
      lagMax: lag.max,
      lagNone: lag.none,
      sshConnections: h.pods.reduce((s, p) => s + p.sshConnections, 0),
      storeConnections: h.storeTotal,
      pods,
    });
  }
}

/** The samples as CSV: fixed columns, then each pod's RSS (MiB) and CPU (cores), pods in order of first appearance. */
export function samplesCsv(samples: readonly Sample[]): string {
  const pods = [...new Set(samples.flatMap((s) => s.pods.map((p) => p.pod)))];
  const head = [
    't_s',
    'lag_p95_s',
    'lag_max_s',
    'servers_without_marker',
    'ssh_connections',
    'store_connections',
    ...pods.map((p) => `rss_mib_${p}`),
    ...pods.map((p) => `cpu_cores_${p}`),
  ];
  const rows = samples.map((s) => {
    const byPod = new Map(s.pods.map((p) => [p.pod, p]));
    return [
      s.t.toFixed(1),
      s.lagP95.toFixed(2),
      s.lagMax.toFixed(2),
      String(s.lagNone),
      String(s.sshConnections),
      String(s.storeConnections),
      ...pods.map((p) => byPod.get(p)?.rssMiB.toFixed(1) ?? ''),
      ...pods.map((p) => byPod.get(p)?.cores.toFixed(3) ?? ''),
    ].join(',');
  });
  return `${[head.join(','), ...rows].join('\n')}\n`;
}
