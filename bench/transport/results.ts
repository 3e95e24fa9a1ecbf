/**
 * What the transport benchmark (bench/transport-bench.ts) measured, as report.ts renders it:
 * the climbs' steps, the side-by-side runs at the saturation load, the auto run, and the
 * context of the run.
 */
import type { DrainResult } from './session.ts';
import type { WindowStats } from './window.ts';

/** One rung of a climb: a fresh session at one rate. */
export interface Step {
  hotMBps: number;
  stats: WindowStats;
  keptUp: boolean;
  drain: DrainResult;
}

export interface CompareRun {
  mode: 'inproc' | 'proxy';
  main: WindowStats;
  drain: DrainResult;
}

export interface AutoResult {
  hotMBps: number;
  promotedHot: number;
  promotedCold: number;
  promotionsTotal: number;
  demotionsTotal: number;
  proxyAtEnd: { hot: number; cold: number };
  /** Seconds from the writer's start to each hot target reading through proxy. */
  promotedAfterSeconds: number[];
  /** Each switch's "reading again after" time, ms. */
  switchMs: number[];
  moves: number;
  after: WindowStats;
  drain: DrainResult;
}

export interface BenchResult {
  /** All inproc climbing (null: skipped, --load given). */
  inprocClimb: Step[] | null;
  /** Hot in proxy climbing (null: --no-proxy-climb). */
  proxyClimb: Step[] | null;
  /** Whether the all-inproc climb found a step it did not keep up with (null: skipped). */
  saturated: boolean | null;
  /** MB/s per hot server of the comparison. */
  load: number;
  compare: CompareRun[];
  auto: AutoResult;
}

export interface ReportContext {
  /** --pin-collector: the collector's core, and the CPUs of everything else. */
  pin?: { core: number; others: string };
  hot: number;
  cold: number;
  coldBps: number;
  ladder: readonly number[];
  stepSeconds: number;
  settleSeconds: number;
  warmupSeconds: number;
  measureSeconds: number;
  keepUp: number;
  rounds: number;
  retries: number;
  /** A window whose other work exceeded this share of a core was measured again. */
  disturbed: number;
  fleetNice: number;
  collectorArgs: readonly string[];
  autoArgs: readonly string[];
  totalSeconds: number;
}
