/**
 * The transport benchmark's event-loop probe, loaded into `pglog collect` with
 * `NODE_OPTIONS=--import=<this file>` (bench/transport/session.ts). The collector's own
 * /metrics histogram samples every 10 ms and resets at every scrape, which is too coarse to
 * tell a 1 ms loop from a 3 ms one and cannot give percentiles over a whole window; this one
 * samples every 1 ms (perf_hooks.monitorEventLoopDelay, as bench/fifo-bench.ts does) and
 * covers exactly the window the benchmark asks for.
 *
 * Each SIGUSR2 appends one JSON line to $PGLOG_BENCH_ELD_FILE with the histogram since the
 * previous signal (or since start-up), in ms as Node records them (the 1 ms interval
 * included), then resets it. Does nothing in any other process that inherits NODE_OPTIONS
 * (the `pglog sshproxy` child): only when the command is `collect`.
 */
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

export const ELD_RESOLUTION_MS = 1;

export interface EldLine {
  /** Wall-clock ms when the signal was handled. */
  at: number;
  /** Samples (timer callbacks) since the previous line. */
  count: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

const file = process.env.PGLOG_BENCH_ELD_FILE;
if (file !== undefined && file !== '' && process.argv[2] === 'collect') {
  const h = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  h.enable();
  const ms = (ns: number): number => ns / 1e6;
  process.on('SIGUSR2', () => {
    const line: EldLine = {
      at: Date.now(),
      count: h.count,
      min: ms(h.min),
      p50: ms(h.percentile(50)),
      p90: ms(h.percentile(90)),
      p99: ms(h.percentile(99)),
      p999: ms(h.percentile(99.9)),
      max: ms(h.max),
      mean: ms(h.mean),
    };
    h.reset();
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  });
}
