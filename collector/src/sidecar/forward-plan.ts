/**
 * The sidecar's decisions about SQL forwards, apart from doing them (forwards.ts does). Pure
 * and total, like reconcile.ts: called after every event with a snapshot, so a plan only has
 * to be right for the moment it is made.
 *
 * A forward belongs to one master connection: the one whose `ssh -O forward` bound its local
 * socket. A master that ends (or is replaced after a connection change) takes its forwards
 * with it, so a forward set up on another connection than the server's current one is lost
 * and goes back to `pending`; the next master that comes up gets it again. `connection`
 * numbers tell master runs apart (SshMaster.connection: new for every time a master is up).
 */
import type { DesiredForward } from '@pglog/common/sidecar/contract.ts';

/**
 * `pending`: waiting for its master, or lost with a master; `opening`: an `ssh -O forward`
 * (or the cancel of a changed one) runs; `ready`: the local socket is bound; `failed`: the
 * master refused it, retried at `retryAt` on the same connection.
 */
export type ForwardPhase = 'pending' | 'opening' | 'ready' | 'failed';

export interface ForwardSnapshot extends DesiredForward {
  phase: ForwardPhase;
  /** The master connection it was set up (or refused) on; null while pending. */
  connection: number | null;
  /** When a failed forward may be tried again (ms since the epoch). */
  retryAt: number;
}

export interface ForwardPlan {
  /** Gone from desired.json or changed: cancel on its master (if that is still up), remove the socket, forget. */
  remove: string[];
  /** New in desired.json: `pending`. */
  add: DesiredForward[];
  /** Ready or failed on a connection that is no longer up: back to `pending`, stale socket removed. */
  lost: string[];
  /** Ask the server's up master for it now. */
  open: { id: string; connection: number }[];
}

const sameSpec = (a: DesiredForward, b: DesiredForward): boolean => a.server === b.server && a.remoteSocket === b.remoteSocket && a.port === b.port;

/**
 * @param upConnections server name -> connection of its slot-0 master while that is up
 *   (servers whose master is connecting, in backoff or absent are not in it)
 */
export function planForwards(
  desired: readonly DesiredForward[],
  current: readonly ForwardSnapshot[],
  upConnections: ReadonlyMap<string, number>,
  now: number,
): ForwardPlan {
  const plan: ForwardPlan = { remove: [], add: [], lost: [], open: [] };
  const wanted = new Map(desired.map((f) => [f.id, f]));
  const kept = new Map<string, ForwardSnapshot>();
  for (const f of current) {
    const d = wanted.get(f.id);
    // A changed one is removed now and added again by a later plan, once its removal is done
    // (the same local socket path cannot be bound twice).
    if (d === undefined || !sameSpec(d, f)) plan.remove.push(f.id);
    else kept.set(f.id, { ...f });
  }
  const removed = new Set(plan.remove);
  for (const d of desired) {
    if (kept.has(d.id) || removed.has(d.id)) continue;
    plan.add.push(d);
    kept.set(d.id, { ...d, phase: 'pending', connection: null, retryAt: 0 });
  }
  for (const f of kept.values()) {
    const up = upConnections.get(f.server);
    if ((f.phase === 'ready' || f.phase === 'failed') && f.connection !== up) {
      plan.lost.push(f.id);
      f.phase = 'pending';
      f.connection = null;
    }
    if (up === undefined) continue;
    if (f.phase === 'pending' || (f.phase === 'failed' && f.retryAt <= now)) plan.open.push({ id: f.id, connection: up });
  }
  return plan;
}

export function isEmptyForwardPlan(p: ForwardPlan): boolean {
  return p.remove.length === 0 && p.add.length === 0 && p.lost.length === 0 && p.open.length === 0;
}

/** The snapshot once a plan is under way (opens `opening`), for tests and checks. */
export function applyForwardPlan(current: readonly ForwardSnapshot[], plan: ForwardPlan): ForwardSnapshot[] {
  const removed = new Set(plan.remove);
  const lost = new Set(plan.lost);
  const opened = new Map(plan.open.map((o) => [o.id, o.connection]));
  const next: ForwardSnapshot[] = current.filter((f) => !removed.has(f.id)).map((f) => ({ ...f }));
  for (const a of plan.add) next.push({ ...a, phase: 'pending', connection: null, retryAt: 0 });
  for (const f of next) {
    if (lost.has(f.id)) {
      f.phase = 'pending';
      f.connection = null;
    }
    const connection = opened.get(f.id);
    if (connection !== undefined) {
      f.phase = 'opening';
      f.connection = connection;
    }
  }
  return next;
}
