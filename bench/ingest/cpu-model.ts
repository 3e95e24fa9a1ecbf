/**
 * The collector's CPU as two costs (pure: no I/O): a cost per second whatever the load (each
 * stream's read rounds, handovers, timers, commits, metrics: they happen about as often at 5
 * MB/s as at 20) and a cost per MB read (splitting, parsing, encoding, COPY). A run's figure in
 * ms per MB mixes the two, so it falls as the load rises; the split says which of them a target
 * in ms per MB is out of reach for (issue 15: at most 20 ms per MB), and at what load.
 *
 * Fitted by least squares over the runs of one configuration at different read rates (with
 * two rates, the line through both): CPU ms per second = perSecond + perMB × MB/s read.
 */

/** One run: what the collector read and the CPU it took, over the same window. */
export interface CpuSample {
  /** MB read per second. */
  readMBps: number;
  /** CPU ms per MB read. */
  cpuMsPerMB: number;
}

export interface CpuModel {
  /** CPU ms per second that does not grow with what is read. */
  perSecondMs: number;
  /** CPU ms for each further MB read. */
  perMBMs: number;
  /** The read rates it was fitted over, MB/s. */
  fromMBps: number;
  toMBps: number;
}

/** Read rates closer than this (MB/s) cannot separate the two costs. */
const MIN_SPREAD_MBPS = 1;

/** The model of `samples` (one configuration), or null when their read rates are too close to tell the two costs apart. */
export function fitCpuModel(samples: readonly CpuSample[]): CpuModel | null {
  const usable = samples.filter((s) => Number.isFinite(s.readMBps) && Number.isFinite(s.cpuMsPerMB) && s.readMBps > 0);
  if (usable.length < 2) return null;
  const xs = usable.map((s) => s.readMBps);
  const ys = usable.map((s) => s.cpuMsPerMB * s.readMBps);
  const fromMBps = Math.min(...xs);
  const toMBps = Math.max(...xs);
  if (toMBps - fromMBps < MIN_SPREAD_MBPS) return null;
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
  }
  const perMBMs = sxy / sxx;
  return { perSecondMs: my - perMBMs * mx, perMBMs, fromMBps, toMBps };
}

/** CPU ms per MB the model gives at `readMBps`. */
export function cpuPerMBAt(model: CpuModel, readMBps: number): number {
  return model.perMBMs + model.perSecondMs / readMBps;
}

/**
 * The read rate (MB/s) at which the model reaches `targetMsPerMB`, or null when no rate does
 * (its cost per MB alone is at or over the target).
 */
export function rateForTarget(model: CpuModel, targetMsPerMB: number): number | null {
  if (model.perMBMs >= targetMsPerMB) return null;
  return Math.max(0, model.perSecondMs) / (targetMsPerMB - model.perMBMs);
}
