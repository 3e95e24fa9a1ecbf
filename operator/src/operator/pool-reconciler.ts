/**
 * Reconciles one CollectorPool, level-triggered: it reads the informer caches, computes the
 * whole desired state (StatefulSet, Service, PodDisruptionBudget, one CollectorShard per
 * replica, every target's status, the pool's status), and writes only what differs. Running
 * it twice in a row writes nothing the second time. Every outcome is explicit: a Result (maybe
 * with a time to look again), a TerminalError for an invalid spec (a condition says why; not
 * retried), or an error the queue retries with backoff.
 */
import type { CollectorPool } from '../api/collector-pool.ts';
import type { CollectorShard } from '../api/collector-shard.ts';
import type { KubeObject, KubeClient } from '../kube/client-types.ts';
import { COLLECTOR_POOLS, COLLECTOR_SHARDS, POD_DISRUPTION_BUDGETS, POSTGRES_TARGETS, SERVICES, STATEFUL_SETS } from '../kube/resources.ts';
import { isKubeError } from '../kube/errors.ts';
import { TerminalError, type Result } from '../kube/controller-loop.ts';
import { isPglogError, PglogError } from '../../../collector/src/errors.ts';
import type { TargetObject } from '../api/target-object.ts';
import { planPool, selectPoolTargets } from '../controller/assignment.ts';
import { semanticEqual } from '../controller/conditions.ts';
import { desiredHeadlessService, desiredPodDisruptionBudget, desiredStatefulSet, ownerReference, poolLabels, poolSelector } from '../controller/pool-resources.ts';
import { policyRefusal, type PoolPolicy } from '../controller/pool-policy.ts';
import { applyOwned, controlledBy, currentObject } from './owned-objects.ts';
import { desiredPoolStatus, type PoolObservation, type PoolProblem, type StatefulSetState } from './pool-status.ts';
import { desiredTargetStatus, targetStatusChanged } from './target-status.ts';
import type { OperatorMetrics } from './operator-metrics.ts';
import { mapLimit } from './map-limit.ts';

/** Reads of the informer caches. */
export interface CacheReader<T> {
  get(namespace: string | undefined, name: string): T | undefined;
  list(): T[];
}

export interface EventSink {
  record(regarding: KubeObject, type: 'Normal' | 'Warning', reason: string, note: string): Promise<void>;
}

export interface PoolReconcilerOptions {
  client: KubeClient;
  pools: CacheReader<CollectorPool>;
  targets: CacheReader<TargetObject>;
  shards: CacheReader<CollectorShard>;
  statefulSets: CacheReader<KubeObject & { status?: StatefulSetState }>;
  services: CacheReader<KubeObject>;
  podDisruptionBudgets: CacheReader<KubeObject>;
  events: EventSink;
  metrics: OperatorMetrics;
  /** Image of collector and sidecar when the pool names none (the operator's own). */
  defaultImage: string;
  serviceAccountName?: string;
  /** Allowed images and namespaces (pool-policy.ts); undefined: any (tests of the reconcile alone). */
  policy?: PoolPolicy;
  fieldManager: string;
  now: () => number;
  /** Parallel status writes (first reconcile of 1,000 targets). */
  statusConcurrency?: number;
}

/** The loop's Result, and how many objects were written (for the debug log). */
export type PoolOutcome = Result & { writes: number };

/** Looked at again this often while `auto` targets may cross a threshold or finish a dwell. */
const TRANSPORT_RECHECK_MS = 10_000;

export class PoolReconciler {
  private readonly o: PoolReconcilerOptions;
  /** Last shard count per pool, to drop the metrics of shards a scale-down removed. */
  private readonly shardCounts = new Map<string, number>();
  /**
   * The problem last announced per pool: the informer may not have the status written by the
   * last pass yet, so it alone cannot tell whether the Warning went out already.
   */
  private readonly announced = new Map<string, string>();

  constructor(options: PoolReconcilerOptions) {
    this.o = options;
  }

  /**
   * The pool's status, written when it changed. Problems (a refused image, a name taken by
   * someone else's object) make it Ready False and Degraded True with the first one's reason,
   * and are announced once by a Warning Event. Returns the number of writes.
   */
  private async writePoolStatus(pool: CollectorPool, problems: readonly PoolProblem[], targets: number, loads: PoolObservation['loads'],
    shards: readonly CollectorShard[], statefulSet: StatefulSetState | undefined, nowIso: string): Promise<number> {
    const { namespace = '', name } = pool.metadata;
    const problem = problems.length === 0 ? undefined : { reason: problems[0]!.reason, message: problems.map((p) => p.message).join('; ') };
    const key = `${namespace}/${name}`;
    if (problem === undefined) {
      this.announced.delete(key);
    } else if (isNewProblem(pool, problem) && this.announced.get(key) !== `${problem.reason}: ${problem.message}`) {
      this.announced.set(key, `${problem.reason}: ${problem.message}`);
      await this.o.events.record(pool, 'Warning', problem.reason, problem.message);
    }
    const poolStatus = desiredPoolStatus({ pool, selector: poolSelector(pool), statefulSet, targets, loads, shards, ...(problem === undefined ? {} : { problem }) }, nowIso);
    if (semanticEqual(pool.status ?? {}, poolStatus)) return 0;
    await this.o.client.mergePatch(COLLECTOR_POOLS, namespace, name, { status: poolStatus }, 'status');
    return 1;
  }

