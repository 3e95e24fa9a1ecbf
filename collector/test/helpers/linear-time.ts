// Timing for the linear-time tests (parser-linear-time.test.ts, normalize.test.ts): the
// fastest of a few samples of one call, and a ratio re-measured while it is over its limit,
// because the other work of a busy machine only ever makes a sample slower. The tests compare
// two sizes measured in one run, never a fixed time.

/** One timing sample lasts at least this long (calls repeated), and the fastest of SAMPLES counts. */
const SAMPLE_MS = 1;
const SAMPLES = 5;
/** Measurements beyond the first when a ratio is over its limit. */
const REMEASURES = 3;

/** Fastest time of one call of `run(input)`, in ms. */
export function fastest<T>(run: (input: T) => void, input: T): number {
  run(input);
  let reps = 1;
  for (;;) {
    const t0 = performance.now();
    for (let r = 0; r < reps; r++) run(input);
    const ms = performance.now() - t0;
    if (ms >= SAMPLE_MS || reps >= 1 << 16) break;
    reps *= ms <= SAMPLE_MS / 16 ? 16 : 2;
  }
  let best = Infinity;
  for (let s = 0; s < SAMPLES; s++) {
    const t0 = performance.now();
    for (let r = 0; r < reps; r++) run(input);
    best = Math.min(best, (performance.now() - t0) / reps);
  }
  return best;
}

/** `measure()`, measured again up to REMEASURES times while `over` says it is over its limit. */
export function remeasured<T>(measure: () => T, over: (m: T) => boolean): T {
  let m = measure();
  for (let again = 0; again < REMEASURES && over(m); again++) m = measure();
  return m;
}
