/**
 * When a simulated fleet streams, read from the store: the moment each server's first marker
 * written after a given instant (an install, a pod killed, a fault) is stored. A server
 * "streams" once that marker is there, so the time until every server of a set streams is what
 * an operator of the fleet waits after the instant.
 *
 * Built for thousands of servers and a store that grows by millions of rows while it waits:
 * each poll asks only for the servers still missing, over marker rows only (by the markers'
 * fingerprint, which the store indexes with the time, once a first marker shows it), and polls
 * no more often than twice the last query took. A store that is down (restarted by a fault)
 * or has no schema yet is polled again, not an error.
 */
import type pg from 'pg';

import { FLEET_TAG_PREFIX, type TargetWritten } from './check.ts';
import type { WriterTotals } from './log-writer.ts';

/** What of a SimulatedFleet this needs: its names and what its writer wrote. */
export interface StreamingFleet {
  readonly logs: ReadonlyArray<{ name: string }>;
  snapshot(): Promise<WriterTotals>;
  written(totals: WriterTotals): TargetWritten[];
}

export interface StreamingTimes {
  /** Seconds from `since` until half of the servers had a marker written after `since` stored. */
  half: number | null;
  /** ... until every server had. */
  all: number | null;
  /** Servers that never did within the wait. */
  missing: string[];
  /** Seconds from `since` for each server that did. */
  byTarget: Map<string, number>;
}

export interface StreamingOptions {
  /** The servers to wait for, by target name (default: every server of the fleet). */
  names?: readonly string[];
  /** Least time between polls, ms. Default 1000. */
  pollMs?: number;
  /** Called after every poll: servers streaming so far, of how many. */
  progress?: (streaming: number, total: number) => void;
  /** Stop waiting early (a run interrupted). */
  signal?: AbortSignal;
}

const MARKER_LIKE = `SELECT ''${FLEET_TAG_PREFIX}:%`;
/** The marker number of a marker row's query (`SELECT 'TAG:RUN:N'`). */
const MARKER_NUMBER = "split_part(split_part(query, '''', 2), ':', 3)::int";

/** Errors a poll lives with: no schema yet, the store restarting or unreachable. */
export function isStoreAway(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? '';
  return (
    code === '42P01' ||
    code === '3F000' ||
    code.startsWith('57') ||
    code.startsWith('08') ||
    /ECONNREFUSED|ECONNRESET|ENOENT|terminat|Connection/i.test(String(e))
  );
}

/**
 * The fingerprint the store gives marker rows (every marker is `SELECT '...'`, one shape), or
 * null while none is stored. With it, marker queries use the (fingerprint, ts) index.
 */
export class MarkerFingerprint {
  private value: string | null = null;

  async get(store: pg.Pool): Promise<string | null> {
    if (this.value !== null) return this.value;
    const { rows } = await store.query<{ fingerprint: string | null }>(
      `SELECT fingerprint FROM pglog.statements WHERE query LIKE '${MARKER_LIKE}' AND fingerprint IS NOT NULL LIMIT 1`,
    );
    this.value = rows[0]?.fingerprint ?? null;
    return this.value;
  }
}

/** The newest marker number stored per target of `names`, among rows logged at or after `since` (ms). */
export async function newestMarkersOf(store: pg.Pool, fingerprint: MarkerFingerprint, names: readonly string[], since: number): Promise<Map<string, number>> {
  const fp = await fingerprint.get(store);
  const { rows } = await store.query<{ target: string; n: number }>(
    `SELECT target, max(${MARKER_NUMBER}) AS n FROM pglog.statements
     WHERE ts >= $1 AND target = ANY($2) AND query LIKE '${MARKER_LIKE}' ${fp === null ? '' : 'AND fingerprint = $3'}
     GROUP BY target`,
    fp === null ? [new Date(since), names] : [new Date(since), names, fp],
  );
  return new Map(rows.map((r) => [r.target, r.n]));
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });

/**
 * Polls the store until every server's (of `names`, default all) first marker written after
 * `since` (ms) is stored, or `timeoutMs` passes: the time from `since` until half and until all
 * of them stream. What the fleet had written is read when this is called: call it at `since`.
 */
export async function untilEveryServerStreams(
  store: pg.Pool,
  fleet: StreamingFleet,
  since: number,
  timeoutMs: number,
  options: StreamingOptions = {},
): Promise<StreamingTimes> {
  const names = [...(options.names ?? fleet.logs.map((l) => l.name))];
  const before = new Map(fleet.written(await fleet.snapshot()).map((w) => [w.name, w.markers]));
  const streamingAt = new Map<string, number>();
  const fingerprint = new MarkerFingerprint();
  const deadline = Date.now() + timeoutMs;
  while (streamingAt.size < names.length && Date.now() < deadline && options.signal?.aborted !== true) {
    const missing = names.filter((n) => !streamingAt.has(n));
    const asked = Date.now();
    let newest = new Map<string, number>();
    try {
      newest = await newestMarkersOf(store, fingerprint, missing, since - 2000);
    } catch (e) {
      if (!isStoreAway(e)) throw e;
    }
    const now = Date.now();
    for (const name of missing) if ((newest.get(name) ?? 0) > (before.get(name) ?? 0)) streamingAt.set(name, now);
    options.progress?.(streamingAt.size, names.length);
    if (streamingAt.size < names.length) await sleep(Math.max(options.pollMs ?? 1000, 2 * (now - asked)), options.signal);
  }
  return streamingTimes(names, streamingAt, since);
}

/** Pure: the half and all times of the servers that stream, at `streamingAt` (ms) each. */
export function streamingTimes(names: readonly string[], streamingAt: ReadonlyMap<string, number>, since: number): StreamingTimes {
  const byTarget = new Map([...streamingAt].map(([n, t]) => [n, (t - since) / 1000]));
  const times = [...byTarget.values()].sort((a, b) => a - b);
  return {
    half: names.length > 0 && times.length >= names.length / 2 ? times[Math.max(0, Math.ceil(names.length / 2) - 1)]! : null,
    all: times.length === names.length ? (times.at(-1) ?? 0) : null,
    missing: names.filter((n) => !streamingAt.has(n)),
    byTarget,
  };
}
