/**
 * Cluster mode, pure: a PostgresTarget object read from the API server → the validated,
 * normalized target (the same validator as a targets file, mode `cluster`), and the Secret
 * it names → SSH credentials. Errors are PglogError CONFIG_INVALID naming the object and the
 * field or key; they never quote a key's content.
 */
import { isSshKeyFiles, type PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';

import type { TargetCredentials } from '../collect/credentials.ts';
import { formatPath } from '../config/field-path.ts';
import { DocumentValidator } from '../config/target-validation.ts';

/** The Secret keys that may hold the private key, in order of preference. */
export const PRIVATE_KEY_KEYS = ['id_ed25519', 'id_rsa'] as const;
export const KNOWN_HOSTS_KEY = 'known_hosts';

/**
 * The label by which a Secret opts in to serving pglog as SSH credentials. Without it, a
 * PostgresTarget author could point the collector at any key-bearing Secret of the namespace
 * (another team's) and stream that account's files; the Secret's owner decides, not the
 * target's author (docs/targets.md).
 */
export const SSH_CREDENTIALS_LABEL = 'pglog.io/ssh-credentials';

/**
 * The annotation by which a Secret names the PostgresTargets (of its namespace) that may use it:
 * `db1,db2`, or `*` for every target of the namespace. The label alone let any target author of
 * the namespace borrow another team's key with a host, user and log directory of their own
 * (docs/decisions/0034-secrets-name-their-users.md).
 */
export const ALLOWED_TARGETS_ANNOTATION = 'pglog.io/allowed-targets';

/** A core/v1 Secret, reduced to what is read here. */
export interface SecretObject {
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  data?: Record<string, string>;
}

/** Whether the Secret carries `pglog.io/ssh-credentials: "true"`. */
export function optsInAsSshCredentials(secret: SecretObject): boolean {
  return secret.metadata.labels?.[SSH_CREDENTIALS_LABEL] === 'true';
}

/**
 * Whether the Secret serves PostgresTarget `target`: it opts in, and its annotation lists the
 * target or is `*`. Names are compared exactly; `*` is the only pattern, as a prefix (`db-*`)
 * would look narrower than it is: whoever may create targets picks their names. A Secret
 * without the annotation serves no target.
 */
export function servesTarget(secret: SecretObject, target: string): boolean {
  if (!optsInAsSshCredentials(secret)) return false;
  const names = (secret.metadata.annotations?.[ALLOWED_TARGETS_ANNOTATION] ?? '').split(',').map((n) => n.trim());
  return names.includes(target) || (names.length === 1 && names[0] === '*');
}

/**
 * Validates a PostgresTarget as served by the API (metadata.uid, resourceVersion, status ...
 * are the server's and not checked) and returns it normalized.
 */
export function targetFromObject(object: unknown, where: string): PostgresTarget {
  if (typeof object !== 'object' || object === null) throw new PglogError('CONFIG_INVALID', `${where}: not an object`);
  const o = object as Record<string, unknown>;
  const meta = (typeof o['metadata'] === 'object' && o['metadata'] !== null ? o['metadata'] : {}) as Record<string, unknown>;
  const pick = (k: string): Record<string, unknown> => (meta[k] === undefined ? {} : { [k]: meta[k] });
  const document = {
    apiVersion: o['apiVersion'],
    kind: o['kind'],
    metadata: { ...pick('name'), ...pick('namespace'), ...pick('labels'), ...pick('annotations') },
    spec: o['spec'],
  };
  const v = new DocumentValidator('cluster', '/');
  const target = v.target(document);
  if (target === undefined || v.problems.length > 0) {
    const lines = v.problems.slice(0, 10).map((p) => `${formatPath(p.path)}: ${p.message}`);
    throw new PglogError('CONFIG_INVALID', `${where}: ${lines.join('; ')}`);
  }
  return target;
}

/** The name of the Secret a cluster-mode target refers to. */
export function secretNameOf(target: PostgresTarget): string {
  const ssh = target.spec.ssh;
  if (isSshKeyFiles(ssh)) {
    throw new PglogError('CONFIG_INVALID', `PostgresTarget ${target.metadata.name}: spec.ssh gives key files; in the cluster it must be spec.ssh.secretRef`);
  }
  return ssh.secretRef.name;
}

/**
 * The SSH credentials in a Secret: the private key under `id_ed25519` (preferred) or
 * `id_rsa`, the server's host key under `known_hosts`, base64 as the API serves `data`.
 */
export function credentialsFromSecret(secret: SecretObject, target: string): TargetCredentials {
  const where = `Secret ${secret.metadata.namespace === undefined ? '' : `${secret.metadata.namespace}/`}${secret.metadata.name} (of PostgresTarget ${target})`;
  const data = secret.data ?? {};
  const keyName = PRIVATE_KEY_KEYS.find((k) => data[k] !== undefined);
  if (keyName === undefined) {
    throw new PglogError('CONFIG_INVALID', `${where}: no private key: expected the key ${PRIVATE_KEY_KEYS.join(' or ')}; it has ${describeKeys(data)}`);
  }
  const privateKey = decode(data[keyName]!, where, keyName);
  if (!privateKey.toString('latin1').includes('PRIVATE KEY')) {
    throw new PglogError('CONFIG_INVALID', `${where}: ${keyName} is not a private key in OpenSSH or PEM format`);
  }
  const hosts = data[KNOWN_HOSTS_KEY];
  if (hosts === undefined)
    throw new PglogError('CONFIG_INVALID', `${where}: no ${KNOWN_HOSTS_KEY}: the server's host key is always checked; it has ${describeKeys(data)}`);
  const knownHosts = decode(hosts, where, KNOWN_HOSTS_KEY).toString('utf8');
  if (knownHosts.trim() === '') throw new PglogError('CONFIG_INVALID', `${where}: ${KNOWN_HOSTS_KEY} is empty`);
  // Where the credentials came from, without the target: every target naming this Secret
  // shares them (target-resolver.ts), and SSH messages name the target themselves.
  const source = `Secret ${secret.metadata.namespace === undefined ? '' : `${secret.metadata.namespace}/`}${secret.metadata.name}`;
  return {
    privateKey,
    privateKeySource: `${source} key ${keyName}`,
    knownHosts: { text: knownHosts, source: `${source} key ${KNOWN_HOSTS_KEY}` },
  };
}

function decode(text: string, where: string, key: string): Buffer {
  // The API always serves valid base64; anything else was hand-made and is refused, not guessed.
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
    throw new PglogError('CONFIG_INVALID', `${where}: ${key} is not base64 (Secret data is base64-encoded)`);
  }
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length === 0) throw new PglogError('CONFIG_INVALID', `${where}: ${key} is empty`);
  return bytes;
}

function describeKeys(data: Record<string, string>): string {
  const keys = Object.keys(data).sort();
  return keys.length === 0 ? 'no keys' : `keys ${keys.join(', ')}`;
}
