/**
 * Clean-up for benchmark entry points: functions registered as things start, run in reverse
 * order once, on a normal end, a failure, or SIGINT/SIGTERM (then the process exits 130).
 * A failing step is reported through `say` and does not stop the others.
 */
export interface Cleanup {
  /** Registers a step; steps run last-registered first. */
  push(fn: () => Promise<void> | void): void;
  /** Runs every registered step (once; later calls wait for the same run). */
  run(): Promise<void>;
}

export function createCleanup(say: (line: string) => void): Cleanup {
  const steps: Array<() => Promise<void> | void> = [];
  let running: Promise<void> | null = null;
  const run = (): Promise<void> => {
    running ??= (async () => {
      for (const fn of steps.splice(0).reverse()) {
        try {
          await fn();
        } catch (e) {
          say(`cleanup: ${(e as Error).message}`);
        }
      }
    })();
    return running;
  };
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      say(`${signal}: cleaning up`);
      void run().finally(() => process.exit(130));
    });
  }
  return {
    push: (fn) => {
      steps.push(fn);
    },
    run,
  };
}

/** The clean-up of one run (one collector, one writer) inside a benchmark's. */
export interface RunCleanup {
  /** Registers a step with this run and with the benchmark, so that an interrupt stops it too. */
  onCleanup: (fn: () => Promise<void> | void) => void;
  /** Runs this run's steps, last-registered first; the benchmark's clean-up runs them again, so each must allow that. */
  run: () => Promise<void>;
}

export function runCleanup(all: Cleanup): RunCleanup {
  const steps: Array<() => Promise<void> | void> = [];
  return {
    onCleanup: (fn) => {
      steps.push(fn);
      all.push(fn);
    },
    run: async () => {
      for (const fn of steps.splice(0).reverse()) await fn();
    },
  };
}
