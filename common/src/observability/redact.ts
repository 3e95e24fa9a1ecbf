/**
 * Keeping secrets out of logs and error messages.
 *
 * Three independent nets, because each one alone misses cases the others catch:
 * - key paths (`password`, `privateKey`, ... see logger.ts) hide values by field name;
 * - `redactUrl` removes the password from PostgreSQL URLs that end up in text;
 * - a `SecretScrubber` knows the literal secrets this process holds (a private key's text,
 *   the store password) and replaces them wherever they appear, whatever field or message
 *   they were copied into (an error message quoting a connection string, a stack trace ...).
 *
 * Pure: no I/O. The process-wide scrubber (`registerSecret`) is the one piece of shared state,
 * on purpose: a secret loaded anywhere must be hidden from every logger of the process.
 */

export const REDACTED = '[REDACTED]';

/** Lines of a multi-line secret (a PEM key body) are registered on their own from this length. */
const MIN_SECRET_LINE = 16;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The form a string takes inside a JSON string literal (what a JSON log line contains). */
function jsonEscaped(s: string): string {
  return JSON.stringify(s).slice(1, -1);
}

export class SecretScrubber {
  private readonly secrets = new Set<string>();
  private pattern: RegExp | null = null;

  /**
   * Adds a literal secret. Its JSON-escaped forms are added too (a key's newlines appear as `\n`
   * in a JSON log line), and so is every line of a multi-line secret long enough to be
   * unmistakable, so a log that quotes one line of a private key does not leak that line.
   * Empty strings are ignored (they would match everywhere).
   */
  register(secret: string): void {
    // JSON-escaped once (a field of a JSON line) and twice (a JSON text quoted in such a field).
    const forms = new Set<string>([secret, jsonEscaped(secret), jsonEscaped(jsonEscaped(secret))]);
    if (secret.includes('\n')) {
      for (const line of secret.split(/\r?\n/)) {
        const t = line.trim();
        if (t.length >= MIN_SECRET_LINE && !t.startsWith('-----')) forms.add(t);
      }
    }
    let added = false;
    for (const f of forms) {
      if (f.length > 0 && !this.secrets.has(f)) {
        this.secrets.add(f);
        added = true;
      }
    }
    if (added) this.pattern = null;
  }

  get size(): number {
    return this.secrets.size;
  }

  /** `text` with every registered secret replaced by `[REDACTED]`. */
  scrub(text: string): string {
    if (this.secrets.size === 0 || text.length === 0) return text;
    // Longest first, so a secret that contains another is replaced whole.
    this.pattern ??= new RegExp(
      [...this.secrets]
        .sort((a, b) => b.length - a.length)
        .map(escapeRegExp)
        .join('|'),
      'g',
    );
    return text.replace(this.pattern, REDACTED);
  }
}

/** The process-wide scrubber every logger uses unless given its own. */
export const processSecrets = new SecretScrubber();

/** Registers a literal secret with the process-wide scrubber: no log line will contain it. */
export function registerSecret(secret: string): void {
  processSecrets.register(secret);
}

// scheme://user:password@host: the password is everything between the first ':' after the
// user and the last '@' before the host (passwords may contain '@' when not percent-encoded).
// Neither part crosses '"' or '\', so the patterns can run over a JSON log line without
// swallowing the JSON around a URL. The scheme starts only where a run of scheme characters
// starts (a look-behind, not \b): with \b, every letter after a '.' of 'a.a.a.…' began a
// scan to the end of the run, quadratic in a log line any database role can write.
const URL_USERINFO = /(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*:\/\/)([^\s:/?#@"\\]*):[^\s/?#"\\]*@/gi;
// password=... as a URL query parameter or a libpq keyword/value pair (quoted or not).
const PASSWORD_PARAM = /\b(password|passwd|pwd|sslpassword)=(?:'(?:[^'\\]|\\.)*'|[^\s&;"'\\]+)/gi;

/**
 * Removes passwords from PostgreSQL (or any scheme://) URLs and `password=` parameters in a
 * text, keeping everything else (user, host, database) so the message still says where.
 * `postgres://u:pw@db/x?password=p2` → `postgres://u:[REDACTED]@db/x?password=[REDACTED]`.
 */
export function redactUrl(text: string): string {
  return text
    .replace(URL_USERINFO, (_m, scheme: string, user: string) => `${scheme}${user}:${REDACTED}@`)
    .replace(PASSWORD_PARAM, (_m, key: string) => `${key}=${REDACTED}`);
}

/**
 * Everything a secret-free message needs: registered secrets and URL passwords removed. The
 * registered secrets go first: the `password=` pattern stops at a blank, so run first it would
 * leave the rest of a password with a space in it where the scrubber no longer sees it whole.
 */
export function scrubText(text: string, secrets: SecretScrubber = processSecrets): string {
  return redactUrl(secrets.scrub(text));
}

/**
 * Where a PostgreSQL URL points, for error messages: `host H, port P, database D, user U`,
 * never the password. Unparsable input yields `an unparsable URL` rather than echoing it (it
 * may hold a password in a form the patterns above do not recognise).
 */
export function describePostgresUrl(url: string): string {
  // libpq takes an empty host (`postgresql://user@/db?host=/socket/dir`), the WHATWG parser
  // does not: parse it with a placeholder host and remember that there was none.
  const emptyHost = /^[a-z][a-z0-9+.-]*:\/\/(?:[^/?#@]*@)?(?=[/?#]|$)/i.test(url);
  let u: URL;
  try {
    u = new URL(emptyHost ? url.replace(/^([a-z][a-z0-9+.-]*:\/\/(?:[^/?#@]*@)?)/i, '$1empty-host') : url);
  } catch {
    return 'an unparsable store URL';
  }
  const param = (name: string): string | null => u.searchParams.get(name);
  const host = param('host') ?? (emptyHost ? 'the default Unix socket' : decodeURIComponent(u.hostname));
  const port = param('port') ?? (u.port === '' ? '5432' : u.port);
  const path = u.pathname.replace(/^\//, '');
  const database = param('dbname') ?? (path === '' ? null : decodeURIComponent(path));
  const user = param('user') ?? (u.username === '' ? null : decodeURIComponent(u.username));
  const parts = [`host ${host}`, `port ${port}`];
  if (database !== null) parts.push(`database ${database}`);
  if (user !== null) parts.push(`user ${user}`);
  return parts.join(', ');
}
