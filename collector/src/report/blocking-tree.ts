/**
 * The blocking forest of one snapshot (`pglog report locks`), from its edges "pid waits for
 * blockingPid" (pglog.blocking) and its sessions (pglog.activity). Pure.
 *
 * - Roots are sessions that block others and wait for nobody; a node's children are the
 *   sessions waiting for it.
 * - A session waiting for several blockers appears under each of them, so every edge is shown
 *   with its own modes and wait. Its subtree is expanded under the first blocker in the
 *   forest's order only; the later appearances are marked `repeat` and have no children, so
 *   the output stays proportional to the number of edges. `waitsFor` lists all its blockers.
 * - A cycle (sessions waiting for each other: a deadlock the detector has not broken yet, or
 *   one caught between its checks) has no root. It gets a tree of its own, rooted at the
 *   cycle's smallest pid; where the walk comes back to a session already on the path, that
 *   appearance is marked `cycle` and has no children, and the cycle is listed in `cycles`.
 * - Order is deterministic: roots by the total wait of the edges below them (longest first),
 *   then pid; trees of cycles after them; children by their own wait plus the wait below them,
 *   then pid.
 */
import type { BlockingEdge } from '../snapshot/types.ts';

/** One edge of pglog.blocking: `pid` waits for `blockingPid` (the stored edge, as the collector wrote it). */
export type EdgeInput = Pick<BlockingEdge, 'pid' | 'blockingPid' | 'database' | 'lockType' | 'waitMode' | 'heldMode' | 'relation' | 'waitMs'>;

/** What pglog.activity says about a session at the same snapshot. */
export interface SessionInput {
  pid: number;
  database: string | null;
  user: string | null;
  application: string | null;
  state: string | null;
  /** Snapshot time minus xact_start. */
  xactMs: number | null;
  query: string | null;
  fingerprint: string | null;
}

/** A lock a session holds that blocks someone (from the edges where it is the blocker). */
export interface HeldLock {
  mode: string;
  lockType: string;
  relation: string | null;
}

/** A session in the forest: what pglog.activity says of it, and how it waits and blocks. */
export interface BlockingNode extends SessionInput {
  /** The edge to the parent: what this session waits for there. All null on a root. */
  lockType: string | null;
  relation: string | null;
  waitMode: string | null;
  /** What the parent holds that blocks this one; null on a root or when the parent is only queued ahead. */
  heldMode: string | null;
  waitMs: number | null;
  /** Every session this one waits for, ascending. */
  waitsFor: number[];
  /** Locks this session holds that block others (distinct), wherever in the forest they are. */
  holds: HeldLock[];
  /** Shown in full elsewhere in the forest (it waits for more than one session): no children here. */
  repeat: boolean;
  /** This session is its own ancestor here: the end of a cycle, no children. */
  cycle: boolean;
  children: BlockingNode[];
}

export interface BlockingForest {
  roots: BlockingNode[];
  /** Each cycle once, as pids in waiting order (each waits for the next, the last for the first), smallest pid first. */
  cycles: number[][];
  /** Sessions that wait for at least one other. */
  blockedSessions: number;
  longestWaitMs: number | null;
}

