/**
 * Statistics of a query template's durations, as `pglog parse --summary` and `pglog report`
 * both print them (the same fields as pg_stat_statements, plus p95). Times in ms.
 */
export interface DurationSummary {
  calls: number;
  total_ms: number;
  mean_ms: number;
  /** Population standard deviation (as pg_stat_statements reports it). */
  stddev_ms: number;
  min_ms: number;
  max_ms: number;
  /** 95th percentile, interpolated. */
  p95_ms: number;
}
