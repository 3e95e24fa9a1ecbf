/**
 * What the HTML report shows, as plain data: built from the rows of queries.ts, rendered by
 * render.ts and embedded in the page as JSON for the charts. Pure.
 *
 * Series are arrays over the window's bins (index i covers [since + i·bin, since + (i+1)·bin)),
 * with null where a bin had nothing to measure (a percentile without statements), 0 where a
 * count was zero. Times are epoch milliseconds (UTC); the page shows them in the reader's zone
 * or in UTC.
 */
import { date, num, numOrNull, type Row, text, textOrNull } from '../query.ts';
import type { BlockingEpisode } from '../snapshot-types.ts';
import type { ErrorStats, LockWaitStats } from '../types.ts';
import { SERIES_TOP, type TemplateKeys } from './queries.ts';

export interface Overview {
  statements: number;
  /** Statements logged with a duration, and the sum and mean of those durations. */
  timed: number;
  totalMs: number;
  meanMs: number | null;
  errors: number;
  lockWaits: number;
  deadlocks: number;
  connections: number;
  disconnections: number;
  tempFiles: number;
  tempBytes: number;
  checkpoints: number;
  autovacuum: number;
  autoanalyze: number;
  /** The busiest bin's statements (and errors) per second, and when it began. */
  peakQps: number;
  peakQpsAt: number | null;
  peakErrorsPerS: number;
}

export interface TargetRow {
  target: string;
  statements: number;
  totalMs: number;
  counts: Record<string, number>;
}

export interface Template {
  /** Stable id in the page: `t` + its rank by total time. */
  id: string;
  target: string;
  database: string | null;
  fingerprint: string | null;
  normalized: string | null;
  query: string;
  calls: number;
  totalMs: number;
  meanMs: number;
  maxMs: number;
  p95Ms: number;
  rank: { total: number; calls: number; mean: number; p95: number };
  example: { ts: number; user: string | null; application: string | null; durationMs: number; query: string; parameters: string | null } | null;
  plan: { ts: number; durationMs: number | null; format: string | null; plan: string } | null;
  series: { calls: number[]; meanMs: Array<number | null> };
}

export interface Checkpoint {
  ts: number;
  target: string;
  instance: string;
  kind: string | null;
  reason: string | null;
  buffers: number | null;
  buffersPct: number | null;
  walAdded: number | null;
  walRemoved: number | null;
  walRecycled: number | null;
  writeS: number | null;
  syncS: number | null;
  totalS: number | null;
  distanceKb: number | null;
}

export interface MaintenanceRow {
  target: string;
  database: string | null;
  relation: string | null;
  vacuums: number;
  analyzes: number;
  elapsedS: number;
  tuplesRemoved: number;
  pagesRemoved: number;
  walBytes: number;
  aggressive: boolean;
  wraparound: boolean;
  lastSeen: number;
}

export interface TempFileRow {
  target: string;
  database: string | null;
  fingerprint: string | null;
  files: number;
  totalBytes: number;
  maxBytes: number;
  statement: string | null;
}

export interface SessionRow {
  target: string;
  database: string | null;
  user: string | null;
  application: string | null;
  connections: number;
  disconnections: number;
  meanSessionMs: number | null;
  maxSessionMs: number | null;
}

export interface Deadlock {
  ts: number;
  target: string;
  instance: string;
  database: string | null;
  pid: number | null;
  message: string;
  processes: unknown;
}

export interface Listed<T> {
  rows: T[];
  groups: number;
}

export interface HtmlReport {
  meta: {
    since: number;
    until: number;
    binMs: number;
    bins: number;
    target: string | null;
    database: string | null;
    limit: number;
    generatedAt: number;
    /** 'histogram': p50/p95/p99 read from the statement rollup's histogram (within 9.1 %); 'exact': percentile_cont over the rows. */
    percentiles: 'exact' | 'histogram';
  };
  overview: Overview;
  targets: TargetRow[];
  series: Record<string, Array<number | null>>;
  targetSeries: { targets: string[]; qps: number[][] };
  templates: Listed<Template>;
  errors: {
    sqlstates: Array<{ sqlstate: string | null; count: number }>;
    series: { sqlstates: Array<string | null>; counts: number[][] };
    messages: Listed<ErrorStats>;
  };
  locks: { byType: Listed<LockWaitStats>; deadlocks: Listed<Deadlock> };
  blocking: Listed<BlockingEpisode>;
  checkpoints: Listed<Checkpoint>;
  maintenance: Listed<MaintenanceRow>;
  tempFiles: { rows: TempFileRow[]; groups: number; sizeClasses: number[] };
  sessions: Listed<SessionRow>;
}