  /**
   * Runs a pure computation of desired state; if it finds the spec invalid (CONFIG_INVALID: a
   * quantity out of range, a tuning value the CRD schema cannot check), the pool's status says
   * so with the code as the reason and a TerminalError tells the loop not to retry: only a
   * change of the pool can cure it.
   */
  private async orInvalidSpec<T>(pool: CollectorPool, targets: number, shards: readonly CollectorShard[], nowIso: string, compute: () => T): Promise<T> {
    try {
      return compute();
    } catch (e) {
      if (!isPglogError(e) || e.code !== 'CONFIG_INVALID') throw e;
      await this.writePoolStatus(pool, [{ reason: e.code, message: e.message }], targets, [], shards, undefined, nowIso);
      throw new TerminalError(e.code, `CollectorPool ${pool.metadata.namespace ?? ''}/${pool.metadata.name}: ${e.message}`, { cause: e });
    }
  }

  /** Throws on API errors (the queue retries with backoff); KUBE_CONFLICT means "read again". */
  async reconcile(namespace: string, name: string): Promise<PoolOutcome> {
    const { o } = this;
    const pool = o.pools.get(namespace, name);
    // Deleted: the API server's garbage collector removes what the pool owned.
    if (pool === undefined || pool.metadata.deletionTimestamp !== undefined) {
      this.announced.delete(`${namespace}/${name}`);
      return { writes: 0 };
    }
    const nowMs = o.now();
    const nowIso = new Date(nowMs).toISOString();
    const inNamespace = <T extends KubeObject>(items: T[]): T[] => items.filter((i) => i.metadata.namespace === namespace);
    const selected = selectPoolTargets(inNamespace(o.pools.list()), inNamespace(o.targets.list())).get(name) ?? [];
    const existingShards = inNamespace(o.shards.list()).filter((s) => s.spec.pool === name);
    const plan = await this.orInvalidSpec(pool, selected.length, existingShards, nowIso, () => planPool({ pool, targets: selected, shards: existingShards, nowMs }));
    let writes = 0;

    const uid = pool.metadata.uid;
    // Objects from the API server always have one; without it nothing could be owned.
    if (uid === undefined) throw new PglogError('KUBE_INVALID', `CollectorPool ${namespace}/${name} has no metadata.uid`);
    const owner = ownerReference({ ...pool, metadata: { ...pool.metadata, uid } });
    const refusal = o.policy === undefined ? undefined : policyRefusal(pool, o.policy, o.defaultImage);
    if (refusal?.reason === 'NamespaceNotAllowed') {
      // Nothing of the pool is written where the collector has no account: only its status says why.
      return { writes: await this.writePoolStatus(pool, [refusal], selected.length, [], existingShards, undefined, nowIso) };
    }
    const problems: PoolProblem[] = refusal === undefined ? [] : [refusal];
    const apply = { fieldManager: o.fieldManager, force: true };
    const [sts, service, pdb] = await this.orInvalidSpec(pool, selected.length, existingShards, nowIso, () => [
      desiredStatefulSet(pool, { defaultImage: o.defaultImage, serviceAccountName: o.serviceAccountName }), desiredHeadlessService(pool), desiredPodDisruptionBudget(pool),
    ] as const);
    const conflicts: string[] = [];
    for (const [type, desired, cache] of [
      [STATEFUL_SETS, sts, o.statefulSets], [SERVICES, service, o.services], [POD_DISRUPTION_BUDGETS, pdb, o.podDisruptionBudgets],
    ] as const) {
      // A refused image changes nothing: the pods already running keep theirs.
      if (type === STATEFUL_SETS && refusal !== undefined) continue;
      const objectName = (desired as KubeObject).metadata.name;
      const current = await currentObject(o.client, type, namespace, objectName, cache.get(namespace, objectName));
      if (current !== null && !controlledBy(current, uid)) {
        conflicts.push(`${type.kind} ${objectName}`);
        continue;
      }
      const result = await applyOwned(o.client, type, desired as KubeObject, current ?? undefined, apply);
      if (result !== 'unchanged') writes++;
      if (result === 'created') await o.events.record(pool, 'Normal', 'Created', `created ${type.kind} ${objectName}`);
    }
    if (conflicts.length > 0) {
      problems.push({
        reason: 'OwnedObjectConflict',
        message: `${conflicts.join(' and ')} in namespace ${namespace} already exist${conflicts.length === 1 ? 's' : ''} and ${conflicts.length === 1 ? 'is' : 'are'} not controlled by this pool: `
          + 'left untouched; rename the pool or remove the object',
      });
    }

    // Shards: one per replica, spec = the assignment; surplus ones (scale-down) are deleted.
    const byName = new Map(existingShards.map((s) => [s.metadata.name, s]));
    for (const planned of plan.shards) {
      // The count is redundant with the list; it is there for the printer column.
      const shard = { ...planned, spec: { ...planned.spec, targetCount: planned.spec.targets.length } };
      const current = byName.get(shard.name);
      byName.delete(shard.name);
      if (current === undefined) {
        const created: CollectorShard = {
          apiVersion: 'pglog.io/v1alpha1', kind: 'CollectorShard',
          metadata: { name: shard.name, namespace, labels: { ...poolLabels(pool), 'pglog.io/shard-index': String(shard.index) }, ownerReferences: [owner] },
          spec: shard.spec,
        };
        await o.client.create(COLLECTOR_SHARDS, created);
        writes++;
      } else if (!semanticEqual(current.spec, shard.spec)) {
        // Optimistic: a concurrent writer makes this a 409; the queue reads again and retries.
        await o.client.replace(COLLECTOR_SHARDS, { ...current, spec: shard.spec });
        writes++;
      }
    }
    for (const surplus of byName.values()) {
      await o.client.delete(COLLECTOR_SHARDS, namespace, surplus.metadata.name, { preconditions: { uid: surplus.metadata.uid } });
      writes++;
    }

    // What moved and which transports changed, for events and metrics.
    const previous = previousAssignments(existingShards);
    let moved = 0;
    let promoted = 0;
    let demoted = 0;
    for (const [target, next] of plan.targets) {
      const before = previous.get(target);
      if (before === undefined) continue;
      if (before.shard !== next.shard) moved++;
      else if (before.transport !== next.transport) {
        if (next.transport === 'proxy') promoted++;
        else demoted++;
      }
    }
    o.metrics.transportChanges(namespace, name, promoted, demoted, moved);
    if (moved > 0) await o.events.record(pool, 'Normal', 'Rebalanced', `${moved} targets moved to another shard`);
    if (promoted + demoted > 0) await o.events.record(pool, 'Normal', 'TransportsChanged', `${promoted} targets moved to the sshproxy sidecar, ${demoted} back to the in-process client`);
    o.metrics.shards(namespace, name, plan.loads, this.shardCounts.get(`${namespace}/${name}`) ?? 0);
    this.shardCounts.set(`${namespace}/${name}`, plan.loads.length);

    // Target statuses: the shard and transport (what `kubectl get postgrestargets` shows).
    const reported = reportedTargets(existingShards);
    const statusWrites = selected.flatMap((target) => {
      const assignment = plan.targets.get(target.metadata.name);
      if (assignment === undefined) return [];
      const next = desiredTargetStatus(target, assignment, reported.get(target.metadata.name), nowIso);
      return targetStatusChanged(target, next) ? [{ target, next }] : [];
    });
    await mapLimit(statusWrites, o.statusConcurrency ?? 16, async ({ target, next }) => {
      try {
        await o.client.mergePatch(POSTGRES_TARGETS, namespace, target.metadata.name, { status: next }, 'status');
      } catch (e) {
        // Deleted since the cache was read: nothing to write.
        if (!isKubeError(e, 'KUBE_NOT_FOUND')) throw e;
      }
    });
    writes += statusWrites.length;

    writes += await this.writePoolStatus(pool, problems, selected.length, plan.loads, existingShards, o.statefulSets.get(namespace, sts.metadata.name)?.status, nowIso);
    const hasAuto = selected.some((t) => t.spec.transport === 'auto');
    return { writes, ...(hasAuto ? { requeueAfterMs: TRANSPORT_RECHECK_MS } : {}) };
  }
}

