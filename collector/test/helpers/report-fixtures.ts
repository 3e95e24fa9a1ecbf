// What the unit tests of `report locks` and `report activity` share: a server whose newest
// snapshot run worked, and the run fields that both reports' JSON lists first for a server.
import type { ServerRuns } from '../../src/report/snapshot-types.ts';

/** The newest snapshot (and the newest run) of the servers these tests show. */
export const SNAPSHOT_AT = new Date('2026-11-23T18:40:12Z');

/** db1/main with a snapshot at SNAPSHOT_AT and a newest run that worked; `over` sets what a test reads. */
export function serverRuns(over: Partial<ServerRuns> & Pick<ServerRuns, 'sessions' | 'blocked' | 'lastRunMs' | 'runs'>): ServerRuns {
  return {
    target: 'db1',
    instance: 'main',
    snapshotAt: SNAPSHOT_AT,
    lastRunAt: SNAPSHOT_AT,
    lastErrorCode: null,
    lastError: null,
    failedRuns: 0,
    ...over,
  };
}

/** The keys snapshotReportJson() gives a server, in order, before each report's own. */
export const SERVER_RUN_KEYS = ['target', 'instance', 'snapshotAt', 'lastRun', 'runs', 'failedRuns'];
