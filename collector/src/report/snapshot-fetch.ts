/**
 * Runs the queries of `report locks` and `report activity` in one read-only snapshot of the
 * store (fetch.ts) and assembles their results per server instance.
 */
import type pg from 'pg';

import { activityStates, longRunningQuery, longSessionFromRow, sessionStatesQuery } from './activity-query.ts';
import { buildBlockingForest, type EdgeInput, type SessionInput, treesInDatabase } from './blocking-tree.ts';
import { inReadOnlySnapshot } from './fetch.ts';
import { currentEdgesQuery, currentTreeSessionsQuery, edgeFromRow, episodeFromRow, episodesQuery, treeSessionFromRow } from './locks-query.ts';
import { groupsOf } from './query.ts';
import { serverKey, serverRunsFromRow, serverRunsQuery } from './snapshot-runs-query.ts';
import type { ActivityReport, LocksReport, SnapshotFilter } from './snapshot-types.ts';

function groupBy<T extends { target: string; instance: string }>(rows: readonly T[]): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const r of rows) {
    const key = serverKey(r.target, r.instance);
    const list = map.get(key);
    if (list === undefined) map.set(key, [r]);
    else list.push(r);
  }
  return map;
}

export async function fetchLocksReport(client: pg.ClientBase, filter: SnapshotFilter): Promise<LocksReport> {
  return inReadOnlySnapshot(client, async () => {
    const runs = (await client.query(serverRunsQuery(filter))).rows.map(serverRunsFromRow);
    const edges = groupBy((await client.query(currentEdgesQuery(filter))).rows.map(edgeFromRow));
    const sessions = groupBy((await client.query(currentTreeSessionsQuery(filter))).rows.map(treeSessionFromRow));
    const episodeRows = (await client.query(episodesQuery(filter))).rows;
    const servers = runs.map((run) => {
      const key = serverKey(run.target, run.instance);
      const forest = buildBlockingForest(edges.get(key) ?? ([] as EdgeInput[]), sessions.get(key) ?? ([] as SessionInput[]));
      if (filter.database !== null) forest.roots = treesInDatabase(forest, filter.database);
      return { ...run, forest };
    });
    return { filter, servers, episodes: episodeRows.map(episodeFromRow), episodesTotal: groupsOf(episodeRows) };
  });
}

export async function fetchActivityReport(client: pg.ClientBase, filter: SnapshotFilter): Promise<ActivityReport> {
  return inReadOnlySnapshot(client, async () => {
    const runs = (await client.query(serverRunsQuery(filter))).rows.map(serverRunsFromRow);
    const states = activityStates((await client.query(sessionStatesQuery(filter))).rows);
    const longRows = (await client.query(longRunningQuery(filter))).rows;
    const servers = runs.map((run) => {
      const s = states.get(serverKey(run.target, run.instance));
      return { ...run, byState: s?.byState ?? {}, lockWaiting: s?.lockWaiting ?? 0 };
    });
    return { filter, servers, longRunning: longRows.map(longSessionFromRow), longRunningTotal: groupsOf(longRows) };
  });
}