export const ms = (v: unknown): number => date(v).getTime();
export const zeros = (n: number): number[] => new Array<number>(n).fill(0);
const nulls = (n: number): Array<number | null> => new Array<number | null>(n).fill(null);
export const inRange = (bin: number, bins: number): boolean => Number.isInteger(bin) && bin >= 0 && bin < bins;

/** The statement series (qps, percentiles, totals) and the overview's statement numbers. */
export function statementSeries(
  rows: readonly Row[],
  bins: number,
  binMs: number,
): { series: Record<string, Array<number | null>>; totals: Pick<Overview, 'statements' | 'timed' | 'totalMs' | 'peakQps' | 'peakQpsAt'> } {
  const qps = zeros(bins);
  const statements = zeros(bins);
  const p50 = nulls(bins);
  const p95 = nulls(bins);
  const p99 = nulls(bins);
  let total = 0;
  let timed = 0;
  let totalMs = 0;
  let peak = -1;
  let peakAt: number | null = null;
  for (const r of rows) {
    const b = num(r.bin);
    const n = num(r.n);
    total += n;
    timed += num(r.timed);
    totalMs += num(r.total_ms);
    if (!inRange(b, bins)) continue;
    statements[b] = n;
    qps[b] = n / (binMs / 1000);
    if (n > peak) {
      peak = n;
      peakAt = b;
    }
    const pct = Array.isArray(r.pct) ? r.pct.map(numOrNull) : [];
    p50[b] = pct[0] ?? null;
    p95[b] = pct[1] ?? null;
    p99[b] = pct[2] ?? null;
  }
  return {
    series: { statements, qps, p50, p95, p99 },
    totals: { statements: total, timed, totalMs, peakQps: peak < 0 ? 0 : peak / (binMs / 1000), peakQpsAt: peakAt },
  };
}

/** Per-event-family series (counts and values per bin) from eventSeriesQuery's rows. */
export function eventSeries(
  rows: readonly Row[],
  bins: number,
): { counts: Record<string, number[]>; values: Record<string, number[]>; totals: Record<string, number> } {
  const counts: Record<string, number[]> = {};
  const values: Record<string, number[]> = {};
  const totals: Record<string, number> = {};
  for (const kind of ['lock_waits', 'deadlocks', 'connections', 'disconnections', 'temp_files', 'checkpoints', 'autovacuum', 'autoanalyze', 'blocked']) {
    counts[kind] = zeros(bins);
    values[kind] = zeros(bins);
    totals[kind] = 0;
  }
  for (const r of rows) {
    const kind = text(r.kind);
    const b = num(r.bin);
    const c = counts[kind];
    const v = values[kind];
    if (c === undefined || v === undefined) continue;
    totals[kind] = (totals[kind] ?? 0) + num(r.n);
    if (kind === 'temp_files') totals.temp_bytes = (totals.temp_bytes ?? 0) + num(r.v);
    if (!inRange(b, bins)) continue;
    c[b] = num(r.n);
    v[b] = num(r.v);
  }
  return { counts, values, totals };
}

/** Errors per SQLSTATE: totals, and a series for each of the most frequent (the rest summed as "other"). */
export function errorSeries(
  rows: readonly Row[],
  bins: number,
): HtmlReport['errors']['series'] & { totals: Array<{ sqlstate: string | null; count: number }>; perBin: number[] } {
  const bySqlstate = new Map<string | null, number[]>();
  const perBin = zeros(bins);
  for (const r of rows) {
    const s = textOrNull(r.sqlstate);
    const b = num(r.bin);
    const n = num(r.n);
    let arr = bySqlstate.get(s);
    if (arr === undefined) {
      arr = zeros(bins);
      bySqlstate.set(s, arr);
    }
    if (!inRange(b, bins)) continue;
    arr[b] = (arr[b] ?? 0) + n;
    perBin[b] = (perBin[b] ?? 0) + n;
  }
  const totals = [...bySqlstate]
    .map(([sqlstate, arr]) => ({ sqlstate, count: arr.reduce((a, x) => a + x, 0) }))
    .sort((a, b) => b.count - a.count || String(a.sqlstate).localeCompare(String(b.sqlstate)));
  const top = totals.slice(0, SERIES_TOP).map((t) => t.sqlstate);
  const counts = top.map((s) => bySqlstate.get(s) ?? zeros(bins));
  if (totals.length > SERIES_TOP) {
    const other = zeros(bins);
    for (const t of totals.slice(SERIES_TOP))
      (bySqlstate.get(t.sqlstate) ?? []).forEach((x, i) => {
        other[i] = (other[i] ?? 0) + x;
      });
    top.push('other');
    counts.push(other);
  }
  return { sqlstates: top, counts, totals, perBin };
}

