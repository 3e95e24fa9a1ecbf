/**
 * The HTML report's statement queries over the statement rollup (docs/store.md "Statement
 * rollup", version 6), for windows whose bins are whole minutes (a window longer than
 * MAX_BINS minutes): the whole minutes of the window come from pglog.statement_rollup, the
 * partial minutes at its two edges from pglog.statements, so counts and totals are exact.
 * Percentiles come from the rollup's duration histogram: within 2^(1/8) - 1 (9.1 %) of the
 * exact ones. A rollup minute is placed in the bin its start falls in: when the window does
 * not start on a whole minute, a bin's edge may be off by up to a minute. Pure.
 */
import type { SqlQuery } from '../query.ts';
import { type HtmlFilter, rankedTemplates, type TemplateKeys, windowWhere } from './queries.ts';

/** The shortest bin the rollup serves: its bucket. */
export const ROLLUP_BUCKET_MS = 60_000;

export function rollupServes(binMs: number): boolean {
  return binMs >= ROLLUP_BUCKET_MS && binMs % ROLLUP_BUCKET_MS === 0;
}

/**
 * `u`: one row per rollup part (whole minutes of the window) and per raw statement (the
 * partial minutes at its edges), as (ts, target, database, fingerprint, calls, timed,
 * total_ms, max_ms, bins, counts). $1 since, $2 until, then the filter's values.
 */
function unitsCte(filter: HtmlFilter): { sql: string; values: unknown[] } {
  const w = windowWhere(filter);
  const lo = `(CASE WHEN date_bin('1 minute', $1::timestamptz, timestamptz 'epoch') = $1::timestamptz THEN $1::timestamptz
                ELSE date_bin('1 minute', $1::timestamptz, timestamptz 'epoch') + interval '1 minute' END)`;
  const hi = `date_bin('1 minute', $2::timestamptz, timestamptz 'epoch')`;
  const rollupWhere = w.sql.replace('ts >= $1 AND ts < $2', `bucket >= ${lo} AND bucket < ${hi}`);
  return {
    sql: `u AS (
  SELECT bucket AS ts, target, database, fingerprint, calls, timed, total_ms, max_ms, bins, counts
    FROM pglog.statement_rollup ${rollupWhere}
  UNION ALL
  SELECT ts, target, database, fingerprint, 1, (duration_ms IS NOT NULL)::int, coalesce(duration_ms, 0), duration_ms,
         CASE WHEN duration_ms IS NULL THEN '{}'::int4[] ELSE ARRAY[pglog.duration_bin(duration_ms)] END,
         CASE WHEN duration_ms IS NULL THEN '{}'::int4[] ELSE ARRAY[1] END
    FROM pglog.statements ${w.sql} AND NOT (ts >= ${lo} AND ts < ${hi}))`,
    values: w.values,
  };
}

function binOf(values: unknown[], binMs: number, alias = ''): string {
  values.push(binMs);
  return `floor(date_part('epoch', ${alias}ts - $1::timestamptz) * 1000 / $${values.length})::int`;
}

/** The histogram percentile q over `c` (cum, tot per group): the first bin whose running count reaches ceil(q * tot). */
const pct = (q: number): string => `pglog.duration_of_bin(min(hb) FILTER (WHERE cum >= ceil(${q} * tot)))`;

/** statementSeriesQuery (queries.ts) over the rollup: the same columns, percentiles from the histograms. */
export function rollupStatementSeriesQuery(filter: HtmlFilter): SqlQuery {
  const u = unitsCte(filter);
  const bin = binOf(u.values, filter.binMs);
  return {
    text: `WITH ${u.sql},
b AS (SELECT ${bin} AS bin, sum(calls) AS n, sum(timed) AS timed, sum(total_ms) AS total_ms FROM u GROUP BY 1),
h AS (SELECT ${bin} AS bin, hb, sum(hc) AS c FROM u, unnest(bins, counts) AS x(hb, hc) GROUP BY 1, 2),
c AS (SELECT bin, hb, sum(c) OVER (PARTITION BY bin ORDER BY hb) AS cum, sum(c) OVER (PARTITION BY bin) AS tot FROM h),
p AS (SELECT bin, ARRAY[${pct(0.5)}, ${pct(0.95)}, ${pct(0.99)}] AS pct FROM c GROUP BY bin)
SELECT b.bin, b.n, b.timed, b.total_ms, p.pct FROM b LEFT JOIN p USING (bin) ORDER BY 1`,
    values: u.values,
  };
}

/** targetSeriesQuery (queries.ts) over the rollup. */
export function rollupTargetSeriesQuery(filter: HtmlFilter): SqlQuery {
  const u = unitsCte(filter);
  const bin = binOf(u.values, filter.binMs);
  return {
    text: `WITH ${u.sql}
SELECT target, ${bin} AS bin, sum(calls) AS n, sum(total_ms) AS total_ms FROM u GROUP BY 1, 2`,
    values: u.values,
  };
}

/** templatesQuery (queries.ts) over the rollup: timed statements only, p95 from the histogram. */
export function rollupTemplatesQuery(filter: HtmlFilter): SqlQuery {
  const u = unitsCte(filter);
  u.values.push(filter.limit);
  const n = `$${u.values.length}`;
  const key = 'target, database, fingerprint';
  return {
    text: `WITH ${u.sql},
g AS (SELECT ${key}, sum(timed) AS calls, sum(total_ms) AS total_ms, sum(total_ms) / sum(timed) AS mean_ms, max(max_ms) AS max_ms
        FROM u WHERE timed > 0 GROUP BY ${key}),
h AS (SELECT ${key}, hb, sum(hc) AS c FROM u, unnest(bins, counts) AS x(hb, hc) GROUP BY ${key}, hb),
c AS (SELECT ${key}, hb, sum(c) OVER (PARTITION BY ${key} ORDER BY hb) AS cum, sum(c) OVER (PARTITION BY ${key}) AS tot FROM h),
p AS (SELECT ${key}, ${pct(0.95)} AS p95_ms FROM c GROUP BY ${key}),
s AS (SELECT g.*, p.p95_ms FROM g LEFT JOIN p ON p.target = g.target AND p.database IS NOT DISTINCT FROM g.database AND p.fingerprint IS NOT DISTINCT FROM g.fingerprint),
${rankedTemplates(n)}`,
    values: u.values,
  };
}

/** templateSeriesQuery (queries.ts) over the rollup: calls and mean per bin of each shown template. */
export function rollupTemplateSeriesQuery(filter: HtmlFilter, keys: TemplateKeys): SqlQuery {
  const u = unitsCte(filter);
  const bin = binOf(u.values, filter.binMs, 'u.');
  u.values.push(keys.targets, keys.databases, keys.fingerprints);
  const k = u.values.length - 2;
  return {
    text: `WITH ${u.sql},
k AS (SELECT * FROM unnest($${k}::text[], $${k + 1}::text[], $${k + 2}::text[]) AS k(target, database, fingerprint))
SELECT k.target, k.database, k.fingerprint, ${bin} AS bin, sum(u.timed) AS calls, sum(u.total_ms) / sum(u.timed) AS mean_ms
  FROM u JOIN k ON u.target = k.target AND coalesce(u.fingerprint, '') = coalesce(k.fingerprint, '') AND coalesce(u.database, '') = coalesce(k.database, '')
 WHERE u.timed > 0
 GROUP BY 1, 2, 3, 4`,
    values: u.values,
  };
}
