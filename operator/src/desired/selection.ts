/**
 * Which pool collects which target (collector-pool.ts, `targetSelector`): a target belongs to
 * the pool its `spec.pool` names, or to a pool whose label selector matches it; when several
 * pools claim it, the one `spec.pool` names wins, else the pool whose name sorts first. So
 * every target is collected by at most one pool, and the choice does not depend on the order
 * the caches list objects in. Pure.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { LabelSelector } from '@pglog/common/api/common.ts';
import type { PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';

/**
 * Whether `labels` satisfy `selector`, as Kubernetes defines it: every `matchLabels` pair and
 * every expression must hold; an empty selector matches everything (an absent one is the
 * caller's business: for pools it selects nothing). An unknown operator throws CONFIG_INVALID.
 */
export function matchesLabelSelector(selector: LabelSelector, labels: Readonly<Record<string, string>> | undefined): boolean {
  const has = (key: string): boolean => labels !== undefined && Object.hasOwn(labels, key);
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!has(key) || labels![key] !== value) return false;
  }
  for (const req of selector.matchExpressions ?? []) {
    const values = req.values ?? [];
    switch (req.operator) {
      case 'In':
        if (values.length === 0) throw new PglogError('CONFIG_INVALID', `label selector: operator In on key ${req.key} needs values`);
        if (!has(req.key) || !values.includes(labels![req.key]!)) return false;
        break;
      case 'NotIn':
        if (values.length === 0) throw new PglogError('CONFIG_INVALID', `label selector: operator NotIn on key ${req.key} needs values`);
        if (has(req.key) && values.includes(labels![req.key]!)) return false;
        break;
      case 'Exists':
        if (!has(req.key)) return false;
        break;
      case 'DoesNotExist':
        if (has(req.key)) return false;
        break;
      default:
        throw new PglogError('CONFIG_INVALID', `label selector: unknown operator '${req.operator}' on key ${req.key} (In, NotIn, Exists, DoesNotExist)`);
    }
  }
  return true;
}

/**
 * Pool name → its targets (sorted by name), for every pool given (an empty list when it has
 * none). Pools and targets must come from one namespace (a pool only collects targets of its
 * own); a target of another namespace than the pools is left out.
 */
export function selectPoolTargets(pools: readonly CollectorPool[], targets: readonly PostgresTarget[]): Map<string, PostgresTarget[]> {
  const sortedPools = [...pools].sort((a, b) => compareNames(a.metadata.name, b.metadata.name));
  const byName = new Map<string, CollectorPool>();
  for (const pool of sortedPools) {
    if (byName.has(pool.metadata.name))
      throw new PglogError('CONFIG_INVALID', `selectPoolTargets: two pools named ${pool.metadata.name}: give the pools of one namespace`);
    byName.set(pool.metadata.name, pool);
  }
  const out = new Map<string, PostgresTarget[]>(sortedPools.map((p) => [p.metadata.name, []]));
  for (const target of [...targets].sort((a, b) => compareNames(a.metadata.name, b.metadata.name))) {
    const owner = owningPool(target, byName, sortedPools);
    if (owner !== undefined) out.get(owner.metadata.name)!.push(target);
  }
  return out;
}

function owningPool(target: PostgresTarget, byName: ReadonlyMap<string, CollectorPool>, sortedPools: readonly CollectorPool[]): CollectorPool | undefined {
  const sameNamespace = (pool: CollectorPool): boolean => (pool.metadata.namespace ?? '') === (target.metadata.namespace ?? '');
  const named = target.spec.pool === undefined ? undefined : byName.get(target.spec.pool);
  if (named !== undefined && sameNamespace(named)) return named;
  return sortedPools.find(
    (pool) => sameNamespace(pool) && pool.spec.targetSelector !== undefined && matchesLabelSelector(pool.spec.targetSelector, target.metadata.labels),
  );
}

function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
