/**
 * Naming the store in messages without its password (pure). A store URL may carry a password
 * (`postgresql://pglog:secret@db:5432/pglog`); error messages and logs say
 * `store pglog@db:5432/pglog` instead, built from the parsed parts, never from the text.
 */

/** `store user@host:port/database` for messages; never contains the password. */
export function describeStore(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'the store (its URL cannot be parsed: not shown, it may hold a password)';
  }
  if (u.protocol !== 'postgresql:' && u.protocol !== 'postgres:') return 'the store (not a postgresql:// URL: not shown)';
  const decode = (s: string): string => {
    try { return decodeURIComponent(s); } catch { return s; }
  };
  // libpq lets ?host= and ?port= name the host (a Unix socket directory) when the URL has none.
  const host = u.hostname !== '' ? decode(u.hostname) : (u.searchParams.get('host') ?? 'localhost');
  const port = u.port !== '' ? u.port : (u.searchParams.get('port') ?? '5432');
  const user = u.username !== '' ? `${decode(u.username)}@` : '';
  const database = decode(u.pathname.replace(/^\//, '')) || (u.username !== '' ? decode(u.username) : '');
  return `store ${user}${host}:${port}/${database}`;
}

/** `text` with the URL's password replaced by `***`, should a library ever quote the URL. */
export function withoutPassword(text: string, url: string): string {
  let password = '';
  try { password = new URL(url).password; } catch { return text; }
  if (password === '') return text;
  let out = text.replaceAll(password, '***');
  try {
    const decoded = decodeURIComponent(password);
    if (decoded !== '') out = out.replaceAll(decoded, '***');
  } catch { /* not percent-encoded */ }
  return out;
}
