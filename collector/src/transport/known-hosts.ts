/**
 * OpenSSH known_hosts, parsed and checked without I/O. The collector never trusts a host key
 * on first use: a server is reachable only when its exact key is in the target's known_hosts,
 * as `ssh -o StrictHostKeyChecking=yes` would require.
 *
 * Supported (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"): comments and blank lines; comma-separated
 * host patterns with `*` and `?` wildcards and `!` negation; `[host]:port` for servers not on
 * port 22; hashed host names `|1|base64(salt)|base64(HMAC-SHA1(salt, host))`; the `@revoked`
 * marker (that key is refused for the hosts it names). `@cert-authority` lines are ignored:
 * pglog does not accept host certificates, so a CA line can never vouch for a server (the
 * server's plain key must be listed).
 *
 * Both transports mean the same by this: the sidecar's OpenSSH would accept a host certificate
 * signed by a listed CA, so its copy of known_hosts goes through `withoutCertAuthorities`
 * first (F10 of the 2026-11 review; docs/targets.md). Checking certificates in-process instead
 * would mean verifying the CA's signature, validity window, principals and critical options
 * of a format ssh2 does not parse: more trusted code than one extra line in known_hosts saves.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export interface KnownHostEntry {
  /** 1-based line number in the source, for messages. */
  line: number;
  marker: 'revoked' | null;
  /** Plain patterns (lower-cased), or null for a hashed entry. */
  patterns: string[] | null;
  hashed: { salt: Buffer; hash: Buffer } | null;
  keyType: string;
  keyBlob: Buffer;
}

export interface KnownHosts {
  /** Where the text came from (a file path or "secret NAME"), for messages. */
  source: string;
  entries: KnownHostEntry[];
  /** Lines that were neither comments nor valid entries (OpenSSH skips them the same way). */
  invalidLines: number[];
}

export type HostKeyVerdict = { ok: true; line: number } | { ok: false; code: 'SSH_HOST_KEY_UNKNOWN' | 'SSH_HOST_KEY_CHANGED'; message: string };

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

export function parseKnownHosts(text: string, source: string): KnownHosts {
  const entries: KnownHostEntry[] = [];
  const invalidLines: number[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const trimmed = (lines[i] ?? '').trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const parsed = parseLine(trimmed, i + 1);
    if (parsed === 'ignored') continue;
    if (parsed === null) invalidLines.push(i + 1);
    else entries.push(parsed);
  }
  return { source, entries, invalidLines };
}

/** The marker OpenSSH reads as "this key signs host certificates" (case-sensitive, as in OpenSSH). */
const CERT_AUTHORITY = '@cert-authority';

/**
 * known_hosts text for the sidecar's OpenSSH: every `@cert-authority` line becomes a comment
 * (line numbers, which OpenSSH's messages cite, stay those of the original), so OpenSSH, like
 * the in-process checker, trusts a server only by its listed plain key.
 */
export function withoutCertAuthorities(text: string): string {
  return text
    .split('\n')
    .map((line) =>
      line.trim().split(/[ \t]/, 1)[0] === CERT_AUTHORITY ? '# @cert-authority line left out by pglog: host certificates are not accepted' : line,
    )
    .join('\n');
}

function parseLine(text: string, line: number): KnownHostEntry | null | 'ignored' {
  const fields = text.split(/[ \t]+/);
  let marker: 'revoked' | null = null;
  if (fields[0]?.startsWith('@') === true) {
    const name = fields.shift();
    if (name === CERT_AUTHORITY) return 'ignored';
    if (name !== '@revoked') return null;
    marker = 'revoked';
  }
  const [hosts, keyType, keyBase64] = fields;
  if (hosts === undefined || keyType === undefined || keyBase64 === undefined || !BASE64.test(keyBase64)) return null;
  const keyBlob = Buffer.from(keyBase64, 'base64');
  // The blob names its own type; a line whose two type names disagree is corrupt.
  if (sshKeyType(keyBlob) !== keyType) return null;
  if (hosts.startsWith('|')) {
    const hashed = parseHashedHost(hosts);
    return hashed === null ? null : { line, marker, patterns: null, hashed, keyType, keyBlob };
  }
  const patterns = hosts
    .toLowerCase()
    .split(',')
    .filter((p) => p !== '');
  if (patterns.length === 0) return null;
  return { line, marker, patterns, hashed: null, keyType, keyBlob };
}

function parseHashedHost(field: string): { salt: Buffer; hash: Buffer } | null {
  const parts = field.split('|');
  // ['', '1', salt, hash]: only HMAC-SHA1 (magic 1) exists in OpenSSH.
  if (parts.length !== 4 || parts[1] !== '1') return null;
  const [, , salt, hash] = parts;
  if (salt === undefined || hash === undefined || !BASE64.test(salt) || !BASE64.test(hash)) return null;
  const saltBuf = Buffer.from(salt, 'base64');
  const hashBuf = Buffer.from(hash, 'base64');
  if (saltBuf.length !== 20 || hashBuf.length !== 20) return null;
  return { salt: saltBuf, hash: hashBuf };
}

/** The name a server is listed under: `host` on port 22, `[host]:port` otherwise (OpenSSH's put_host_port). */
export function knownHostsName(host: string, port: number): string {
  const h = host.toLowerCase();
  return port === 22 ? h : `[${h}]:${port}`;
}

