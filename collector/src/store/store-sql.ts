/**
 * The store writer's statements besides COPY, with their parameters built from plain values.
 * Sets of rows go in as arrays through `unnest`, so each step is one statement whatever the
 * batch size. Statements that lock rows take them in key order, so collectors committing
 * overlapping streams or templates at the same time queue instead of deadlocking.
 */
import type pg from 'pg';

import type { Micros } from './iso-time.ts';
import type { StorePosition } from './store-types.ts';

export interface StreamEpoch {
  target: string;
  instance: string;
  epoch: number;
}

/** One array per field of `rows`, in the order of `fields`: the parameters of an `unnest($n::type[], ...)`. */
function unnestArrays<T, K extends keyof T>(rows: readonly T[], fields: readonly K[]): T[K][][] {
  return fields.map((f) => rows.map((r) => r[f]));
}

/** Locks the claims of the given streams in key order; returns the stored epochs found. */
export async function lockClaims(client: pg.ClientBase, streams: readonly { target: string; instance: string }[]): Promise<StreamEpoch[]> {
  if (streams.length === 0) return [];
  const res = await client.query<{ target: string; instance: string; epoch: string }>(
    `SELECT c.target, c.instance, c.epoch::text AS epoch
       FROM pglog.stream_claims c
       JOIN unnest($1::text[], $2::text[]) AS k(target, instance) USING (target, instance)
      ORDER BY c.target, c.instance
        FOR UPDATE OF c`,
    unnestArrays(streams, ['target', 'instance']),
  );
  return res.rows.map((r) => ({ target: r.target, instance: r.instance, epoch: Number(r.epoch) }));
}

/** Creates claims for streams that were never claimed (epoch as given); existing ones stay. */
export async function insertMissingClaims(client: pg.ClientBase, streams: readonly StreamEpoch[]): Promise<void> {
  if (streams.length === 0) return;
  await client.query(
    `INSERT INTO pglog.stream_claims (target, instance, epoch)
     SELECT * FROM unnest($1::text[], $2::text[], $3::int8[]) ORDER BY 1, 2
     ON CONFLICT (target, instance) DO NOTHING`,
    unnestArrays(streams, ['target', 'instance', 'epoch']),
  );
}

/** Standalone claims: each stream's stored epoch + 1 (1 for a new stream), atomically; the rows in key order. */
export async function claimNextAll(client: pg.ClientBase, streams: readonly { target: string; instance: string }[]): Promise<StreamEpoch[]> {
  if (streams.length === 0) return [];
  const res = await client.query<{ target: string; instance: string; epoch: string }>(
    `INSERT INTO pglog.stream_claims AS c (target, instance, epoch)
     SELECT t, i, 1 FROM unnest($1::text[], $2::text[]) AS k(t, i) ORDER BY 1, 2
     ON CONFLICT (target, instance) DO UPDATE SET epoch = c.epoch + 1, claimed_at = now()
     RETURNING c.target, c.instance, c.epoch::text AS epoch`,
    unnestArrays(streams, ['target', 'instance']),
  );
  return res.rows.map((r) => ({ target: r.target, instance: r.instance, epoch: Number(r.epoch) }));
}

/**
 * Cluster claims: each stream's epoch stored unless a higher one is. Returns the streams whose
 * epoch was stored; the others (fenced by a higher one) are not in the result.
 */
export async function claimEpochAll(client: pg.ClientBase, streams: readonly StreamEpoch[]): Promise<StreamEpoch[]> {
  if (streams.length === 0) return [];
  const res = await client.query<{ target: string; instance: string; epoch: string }>(
    `INSERT INTO pglog.stream_claims AS c (target, instance, epoch)
     SELECT * FROM unnest($1::text[], $2::text[], $3::int8[]) ORDER BY 1, 2
     ON CONFLICT (target, instance) DO UPDATE SET epoch = EXCLUDED.epoch, claimed_at = now()
       WHERE c.epoch <= EXCLUDED.epoch
     RETURNING c.target, c.instance, c.epoch::text AS epoch`,
    unnestArrays(streams, ['target', 'instance', 'epoch']),
  );
  return res.rows.map((r) => ({ target: r.target, instance: r.instance, epoch: Number(r.epoch) }));
}

