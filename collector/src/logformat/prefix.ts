/**
 * log_line_prefix compiled into a byte matcher (PostgreSQL 13-17 escapes).
 *
 * The compiled form is a list of operations (literal bytes, fixed-shape fields such as %m or
 * %p, and variable fields such as %u that end where the following literal starts), run over
 * the line's bytes without decoding. Variable fields back-track over later occurrences of
 * their delimiter, so an application name containing the delimiter still parses.
 *
 * Modules: prefix-compile.ts (escapes → operations, error messages), prefix-matcher.ts
 * (CompiledPrefix), prefix-field-cache.ts (FieldCache and latin1, also used by the other
 * assemblers), prefix-replay.ts (the last match, replayed on a line that starts with the
 * bytes it read); re-exported here.
 *
 * Semantics follow elog.c log_line_prefix():
 * - `%q`: processes without a client connection stop the prefix there, so both the full
 *   prefix and the prefix cut at `%q` are accepted (the cut form is tried first when a
 *   severity follows the cut point).
 * - Session-only escapes (%u %d %a %i %r %h) print nothing for background processes, %v and
 *   %P may be empty: variable and optional fields match empty text (their field is null).
 * - Padding `%N?` / `%-N?`: values are right- (N > 0) or left-justified (N < 0) with spaces to
 *   at least |N| bytes and never cut; the spaces are not part of the value.
 * - `[unknown]` (what a session prints for a not-yet-known user, database or application)
 *   becomes null, as csvlog and jsonlog leave those fields empty.
 *
 * The matcher also requires `SEVERITY:` right after the prefix (see severity.ts): a prefix
 * alone says too little to tell a prefixed line from message text.
 */
import { compileOps } from './prefix-compile.ts';
import { CompiledPrefix } from './prefix-matcher.ts';

export { FieldCache, latin1 } from './prefix-field-cache.ts';
export type { PrefixFields } from './prefix-matcher.ts';
export { CompiledPrefix, emptyPrefixFields } from './prefix-matcher.ts';

/** Compiles a log_line_prefix; throws PglogError('PREFIX_UNSUPPORTED') for what cannot be parsed. */
export function compilePrefix(prefix: string): CompiledPrefix {
  return new CompiledPrefix(prefix, compileOps(prefix));
}
