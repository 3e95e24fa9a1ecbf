/**
 * The fleet's few real PostgreSQL servers: each a PostgreSQL 15 logging every statement
 * (log-server.ts, rotating by size), reached through a sshd of the simulated fleet (which lets
 * clients forward to Unix sockets), with a monitoring role (pg_monitor only, peer-mapped from
 * the SSH login user, as docs/snapshots.md recommends) for the SQL snapshots, and a seq-load
 * whose numbered statements the check finds in the store exactly once.
 */
import { compareNumbers, loggedNumbers } from '@pglog/test-support/checker.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { setUpMonitoringRole } from '@pglog/test-support/monitoring-role.ts';
import { DEFAULT_TAG_PREFIX, parseSeqTags, type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import type pg from 'pg';

export interface RealServer {
  readonly name: string;
  readonly server: LogServer;
  load: SeqLoad | null;
}

export interface RealCheck {
  name: string;
  logged: number;
  lost: number;
  duplicated: number;
  /** Snapshot runs stored without an error, and with one. */
  snapshots: number;
  snapshotErrors: number;
  line: string;
}

/** `count` real servers named pg0, pg1, ...; the SSH login user reads their logs and is mapped to the monitoring role. */
export async function startRealServers(count: number, osUser: string): Promise<RealServer[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => startLogServer({ logRotationSizeKb: 1024 })));
  const servers = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = started.find((r) => r.status === 'rejected');
  if (failed !== undefined) {
    await Promise.allSettled(servers.map((s) => s.dispose()));
    throw failed.reason;
  }
  try {
    for (const s of servers) await setUpMonitoringRole(s, [osUser]);
  } catch (e) {
    await Promise.allSettled(servers.map((s) => s.dispose()));
    throw e;
  }
  return servers.map((server, i) => ({ name: `pg${i}`, server, load: null }));
}

/** Starts each server's seq-load (numbered statements, each logged once). */
export function startRealLoads(servers: readonly RealServer[], ratePerSecond = 20): void {
  for (const s of servers) s.load = startSeqLoad(s.server.url, { ratePerSecond, payloadBytes: 120, connections: 1 });
}

/** Stops the loads; what each server logged is then final. */
export async function stopRealLoads(servers: readonly RealServer[]): Promise<void> {
  await Promise.all(servers.map((s) => s.load?.stop() ?? Promise.resolve()));
}

/**
 * What each server logged of its load against the store's rows (one scan of the seq-load
 * statements for all of them), and its snapshot runs.
 */
export async function checkRealServers(store: pg.Pool, servers: readonly RealServer[]): Promise<RealCheck[]> {
  if (servers.length === 0) return [];
  const names = servers.map((s) => s.name);
  const { rows } = await store.query<{ target: string; query: string }>(
    `SELECT target, query FROM pglog.statements WHERE target = ANY($1) AND query LIKE 'SELECT ''${DEFAULT_TAG_PREFIX}:%'`,
    [names],
  );
  const runs = await store.query<{ target: string; ok: string; failed: string }>(
    `SELECT target, count(*) FILTER (WHERE error_code IS NULL) AS ok, count(*) FILTER (WHERE error_code IS NOT NULL) AS failed
     FROM pglog.snapshot_runs WHERE target = ANY($1) GROUP BY target`,
    [names],
  );
  return servers.map((s) => {
    const run = s.load?.run ?? '';
    const stored = rows.filter((r) => r.target === s.name).flatMap((r) => parseSeqTags(r.query, run).slice(0, 1));
    const r = compareNumbers(loggedNumbers(s.server.logDirectory, run), stored);
    const snap = runs.rows.find((x) => x.target === s.name);
    const snapshots = Number(snap?.ok ?? 0);
    const snapshotErrors = Number(snap?.failed ?? 0);
    return {
      name: s.name,
      logged: r.expected,
      lost: r.lost.length,
      duplicated: r.duplicated.length,
      snapshots,
      snapshotErrors,
      line: `${s.name}: ${r.expected} statements logged, ${r.lost.length} lost, ${r.duplicated.length} duplicated; ${snapshots} snapshots stored, ${snapshotErrors} failed`,
    };
  });
}

/**
 * Seconds from `since` until each real server's first statement completed after `since` is in
 * the store (null: not within `timeoutMs`): when the real servers stream. Call it at `since`.
 */
export async function untilRealStreaming(
  store: pg.Pool,
  servers: readonly RealServer[],
  since: number,
  timeoutMs: number,
): Promise<Map<string, number | null>> {
  const before = new Map(servers.map((s) => [s.name, s.load?.completed().at(-1) ?? 0]));
  const runs = new Map(servers.map((s) => [s.name, s.load?.run ?? '']));
  const at = new Map<string, number | null>(servers.map((s) => [s.name, null]));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing = [...at].filter(([, t]) => t === null).map(([n]) => n);
    if (missing.length === 0 || Date.now() > deadline) return at;
    const asked = Date.now();
    try {
      const { rows } = await store.query<{ target: string; query: string }>(
        `SELECT DISTINCT ON (target) target, query FROM pglog.statements
         WHERE ts >= $1 AND target = ANY($2) AND query LIKE 'SELECT ''${DEFAULT_TAG_PREFIX}:%' ORDER BY target, ts DESC`,
        [new Date(since - 2000), missing],
      );
      for (const r of rows) {
        const n = parseSeqTags(r.query, runs.get(r.target) ?? '')[0] ?? 0;
        if (n > (before.get(r.target) ?? 0)) at.set(r.target, (Date.now() - since) / 1000);
      }
    } catch {
      /* the store away or without its schema yet: asked again */
    }
    await new Promise((r) => setTimeout(r, Math.max(1000, 2 * (Date.now() - asked))));
  }
}