/** The committed positions of the streams that have one. */
export async function readPositions(client: pg.ClientBase, streams: readonly { target: string; instance: string }[]): Promise<StorePosition[]> {
  if (streams.length === 0) return [];
  const res = await client.query<{ target: string; instance: string; file: string; file_identity: string | null; byte_offset: string }>(
    `SELECT p.target, p.instance, p.file, p.file_identity, p.byte_offset::text AS byte_offset
       FROM pglog.read_position_state p
       JOIN unnest($1::text[], $2::text[]) AS k(target, instance) USING (target, instance)`,
    unnestArrays(streams, ['target', 'instance']),
  );
  return res.rows.map((r) => ({ target: r.target, instance: r.instance, file: r.file, identity: r.file_identity ?? '', offset: Number(r.byte_offset) }));
}

/** Streams' first positions (where they start), under their epochs, unless one is stored: a stored position is never replaced by a start. */
export async function insertStartPositions(client: pg.ClientBase, starts: readonly { start: StorePosition; epoch: number }[]): Promise<void> {
  if (starts.length === 0) return;
  const rows = starts.map(({ start, epoch }) => ({ ...start, epoch }));
  await client.query(
    `INSERT INTO pglog.read_position_state (target, instance, file, file_identity, byte_offset, epoch, updated_at)
     SELECT t, i, f, fi, o, e, now() FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[]) AS k(t, i, f, fi, o, e)
     ORDER BY 1, 2
     ON CONFLICT (target, instance) DO NOTHING`,
    unnestArrays(rows, ['target', 'instance', 'file', 'identity', 'offset', 'epoch']),
  );
}

export interface QuarantineRecord {
  target: string;
  instance: string;
  file: string | null;
  fileOffset: number | null;
  reason: string;
  /** JSON text. */
  row: string;
}

export interface TemplateRow {
  fingerprint: string;
  normalized: string;
  first: Micros;
  last: Micros;
}

/**
 * How far behind a batch's newest use a template's last_seen may stay. Every server of a fleet
 * runs the same application's templates, so every commit of every collector wanted the same
 * rows: upserting them locked each until the commit ended and serialized the store's lanes
 * behind one another (issue 46's soak: most commits of six collectors waiting on tuple locks).
 */
const TEMPLATE_LAST_SEEN_STEP = "interval '1 minute'";

/**
 * The end of a batch, in one statement (one round trip): the query templates (new ones
 * inserted, never waiting for an existing one; first_seen widened exactly, locking in
 * fingerprint order, so collectors sharing templates lock them in the same order; last_seen
 * moved forward once it is a minute behind, skipping a row another commit holds: that commit
 * moves it), the quarantined rows, and the read positions, each with its owner's epoch. The epoch
 * guard repeats the claim check (the claims are locked by this transaction): a position is
 * never taken back by an owner older than the one that wrote it. Timestamps travel as int8
 * microseconds since 1970 (exact) and become timestamptz in the server.
 */