/** One edge per (pid, blockingPid); if the input repeats a pair, the longest wait is kept. */
function uniqueEdges(edges: readonly EdgeInput[]): EdgeInput[] {
  const byPair = new Map<string, EdgeInput>();
  for (const e of edges) {
    const key = `${e.pid}:${e.blockingPid}`;
    const seen = byPair.get(key);
    if (seen === undefined || (e.waitMs ?? -1) > (seen.waitMs ?? -1)) byPair.set(key, e);
  }
  return [...byPair.values()];
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

export function buildBlockingForest(edgesIn: readonly EdgeInput[], sessionsIn: readonly SessionInput[]): BlockingForest {
  const edges = uniqueEdges(edgesIn);
  const sessions = new Map(sessionsIn.map((s) => [s.pid, s]));
  const waitersOf = new Map<number, EdgeInput[]>();
  const blockersOf = new Map<number, number[]>();
  // An edge names its waiter's database: the fallback for a session missing from the snapshot.
  const databaseOf = new Map<number, string>();
  for (const e of edges) {
    push(waitersOf, e.blockingPid, e);
    push(blockersOf, e.pid, e.blockingPid);
    if (e.database !== null) databaseOf.set(e.pid, e.database);
  }

  // Total wait of the edges reachable below a session, each edge once (a session under two
  // blockers must not count twice). Memoized: children are sorted by it at every level.
  const weights = new Map<number, number>();
  const weight = (pid: number): number => {
    const known = weights.get(pid);
    if (known !== undefined) return known;
    const reached = new Set([pid]);
    const queue = [pid];
    let total = 0;
    for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
      for (const e of waitersOf.get(next) ?? []) {
        total += e.waitMs ?? 0;
        if (!reached.has(e.pid)) {
          reached.add(e.pid);
          queue.push(e.pid);
        }
      }
    }
    weights.set(pid, total);
    return total;
  };
  const childOrder = (a: EdgeInput, b: EdgeInput): number => (b.waitMs ?? 0) + weight(b.pid) - ((a.waitMs ?? 0) + weight(a.pid)) || a.pid - b.pid;
  for (const list of waitersOf.values()) list.sort(childOrder);

  const holdsOf = (pid: number): HeldLock[] => {
    const held = new Map<string, HeldLock>();
    for (const e of waitersOf.get(pid) ?? []) {
      if (e.heldMode !== null)
        held.set(`${e.heldMode}\u0000${e.lockType}\u0000${e.relation ?? ''}`, { mode: e.heldMode, lockType: e.lockType, relation: e.relation });
    }
    return [...held.values()].sort(
      (a, b) => (a.relation ?? '').localeCompare(b.relation ?? '') || a.mode.localeCompare(b.mode) || a.lockType.localeCompare(b.lockType),
    );
  };
  const makeNode = (pid: number, edge: EdgeInput | null): BlockingNode => {
    const s = sessions.get(pid);
    return {
      pid,
      database: s?.database ?? databaseOf.get(pid) ?? null,
      user: s?.user ?? null,
      application: s?.application ?? null,
      state: s?.state ?? null,
      xactMs: s?.xactMs ?? null,
      query: s?.query ?? null,
      fingerprint: s?.fingerprint ?? null,
      lockType: edge?.lockType ?? null,
      relation: edge?.relation ?? null,
      waitMode: edge?.waitMode ?? null,
      heldMode: edge?.heldMode ?? null,
      waitMs: edge?.waitMs ?? null,
      waitsFor: [...(blockersOf.get(pid) ?? [])].sort((a, b) => a - b),
      holds: holdsOf(pid),
      repeat: false,
      cycle: false,
      children: [],
    };
  };

  const expanded = new Set<number>();
  const cycles = new Map<string, number[]>();
  const path: number[] = [];
  const onPath = new Set<number>();
  const expand = (pid: number, edge: EdgeInput | null): BlockingNode => {
    const node = makeNode(pid, edge);
    if (onPath.has(pid)) {
      node.cycle = true;
      // The path from this pid down to here, reversed, is the waiting order (a child waits for its parent).
      const loop = path.slice(path.indexOf(pid)).reverse();
      const start = loop.indexOf(Math.min(...loop));
      const normal = [...loop.slice(start), ...loop.slice(0, start)];
      cycles.set(normal.join(','), normal);
      return node;
    }
    if (expanded.has(pid)) {
      node.repeat = true;
      return node;
    }
    expanded.add(pid);
    path.push(pid);
    onPath.add(pid);
    for (const e of waitersOf.get(pid) ?? []) node.children.push(expand(e.pid, e));
    path.pop();
    onPath.delete(pid);
    return node;
  };

  const roots = [...waitersOf.keys()]
    .filter((pid) => !blockersOf.has(pid))
    .sort((a, b) => weight(b) - weight(a) || a - b)
    .map((pid) => expand(pid, null));

  // What no root reaches hangs off a cycle: every blocker of an unexpanded session is itself
  // unexpanded (an expanded one would have expanded it), so walking up from one always ends
  // in a loop. Walk from the smallest such pid, root a tree at the loop's smallest pid.
  for (;;) {
    const pending = [...waitersOf.keys()].filter((pid) => !expanded.has(pid));
    if (pending.length === 0) break;
    const walked: number[] = [];
    let cur = Math.min(...pending);
    while (!walked.includes(cur)) {
      walked.push(cur);
      cur = Math.min(...(blockersOf.get(cur) ?? [cur]));
    }
    roots.push(expand(Math.min(...walked.slice(walked.indexOf(cur))), null));
  }

  const waits = edges.map((e) => e.waitMs).filter((w): w is number => w !== null);
  return {
    roots,
    cycles: [...cycles.values()].sort((a, b) => (a[0] ?? 0) - (b[0] ?? 0) || a.length - b.length),
    blockedSessions: blockersOf.size,
    longestWaitMs: waits.length === 0 ? null : Math.max(...waits),
  };
}

/** Every node of a forest, depth first (repeats and cycle ends included). */
export function* walkForest(nodes: readonly BlockingNode[]): Generator<BlockingNode> {
  for (const n of nodes) {
    yield n;
    yield* walkForest(n.children);
  }
}

/** Only the trees that involve a session of `database` (the `--database` filter). */
export function treesInDatabase(forest: BlockingForest, database: string): BlockingNode[] {
  return forest.roots.filter((root) => {
    for (const n of walkForest([root])) if (n.database === database) return true;
    return false;
  });
}
