/**
 * How the snapshot benchmark (bench/snapshot-bench.ts) measures its variants: blocks A B … B A
 * after warm-up, each snapshot's latency, and CPU and delayed ACKs per snapshot.
 */
import { delayedAcks, treeCpuMs } from './proc.ts';

/** Linux's minimum delayed-ACK time is 40 ms: a snapshot above this waited for one (see the section's text). */
export const STALL_MS = 35;

export interface Percentiles {
  p50: number;
  p99: number;
  max: number;
  /** Share of samples over STALL_MS (0..1). */
  stalled: number;
  /** Median of the samples up to STALL_MS (NaN when none). */
  p50Unstalled: number;
}
export interface Shape {
  rows: number;
  sessions: number;
  edges: number;
}
export interface VariantResult {
  latency: Percentiles;
  /** Per snapshot, ms. */
  collectorCpuMs: number;
  serverCpuMs: number;
  sidecarCpuMs: number;
  /** Machine-wide TcpExt DelayedACKs (/proc/net/netstat) per snapshot. */
  delayedAcks: number;
  shape: Shape;
}

function percentiles(samples: number[]): Percentiles {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] ?? NaN;
  const unstalled = s.filter((x) => x <= STALL_MS);
  return {
    p50: at(0.5),
    p99: at(0.99),
    max: s[s.length - 1] ?? NaN,
    stalled: (s.length - unstalled.length) / s.length,
    p50Unstalled: unstalled[Math.max(0, Math.ceil(0.5 * unstalled.length) - 1)] ?? NaN,
  };
}

export interface Variant {
  name: string;
  /** One snapshot; resolves with its shape once the result is there, and `done` after any clean-up of it. */
  run(): Promise<{ shape: Shape; done: Promise<void> }>;
  sidecarPids?: () => number[];
}

/** Runs the variants in blocks A B … B A (one variant: two blocks), after warm-up; per-snapshot numbers. */
export async function measure(
  variants: Variant[],
  serverPids: () => number[],
  perBlock: number,
  warmup: number,
  say: (line: string) => void,
): Promise<VariantResult[]> {
  const samples = variants.map(() => [] as number[]);
  const collector = variants.map(() => 0);
  const server = variants.map(() => 0);
  const sidecar = variants.map(() => 0);
  const acks = variants.map(() => 0);
  const shapes: (Shape | null)[] = variants.map(() => null);
  for (const v of variants) for (let i = 0; i < warmup; i++) await (await v.run()).done;
  const forward = variants.map((_, k) => k);
  const order = [...forward, ...forward.reverse()];
  for (const k of order) {
    const v = variants[k]!;
    const cpu0 = process.cpuUsage();
    const server0 = treeCpuMs(serverPids());
    const sidecar0 = treeCpuMs(v.sidecarPids?.() ?? []);
    const acks0 = delayedAcks();
    for (let i = 0; i < perBlock; i++) {
      const t0 = performance.now();
      const { shape, done } = await v.run();
      samples[k]!.push(performance.now() - t0);
      await done;
      shapes[k] = shape;
    }
    const cpu = process.cpuUsage(cpu0);
    collector[k]! += (cpu.user + cpu.system) / 1000;
    server[k]! += treeCpuMs(serverPids()) - server0;
    sidecar[k]! += treeCpuMs(v.sidecarPids?.() ?? []) - sidecar0;
    acks[k]! += delayedAcks() - acks0;
  }
  return variants.map((v, k) => {
    const n = samples[k]!.length;
    const r: VariantResult = {
      latency: percentiles(samples[k]!),
      collectorCpuMs: collector[k]! / n,
      serverCpuMs: server[k]! / n,
      sidecarCpuMs: sidecar[k]! / n,
      delayedAcks: acks[k]! / n,
      shape: shapes[k]!,
    };
    say(
      `${v.name.padEnd(44)} p50 ${r.latency.p50.toFixed(2)} p99 ${r.latency.p99.toFixed(2)} max ${r.latency.max.toFixed(2)} ms; ` +
        `CPU per snapshot: collector ${r.collectorCpuMs.toFixed(2)} ms, server ${r.serverCpuMs.toFixed(2)} ms, sidecar ${r.sidecarCpuMs.toFixed(2)} ms; ${r.delayedAcks.toFixed(2)} delayed ACKs; ${r.shape.rows} rows`,
    );
    return r;
  });
}
