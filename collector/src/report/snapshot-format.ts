/**
 * What the text and JSON of `report locks` and `report activity` share: a server's run
 * status, timestamps. Pure.
 */
import { formatMs, formatTime, storesJson } from './format.ts';
import type { ServerRuns, SnapshotFilter } from './snapshot-types.ts';
import { escapeControls } from './terminal-safe.ts';
import { oneLine } from './text-table.ts';
import type { StoresRead } from './types.ts';

export function iso(d: Date | null): string | null {
  return d === null ? null : d.toISOString();
}

/** What both reports say when no server has a snapshot run in the window. */
export const NO_RUNS = 'No snapshot runs in this window (is collect.activity or collect.locks on for these targets?)';

/** `db1/main`; `db1/main (store NAME)` when the server instance is in several stores' rows. Escaped for a terminal. */
export function serverName(s: { target: string; instance: string; store?: string }): string {
  const name = escapeControls(`${s.target}/${s.instance}`);
  return s.store === undefined ? name : `${name} (store ${oneLine(s.store)})`;
}

/** Why the newest run failed, on one line, escaped for a terminal; null when it did not. */
export function lastRunFailure(s: ServerRuns): string | null {
  if (s.lastErrorCode === null && s.lastError === null) return null;
  const why = [s.lastErrorCode === null ? null : escapeControls(s.lastErrorCode), s.lastError === null ? null : oneLine(s.lastError)]
    .filter((p) => p !== null && p !== '')
    .join(': ');
  return `newest snapshot run failed at ${formatTime(s.lastRunAt)}Z after ${formatMs(s.lastRunMs)}: ${why}`;
}

/** The run fields of a server in JSON (shared by both reports). */
function serverRunsJson(s: ServerRuns): Record<string, unknown> {
  return {
    target: s.target,
    instance: s.instance,
    snapshotAt: iso(s.snapshotAt),
    lastRun: {
      at: s.lastRunAt.toISOString(),
      durationMs: s.lastRunMs,
      ok: s.lastErrorCode === null && s.lastError === null,
      errorCode: s.lastErrorCode,
      error: s.lastError,
    },
    runs: s.runs,
    failedRuns: s.failedRuns,
    ...(s.store === undefined ? {} : { store: s.store }),
  };
}

/**
 * The start both reports' JSON documents share: the report's name, the window, the filters
 * (`moreFilters` after the common ones) and the servers, each its run fields then `serverFields`.
 */
export function snapshotReportJson<S extends ServerRuns>(
  name: string,
  report: { filter: SnapshotFilter; servers: readonly S[]; stores?: StoresRead },
  serverFields: (s: S) => object,
  moreFilters: object = {},
): { report: string; window: { since: string; until: string }; filters: object; servers: object[] } {
  const f = report.filter;
  return {
    report: name,
    window: { since: f.since.toISOString(), until: f.until.toISOString() },
    filters: { target: f.target, database: f.database, limit: f.limit, ...moreFilters },
    ...storesJson(report.stores, 'failedStores'),
    servers: report.servers.map((s) => ({ ...serverRunsJson(s), ...serverFields(s) })),
  };
}
