/**
 * Cluster mode: the shard's assigned target names → targets the collector can run. For each
 * one, GET its PostgresTarget and the Secret it names (by name: the collector may read only
 * the Secrets it is pointed at, never list them), check that the Secret opts in
 * (`pglog.io/ssh-credentials: "true"`), validate, and parse the credentials.
 *
 * A target that cannot be resolved (missing object or Secret, invalid spec, bad Secret) is
 * reported with its error code and left out; the others are not held up by it. Called again
 * on every shard change and periodically, so edits and Secret rotation arrive: an object
 * whose resourceVersion did not change is not parsed again. A transient API failure keeps a
 * target's last good resolution rather than stopping a running stream.
 */
import type { ShardTarget } from '@pglog/common/api/collector-shard.ts';
import type { PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { isPglogError, PglogError } from '@pglog/common/errors.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { POSTGRES_TARGETS, SECRETS } from '@pglog/common/kube/resources.ts';
import { registerSecret } from '@pglog/common/observability/logger.ts';

import type { TargetAssignment } from '../collect/assignment-plan.ts';
import type { TargetCredentials } from '../collect/credentials.ts';
import type { RateHint } from '../collect/target-transports.ts';
import {
  credentialsFromSecret,
  optsInAsSshCredentials,
  secretNameOf,
  type SecretObject,
  SSH_CREDENTIALS_LABEL,
  targetFromObject,
} from './target-credentials.ts';

export type ResolvedTarget = { name: string; ok: true; assignment: TargetAssignment } | { name: string; ok: false; code: string; message: string };

interface Cached {
  targetVersion: string;
  target: PostgresTarget;
  secretName: string;
  secretVersion: string;
  credentials: TargetCredentials;
}

export class TargetResolver {
  private readonly kube: KubeClient;
  private readonly namespace: string;
  private readonly cache = new Map<string, Cached>();

  constructor(kube: KubeClient, namespace: string) {
    this.kube = kube;
    this.namespace = namespace;
  }

  /** Resolves every assigned target; never rejects (failures are per target). */
  async resolve(assigned: readonly ShardTarget[]): Promise<ResolvedTarget[]> {
    const names = new Set(assigned.map((a) => a.name));
    for (const name of this.cache.keys()) if (!names.has(name)) this.cache.delete(name);
    return Promise.all(
      assigned.map(async (a): Promise<ResolvedTarget> => {
        try {
          const { target, credentials, rateHint } = await this.resolveOne(a.name);
          return {
            name: a.name,
            ok: true,
            assignment: { target, credentials, epoch: a.epoch, transport: a.transport, ...(rateHint === undefined ? {} : { rateHint }) },
          };
        } catch (e) {
          const cached = this.cache.get(a.name);
          if (isPglogError(e) && e.code === 'KUBE_UNAVAILABLE' && cached !== undefined) {
            return { name: a.name, ok: true, assignment: { target: cached.target, credentials: cached.credentials, epoch: a.epoch, transport: a.transport } };
          }
          if (!isPglogError(e) || e.code !== 'KUBE_UNAVAILABLE') this.cache.delete(a.name);
          return { name: a.name, ok: false, code: isPglogError(e) ? e.code : 'UNKNOWN', message: (e as Error).message };
        }
      }),
    );
  }

  private async resolveOne(name: string): Promise<{ target: PostgresTarget; credentials: TargetCredentials; rateHint: RateHint | undefined }> {
    const object = await this.kube.get<KubeObject>(POSTGRES_TARGETS, this.namespace, name);
    if (object === null) throw new PglogError('KUBE_NOT_FOUND', `PostgresTarget ${this.namespace}/${name} does not exist`);
    const targetVersion = object.metadata.resourceVersion ?? '';
    const cached = this.cache.get(name);
    const target =
      cached !== undefined && targetVersion !== '' && cached.targetVersion === targetVersion
        ? cached.target
        : targetFromObject(object, `PostgresTarget ${this.namespace}/${name}`);
    const secretName = secretNameOf(target);
    const secret = await this.kube.get<KubeObject & SecretObject>(SECRETS, this.namespace, secretName);
    // One answer for "absent" and "not opted in": a target's author learns nothing about
    // Secrets they could not use anyway.
    if (secret === null || !optsInAsSshCredentials(secret)) {
      throw new PglogError(
        'KUBE_NOT_FOUND',
        `Secret ${this.namespace}/${secretName} (spec.ssh.secretRef of PostgresTarget ${name}) does not exist ` +
          `or does not opt in with the label ${SSH_CREDENTIALS_LABEL}: "true" (docs/targets.md)`,
      );
    }
    const secretVersion = secret.metadata.resourceVersion ?? '';
    let credentials: TargetCredentials;
    if (cached !== undefined && cached.secretName === secretName && secretVersion !== '' && cached.secretVersion === secretVersion) {
      credentials = cached.credentials;
    } else {
      credentials = credentialsFromSecret(secret, name);
      // Scrubbed from every log line from now on, should a library ever echo it.
      registerSecret(credentials.privateKey.toString('utf8').trim());
    }
    this.cache.set(name, { targetVersion, target, secretName, secretVersion, credentials });
    return { target, credentials, rateHint: rateHintOf(object) };
  }
}

/**
 * The rates in the target's status (written by the operator from the last owner's report):
 * where a target that moved here starts its rate meters. Anything malformed is ignored.
 */
export function rateHintOf(object: KubeObject & { status?: unknown }): RateHint | undefined {
  const rates = (object.status as { rates?: { bytesPerSecond?: unknown; linesPerSecond?: unknown } } | undefined)?.rates;
  const bytes = rates?.bytesPerSecond;
  const lines = rates?.linesPerSecond;
  if (typeof bytes !== 'number' || !Number.isFinite(bytes) || bytes < 0) return undefined;
  return { bytesPerSecond: bytes, linesPerSecond: typeof lines === 'number' && Number.isFinite(lines) && lines >= 0 ? lines : 0 };
}
