/**
 * Reconciles one CollectorPool, level-triggered: it reads the informer caches, computes the
 * whole desired state (StatefulSet, Service, PodDisruptionBudget, one CollectorShard per
 * replica, every target's status, the pool's status), and writes only what differs. Running
 * it twice in a row writes nothing the second time. A pass is a list of phases, each in its
 * own file, as CloudNativePG cuts its cluster reconcile. Every outcome is explicit: a Result
 * (maybe with a time to look again), a TerminalError for an invalid spec (a condition says
 * why; not retried), or an error the queue retries with backoff.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import { PglogError } from '@pglog/common/errors.ts';
import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import type { Result } from '@pglog/common/kube/controller-loop.ts';

import { planPool, selectPoolTargets } from '../desired/assignment.ts';
import { policyRefusal } from '../desired/pool-policy.ts';
import { ownerReference } from '../desired/pool-resources.ts';
import { ownedObjectsPhase } from './pool-owned-objects.ts';
import type { PoolMemory, PoolPass, PoolReconcilerOptions } from './pool-pass.ts';
import { shardsPhase } from './pool-shards.ts';
import { orInvalidSpec, poolStatusPhase, writePoolStatus } from './pool-status-writer.ts';
import { targetStatusPhase } from './pool-target-status.ts';
import { transitionsPhase } from './pool-transitions.ts';

/** The loop's Result, and how many objects were written (for the debug log). */
export type PoolOutcome = Result & { writes: number };

/** Looked at again this often while `auto` targets may cross a threshold or finish a dwell. */
const TRANSPORT_RECHECK_MS = 10_000;

/** A pass that left writes out (their objects changed after it read them) is repeated this soon. */
const SKIPPED_RECHECK_MS = 1000;

/** A pass, in order: each phase reads the pass and adds its writes and problems. */
const PHASES: ReadonlyArray<(pass: PoolPass) => Promise<void>> = [
  ownedObjectsPhase, // StatefulSet, Service, PodDisruptionBudget
  shardsPhase, // one CollectorShard per replica, spec = the assignment
  transitionsPhase, // moves, promotions and demotions as Events and metrics
  targetStatusPhase, // each target's shard, transport and conditions
  poolStatusPhase, // the pool's status and conditions, problems announced once
];

export class PoolReconciler {
  private readonly o: PoolReconcilerOptions;
  private readonly memory: PoolMemory = { shardCounts: new Map(), announced: new Map() };

  constructor(options: PoolReconcilerOptions) {
    this.o = options;
  }

  /** Throws on API errors (the queue retries with backoff); KUBE_CONFLICT means "read again". */
  async reconcile(namespace: string, name: string): Promise<PoolOutcome> {
    const pool = this.o.pools.get(namespace, name);
    // Deleted: the API server's garbage collector removes what the pool owned.
    if (pool === undefined || pool.metadata.deletionTimestamp !== undefined) {
      this.memory.announced.delete(`${namespace}/${name}`);
      return { writes: 0 };
    }
    const pass = await this.observe(pool, namespace, name);
    if (pass.refusal?.reason === 'NamespaceNotAllowed') {
      // Nothing of the pool is written where the collector has no account: only its status says why.
      return {
        writes: await writePoolStatus({ ...pass, targets: pass.selected.length, loads: [], shards: pass.existingShards, statefulSet: undefined }, [
          pass.refusal,
        ]),
      };
    }
    for (const phase of PHASES) await phase(pass);
    if (pass.skipped > 0) return { writes: pass.writes, requeueAfterMs: SKIPPED_RECHECK_MS };
    const hasAuto = pass.selected.some((t) => t.spec.transport === 'auto');
    return { writes: pass.writes, ...(hasAuto ? { requeueAfterMs: TRANSPORT_RECHECK_MS } : {}) };
  }

  /** Reads the caches and plans the pool (pure), the start of every pass. */
  private async observe(pool: CollectorPool, namespace: string, name: string): Promise<PoolPass> {
    const { o } = this;
    const nowMs = o.now();
    const nowIso = new Date(nowMs).toISOString();
    const inNamespace = <T extends KubeObject>(items: T[]): T[] => items.filter((i) => i.metadata.namespace === namespace);
    const selected = selectPoolTargets(inNamespace(o.pools.list()), inNamespace(o.targets.list())).get(name) ?? [];
    const existingShards = inNamespace(o.shards.list()).filter((s) => s.spec.pool === name);
    const status = { o, memory: this.memory, pool, nowIso, targets: selected.length, shards: existingShards };
    const plan = await orInvalidSpec(status, () => planPool({ pool, targets: selected, shards: existingShards, nowMs }));
    const uid = pool.metadata.uid;
    // Objects from the API server always have one; without it nothing could be owned.
    if (uid === undefined) throw new PglogError('KUBE_INVALID', `CollectorPool ${namespace}/${name} has no metadata.uid`);
    const owner = ownerReference({ ...pool, metadata: { ...pool.metadata, uid } });
    const refusal = o.policy === undefined ? undefined : policyRefusal(pool, o.policy, o.defaultImage);
    return {
      o,
      memory: this.memory,
      pool,
      namespace,
      name,
      uid,
      owner,
      nowIso,
      selected,
      existingShards,
      plan,
      refusal,
      problems: refusal === undefined ? [] : [refusal],
      writes: 0,
      skipped: 0,
    };
  }
}
