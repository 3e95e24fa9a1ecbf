/**
 * The `sqlstate_class` label of `pglog_log_errors_total` (docs/metrics.md): the two-character
 * SQLSTATE class of an error a server logged, from the fixed list of classes PostgreSQL
 * defines (its documentation's appendix "PostgreSQL Error Codes"), so the label has a bounded
 * set of values whatever a log holds. A log is hostile input: a SQLSTATE field is whatever
 * bytes the prefix's `%e` or a csv/json field held, so only an exact five-character code of a
 * known class gives its class; any other text is `other`, and an error logged without a
 * SQLSTATE (a stderr `log_line_prefix` without `%e`) is `unknown`.
 */

export const SQLSTATE_CLASSES = [
  '00',
  '01',
  '02',
  '03',
  '08',
  '09',
  '0A',
  '0B',
  '0F',
  '0L',
  '0P',
  '0Z',
  '20',
  '21',
  '22',
  '23',
  '24',
  '25',
  '26',
  '27',
  '28',
  '2B',
  '2D',
  '2F',
  '34',
  '38',
  '39',
  '3B',
  '3D',
  '3F',
  '40',
  '42',
  '44',
  '53',
  '54',
  '55',
  '57',
  '58',
  '72',
  'F0',
  'HV',
  'P0',
  'XX',
] as const;
export type SqlstateClass = (typeof SQLSTATE_CLASSES)[number] | 'other' | 'unknown';

const KNOWN: ReadonlySet<string> = new Set(SQLSTATE_CLASSES);
const CODE = /^[0-9A-Z]{5}$/;

/** The class label of a logged SQLSTATE: a known class, `other`, or `unknown` (none logged). */
export function sqlstateClassOf(sqlstate: string | null): SqlstateClass {
  if (sqlstate === null || sqlstate === '') return 'unknown';
  if (!CODE.test(sqlstate)) return 'other';
  const cls = sqlstate.slice(0, 2);
  return KNOWN.has(cls) ? (cls as SqlstateClass) : 'other';
}

/** Severities counted as errors in `pglog_log_errors_total` (a WARNING is not one). */
export function isErrorSeverity(severity: string): boolean {
  return severity === 'ERROR' || severity === 'FATAL' || severity === 'PANIC';
}