export async function finishBatch(
  client: pg.ClientBase,
  templates: readonly TemplateRow[],
  quarantine: readonly QuarantineRecord[],
  positions: readonly (StorePosition & { epoch: number })[],
): Promise<void> {
  if (templates.length + quarantine.length + positions.length === 0) return;
  const sortedPositions = [...positions].sort((a, b) => compareKeys(a, b));
  await client.query(
    `WITH seen AS (
       SELECT f, n, timestamptz 'epoch' + a * interval '1 microsecond' AS a, timestamptz 'epoch' + b * interval '1 microsecond' AS b
         FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[]) AS u(f, n, a, b)
     ), inserted AS (
       INSERT INTO pglog.query_templates (fingerprint, normalized, first_seen, last_seen)
       SELECT f, n, a, b FROM seen
       ON CONFLICT (fingerprint) DO NOTHING
       RETURNING 1
     ), earlier AS (
       UPDATE pglog.query_templates q SET first_seen = seen.a, last_seen = GREATEST(q.last_seen, seen.b)
         FROM seen, (SELECT t.fingerprint FROM pglog.query_templates t JOIN seen ON t.fingerprint = seen.f
                      WHERE seen.a < t.first_seen ORDER BY t.fingerprint FOR UPDATE OF t) l
        WHERE q.fingerprint = seen.f AND q.fingerprint = l.fingerprint AND seen.a < q.first_seen
       RETURNING 1
     ), later AS (
       UPDATE pglog.query_templates q SET last_seen = GREATEST(q.last_seen, seen.b)
         FROM seen, (SELECT t.fingerprint FROM pglog.query_templates t JOIN seen ON t.fingerprint = seen.f
                      WHERE seen.a >= t.first_seen AND seen.b > t.last_seen + ${TEMPLATE_LAST_SEEN_STEP}
                      ORDER BY t.fingerprint FOR UPDATE OF t SKIP LOCKED) l
        WHERE q.fingerprint = seen.f AND q.fingerprint = l.fingerprint
       RETURNING 1
     ), quarantined AS (
       INSERT INTO pglog.quarantine (target, instance, file, file_offset, reason, "row")
       SELECT * FROM unnest($5::text[], $6::text[], $7::text[], $8::int8[], $9::text[], $10::jsonb[])
       RETURNING 1
     ), positions AS (
       INSERT INTO pglog.read_position_state AS p (target, instance, file, file_identity, byte_offset, epoch, updated_at)
       SELECT t, i, f, fi, o, e, now() FROM unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::int8[], $16::int8[]) AS u(t, i, f, fi, o, e)
       ON CONFLICT (target, instance) DO UPDATE
         SET file = EXCLUDED.file, file_identity = EXCLUDED.file_identity, byte_offset = EXCLUDED.byte_offset,
             epoch = EXCLUDED.epoch, updated_at = EXCLUDED.updated_at
         WHERE p.epoch <= EXCLUDED.epoch
       RETURNING 1
     )
     SELECT (SELECT count(*) FROM inserted) + (SELECT count(*) FROM earlier) + (SELECT count(*) FROM later) AS templates,
            (SELECT count(*) FROM quarantined) AS quarantined,
            (SELECT count(*) FROM positions) AS positions`,
    [
      templates.map((t) => t.fingerprint),
      templates.map((t) => t.normalized),
      templates.map((t) => t.first.toString()),
      templates.map((t) => t.last.toString()),
      ...unnestArrays(quarantine, ['target', 'instance', 'file', 'fileOffset', 'reason', 'row']),
      ...unnestArrays(sortedPositions, ['target', 'instance', 'file', 'identity', 'offset', 'epoch']),
    ],
  );
}

/**
 * `pg_advisory_xact_lock` key of partition maintenance: the ASCII bytes of "pglogprt" as a
 * big-endian int64. Every collector of a fleet maintains the partitions; two that found the same
 * partition missing at once both created it, and one failed with 42P07 (issue 46, after a store
 * restart). Under this lock the second finds the first's partition.
 */
const MAINTENANCE_LOCK_KEY = 0x70676c6f67707274n;

/** Runs `work` in one transaction that holds the partition maintenance lock of the whole store. */
export async function underMaintenanceLock<T>(client: pg.ClientBase, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1::int8)', [MAINTENANCE_LOCK_KEY.toString()]);
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}

/** Partitions from the day before `day` to three days after it; returns the names created. */
export async function ensurePartitions(client: pg.ClientBase, day: string): Promise<string[]> {
  const res = await client.query<{ name: string }>('SELECT pglog.ensure_partitions($1::date - 1, 5) AS name', [day]);
  return res.rows.map((r) => r.name);
}

/** Drops the daily partitions that end on or before `day`; returns their names. */
export async function dropPartitionsBefore(client: pg.ClientBase, day: string): Promise<string[]> {
  const res = await client.query<{ name: string }>('SELECT pglog.drop_partitions_before($1::date) AS name', [day]);
  // The statement rollup (version 6) is kept as long as the statements it sums.
  await client.query(`DELETE FROM pglog.statement_rollup_parts WHERE bucket < $1::date::timestamp AT TIME ZONE 'UTC'`, [day]);
  return res.rows.map((r) => r.name);
}

export function compareKeys(a: { target: string; instance: string }, b: { target: string; instance: string }): number {
  if (a.target !== b.target) return a.target < b.target ? -1 : 1;
  if (a.instance !== b.instance) return a.instance < b.instance ? -1 : 1;
  return 0;
}

