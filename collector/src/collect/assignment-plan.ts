/**
 * What to do when the collector's assignment changes at run time (cluster mode: the shard's
 * spec): which targets to start, stop, restart and re-pin to another transport.
 *
 * Pure: the collector passes what runs and what is wanted, each target summarized by a
 * fingerprint of everything that needs new streams when it changes (spec without the
 * transport, credentials), its assignment epoch and its transport.
 */
import { createHash } from 'node:crypto';

import type { ActiveTransport, PostgresTarget, Transport } from '@pglog/common/api/postgres-target.ts';

import type { RateHint } from './target-transports.ts';

/** One target as the plan compares it. */
export interface PlannedTarget {
  name: string;
  /** `targetFingerprint` of the target and its credentials. */
  fingerprint: string;
  /** The epoch its streams claim with; null in standalone mode (the store picks the next). */
  epoch: number | null;
  /** The transport it is pinned to (`auto` only in standalone mode). */
  transport: Transport;
}

export interface AssignmentPlan {
  /** Not running, wanted. */
  start: string[];
  /** Running, no longer wanted: stopped after what they handed over is committed. */
  stop: string[];
  /** Running and wanted, but with another spec, credentials or epoch: stopped, then started again. */
  restart: string[];
  /** Running and wanted unchanged but for the transport: moved by the transport control. */
  repin: Array<{ name: string; transport: Transport }>;
}

/** Every list sorted by name, so the order of work does not depend on the input order. */
export function planAssignment(running: readonly PlannedTarget[], wanted: readonly PlannedTarget[]): AssignmentPlan {
  const now = new Map(running.map((t) => [t.name, t]));
  const next = new Map(wanted.map((t) => [t.name, t]));
  const plan: AssignmentPlan = { start: [], stop: [], restart: [], repin: [] };
  for (const [name, r] of now) {
    const w = next.get(name);
    if (w === undefined) plan.stop.push(name);
    else if (w.fingerprint !== r.fingerprint || w.epoch !== r.epoch) plan.restart.push(name);
    else if (w.transport !== r.transport) plan.repin.push({ name, transport: w.transport });
  }
  for (const name of next.keys()) if (!now.has(name)) plan.start.push(name);
  const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  plan.start.sort(byName);
  plan.stop.sort(byName);
  plan.restart.sort(byName);
  plan.repin.sort((a, b) => byName(a.name, b.name));
  return plan;
}

/** What a target's credentials contribute to its fingerprint. */
export interface FingerprintCredentials {
  privateKey: Buffer;
  knownHosts: { text: string };
}

/**
 * A digest of everything that needs the target's streams started again when it changes: the
 * spec without `transport` (a transport change is a switch, not a restart) and the
 * credentials. A digest, so the key is not kept in one more place in clear.
 */
export function targetFingerprint(target: PostgresTarget, credentials: FingerprintCredentials): string {
  const { transport: _transport, ...spec } = target.spec;
  const hash = createHash('sha256');
  hash.update(JSON.stringify({ name: target.metadata.name, spec }));
  hash.update('\0');
  hash.update(credentialsDigest(credentials));
  return hash.digest('hex');
}

/**
 * The credentials' own digest, once per credentials object: a fleet's targets share one (a
 * Secret's parse, target-resolver.ts) whose known_hosts lists every server, and every new
 * assignment fingerprints every target (issue 46: thousands of hashes of the same text).
 */
const credentialDigests = new WeakMap<FingerprintCredentials, string>();
function credentialsDigest(credentials: FingerprintCredentials): string {
  let digest = credentialDigests.get(credentials);
  if (digest === undefined) {
    digest = createHash('sha256').update(credentials.privateKey).update('\0').update(credentials.knownHosts.text).digest('hex');
    credentialDigests.set(credentials, digest);
  }
  return digest;
}

/** One target of an assignment given to the collector at run time. */
export interface TargetAssignment {
  /** The validated target; its `spec.transport` is ignored in favour of `transport`. */
  target: PostgresTarget;
  credentials: { privateKey: Buffer; privateKeySource: string; knownHosts: { text: string; source: string } };
  /** The assignment epoch the streams claim with (fencing an older owner). */
  epoch: number;
  /** The transport the operator chose. */
  transport: ActiveTransport;
  /** The rate last reported for the target (by its previous owner); not part of what restarts it. */
  rateHint?: RateHint;
}
