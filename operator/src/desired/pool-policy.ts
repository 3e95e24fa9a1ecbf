/**
 * What a CollectorPool may ask of the operator, decided by whoever installs the operator and
 * not by whoever writes the pool (docs/install.md "Who may create a CollectorPool"):
 *
 * - its images: a pool's pods run with the collector's service account, which may read the
 *   Secrets of its namespace, so a pool that could name any image could run any code with
 *   that account. Images must match the operator's allow-list (`--allowed-images`,
 *   image-allow-list.ts);
 * - its store: the collector migrates schema `pglog` into the database its Secret's URL names
 *   and writes there the logs and query texts of every target the pool selects. A pool that
 *   could name any Secret could aim that at another application's database (with that
 *   application's credentials) or at a server of its own author's. The Secret must be one of
 *   the operator's allow-list (`--allowed-store-secrets`);
 * - its namespace: the operator writes workloads only where the collector's account and RBAC
 *   exist (`--collector-namespaces`).
 *
 * Parsed once at start-up (a bad flag stops the operator with a message naming the entry);
 * the checks are pure and run on every reconcile.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import { PglogError } from '@pglog/common/errors.ts';

import { imageAllowed } from './image-allow-list.ts';

export interface PoolPolicy {
  /** Entries of `--allowed-images` (image-allow-list.ts). */
  allowedImages: readonly string[];
  /**
   * Secrets pools may name as their store: `NAME` (in any collector namespace) or
   * `NAMESPACE/NAME`; undefined: any (tests of the reconcile alone; the command always sets it).
   */
  allowedStoreSecrets?: readonly string[];
  /** Namespaces whose pools are reconciled; undefined: every namespace the operator watches. */
  collectorNamespaces?: readonly string[];
}

/** A pool the policy refuses: the condition reason and a message naming what and why. */
export interface PolicyRefusal {
  reason: 'ImageNotAllowed' | 'NamespaceNotAllowed' | 'StoreSecretNotAllowed';
  message: string;
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

const SECRET_NAME = /^[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?$/;
const NAMESPACE_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * `--allowed-store-secrets A,B`: Secret names (DNS-1123 subdomains), each alone (that name in
 * any collector namespace) or as NAMESPACE/NAME (in that namespace only). No wildcard: each
 * entry is a store the administrator knows of.
 */
export function parseStoreSecretList(text: string, flag = '--allowed-store-secrets'): string[] {
  const entries = text.split(',').map((e) => e.trim());
  if (entries.every((e) => e === '')) throw new PglogError('USAGE', `operator: ${flag} is empty: give at least one Secret name`);
  for (const entry of entries) {
    const slash = entry.indexOf('/');
    const namespace = slash < 0 ? undefined : entry.slice(0, slash);
    const name = slash < 0 ? entry : entry.slice(slash + 1);
    if ((namespace !== undefined && !NAMESPACE_NAME.test(namespace)) || !SECRET_NAME.test(name)) {
      throw new PglogError(
        'USAGE',
        `operator: ${flag} entry '${entry}' is not a Secret name or NAMESPACE/NAME (lower-case letters, digits, '-' and '.'; no wildcards)`,
      );
    }
  }
  return [...new Set(entries)];
}

/** Whether the pool in `namespace` may use Secret `name` as its store. */
export function storeSecretAllowed(namespace: string, name: string, allowed: readonly string[]): boolean {
  // A name with a slash is no Secret's (the API server refuses it); it must not pass as NAMESPACE/NAME.
  return !name.includes('/') && (allowed.includes(name) || allowed.includes(`${namespace}/${name}`));
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
  const secret = pool.spec.store.secretRef.name;
  if (policy.allowedStoreSecrets !== undefined && !storeSecretAllowed(namespace, secret, policy.allowedStoreSecrets)) {
    return {
      reason: 'StoreSecretNotAllowed',
      message:
        `spec.store.secretRef.name ${secret} is not a store Secret this operator allows (${policy.allowedStoreSecrets.join(', ')}): ` +
        "the StatefulSet is left as it was; name an allowed Secret or ask the operator's administrator (--allowed-store-secrets)",
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
