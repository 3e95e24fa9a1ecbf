/**
 * How long each test tier and each test file may take on the project's machine (2 cores,
 * real servers started per file), in seconds. `make test` fails when a file or a tier runs
 * over, so a test that slows down is noticed the day it does, not when CI stops fitting its
 * slot. The budgets are about twice what the files take on a quiet machine; raise one only
 * with the reason in the commit.
 */
export interface TierBudget {
  /** Wall time of the whole tier. */
  readonly tierSeconds: number;
  /** Wall time of any one file of the tier not named below. */
  readonly fileSeconds: number;
  /** Files that need more, by file name, with why. */
  readonly files: Readonly<Record<string, number>>;
}

export const BUDGETS: Readonly<Record<string, TierBudget>> = {
  unit: {
    tierSeconds: 900,
    fileSeconds: 120,
    files: {
      // Generates the CRD schemas from the TypeScript types with the compiler API, several times.
      'generate.test.ts': 300,
    },
  },
  collector: {
    tierSeconds: 1500,
    fileSeconds: 180,
    files: {
      // SIGKILLs at every stage of start-up, both transports, all cores kept busy.
      'collect-crash-first-start.test.ts': 300,
    },
  },
  operator: { tierSeconds: 900, fileSeconds: 180, files: {} },
  e2e: {
    // 1200 before the fleet file; it adds its own budget.
    tierSeconds: 1560,
    fileSeconds: 240,
    files: {
      // helm install, promotion, container kill, scale 2 -> 4 -> 2, leader kill, helm upgrade.
      'cluster-e2e.test.ts': 480,
      // 102 sshd and PostgresTargets, helm install until every one streams, a pod killed, every
      // marker checked, and the node's teardown (about a minute): 167 s with a 1000-server
      // benchmark running beside it.
      'fleet-e2e.test.ts': 360,
    },
  },
};