/** The key type named at the start of an SSH public key blob (`ssh-ed25519`, `ssh-rsa`, ...), or null if malformed. */
export function sshKeyType(blob: Buffer): string | null {
  if (blob.length < 4) return null;
  const len = blob.readUInt32BE(0);
  if (len === 0 || len > 64 || 4 + len > blob.length) return null;
  const type = blob.toString('latin1', 4, 4 + len);
  return /^[\x21-\x7e]+$/.test(type) ? type : null;
}

/** OpenSSH's fingerprint form: `SHA256:` and the unpadded base64 SHA-256 of the key blob. */
export function sha256Fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256')
    .update(blob)
    .digest('base64')
    .replace(/(?<!=)=+$/, '')}`;
}

/** OpenSSH's match_pattern: `*` any run of characters, `?` exactly one; both sides lower-cased by the caller. */
export function matchWildcard(text: string, pattern: string): boolean {
  // Iterative glob match with single-star backtracking: linear enough for host names, no regex injection.
  let t = 0;
  let p = 0;
  let starP = -1;
  let starT = 0;
  while (t < text.length) {
    const pc = pattern[p];
    if (pc === '*') {
      starP = p++;
      starT = t;
    } else if (pc !== undefined && (pc === '?' || pc === text[t])) {
      p++;
      t++;
    } else if (starP >= 0) {
      p = starP + 1;
      t = ++starT;
    } else {
      return false;
    }
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}

/** Whether a known_hosts entry names `name` (the result of knownHostsName). */
export function entryMatchesHost(entry: KnownHostEntry, name: string): boolean {
  if (entry.hashed !== null) {
    const mac = createHmac('sha1', entry.hashed.salt).update(name).digest();
    return timingSafeEqual(mac, entry.hashed.hash);
  }
  // OpenSSH's match_hostname: any matching negated pattern excludes the line outright.
  let positive = false;
  for (const pattern of entry.patterns ?? []) {
    if (pattern.startsWith('!')) {
      if (matchWildcard(name, pattern.slice(1))) return false;
    } else if (matchWildcard(name, pattern)) {
      positive = true;
    }
  }
  return positive;
}

/**
 * The entries of `knownHosts` that name `host:port` (revoked ones included), in file order,
 * as a KnownHosts of their own: what one connection keeps. A fleet's known_hosts lists every
 * server, and a collector with thousands of connections must not hold a copy of it, or match
 * every line of it, per connection (issue 46).
 */
export function knownHostsFor(knownHosts: KnownHosts, host: string, port: number): KnownHosts {
  const name = knownHostsName(host, port);
  return { source: knownHosts.source, entries: knownHosts.entries.filter((e) => entryMatchesHost(e, name)), invalidLines: knownHosts.invalidLines };
}

/** The key types known_hosts holds for a server (not revoked ones), in file order, without repeats. */
export function knownKeyTypes(knownHosts: KnownHosts, host: string, port: number): string[] {
  const name = knownHostsName(host, port);
  const types: string[] = [];
  for (const e of knownHosts.entries) {
    if (e.marker === null && !types.includes(e.keyType) && entryMatchesHost(e, name)) types.push(e.keyType);
  }
  return types;
}

/**
 * Checks the key a server offered against known_hosts. Fails closed: a server with no entry is
 * refused (UNKNOWN), one listed with other keys is refused (CHANGED), a key marked `@revoked`
 * for it is refused (CHANGED, the message says revoked).
 */
export function verifyHostKey(knownHosts: KnownHosts, host: string, port: number, keyType: string, keyBlob: Buffer): HostKeyVerdict {
  const name = knownHostsName(host, port);
  const offered = `${keyType} key ${sha256Fingerprint(keyBlob)}`;
  const where = `${host}:${port}`;
  const matching = knownHosts.entries.filter((e) => entryMatchesHost(e, name));
  const revoked = matching.find((e) => e.marker === 'revoked' && e.keyBlob.equals(keyBlob));
  if (revoked !== undefined) {
    return {
      ok: false,
      code: 'SSH_HOST_KEY_CHANGED',
      message: `${where} offered ${offered}, which is marked @revoked in ${knownHosts.source} line ${revoked.line}`,
    };
  }
  const trusted = matching.filter((e) => e.marker === null);
  const same = trusted.find((e) => e.keyBlob.equals(keyBlob));
  if (same !== undefined) return { ok: true, line: same.line };
  if (trusted.length > 0) {
    const expected = trusted.find((e) => e.keyType === keyType) ?? trusted[0];
    const expectedText =
      expected === undefined ? '' : `; ${knownHosts.source} line ${expected.line} expects ${expected.keyType} key ${sha256Fingerprint(expected.keyBlob)}`;
    return {
      ok: false,
      code: 'SSH_HOST_KEY_CHANGED',
      message: `host key of ${where} has changed (or someone is intercepting the connection): it offered ${offered}${expectedText}`,
    };
  }
  return {
    ok: false,
    code: 'SSH_HOST_KEY_UNKNOWN',
    message: `host key of ${where} is not in ${knownHosts.source}: it offered ${offered} (add the server's key as "${name} ${keyType} ..." after checking that fingerprint on the server)`,
  };
}
