/**
 * The store writer's connections: a small fixed number of slots, each holding at most one
 * connection, made when a slot is first used and made again after it was lost
 * (docs/store.md "Parallel commits", docs/decisions/0015-parallel-commits.md).
 *
 * An operation leases one slot (a batch commit, a claim, a snapshot group) or every slot at
 * once (migrations, partition maintenance: DDL that takes ACCESS EXCLUSIVE locks on the
 * tables the commits write, so it runs with no commit in flight instead of deadlocking
 * against one). Leases are granted strictly in the order asked: an operation that needs every
 * slot is not starved by a stream of single ones behind it.
 *
 * The pool does not order commits: the Batcher never has two batches of one stream in flight
 * (its lanes, batcher.ts), and the claims of each batch are locked in key order.
 */
import type pg from 'pg';

/** One connection place. `client` is null until first used, and again after it was lost. */
export interface PoolSlot {
  readonly index: number;
  client: pg.Client | null;
}

interface Waiter {
  all: boolean;
  grant: (slots: PoolSlot[]) => void;
}

export class ConnectionPool {
  private readonly slots: PoolSlot[];
  private free: PoolSlot[];
  private waiters: Waiter[] = [];

  constructor(size: number) {
    this.slots = Array.from({ length: size }, (_, index) => ({ index, client: null }));
    this.free = [...this.slots];
  }

  get size(): number {
    return this.slots.length;
  }

  /** Slots not leased at the moment. */
  get idle(): number {
    return this.free.length;
  }

  /** Resolves with one slot (`all` false) or every slot, once no earlier request is waiting. */
  lease(all: boolean): Promise<PoolSlot[]> {
    return new Promise((grant) => {
      this.waiters.push({ all, grant });
      this.grant();
    });
  }

  /** Gives leased slots back. */
  release(slots: readonly PoolSlot[]): void {
    this.free.push(...slots);
    this.grant();
  }

  /** The connections made so far (for closing). */
  clients(): pg.Client[] {
    return this.slots.flatMap((s) => (s.client === null ? [] : [s.client]));
  }

  private grant(): void {
    for (;;) {
      const head = this.waiters[0];
      if (head === undefined) return;
      const wanted = head.all ? this.slots.length : 1;
      if (this.free.length < wanted) return;
      this.waiters.shift();
      // Lowest index first: with little load one connection does the work and the others
      // are never made.
      this.free.sort((a, b) => a.index - b.index);
      head.grant(this.free.splice(0, wanted));
    }
  }
}
