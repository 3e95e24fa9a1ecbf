/**
 * The template fingerprint of a query text from pg_stat_activity or pg_stat_statements: the
 * same normalizer and hash as the log parser, so snapshots join statements from the log.
 */
import { fingerprintOf, normalizeQuery } from '../logformat/normalize/normalize.ts';

/**
 * What pg_stat_activity shows instead of another role's query to a role without
 * pg_read_all_stats: not a statement, so it gets no fingerprint.
 */
export const HIDDEN_QUERY = '<insufficient privilege>';

/** Fingerprint of `query`'s template; '' when there is no query text (or it is hidden). */
export function queryFingerprint(query: string | null): string {
  if (query === null || query === '' || query === HIDDEN_QUERY) return '';
  return fingerprintOf(normalizeQuery(query));
}
