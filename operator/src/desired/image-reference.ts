/**
 * Image references as a container runtime reads them, after the distribution project's
 * reference grammar, which containerd, CRI-O and Docker share:
 *
 *   reference := name [":" tag] ["@" digest]
 *   name      := [domain "/"] path-component ("/" path-component)*
 *   domain    := host [":" port]      the first component, when it has "." or ":" or is "localhost"
 *
 * Pure. The allow-list (image-allow-list.ts) compares what this finds, never raw text, so
 * `ghcr.io/pglog/pglog@evil.example/x` is not read as repository ghcr.io/pglog/pglog.
 */

export interface ImageReference {
  /** Registry host and port; undefined when the reference names none (then the runtime decides which registry it means). */
  domain: string | undefined;
  /** The repository: domain and path, as written. */
  name: string;
  tag: string | undefined;
  digest: string | undefined;
}

export type ParsedReference = { ok: true; reference: ImageReference } | { ok: false; problem: string };

/** The longest name the grammar allows. */
const MAX_NAME_LENGTH = 255;
/** Lower-case letters and digits, separated by one `.`, one or two `_`, or dashes. */
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
/** DNS labels separated by dots, or an IPv6 address in brackets; an optional port. */
const DOMAIN = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::\d+)?$/;
const TAG = /^\w[\w.-]{0,127}$/;
/**
 * The grammar admits other algorithms; sha256 is the one registries serve and runtimes
 * verify, and a pin in any other form is more likely a typing mistake than a choice.
 */
const DIGEST = /^sha256:[0-9a-f]{64}$/;

export interface ParseOptions {
  /** Tags may hold `*` (an allow-list entry's tag pattern). */
  tagPattern?: boolean;
}

/** `text` taken apart, or what in it breaks the grammar (quoting the part, never guessing). */
export function parseImageReference(text: string, options: ParseOptions = {}): ParsedReference {
  const at = text.indexOf('@');
  const named = at < 0 ? text : text.slice(0, at);
  const digest = at < 0 ? undefined : text.slice(at + 1);
  if (digest !== undefined && !DIGEST.test(digest)) return problem(`its digest '${digest}' is not sha256: and 64 lower-case hex digits`);
  const slash = named.lastIndexOf('/');
  const colon = named.lastIndexOf(':');
  // A colon after the last slash starts the tag; one before it is a registry port.
  const tag = colon > slash ? named.slice(colon + 1) : undefined;
  const name = colon > slash ? named.slice(0, colon) : named;
  if (tag !== undefined && !TAG.test(options.tagPattern === true ? tag.replaceAll('*', 'x') : tag)) {
    return problem(`its tag '${tag}' is not 1 to 128 letters, digits, '_', '.' or '-' starting with a letter, digit or '_'`);
  }
  if (name === '') return problem('it names no repository');
  if (name.length > MAX_NAME_LENGTH) return problem(`its repository is longer than ${MAX_NAME_LENGTH} characters`);
  const parts = name.split('/');
  const first = parts[0]!;
  const domain = parts.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost') ? first : undefined;
  if (domain !== undefined && !DOMAIN.test(domain)) return problem(`its registry '${domain}' is not a host name or a [IPv6] address with an optional :port`);
  const path = domain === undefined ? parts : parts.slice(1);
  const wrong = path.find((p) => !PATH_COMPONENT.test(p));
  if (wrong !== undefined) {
    return problem(`its path component '${wrong}' is not lower-case letters and digits separated by '.', '_', '__' or '-'`);
  }
  return { ok: true, reference: { domain, name, tag, digest } };
}

function problem(text: string): ParsedReference {
  return { ok: false, problem: text };
}

/**
 * Whether `tag` matches `pattern`, where `*` stands for any run of tag characters (none
 * included) and everything else for itself. No regular expression is built from the pattern.
 */
export function tagMatches(pattern: string, tag: string): boolean {
  const pieces = pattern.split('*');
  if (pieces.length === 1) return pattern === tag;
  const head = pieces[0]!;
  const tail = pieces[pieces.length - 1]!;
  if (tag.length < head.length + tail.length || !tag.startsWith(head) || !tag.endsWith(tail)) return false;
  let at = head.length;
  const end = tag.length - tail.length;
  for (const middle of pieces.slice(1, -1)) {
    const found = tag.indexOf(middle, at);
    if (found < 0 || found + middle.length > end) return false;
    at = found + middle.length;
  }
  return true;
}