/** Statements per target: the fleet table's totals and a qps series for each of the busiest targets. */
export function targetSeries(
  rows: readonly Row[],
  bins: number,
  binMs: number,
): { totals: Map<string, { statements: number; totalMs: number }>; series: HtmlReport['targetSeries'] } {
  const totals = new Map<string, { statements: number; totalMs: number }>();
  const perBin = new Map<string, number[]>();
  for (const r of rows) {
    const t = text(r.target);
    const b = num(r.bin);
    const n = num(r.n);
    const tot = totals.get(t) ?? { statements: 0, totalMs: 0 };
    tot.statements += n;
    tot.totalMs += num(r.total_ms);
    totals.set(t, tot);
    let arr = perBin.get(t);
    if (arr === undefined) {
      arr = zeros(bins);
      perBin.set(t, arr);
    }
    if (inRange(b, bins)) arr[b] = n / (binMs / 1000);
  }
  const top = [...totals]
    .sort((a, b) => b[1].statements - a[1].statements || a[0].localeCompare(b[0]))
    .slice(0, SERIES_TOP)
    .map(([t]) => t);
  return { totals, series: { targets: top, qps: top.map((t) => perBin.get(t) ?? zeros(bins)) } };
}

export function templateFromRow(r: Row, bins: number): Template {
  return {
    id: `t${num(r.by_total)}`,
    target: text(r.target),
    database: textOrNull(r.database),
    fingerprint: textOrNull(r.fingerprint),
    normalized: textOrNull(r.normalized),
    query: '',
    calls: num(r.calls),
    totalMs: num(r.total_ms),
    meanMs: num(r.mean_ms),
    maxMs: num(r.max_ms),
    p95Ms: num(r.p95_ms),
    rank: { total: num(r.by_total), calls: num(r.by_calls), mean: num(r.by_mean), p95: num(r.by_p95) },
    example: null,
    plan: null,
    series: { calls: zeros(bins), meanMs: nulls(bins) },
  };
}

export function templateKeyOf(t: { target: string; database: string | null; fingerprint: string | null }): string {
  return JSON.stringify([t.target, t.database, t.fingerprint]);
}

export function templateKeys(templates: readonly Template[]): TemplateKeys {
  return {
    targets: templates.map((t) => t.target),
    databases: templates.map((t) => t.database),
    fingerprints: templates.map((t) => t.fingerprint),
    maxMs: templates.map((t) => t.maxMs),
  };
}

/** Fills each template's example, plan and series from their queries' rows. */
export function attachTemplateDetails(
  templates: readonly Template[],
  examples: readonly Row[],
  series: readonly Row[],
  plans: readonly Row[],
  bins: number,
): void {
  const byKey = new Map(templates.map((t) => [templateKeyOf(t), t]));
  const keyOfRow = (r: Row): string => templateKeyOf({ target: text(r.target), database: textOrNull(r.database), fingerprint: textOrNull(r.fingerprint) });
  for (const r of examples) {
    const t = byKey.get(keyOfRow(r));
    if (t === undefined) continue;
    t.query = text(r.query);
    t.example = {
      ts: ms(r.ts),
      user: textOrNull(r.username),
      application: textOrNull(r.application),
      durationMs: num(r.duration_ms),
      query: text(r.query),
      parameters: textOrNull(r.parameters),
    };
  }
  for (const r of series) {
    const t = byKey.get(keyOfRow(r));
    const b = num(r.bin);
    if (t === undefined || !inRange(b, bins)) continue;
    t.series.calls[b] = num(r.calls);
    t.series.meanMs[b] = numOrNull(r.mean_ms);
  }
  const planOf = new Map(plans.map((r) => [JSON.stringify([text(r.target), textOrNull(r.fingerprint)]), r]));
  for (const t of templates) {
    const p = planOf.get(JSON.stringify([t.target, t.fingerprint]));
    if (p !== undefined) t.plan = { ts: ms(p.ts), durationMs: numOrNull(p.duration_ms), format: textOrNull(p.format), plan: text(p.plan) };
  }
}
