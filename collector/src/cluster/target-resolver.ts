/**
 * Cluster mode: the shard's assigned target names → targets the collector can run. For each
 * one, GET its PostgresTarget and the Secret it names (by name: the collector may read only
 * the Secrets it is pointed at, never list them), check that the Secret serves it (the label
 * `pglog.io/ssh-credentials: "true"` and the target in its annotation `pglog.io/allowed-targets`),
 * validate, and parse the credentials.
 *
 * A target that cannot be resolved (missing object or Secret, invalid spec, bad Secret) is
 * reported with its error code and left out; the others are not held up by it. Called again
 * on every shard change and periodically, so edits and Secret rotation arrive: an object
 * whose resourceVersion did not change is not parsed again. A transient API failure keeps a
 * target's last good resolution rather than stopping a running stream.
 *
 * A fleet's targets mostly share one Secret (one key, one known_hosts listing every server):
 * a round GETs each Secret once however many targets name it, and every target of the same
 * Secret version shares one parse of it (issue 46: a shard of a thousand targets read a
 * thousand copies of the same Secret every 30 s and kept one each). At most
 * RESOLVE_CONCURRENCY requests are in flight.
 */
import type { ShardTarget } from '@pglog/common/api/collector-shard.ts';
import type { PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { isPglogError, PglogError } from '@pglog/common/errors.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { POSTGRES_TARGETS, SECRETS } from '@pglog/common/kube/resources.ts';
import { registerSecret } from '@pglog/common/observability/logger.ts';
import { mapLimit } from '@pglog/common/time/map-limit.ts';

import type { TargetAssignment } from '../collect/assignment-plan.ts';
import type { TargetCredentials } from '../collect/credentials.ts';
import type { RateHint } from '../collect/target-transports.ts';
import {
  ALLOWED_TARGETS_ANNOTATION,
  credentialsFromSecret,
  secretNameOf,
  type SecretObject,
  servesTarget,
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

/** API requests of one round in flight at once. */
const RESOLVE_CONCURRENCY = 16;

/** A Secret's credentials, parsed once per version and shared by the targets that name it. */
interface ParsedSecret {
  version: string;
  credentials: TargetCredentials;
}

export class TargetResolver {
  private readonly kube: KubeClient;
  private readonly namespace: string;
  private readonly cache = new Map<string, Cached>();
  private readonly secrets = new Map<string, ParsedSecret>();

  constructor(kube: KubeClient, namespace: string) {
    this.kube = kube;
    this.namespace = namespace;
  }

  /** Resolves every assigned target; never rejects (failures are per target). */
  async resolve(assigned: readonly ShardTarget[]): Promise<ResolvedTarget[]> {
    const names = new Set(assigned.map((a) => a.name));
    for (const name of this.cache.keys()) if (!names.has(name)) this.cache.delete(name);
    // This round's GET of each Secret, shared by the targets that name it.
    const round = new Map<string, Promise<(KubeObject & SecretObject) | null>>();
    const resolved = await mapLimit(assigned, RESOLVE_CONCURRENCY, async (a): Promise<ResolvedTarget> => {
      try {
        const { target, credentials, rateHint } = await this.resolveOne(a.name, round);
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
    });
    const used = new Set([...this.cache.values()].map((c) => c.secretName));
    for (const name of this.secrets.keys()) if (!used.has(name)) this.secrets.delete(name);
    return resolved;
  }

  private async resolveOne(
    name: string,
    round: Map<string, Promise<(KubeObject & SecretObject) | null>>,
  ): Promise<{ target: PostgresTarget; credentials: TargetCredentials; rateHint: RateHint | undefined }> {
    const object = await this.kube.get<KubeObject>(POSTGRES_TARGETS, this.namespace, name);
    if (object === null) throw new PglogError('KUBE_NOT_FOUND', `PostgresTarget ${this.namespace}/${name} does not exist`);
    const targetVersion = object.metadata.resourceVersion ?? '';
    const cached = this.cache.get(name);
    const target =
      cached !== undefined && targetVersion !== '' && cached.targetVersion === targetVersion
        ? cached.target
        : targetFromObject(object, `PostgresTarget ${this.namespace}/${name}`);
    const secretName = secretNameOf(target);
    let read = round.get(secretName);
    if (read === undefined) round.set(secretName, (read = this.kube.get<KubeObject & SecretObject>(SECRETS, this.namespace, secretName)));
    const secret = await read;
    // One answer for "absent", "not opted in" and "not for this target": a target's author
    // learns nothing about Secrets they could not use anyway, not even that they exist.
    if (secret === null || !servesTarget(secret, name)) {
      throw new PglogError(
        'KUBE_NOT_FOUND',
        `Secret ${this.namespace}/${secretName} (spec.ssh.secretRef of PostgresTarget ${name}) does not exist ` +
          `or does not opt in with the label ${SSH_CREDENTIALS_LABEL}: "true" and the annotation ${ALLOWED_TARGETS_ANNOTATION} ` +
          'listing the target (docs/targets.md)',
      );
    }
    const secretVersion = secret.metadata.resourceVersion ?? '';
    const parsed = this.secrets.get(secretName);
    let credentials: TargetCredentials;
    if (parsed !== undefined && secretVersion !== '' && parsed.version === secretVersion) {
      credentials = parsed.credentials;
    } else {
      credentials = credentialsFromSecret(secret, name);
      // Scrubbed from every log line from now on, should a library ever echo it.
      registerSecret(credentials.privateKey.toString('utf8').trim());
      if (secretVersion !== '') this.secrets.set(secretName, { version: secretVersion, credentials });
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