/**
 * `pg_try_advisory_xact_lock` key of the rollup's compaction: "pglogcmp". One compaction at a
 * time in the whole store: at fleet scale every collector compacting the same two days at once
 * made each wait on the others' row locks for tens of seconds, holding a store connection each,
 * and a killed collector's compaction ran on in the server (issue 46's soak).
 */
export const COMPACTION_LOCK_KEY = 0x70676c6f67636d70n;

/** How long one compaction may run before the server cancels it (it is redone by the next round). */
const COMPACTION_TIMEOUT = '5min';

/**
 * compactRollup in a transaction of its own under the store's compaction lock; null (nothing
 * done) when another collector holds the lock: its compaction covers the same parts.
 */
export async function compactRollupAlone(client: pg.ClientBase, from: Date, to: Date): Promise<{ removed: number; inserted: number } | null> {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_xact_lock($1::int8) AS locked', [COMPACTION_LOCK_KEY.toString()]);
    if (rows[0]?.locked !== true) {
      await client.query('ROLLBACK');
      return null;
    }
    await client.query(`SET LOCAL statement_timeout = '${COMPACTION_TIMEOUT}'`);
    const result = await compactRollup(client, from, to);
    await client.query('COMMIT');
    return result;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}

/**
 * Compacts the statement rollup's parts (docs/store.md "Statement rollup"): every (bucket, key)
 * in [from, to) with more than one part becomes one row, its sums and its histogram merged, in
 * one statement (deleted and inserted together). Batches only ever append, so a part committed
 * meanwhile is left for the next run; readers sum parts, so they see the same totals before
 * and after. Keys are matched on coalesce(..., '') to let the planner hash: deleting a key's
 * parts that needed no compaction is harmless, they are put back summed by their real key.
 * Returns the parts removed and the rows that replaced them.
 */
export async function compactRollup(client: pg.ClientBase, from: Date, to: Date): Promise<{ removed: number; inserted: number }> {
  const key = 'bucket, target, instance, database, fingerprint';
  const same = (a: string, b: string): string => `${a}.bucket = ${b}.bucket AND ${a}.target = ${b}.target AND ${a}.instance = ${b}.instance
       AND coalesce(${a}.database, '') = coalesce(${b}.database, '') AND (${a}.database IS NULL) = (${b}.database IS NULL)
       AND coalesce(${a}.fingerprint, '') = coalesce(${b}.fingerprint, '') AND (${a}.fingerprint IS NULL) = (${b}.fingerprint IS NULL)`;
  const res = await client.query<{ removed: string; inserted: string }>(
    `WITH k AS (
       SELECT ${key} FROM pglog.statement_rollup_parts WHERE bucket >= $1 AND bucket < $2 GROUP BY ${key} HAVING count(*) > 1
     ), gone AS (
       DELETE FROM pglog.statement_rollup_parts p USING k WHERE ${same('p', 'k')} RETURNING p.*
     ), h AS (
       SELECT ${key}, b, sum(c)::int4 AS c FROM gone, unnest(bins, counts) AS u(b, c) GROUP BY ${key}, b
     ), hb AS (
       SELECT ${key}, array_agg(b ORDER BY b) AS bins, array_agg(c ORDER BY b) AS counts FROM h GROUP BY ${key}
     ), s AS (
       SELECT ${key}, sum(calls) AS calls, sum(timed) AS timed, sum(total_ms) AS total_ms, max(max_ms) AS max_ms FROM gone GROUP BY ${key}
     ), ins AS (
       INSERT INTO pglog.statement_rollup_parts (${key}, calls, timed, total_ms, max_ms, bins, counts)
       SELECT s.bucket, s.target, s.instance, s.database, s.fingerprint, s.calls, s.timed, s.total_ms, s.max_ms,
              coalesce(hb.bins, '{}'), coalesce(hb.counts, '{}')
         FROM s LEFT JOIN hb ON ${same('hb', 's')}
       RETURNING 1
     )
     SELECT (SELECT count(*) FROM gone) AS removed, (SELECT count(*) FROM ins) AS inserted`,
    [from, to],
  );
  return { removed: Number(res.rows[0]?.removed ?? 0), inserted: Number(res.rows[0]?.inserted ?? 0) };
}
