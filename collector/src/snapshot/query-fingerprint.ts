/**
 * The template fingerprint of a query text from pg_stat_activity or pg_stat_statements: the
 * same normalizer and hash as the log parser, so snapshots join statements from the log.
 */
import { fingerprintOf, normalizeQuery } from '../protocol/normalize.ts';

/** Fingerprint of `query`'s template; '' when there is no query text. */
export function queryFingerprint(query: string | null): string {
  if (query === null || query === '') return '';
  return fingerprintOf(normalizeQuery(query));
}
