/**
 * How far behind the store is, per simulated server: the seconds between now and the log time
 * of the newest marker of the server that is stored. Sampled every few seconds through a long
 * run (a soak), so each sample reads only the recent marker rows (by the markers' fingerprint
 * and time, both indexed) and keeps each server's newest time between samples; a server with
 * nothing recent is looked up further back, and one with nothing stored since `since` counts
 * from `since`.
 */
import type pg from 'pg';

import { FLEET_TAG_PREFIX } from './check.ts';
import { isStoreAway, MarkerFingerprint } from './streaming.ts';

export interface LagSample {
  /** Wall-clock time of the sample (ms). */
  at: number;
  /** Seconds behind, over the servers: the 95th percentile and the largest. */
  p95: number;
  max: number;
  /** Servers with no marker stored since `since`. */
  none: number;
  /** False when the store could not be asked (the sample repeats the last one known). */
  fresh: boolean;
}

const MARKER_LIKE = `SELECT ''${FLEET_TAG_PREFIX}:%`;

/** Pure: the p-th percentile (0..1) of `values` by nearest rank; 0 for none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

export class FleetLag {
  private readonly store: pg.Pool;
  private readonly names: readonly string[];
  private readonly since: number;
  private readonly windowMs: number;
  private readonly newest = new Map<string, number>();
  private readonly fingerprint = new MarkerFingerprint();

  /** `names`: the servers' target names; `since` (ms): lag of a server never seen counts from here. */
  constructor(store: pg.Pool, names: readonly string[], since: number, windowMs = 60_000) {
    this.store = store;
    this.names = names;
    this.since = since;
    this.windowMs = windowMs;
  }

  /** Each server's newest stored marker time (ms), as of the last sample. */
  newestTimes(): ReadonlyMap<string, number> {
    return this.newest;
  }

  async sample(): Promise<LagSample> {
    const at = Date.now();
    let fresh = true;
    try {
      await this.read(at - this.windowMs, null);
      // Servers with nothing in the window: further back, only them (at most 15 minutes).
      const behind = this.names.filter((n) => (this.newest.get(n) ?? 0) < at - this.windowMs);
      if (behind.length > 0) {
        const from = Math.max(at - 15 * 60_000, this.since - 2000, Math.min(...behind.map((n) => this.newest.get(n) ?? 0)));
        await this.read(from, behind);
      }
    } catch (e) {
      if (!isStoreAway(e)) throw e;
      fresh = false;
    }
    const lags = this.names.map((n) => (at - (this.newest.get(n) ?? this.since)) / 1000);
    return { at, p95: percentile(lags, 0.95), max: Math.max(0, ...lags), none: this.names.filter((n) => !this.newest.has(n)).length, fresh };
  }

  private async read(from: number, only: readonly string[] | null): Promise<void> {
    const fp = await this.fingerprint.get(this.store);
    const params: unknown[] = [new Date(Math.max(from, this.since - 2000))];
    let where = `ts >= $1 AND query LIKE '${MARKER_LIKE}'`;
    if (fp !== null) {
      params.push(fp);
      where += ` AND fingerprint = $${params.length}`;
    }
    if (only !== null) {
      params.push(only);
      where += ` AND target = ANY($${params.length})`;
    }
    const { rows } = await this.store.query<{ target: string; ts: Date }>(
      `SELECT target, max(ts) AS ts FROM pglog.statements WHERE ${where} GROUP BY target`,
      params,
    );
    for (const r of rows) {
      const t = r.ts.getTime();
      if (t > (this.newest.get(r.target) ?? 0)) this.newest.set(r.target, t);
    }
  }
}
