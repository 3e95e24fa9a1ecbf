/**
 * Naming the store in messages without its password (pure). A store URL may carry a password
 * (`postgresql://pglog:secret@db:5432/pglog`); error messages and logs say
 * `store pglog@db:5432/pglog` instead, built from the parsed parts, never from the text.
 */

interface StoreUrlParts { user: string; password: string; passwordParam: string; host: string; port: string; database: string }

/**
 * The parts of a `postgresql://` URL as libpq reads them. Parsed by hand: WHATWG `URL`
 * refuses the libpq form with a user and no host (`postgresql://postgres@/db?host=/socket`).
 */
function parseStoreUrl(url: string): StoreUrlParts | null {
  const m = /^postgres(?:ql)?:\/\/(?:([^:@/?]*)(?::([^@/?]*))?@)?([^/?]*)(?:\/([^?]*))?(?:\?(.*))?$/.exec(url);
  if (m === null) return null;
  const decode = (s: string | undefined): string => {
    try { return decodeURIComponent(s ?? ''); } catch { return s ?? ''; }
  };
  const params = new URLSearchParams(m[5] ?? '');
  const hostPort = m[3] ?? '';
  // [v6::addr]:port, host:port, host
  const hp = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(hostPort);
  const user = decode(m[1]);
  return {
    user,
    password: decode(m[2]),
    passwordParam: params.get('password') ?? '',
    host: decode(hp?.[1]) || (params.get('host') ?? 'localhost'),
    port: hp?.[2] || (params.get('port') ?? '5432'),
    database: decode(m[4]) || user,
  };
}

/**
 * The passwords a store URL carries (the user-info one and a `password=` parameter), decoded,
 * for the log scrubbers to know. Parsed like libpq, so the Unix-socket form without a host
 * (`postgresql://pglog:pw@/db?host=/run/postgresql`) counts too.
 */
export function storeUrlPasswords(url: string): string[] {
  const p = parseStoreUrl(url);
  return p === null ? [] : [p.password, p.passwordParam].filter((s) => s !== '');
}

/** `store user@host:port/database` for messages; never contains the password. */
export function describeStore(url: string): string {
  const p = parseStoreUrl(url);
  if (p === null) return 'the store (its URL is not shown: not a postgresql:// URL, and it may hold a password)';
  return `store ${p.user === '' ? '' : `${p.user}@`}${p.host}:${p.port}/${p.database}`;
}

/** `text` with the URL's password replaced by `***`, should a library ever quote the URL. */
export function withoutPassword(text: string, url: string): string {
  const m = /^[a-z]+:\/\/[^:@/?]*:([^@/?]+)@/.exec(url);
  const raw = m?.[1];
  if (raw === undefined) return text;
  let out = text.replaceAll(raw, '***');
  const decoded = parseStoreUrl(url)?.password ?? '';
  if (decoded !== '') out = out.replaceAll(decoded, '***');
  return out;
}
