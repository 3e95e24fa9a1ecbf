/**
 * The last phase of a pool reconcile: the pool's status, written when it changed. Problems (a
 * refused image, a name taken by someone else's object, an invalid spec) make it Ready False
 * and Degraded True with the first one's reason, and are announced once by a Warning Event.
 * Also the way out for an invalid spec: its status, then a TerminalError.
 */
import type { CollectorPool, ShardLoad } from '@pglog/common/api/collector-pool.ts';
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import { TerminalError } from '@pglog/common/kube/controller-loop.ts';
import { COLLECTOR_POOLS } from '@pglog/common/kube/resources.ts';

import { semanticEqual } from '../desired/conditions.ts';
import { poolSelector } from '../desired/pool-resources.ts';
import { desiredPoolStatus, type PoolProblem, type StatefulSetState } from '../desired/pool-status.ts';
import type { PoolMemory, PoolPass, PoolReconcilerOptions } from './pool-pass.ts';

/** What the pool's status is built from. */
export interface PoolStatusInput {
  o: PoolReconcilerOptions;
  memory: PoolMemory;
  pool: CollectorPool;
  nowIso: string;
  targets: number;
  loads: ShardLoad[];
  shards: readonly CollectorShard[];
  statefulSet: StatefulSetState | undefined;
}

/** Writes the status if it changed; returns the number of writes. */
export async function writePoolStatus(s: PoolStatusInput, problems: readonly PoolProblem[]): Promise<number> {
  const { pool, o } = s;
  const { namespace = '', name } = pool.metadata;
  const problem = problems.length === 0 ? undefined : { reason: problems[0]!.reason, message: problems.map((p) => p.message).join('; ') };
  const key = `${namespace}/${name}`;
  if (problem === undefined) {
    s.memory.announced.delete(key);
  } else if (isNewProblem(pool, problem) && s.memory.announced.get(key) !== `${problem.reason}: ${problem.message}`) {
    s.memory.announced.set(key, `${problem.reason}: ${problem.message}`);
    await o.events.record(pool, 'Warning', problem.reason, problem.message);
  }
  const poolStatus = desiredPoolStatus(
    {
      pool,
      selector: poolSelector(pool),
      statefulSet: s.statefulSet,
      targets: s.targets,
      loads: s.loads,
      shards: s.shards,
      ...(problem === undefined ? {} : { problem }),
    },
    s.nowIso,
  );
  if (semanticEqual(pool.status ?? {}, poolStatus)) return 0;
  await o.client.mergePatch(COLLECTOR_POOLS, namespace, name, { status: poolStatus }, 'status');
  return 1;
}

/** The status phase: what the pass found, with the StatefulSet's status from the cache. */
export async function poolStatusPhase(pass: PoolPass): Promise<void> {
  const statefulSet = pass.statefulSetName === undefined ? undefined : pass.o.statefulSets.get(pass.namespace, pass.statefulSetName)?.status;
  pass.writes += await writePoolStatus(
    {
      ...pass,
      targets: pass.selected.length,
      loads: pass.plan.loads,
      shards: pass.existingShards,
      statefulSet,
    },
    pass.problems,
  );
}

/**
 * Runs a pure computation of desired state; if it finds the spec invalid (CONFIG_INVALID: a
 * quantity out of range, a tuning value the CRD schema cannot check), the pool's status says
 * so with the code as the reason and a TerminalError tells the loop not to retry: only a
 * change of the pool can cure it.
 */
export async function orInvalidSpec<T>(s: Omit<PoolStatusInput, 'loads' | 'statefulSet'>, compute: () => T): Promise<T> {
  try {
    return compute();
  } catch (e) {
    if (!isPglogError(e) || e.code !== 'CONFIG_INVALID') throw e;
    await writePoolStatus({ ...s, loads: [], statefulSet: undefined }, [{ reason: e.code, message: e.message }]);
    throw new TerminalError(e.code, `CollectorPool ${s.pool.metadata.namespace ?? ''}/${s.pool.metadata.name}: ${e.message}`, { cause: e });
  }
}

/** Whether a Warning for `problem` is news: the pool's Degraded condition does not say it yet. */
function isNewProblem(pool: CollectorPool, problem: PoolProblem): boolean {
  const degraded = pool.status?.conditions?.find((c) => c.type === 'Degraded');
  return degraded?.status !== 'True' || degraded.reason !== problem.reason || degraded.message !== problem.message;
}
