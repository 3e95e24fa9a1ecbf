/**
 * The SQLSTATE of an error a PostgreSQL server sent: pure, shared by the snapshot queries
 * (which tell "no such view on this version" from other refusals) and the sampler's error
 * classification.
 */

/** The SQLSTATE of a server error (pg's DatabaseError carries it as `code`), else null. */
export function sqlStateOf(e: unknown): string | null {
  if (typeof e !== 'object' || e === null) return null;
  const code = (e as { code?: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
}
