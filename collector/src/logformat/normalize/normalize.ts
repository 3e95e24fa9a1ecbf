/**
 * Query templates: SQL text → normalized text → fingerprint.
 *
 * `normalizeQuery` is a hand-written lexical scanner (one pass, no regular expressions) that
 * turns statements differing only in constants into the same text:
 *
 * - literals become `?`: strings ('...' with '' escapes, E'...' with backslash escapes,
 *   U&'...', B'...', X'...', N'...', dollar-quoted $tag$...$tag$, string continuation across
 *   a newline), numbers (integers, decimals, exponents, 0x/0o/0b, `_` separators) including
 *   a sign that is unary (`= -5`, `(-5`, `, +5`), and `$1`-style parameters (so prepared and
 *   simple forms of a statement share a template);
 * - TRUE, FALSE and NULL stay keywords: they usually encode a code path (`WHERE active =
 *   true`), not a value a user typed, and they keep templates readable;
 * - comments (`-- ...`, nested `/* ... *\/`) are removed; unterminated quotes and comments
 *   swallow the rest of the text (never an error);
 * - unquoted identifiers and keywords are lower-cased (Unicode too); quoted identifiers
 *   ("Foo") are kept exactly;
 * - tokens are re-spaced canonically, so whitespace in the input never matters: one space
 *   between tokens, none after `(` `[` `.` `::`, none before `)` `]` `,` `;` `.` `::`, none
 *   between a function name and its `(` (but `in (`, `values (`, `and (` ... keep one);
 * - lists of only constants collapse: `in (?, ?, ?)` → `in (...)`, `values (?, ?), (?, ?)`
 *   → `values (...)`, `array[?, ?]` (also nested) → `array[...]`;
 * - trailing `;` removed.
 *
 * Normalizing normalized text gives the same text (the output is a fixed point).
 *
 * How: sql-scanner.ts (the one-pass scanner and its buffers), sql-lexer.ts (character classes,
 * keywords, token ends), sql-list-collapse.ts (`(...)` lists); fingerprints and the cache of
 * known templates are in sql-template-cache.ts, re-exported here.
 */
import { decodeOutput, releaseBuffers, scan } from './sql-scanner.ts';

export type { QueryTemplate, TemplateCacheOptions } from './sql-template-cache.ts';
export { DEFAULT_TEMPLATE_CACHE_BYTES, fingerprintOf, MAX_CACHED_TEMPLATE_BYTES, TemplateCache } from './sql-template-cache.ts';

/** Normalizes SQL text into its template (see the module comment). Never throws. */
export function normalizeQuery(sql: string): string {
  const normalized = decodeOutput(scan(sql));
  releaseBuffers();
  return normalized;
}
