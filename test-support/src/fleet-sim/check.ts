/**
 * Every marker once, for a whole fleet: what each simulated server's log writer wrote (its
 * markers numbered 1 .. M and its statement entries) against the rows of pglog.statements, each
 * target's counted in the store (thousands of targets and millions of rows are not fetched).
 *
 * A target is whole when its markers in the store are exactly 1 .. M once each and its
 * statement rows number exactly the entries written: markers find a lost or doubled stretch
 * by number, the row count finds one between two markers.
 */
import type pg from 'pg';

export const FLEET_TAG_PREFIX = 'pglog-fleet';

export interface TargetWritten {
  name: string;
  markers: number;
  statements: number;
}

export interface TargetStored {
  /** Statement rows of the target. */
  rows: number;
  /** Marker rows (duplicates included). */
  markerRows: number;
  /** Distinct marker numbers. */
  distinctMarkers: number;
  minMarker: number | null;
  maxMarker: number | null;
}

export interface FleetCheck {
  targets: number;
  /** Targets whose markers and rows are exactly what was written. */
  whole: number;
  lostMarkers: number;
  duplicatedMarkers: number;
  /** Rows minus entries written, over every target (negative: rows missing). */
  rowDifference: number;
  /** The first few targets that are not whole, with what is wrong. */
  problems: string[];
}

/** What the store holds of each target's statements and markers (one query, grouped in the store). */
export async function storedByTarget(client: pg.Client | pg.Pool): Promise<Map<string, TargetStored>> {
  const { rows } = await client.query<{
    target: string;
    rows: string;
    marker_rows: string;
    distinct_markers: string;
    min_marker: number | null;
    max_marker: number | null;
  }>(
    `WITH s AS (
       SELECT target, CASE WHEN query LIKE 'SELECT ''${FLEET_TAG_PREFIX}:%' THEN split_part(split_part(query, '''', 2), ':', 3)::int END AS n
       FROM pglog.statements
     )
     SELECT target, count(*) AS rows, count(n) AS marker_rows, count(DISTINCT n) AS distinct_markers, min(n) AS min_marker, max(n) AS max_marker
     FROM s GROUP BY target`,
  );
  return new Map(
    rows.map((r) => [
      r.target,
      {
        rows: Number(r.rows),
        markerRows: Number(r.marker_rows),
        distinctMarkers: Number(r.distinct_markers),
        minMarker: r.min_marker,
        maxMarker: r.max_marker,
      },
    ]),
  );
}

/** Pure: what was written against what is stored, per target. */
export function compareFleet(written: readonly TargetWritten[], stored: ReadonlyMap<string, TargetStored>): FleetCheck {
  const check: FleetCheck = { targets: written.length, whole: 0, lostMarkers: 0, duplicatedMarkers: 0, rowDifference: 0, problems: [] };
  for (const w of written) {
    const s = stored.get(w.name) ?? { rows: 0, markerRows: 0, distinctMarkers: 0, minMarker: null, maxMarker: null };
    // Numbers outside 1 .. M would be another run's: counted as not whole, not as found.
    const inRange = s.distinctMarkers === 0 || (s.minMarker !== null && s.minMarker >= 1 && s.maxMarker !== null && s.maxMarker <= w.markers);
    const lost = w.markers - s.distinctMarkers;
    const duplicated = s.markerRows - s.distinctMarkers;
    check.lostMarkers += Math.max(0, lost);
    check.duplicatedMarkers += duplicated;
    check.rowDifference += s.rows - w.statements;
    if (inRange && lost === 0 && duplicated === 0 && s.rows === w.statements) check.whole++;
    else if (check.problems.length < 10) {
      check.problems.push(
        `${w.name}: wrote ${w.markers} markers and ${w.statements} statements, the store holds ${s.distinctMarkers} distinct markers (${s.minMarker ?? '-'}..${s.maxMarker ?? '-'}) in ${s.markerRows} rows and ${s.rows} statement rows`,
      );
    }
  }
  return check;
}

/** One line for logs and assertion messages. */
export function formatFleetCheck(c: FleetCheck): string {
  const head = `${c.whole} of ${c.targets} targets whole; ${c.lostMarkers} markers lost, ${c.duplicatedMarkers} duplicated; statement rows ${c.rowDifference >= 0 ? '+' : ''}${c.rowDifference} against entries written`;
  return c.problems.length === 0 ? head : `${head}\n  ${c.problems.join('\n  ')}`;
}

/** The newest marker stored per target, among rows logged at or after `since` (ms): who streams now. */
export async function newestMarkers(client: pg.Client | pg.Pool, since: number): Promise<Map<string, number>> {
  const { rows } = await client.query<{ target: string; n: number }>(
    `SELECT target, max(split_part(split_part(query, '''', 2), ':', 3)::int) AS n
     FROM pglog.statements WHERE ts >= $1 AND query LIKE 'SELECT ''${FLEET_TAG_PREFIX}:%' GROUP BY target`,
    [new Date(since)],
  );
  return new Map(rows.map((r) => [r.target, r.n]));
}
