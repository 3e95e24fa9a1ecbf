/**
 * Several stores' reports made into one (`pglog report --store A --store B`). Pure.
 *
 * Each pool writes its own store and a target is collected by one pool, so a group of a
 * section (a template, an error message, a lock type of one target and database) lives in one
 * store: merging is concatenating, sorting in the section's order (the same keys as the SQL's
 * ORDER BY, order.ts), cutting to --limit and summing the group counts. Each store's rows are
 * its first --limit in that order, so the merged rows are exactly the first --limit of all.
 *
 * A target that moved between pools in the window has rows in both stores: the same group then
 * comes from two stores. Its rows are not added together (a p95 or a standard deviation of two
 * parts cannot be combined exactly); both are kept, each with the store it is from (`store`),
 * and each counts as a group. Only such rows carry a store. What is seen of a group is each
 * store's first --limit rows, so a group is known to be in two stores when both stores returned
 * it; both rows of a group can only be shown when both were returned, so a shown pair is always
 * labelled. In the snapshot reports every server instance of a store is returned, so there the
 * rows of a server instance found in two stores (its servers, episodes and sessions) are labelled.
 */
import { LONG_SESSION_ORDER } from './activity-query.ts';
import { EPISODE_ORDER } from './locks-query.ts';
import { comparator, type SortKey } from './order.ts';
import { ERROR_ORDER, LOCK_WAIT_ORDER, STATEMENT_ORDER } from './query.ts';
import { SERVER_ORDER } from './snapshot-runs-query.ts';
import type { ActivityReport, LocksReport, ServerRuns } from './snapshot-types.ts';
import type { FromStore, Report, ReportFilter, ReportSection, StoresRead } from './types.ts';

/** One store's report and the store's name. */
export interface StorePart<R> {
  store: string;
  report: R;
}

/** Keys found in more than one part. */
export function keysInSeveralStores<T>(parts: ReadonlyArray<readonly T[]>, keyOf: (row: T) => string): Set<string> {
  const seen = new Map<string, number>();
  const shared = new Set<string>();
  parts.forEach((rows, i) => {
    for (const r of rows) {
      const key = keyOf(r);
      const first = seen.get(key);
      if (first === undefined) seen.set(key, i);
      else if (first !== i) shared.add(key);
    }
  });
  return shared;
}

/**
 * Every part's rows in `order` (rows equal in it, the same group from two stores, in the order
 * the stores were given), those whose key is in `shared` labelled with their store.
 */
export function mergeRows<T extends FromStore>(
  parts: ReadonlyArray<{ store: string; rows: readonly T[] }>,
  order: readonly SortKey<T>[],
  keyOf: (row: T) => string,
  shared: ReadonlySet<string>,
): T[] {
  const all = parts.flatMap(({ store, rows }) => rows.map((r) => (shared.has(keyOf(r)) ? { ...r, store } : r)));
  // Array.prototype.sort is stable: ties keep the order of the parts.
  return all.sort(comparator(order));
}

/** A section of several stores: the first `limit` rows of all in the section's order, the groups summed. */
export function mergeSection<T extends FromStore>(
  parts: ReadonlyArray<{ store: string; section: ReportSection<T> }>,
  order: readonly SortKey<T>[],
  keyOf: (row: T) => string,
  limit: number,
): ReportSection<T> {
  const shared = keysInSeveralStores(
    parts.map((p) => p.section.rows),
    keyOf,
  );
  const rows = mergeRows(
    parts.map((p) => ({ store: p.store, rows: p.section.rows })),
    order,
    keyOf,
    shared,
  );
  return { rows: rows.slice(0, limit), groups: parts.reduce((n, p) => n + p.section.groups, 0) };
}

/** A key as text: the values in order, NULL and '' kept apart. */
export function keyText(...values: ReadonlyArray<string | number | null>): string {
  return JSON.stringify(values);
}

/** The group keys of the three sections (the columns each groups by). */
export const statementKey = (r: { target: string; database: string | null; fingerprint: string | null }): string =>
  keyText(r.target, r.database, r.fingerprint);
