/**
 * What a CollectorPool may ask of the operator, decided by whoever installs the operator and
 * not by whoever writes the pool (docs/install.md "Who may create a CollectorPool"):
 *
 * - its images: a pool's pods run with the collector's service account, which may read the
 *   Secrets of its namespace, so a pool that could name any image could run any code with
 *   that account. Images must match the operator's allow-list (`--allowed-images`);
 * - its namespace: the operator writes workloads only where the collector's account and RBAC
 *   exist (`--collector-namespaces`).
 *
 * Parsed once at start-up (a bad flag stops the operator with a message naming the entry);
 * the checks are pure and run on every reconcile.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import { PglogError } from '@pglog/common/errors.ts';

export interface PoolPolicy {
  /** Repositories (`registry.example/pglog`) and repository prefixes ending in `/` (`registry.example/team/`). */
  allowedImages: readonly string[];
  /** Namespaces whose pools are reconciled; undefined: every namespace the operator watches. */
  collectorNamespaces?: readonly string[];
}

/** A pool the policy refuses: the condition reason and a message naming what and why. */
export interface PolicyRefusal {
  reason: 'ImageNotAllowed' | 'NamespaceNotAllowed';
  message: string;
}

/**
 * Lowercase registry host (with an optional port) and path components, as image references
 * spell repositories; no tag, no digest. Linear: every quantifier is over a distinct class.
 */
const REPOSITORY = /^[a-z0-9][a-z0-9.-]*(?::\d+)?(?:\/[a-z0-9][a-z0-9._-]*)*\/?$/;

/**
 * `--allowed-images A,B`: each entry a repository (any tag or digest of it) or a prefix ending
 * in `/` (any repository under it). An entry with a tag, a digest, a wildcard or upper case is
 * refused rather than guessed at: a too-wide allow-list is the hole it exists to close.
 */
export function parseAllowedImages(text: string, flag = '--allowed-images'): string[] {
  const entries = text.split(',').map((e) => e.trim());
  if (entries.every((e) => e === '')) throw new PglogError('USAGE', `operator: ${flag} is empty: give at least one image repository`);
  for (const entry of entries) {
    if (entry === '') throw new PglogError('USAGE', `operator: ${flag} '${text}' has an empty entry`);
    if (entry.includes('@') || imageRepository(entry) !== entry) {
      throw new PglogError('USAGE', `operator: ${flag} entry '${entry}' has a tag or digest: give the repository (every tag of it is allowed)`);
    }
    if (!REPOSITORY.test(entry)) {
      throw new PglogError(
        'USAGE',
        `operator: ${flag} entry '${entry}' is not an image repository like registry.example/pglog or a prefix like registry.example/team/ (lower case, no wildcards)`,
      );
    }
  }
  return [...new Set(entries)];
}

/** `--collector-namespaces A,B`: Kubernetes namespace names. */
export function parseNamespaceList(text: string, flag = '--collector-namespaces'): string[] {
  const entries = text.split(',').map((e) => e.trim());
  for (const entry of entries) {
    if (!/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/.test(entry)) {
      throw new PglogError('USAGE', `operator: ${flag} entry '${entry}' is not a namespace name (RFC 1123 label)`);
    }
  }
  return [...new Set(entries)];
}

/** The repository of an image reference: without `@digest` and without `:tag` (a port's colon stays). */
export function imageRepository(image: string): string {
  const at = image.indexOf('@');
  const named = at < 0 ? image : image.slice(0, at);
  const colon = named.lastIndexOf(':');
  return colon > named.lastIndexOf('/') ? named.slice(0, colon) : named;
}

/** Whether `image` is one of `allowed`'s repositories or under one of its prefixes. Exact text: no registry or case normalization. */
export function imageAllowed(image: string, allowed: readonly string[]): boolean {
  const repository = imageRepository(image);
  return allowed.some((entry) => (entry.endsWith('/') ? repository.startsWith(entry) && repository.length > entry.length : repository === entry));
}

/** The first rule `pool` breaks, or undefined. `defaultImage` is what the pool's pods run when it names none. */
export function policyRefusal(pool: CollectorPool, policy: PoolPolicy, defaultImage: string): PolicyRefusal | undefined {
  const namespace = pool.metadata.namespace ?? '';
  if (policy.collectorNamespaces !== undefined && !policy.collectorNamespaces.includes(namespace)) {
    return {
      reason: 'NamespaceNotAllowed',
      message:
        `namespace ${namespace} is not a collector namespace of this operator (${policy.collectorNamespaces.join(', ')}): no workload is created; ` +
        'add it to collectorNamespaces (--collector-namespaces) or move the pool',
    };
  }
  const collectorImage = pool.spec.collector.image ?? defaultImage;
  const images: Array<[string, string]> = [
    ['spec.collector.image', collectorImage],
    ['spec.sidecar.image', pool.spec.sidecar.image ?? collectorImage],
  ];
  const refused = images.filter(([, image]) => !imageAllowed(image, policy.allowedImages));
  if (refused.length === 0) return undefined;
  return {
    reason: 'ImageNotAllowed',
    message:
      `${refused.map(([field, image]) => `${field} ${image}`).join(' and ')} not in the operator's allowed images (${policy.allowedImages.join(', ')}): ` +
      "the StatefulSet is left as it was; use an allowed image or ask the operator's administrator (--allowed-images)",
  };
}
