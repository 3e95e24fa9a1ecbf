/**
 * The images pools may run (`--allowed-images`): a pool's pods hold the collector's service
 * account, which reads the Secrets of its namespace, so whoever picks their image picks code
 * that runs with it. Each entry is one of:
 *
 *   registry.example/pglog                 the repository, any tag or digest
 *   registry.example/team/                 any repository under the prefix, any tag or digest
 *   registry.example/pglog:1.4.*           tags matching the pattern (`*`: any run of tag characters), no digest
 *   registry.example/pglog@sha256:<hex>    that digest only (with or without a tag, which the runtime ignores)
 *
 * Every entry names its registry host: a host-less one (`pglog`) would leave the registry to
 * the runtime's default or short-name search, which may be any registry it is configured
 * with. Pool images are parsed with the reference grammar (image-reference.ts) and compared
 * by their parts as written: no registry or case normalization, so a look-alike does not match.
 *
 * A tag pattern and not a minimum version: tags are names a registry lets anyone who may push
 * move, with no order the runtime knows of, so "1.4.2 or later" would be a promise about text.
 * A pattern says which names; a digest says which bytes, and is what keeps an older build out.
 * An image with a digest matches a tag pattern never: the runtime would run the digest and
 * ignore the tag the pattern was checked against.
 */
import { PglogError } from '@pglog/common/errors.ts';

import { type ImageReference, parseImageReference, tagMatches } from './image-reference.ts';

type AllowEntry =
  | { kind: 'prefix'; prefix: string }
  | { kind: 'repository'; name: string }
  | { kind: 'tags'; name: string; pattern: string }
  | { kind: 'digest'; name: string; digest: string };

/**
 * `--allowed-images A,B`: the entries, each checked; a bad one stops the operator with a
 * message naming it. A too-wide allow-list is the hole it exists to close, so nothing is guessed.
 */
export function parseAllowedImages(text: string, flag = '--allowed-images'): string[] {
  const entries = text.split(',').map((e) => e.trim());
  if (entries.every((e) => e === '')) throw new PglogError('USAGE', `operator: ${flag} is empty: give at least one image repository`);
  for (const entry of entries) {
    if (entry === '') throw new PglogError('USAGE', `operator: ${flag} '${text}' has an empty entry`);
    const parsed = allowEntry(entry);
    if (typeof parsed === 'string') throw new PglogError('USAGE', `operator: ${flag} entry '${entry}' ${parsed}`);
  }
  return [...new Set(entries)];
}

/** The entry's meaning, or why it has none (the end of a sentence starting with the entry). */
function allowEntry(entry: string): AllowEntry | string {
  const prefix = entry.endsWith('/');
  // A prefix is checked as the name of a repository under it.
  const parsed = parseImageReference(prefix ? `${entry}x` : entry, { tagPattern: true });
  const grammar =
    'is not an image repository like registry.example/pglog, a prefix like registry.example/team/, ' +
    'a tag pattern like registry.example/pglog:1.4.* or a digest like registry.example/pglog@sha256:<64 hex digits>';
  if (!parsed.ok) return `${grammar}: ${parsed.problem}`;
  const { domain, name, tag, digest } = parsed.reference;
  if (domain === undefined) {
    return (
      'names no registry host: the container runtime would pick the registry (its default or a short-name search ' +
      'over every registry it is configured with); write it as pulled, e.g. docker.io/library/pglog or ghcr.io/pglog/pglog'
    );
  }
  if (domain !== domain.toLowerCase()) return `${grammar}: write its registry '${domain}' in lower case, as pools do (no case is folded)`;
  if (prefix) {
    if (tag !== undefined || digest !== undefined) return `${grammar}: a prefix has no tag or digest`;
    return { kind: 'prefix', prefix: entry };
  }
  if (tag !== undefined && digest !== undefined) {
    return 'has both a tag and a digest: the runtime pulls the digest and ignores the tag; give the repository@sha256:... alone';
  }
  if (digest !== undefined) return { kind: 'digest', name, digest };
  if (tag !== undefined) return { kind: 'tags', name, pattern: tag };
  return { kind: 'repository', name };
}

/** The repository of an image reference: without `@digest` and without `:tag` (a port's colon stays). */
export function imageRepository(image: string): string {
  const at = image.indexOf('@');
  const named = at < 0 ? image : image.slice(0, at);
  const colon = named.lastIndexOf(':');
  return colon > named.lastIndexOf('/') ? named.slice(0, colon) : named;
}

/**
 * Whether `image` is a valid reference naming its registry that one of `allowed` (entries
 * parseAllowedImages accepted) admits. An entry that does not parse admits nothing.
 */
export function imageAllowed(image: string, allowed: readonly string[]): boolean {
  const parsed = parseImageReference(image);
  if (!parsed.ok || parsed.reference.domain === undefined) return false;
  const reference = parsed.reference;
  return allowed.some((text) => {
    const entry = allowEntry(text);
    return typeof entry !== 'string' && admits(entry, reference);
  });
}

function admits(entry: AllowEntry, image: ImageReference): boolean {
  switch (entry.kind) {
    case 'prefix':
      return image.name.startsWith(entry.prefix);
    case 'repository':
      return image.name === entry.name;
    case 'digest':
      return image.name === entry.name && image.digest === entry.digest;
    case 'tags':
      // No tag means `latest` to the runtime.
      return image.name === entry.name && image.digest === undefined && tagMatches(entry.pattern, image.tag ?? 'latest');
  }
}