export const errorKey = (r: { target: string; database: string | null; severity: string; sqlstate: string | null; message: string }): string =>
  keyText(r.target, r.database, r.severity, r.sqlstate, r.message);
export const lockWaitKey = (r: { target: string; database: string | null; lock_type: string | null }): string => keyText(r.target, r.database, r.lock_type);
/** A server instance: the unit of the snapshot reports. */
export const serverInstanceKey = (r: { target: string; instance: string }): string => keyText(r.target, r.instance);

/** The classic report of several stores (`filter` is the one every store was asked with). */
export function mergeReports(filter: ReportFilter, parts: ReadonlyArray<StorePart<Report>>, stores: StoresRead): Report {
  const section = <T extends FromStore>(pick: (r: Report) => ReportSection<T>, order: readonly SortKey<T>[], keyOf: (row: T) => string): ReportSection<T> =>
    mergeSection(
      parts.map((p) => ({ store: p.store, section: pick(p.report) })),
      order,
      keyOf,
      filter.limit,
    );
  return {
    filter,
    statements: section((r) => r.statements, STATEMENT_ORDER, statementKey),
    errors: section((r) => r.errors, ERROR_ORDER, errorKey),
    lockWaits: section((r) => r.lockWaits, LOCK_WAIT_ORDER, lockWaitKey),
    stores,
  };
}

/** Rows of the snapshot reports: all of a server instance's rows labelled when it is in several stores. */
function snapshotRows<T extends FromStore & { target: string; instance: string }>(
  parts: ReadonlyArray<{ store: string; rows: readonly T[] }>,
  order: readonly SortKey<T>[],
  shared: ReadonlySet<string>,
): T[] {
  return mergeRows(parts, order, serverInstanceKey, shared);
}

/** `report locks` of several stores: every server instance of each, the episodes merged and cut to --limit. */
export function mergeLocksReports(filter: LocksReport['filter'], parts: ReadonlyArray<StorePart<LocksReport>>, stores: StoresRead): LocksReport {
  const { servers, rows: episodes } = serversAndRows(parts, (r) => r.episodes, EPISODE_ORDER);
  return {
    filter,
    servers,
    episodes: episodes.slice(0, filter.limit),
    episodesTotal: parts.reduce((n, p) => n + p.report.episodesTotal, 0),
    stores,
  };
}

/** `report activity` of several stores: every server instance of each, the long-running sessions merged and cut to --limit. */
export function mergeActivityReports(filter: ActivityReport['filter'], parts: ReadonlyArray<StorePart<ActivityReport>>, stores: StoresRead): ActivityReport {
  const { servers, rows: longRunning } = serversAndRows(parts, (r) => r.longRunning, LONG_SESSION_ORDER);
  return {
    filter,
    servers,
    longRunning: longRunning.slice(0, filter.limit),
    longRunningTotal: parts.reduce((n, p) => n + p.report.longRunningTotal, 0),
    stores,
  };
}

type InstanceRow = FromStore & { target: string; instance: string };

/** A snapshot report's servers and one list of its rows, each merged over the stores (a server instance in several stores labelled with its store). */
function serversAndRows<R extends { servers: Array<InstanceRow & ServerRuns> }, T extends InstanceRow>(
  parts: ReadonlyArray<StorePart<R>>,
  rowsOf: (report: R) => readonly T[],
  order: readonly SortKey<T>[],
): { servers: Array<R['servers'][number]>; rows: T[] } {
  const shared = keysInSeveralStores(
    parts.map((p) => p.report.servers),
    serverInstanceKey,
  );
  return {
    servers: snapshotRows<R['servers'][number]>(
      parts.map((p) => ({ store: p.store, rows: p.report.servers })),
      SERVER_ORDER,
      shared,
    ),
    rows: snapshotRows(
      parts.map((p) => ({ store: p.store, rows: rowsOf(p.report) })),
      order,
      shared,
    ),
  };
}