/** Whether a Warning for `problem` is news: the pool's Degraded condition does not say it yet. */
function isNewProblem(pool: CollectorPool, problem: PoolProblem): boolean {
  const degraded = pool.status?.conditions?.find((c) => c.type === 'Degraded');
  return degraded?.status !== 'True' || degraded.reason !== problem.reason || degraded.message !== problem.message;
}

function previousAssignments(shards: readonly CollectorShard[]): Map<string, { shard: number; transport: 'inproc' | 'proxy' }> {
  const out = new Map<string, { shard: number; transport: 'inproc' | 'proxy' }>();
  for (const s of shards) for (const t of s.spec.targets) out.set(t.name, { shard: s.spec.index, transport: t.transport });
  return out;
}

/** Each target's entry in the status of the shard that is assigned it now. */
function reportedTargets(shards: readonly CollectorShard[]): Map<string, NonNullable<NonNullable<CollectorShard['status']>['targets']>[number]> {
  const out = new Map<string, NonNullable<NonNullable<CollectorShard['status']>['targets']>[number]>();
  for (const s of shards) {
    const assigned = new Set(s.spec.targets.map((t) => t.name));
    for (const t of s.status?.targets ?? []) if (assigned.has(t.name)) out.set(t.name, t);
  }
  return out;
}
