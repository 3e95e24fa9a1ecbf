/**
 * Naming the store in messages without its password (pure). A store URL may carry a password
 * (`postgresql://pglog:secret@db:5432/pglog`); error messages and logs say
 * `store pglog@db:5432/pglog` instead, built from the parsed parts, never from the text.
 *
 * Two readings of the URL matter, and they differ when the password is not percent-encoded:
 * - how node-postgres reads it (the store connection): WHATWG URL rules, where the user-info
 *   ends at the LAST '@' of the authority, and the authority at the first '/', '?' or '#';
 * - what the person who wrote it meant: with a raw '/', '?' or '#' in the password, pg sees no
 *   password at all (and refuses the URL), but the text after the first ':' of the user-info
 *   is still a password someone typed.
 * Every spelling of every password either reading finds (raw as written, decoded, and each
 * `password=` parameter) is a secret to scrub; the store is named only from pg's reading, and
 * only when that name holds none of them.
 */

interface StoreUrlParts {
  user: string;
  host: string;
  port: string;
  database: string;
}

const SCHEME = /^postgres(?:ql)?:\/\//i;

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * The URL as node-postgres (pg-connection-string) builds it: spaces and stray '%' make it
 * encode the whole text first; a user-info with no host (`pglog@/db?host=/socket`) is read with
 * a placeholder host. Null when pg would refuse it (or it is not a postgresql:// URL).
 */
function pgUrl(url: string): { parsed: URL; noHost: boolean } | null {
  if (!SCHEME.test(url)) return null;
  const text = /\s|%[^a-f0-9]|%[a-f0-9][^a-f0-9]/i.test(url) ? encodeURI(url).replace(/%25(\d\d)/g, '%$1') : url;
  try {
    return { parsed: new URL(text), noHost: false };
  } catch {
    try {
      return { parsed: new URL(text.replace('@/', '@___no_host___/')), noHost: true };
    } catch {
      return null;
    }
  }
}

function parseStoreUrl(url: string): StoreUrlParts | null {
  const pg = pgUrl(url);
  if (pg === null) return null;
  const { parsed: u, noHost } = pg;
  const param = (name: string): string | null => u.searchParams.get(name);
  const user = param('user') ?? decode(u.username);
  const path = decode(u.pathname.replace(/^\//, ''));
  return {
    user,
    host: param('host') ?? ((noHost ? '' : decode(u.hostname.replace(/^\[(.+)\]$/, '$1'))) || 'localhost'),
    port: param('port') ?? (u.port === '' ? '5432' : u.port),
    database: param('dbname') ?? (path === '' ? user : path),
  };
}

/** `password=` values of a query string or a libpq `key=value` string, as written. */
function passwordParams(text: string): string[] {
  const out: string[] = [];
  // A URL query: ?...&password=VALUE&...  (up to '&' or '#').
  for (const m of text.matchAll(/[?&]password=([^&#]*)/gi)) out.push(m[1] ?? '');
  // libpq keyword/value: password=VALUE or password = 'quoted \' value'.
  for (const m of text.matchAll(/(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)/gi)) {
    const v = m[1] ?? '';
    out.push(v);
    if (v.startsWith("'")) out.push(v.slice(1, -1), v.slice(1, -1).replace(/\\(.)/g, '$1'));
  }
  return out;
}

/**
 * The password between the first ':' of the user-info and the '@' that ends it, as written,
 * for each place that '@' can be: the last '@' before the query, and the last '@' of all (a
 * raw '?' in the password). Only when the user part itself looks like a user (no '/', '?', '#').
 */
function writtenPasswords(url: string): string[] {
  const scheme = SCHEME.exec(url);
  if (scheme === null) return [];
  const rest = url.slice(scheme[0].length);
  const query = rest.indexOf('?');
  const ends = [rest.lastIndexOf('@', query < 0 ? rest.length : query), rest.lastIndexOf('@')];
  const out: string[] = [];
  for (const at of ends) {
    if (at < 0) continue;
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(':');
    if (colon < 0 || /[/?#]/.test(userinfo.slice(0, colon))) continue;
    out.push(userinfo.slice(colon + 1));
  }
  return out;
}

/**
 * Every spelling of every password the store URL carries, for the log scrubbers and for
 * `withoutPassword`: the user-info password and `password=` parameters, raw (as written),
 * percent-decoded, and as node-postgres reads them; longest first, no empty string. A libpq
 * `key=value` string's password counts too. The Unix-socket form without a host
 * (`postgresql://pglog:pw@/db?host=/run/postgresql`) is covered like the others.
 */
export function storeUrlPasswords(url: string): string[] {
  const raw = [...writtenPasswords(url), ...passwordParams(url)];
  const pg = pgUrl(url);
  if (pg !== null) {
    raw.push(pg.parsed.password);
    const param = pg.parsed.searchParams.get('password');
    if (param !== null) raw.push(param);
  }
  const forms = new Set<string>();
  for (const r of raw) {
    forms.add(r);
    forms.add(decode(r));
    if (r.includes('+')) forms.add(decode(r.replaceAll('+', ' ')));
  }
  forms.delete('');
  return [...forms].sort((a, b) => b.length - a.length);
}

/** `store user@host:port/database` for messages; never contains any spelling of the password. */
export function describeStore(url: string): string {
  const p = parseStoreUrl(url);
  if (p === null) return 'the store (its URL is not shown: not a postgresql:// URL node-postgres can read, and it may hold a password)';
  const name = `store ${p.user === '' ? '' : `${p.user}@`}${p.host}:${p.port}/${p.database}`;
  // A password written so that pg reads part of it as host or database: never name that.
  if (storeUrlPasswords(url).some((secret) => name.includes(secret)))
    return 'the store (its URL is not shown: its host, user or database would reveal the password)';
  return name;
}

/** `text` with every spelling of the URL's passwords replaced by `***`, should a library ever quote the URL. */
export function withoutPassword(text: string, url: string): string {
  let out = text;
  for (const secret of storeUrlPasswords(url)) {
    // As quoted inside a JSON string too (a backslash or quote in it is escaped there).
    out = out.replaceAll(secret, '***').replaceAll(JSON.stringify(secret).slice(1, -1), '***');
  }
  return out;
}
