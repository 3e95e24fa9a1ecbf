/**
 * What one measured window of the transport benchmark says, from two snapshots of a session
 * (bench/transport/session.ts) and the event-loop probe's histogram over the same window.
 */
import { cpus } from 'node:os';

import { ELD_RESOLUTION_MS, type EldLine } from './eld-probe.ts';
import type { MetricsSample, Snapshot } from './session.ts';

export interface WindowStats {
  seconds: number;
  /** MB/s written by the log writer: all servers, hot ones. */
  offeredMBps: number;
  offeredHotMBps: number;
  /** MB/s read by the collector (pglog_read_bytes_total): all, hot, through FIFOs. */
  readMBps: number;
  readHotMBps: number;
  fifoMBps: number;
  /** read / offered over the window (all servers). */
  keptUp: number;
  /** Unread bytes (written − read) at the window's end, and their growth over it. */
  backlogMB: number;
  backlogGrowthMB: number;
  pausedMax: number;
  /** Event-loop delay beyond the probe's 1 ms timer, ms: whole window. raw* = as Node records it (timer included). */
  eld: { p50: number; p90: number; p99: number; p999: number; max: number; samples: number; rawP99: number };
  /** The collector's own /metrics histogram (10 ms timer, reset every 1 s scrape): median and worst 1 s p99, raw. */
  metricsEld: { p99Median: number; p99Worst: number; max: number; samples: number; slowestScrapeMs: number };
  /** CPU seconds in the window. */
  cpu: {
    collector: number;
    sidecar: number;
    sshClients: number;
    fleet: number;
    writer: number;
    store: number;
    bench: number;
    machineBusy: number;
    other: number;
    cores: number;
  };
  /** Milliseconds per second the collector's main thread was runnable but had no CPU. */
  runQueueMsPerSec: number;
  sshProcesses: number;
  /** Which attempt this window was (more than 1: earlier ones were disturbed by other work). */
  attempts: number;
  sidecarRestarted: boolean;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
};

export function windowStats(
  a: Snapshot,
  b: Snapshot,
  eld: EldLine,
  metrics: readonly MetricsSample[],
  hot: ReadonlySet<string>,
  names: readonly string[],
): WindowStats {
  const seconds = (b.at - a.at) / 1000;
  let offered = 0;
  let offeredHot = 0;
  names.forEach((name, i) => {
    const d = (b.writer.fileBytes[i] ?? 0) - (a.writer.fileBytes[i] ?? 0);
    offered += d;
    if (hot.has(name)) offeredHot += d;
  });
  let read = 0;
  let readHot = 0;
  let readAtEnd = 0;
  let readAtStart = 0;
  for (const name of names) {
    const d = (b.readByTarget.get(name) ?? 0) - (a.readByTarget.get(name) ?? 0);
    read += d;
    if (hot.has(name)) readHot += d;
    readAtEnd += b.readByTarget.get(name) ?? 0;
    readAtStart += a.readByTarget.get(name) ?? 0;
  }
  const backlogEnd = b.writer.bytes - readAtEnd;
  const backlogStart = a.writer.bytes - readAtStart;
  const beyond = (ms: number): number => Math.max(0, ms - ELD_RESOLUTION_MS);
  const cpu = {
    collector: b.cpu.collector - a.cpu.collector,
    sidecar: b.cpu.sidecar - a.cpu.sidecar,
    sshClients: b.cpu.sshClients - a.cpu.sshClients,
    fleet: b.fleetCpu - a.fleetCpu,
    writer: b.writerCpu - a.writerCpu,
    store: b.storeCpu - a.storeCpu,
    bench: b.benchCpu - a.benchCpu,
    machineBusy: b.machine.busy - a.machine.busy,
  };
  // Whatever else ran on the machine meanwhile (the kernel's own threads, anything not ours).
  const other = cpu.machineBusy - (cpu.collector + cpu.sidecar + cpu.sshClients + cpu.fleet + cpu.writer + cpu.store + cpu.bench);
  return {
    seconds,
    offeredMBps: offered / 1e6 / seconds,
    offeredHotMBps: offeredHot / 1e6 / seconds,
    readMBps: read / 1e6 / seconds,
    readHotMBps: readHot / 1e6 / seconds,
    fifoMBps: (b.fifoBytes - a.fifoBytes) / 1e6 / seconds,
    keptUp: read / offered,
    backlogMB: backlogEnd / 1e6,
    backlogGrowthMB: (backlogEnd - backlogStart) / 1e6,
    pausedMax: Math.max(b.paused, ...metrics.map((m) => m.paused)),
    eld: {
      p50: beyond(eld.p50),
      p90: beyond(eld.p90),
      p99: beyond(eld.p99),
      p999: beyond(eld.p999),
      max: beyond(eld.max),
      samples: eld.count,
      rawP99: eld.p99,
    },
    metricsEld: {
      p99Median: median(metrics.map((m) => m.p99 * 1000)),
      p99Worst: Math.max(...metrics.map((m) => m.p99 * 1000)),
      max: Math.max(...metrics.map((m) => m.max * 1000)),
      samples: metrics.length,
      slowestScrapeMs: Math.max(0, ...metrics.map((m) => m.scrapeMs)),
    },
    cpu: { ...cpu, other, cores: cpus().length },
    runQueueMsPerSec: ((b.collectorRunQueue - a.collectorRunQueue) * 1000) / seconds,
    sshProcesses: b.cpu.sshProcesses,
    attempts: 1,
    sidecarRestarted: a.cpu.sidecarPid !== b.cpu.sidecarPid,
  };
}
