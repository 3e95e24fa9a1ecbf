/**
 * Status conditions and the equality that decides whether a write is needed. The reconcile
 * loop computes the whole desired status each time; writing it only when it differs
 * semantically keeps the operator from bumping resourceVersions (and waking every watcher)
 * on a no-op pass. Pure: the time is a parameter.
 */
import type { Condition } from '@pglog/common/api/common.ts';

/** What a caller decides about a condition; the time and generation are filled in by `setCondition`. */
export interface ConditionUpdate {
  type: string;
  status: Condition['status'];
  reason: string;
  message: string;
}

/**
 * `conditions` with `next` set. `lastTransitionTime` changes only when the status changes
 * (as Kubernetes defines it: the time of the last transition, not of the last write). When
 * nothing changes, the same array is returned, so `result === conditions` tells a caller it
 * has nothing to write.
 */
export function setCondition(conditions: Condition[] | undefined, next: ConditionUpdate, nowIso: string, generation?: number): Condition[] {
  const list = conditions ?? [];
  const i = list.findIndex((c) => c.type === next.type);
  const current = i < 0 ? undefined : list[i]!;
  const updated: Condition = {
    type: next.type,
    status: next.status,
    ...(generation === undefined ? {} : { observedGeneration: generation }),
    lastTransitionTime: current !== undefined && current.status === next.status ? current.lastTransitionTime : nowIso,
    reason: next.reason,
    message: next.message,
  };
  if (current !== undefined && semanticEqual(current, updated)) return list;
  if (current === undefined) return [...list, updated];
  return list.map((c, j) => (j === i ? updated : c));
}

/** The condition of `type`, if present. */
export function findCondition(conditions: readonly Condition[] | undefined, type: string): Condition | undefined {
  return conditions?.find((c) => c.type === type);
}

/** Same conditions, whatever their order (Kubernetes treats the list as a map keyed by type). */
export function conditionsEqual(a: readonly Condition[] | undefined, b: readonly Condition[] | undefined): boolean {
  const left = a ?? [];
  const right = b ?? [];
  if (left.length !== right.length) return false;
  const matched = (from: readonly Condition[], to: readonly Condition[]): boolean =>
    from.every((c) => {
      const other = to.find((d) => d.type === c.type);
      return other !== undefined && semanticEqual(c, other);
    });
  return matched(left, right) && matched(right, left);
}

/**
 * Deep equality of JSON values as the API server stores them: a key whose value is
 * `undefined` counts as absent (JSON drops it), key order does not matter, array order does.
 */
export function semanticEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) {
    return typeof a === 'number' && typeof b === 'number' && Number.isNaN(a) && Number.isNaN(b);
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => semanticEqual(x, b[i]));
  }
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  const keys = (r: Record<string, unknown>): string[] => Object.keys(r).filter((k) => r[k] !== undefined);
  const ka = keys(ra);
  if (ka.length !== keys(rb).length) return false;
  return ka.every((k) => Object.hasOwn(rb, k) && semanticEqual(ra[k], rb[k]));
}
