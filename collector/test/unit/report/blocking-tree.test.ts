// The blocking forest of one snapshot: examples (chain, two blockers, cycles) and properties
// over random edge sets (every edge shown once, no session its own ancestor except at a
// marked cycle end, roots wait for nobody, the same forest for any input order).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { type BlockingNode, buildBlockingForest, type EdgeInput, type SessionInput, treesInDatabase } from '../../../src/report/blocking-tree.ts';

function edge(pid: number, blockingPid: number, waitMs: number | null = 1000, over: Partial<EdgeInput> = {}): EdgeInput {
  return {
    pid,
    blockingPid,
    database: 'shop',
    lockType: 'relation',
    waitMode: 'ShareLock',
    heldMode: 'RowExclusiveLock',
    relation: 'public.t',
    waitMs,
    ...over,
  };
}

function session(pid: number, over: Partial<SessionInput> = {}): SessionInput {
  return { pid, database: 'shop', user: 'app', application: 'web', state: 'active', xactMs: 5000, query: `SELECT ${pid}`, fingerprint: `fp${pid}`, ...over };
}

/** The forest as an outline in output order: a line per node, its pid indented two spaces per level, marked `repeat` or `cycle`. */
function outline(roots: readonly BlockingNode[]): string[] {
  const out: string[] = [];
  const walk = (nodes: readonly BlockingNode[], depth: number): void => {
    for (const n of nodes) {
      out.push(`${'  '.repeat(depth)}${n.pid}${n.repeat ? ' repeat' : ''}${n.cycle ? ' cycle' : ''}`);
      walk(n.children, depth + 1);
    }
  };
  walk(roots, 0);
  return out;
}

test('a chain A <- B <- C: one root, each edge under its blocker with its modes and wait', () => {
  const f = buildBlockingForest(
    [edge(3, 2, 500, { waitMode: 'RowExclusiveLock', heldMode: null }), edge(2, 1, 12_300)],
    [session(1, { state: 'idle in transaction', xactMs: 45_000 }), session(2), session(3)],
  );
  assert.deepEqual(outline(f.roots), ['1', '  2', '    3']);
  const [a] = f.roots;
  assert.equal(a?.waitMode, null);
  assert.deepEqual(a?.holds, [{ mode: 'RowExclusiveLock', lockType: 'relation', relation: 'public.t' }]);
  assert.equal(a?.xactMs, 45_000);
  const b = a?.children[0];
  assert.deepEqual([b?.waitMode, b?.heldMode, b?.waitMs, b?.relation, b?.lockType], ['ShareLock', 'RowExclusiveLock', 12_300, 'public.t', 'relation']);
  assert.deepEqual(b?.holds, [], 'B blocks C only by being queued ahead');
  const c = b?.children[0];
  assert.deepEqual([c?.waitMode, c?.heldMode, c?.waitMs], ['RowExclusiveLock', null, 500]);
  assert.equal(f.blockedSessions, 2);
  assert.equal(f.longestWaitMs, 12_300);
  assert.deepEqual(f.cycles, []);
});

test('a session waiting for two blockers appears under both; the second appearance is a childless repeat', () => {
  // 3 waits for 1 and 2; 4 waits for 3. Root 1 carries more wait, so 3 is expanded under it.
  const f = buildBlockingForest([edge(3, 1, 100), edge(3, 2, 100), edge(4, 3, 50), edge(5, 1, 9000)], []);
  assert.deepEqual(outline(f.roots), ['1', '  5', '  3', '    4', '2', '  3 repeat']);
  const repeat = f.roots[1]?.children[0];
  assert.deepEqual(repeat?.waitsFor, [1, 2]);
  assert.deepEqual(repeat?.children, []);
});

test('a cycle with no root becomes a tree of its own and is listed; a cycle below a root too', () => {
  // Under 20, the way back to 10 comes first: all the wait of the cycle lies below it.
  const alone = buildBlockingForest([edge(20, 10), edge(10, 20), edge(30, 20)], []);
  assert.deepEqual(outline(alone.roots), ['10', '  20', '    10 cycle', '    30']);
  assert.deepEqual(alone.cycles, [[10, 20]]);
  const below = buildBlockingForest([edge(2, 1), edge(2, 3), edge(3, 2)], []);
  assert.deepEqual(outline(below.roots), ['1', '  2', '    3', '      2 cycle']);
  assert.deepEqual(below.cycles, [[2, 3]]);
});

test('pid 0 (a prepared transaction) and sessions missing from the snapshot still form a tree', () => {
  const f = buildBlockingForest([edge(7, 0, 1)], []);
  assert.deepEqual(outline(f.roots), ['0', '  7']);
  assert.equal(f.roots[0]?.user, null);
  assert.equal(f.roots[0]?.children[0]?.database, 'shop', "the edge names the waiter's database");
});

test('repeated pairs keep the longest wait; no edges, no trees; --database keeps trees touching it', () => {
  const f = buildBlockingForest([edge(2, 1, 10), edge(2, 1, 30), edge(2, 1, null)], []);
  assert.equal(f.roots[0]?.children.length, 1);
  assert.equal(f.roots[0]?.children[0]?.waitMs, 30);
  assert.deepEqual(buildBlockingForest([], [session(1)]), { roots: [], cycles: [], blockedSessions: 0, longestWaitMs: null });
  const two = buildBlockingForest([edge(2, 1), edge(4, 3, 1000, { database: 'crm' })], [session(3, { database: 'crm' })]);
  assert.deepEqual(
    treesInDatabase(two, 'crm').map((r) => r.pid),
    [3],
  );
  assert.deepEqual(treesInDatabase(two, 'nowhere'), []);
});

// ---------------------------------------------------------------- properties

const edgesArb = fc
  .uniqueArray(
    fc
      .record({
        pid: fc.integer({ min: 0, max: 12 }),
        blockingPid: fc.integer({ min: 0, max: 12 }),
        waitMs: fc.option(fc.integer({ min: 0, max: 100_000 }), { nil: null }),
        heldMode: fc.option(fc.constantFrom('RowExclusiveLock', 'AccessExclusiveLock', 'ExclusiveLock'), { nil: null }),
      })
      .filter((e) => e.pid !== e.blockingPid),
    { selector: (e) => `${e.pid}:${e.blockingPid}`, maxLength: 40 },
  )
  .map((list) => list.map((e) => edge(e.pid, e.blockingPid, e.waitMs, { heldMode: e.heldMode })));

function withParents(roots: readonly BlockingNode[]): { node: BlockingNode; ancestors: number[] }[] {
  const out: { node: BlockingNode; ancestors: number[] }[] = [];
  const walk = (nodes: readonly BlockingNode[], ancestors: number[]): void => {
    for (const n of nodes) {
      out.push({ node: n, ancestors });
      walk(n.children, [...ancestors, n.pid]);
    }
  };
  walk(roots, []);
  return out;
}

test('property: every edge appears exactly once, under its blocker; nothing else appears', () => {
  fc.assert(
    fc.property(edgesArb, (edges) => {
      const f = buildBlockingForest(edges, []);
      const shown = withParents(f.roots)
        .filter((x) => x.ancestors.length > 0)
        .map((x) => `${x.node.pid}:${x.ancestors[x.ancestors.length - 1]}`)
        .sort();
      assert.deepEqual(shown, edges.map((e) => `${e.pid}:${e.blockingPid}`).sort());
    }),
    { numRuns: 500 },
  );
});

test('property: no session is its own ancestor except at a childless cycle end; each session expanded once', () => {
  fc.assert(
    fc.property(edgesArb, (edges) => {
      const f = buildBlockingForest(edges, []);
      const expanded = new Map<number, number>();
      for (const { node, ancestors } of withParents(f.roots)) {
        assert.equal(node.cycle, ancestors.includes(node.pid), `pid ${node.pid}`);
        if (node.cycle || node.repeat) assert.deepEqual(node.children, []);
        else expanded.set(node.pid, (expanded.get(node.pid) ?? 0) + 1);
      }
      for (const [pid, times] of expanded) assert.equal(times, 1, `pid ${pid} expanded ${times} times`);
    }),
    { numRuns: 500 },
  );
});

test('property: roots wait for nobody unless they head a listed cycle; cycles are real; roots ordered by wait below', () => {
  fc.assert(
    fc.property(edgesArb, (edges) => {
      const f = buildBlockingForest(edges, []);
      const pairs = new Set(edges.map((e) => `${e.pid}:${e.blockingPid}`));
      for (const c of f.cycles) c.forEach((pid, i) => assert.ok(pairs.has(`${pid}:${c[(i + 1) % c.length]}`), `cycle ${c.join(',')}`));
      const inCycle = new Set(f.cycles.flat());
      const plain = f.roots.filter((r) => r.waitsFor.length === 0);
      for (const r of f.roots) if (r.waitsFor.length > 0) assert.ok(inCycle.has(r.pid), `root ${r.pid} waits but is in no cycle`);
      assert.deepEqual(f.roots.slice(0, plain.length), plain, 'roots of cycles come after the true roots');
      // Reference: the wait of every edge reachable below a root, each edge once.
      const total = (root: BlockingNode): number => {
        const reached = new Set([root.pid]);
        for (let grew = true; grew;) {
          grew = false;
          for (const e of edges)
            if (reached.has(e.blockingPid) && !reached.has(e.pid)) {
              reached.add(e.pid);
              grew = true;
            }
        }
        return edges.filter((e) => reached.has(e.blockingPid)).reduce((s, e) => s + (e.waitMs ?? 0), 0);
      };
      for (let i = 1; i < plain.length; i++) {
        const [a, b] = [plain[i - 1], plain[i]] as [BlockingNode, BlockingNode];
        assert.ok(total(a) > total(b) || (total(a) === total(b) && a.pid < b.pid), `roots ${a.pid} before ${b.pid}`);
      }
      assert.equal(f.blockedSessions, new Set(edges.map((e) => e.pid)).size);
    }),
    { numRuns: 500 },
  );
});

test('property: the forest does not depend on the order of edges and sessions', () => {
  fc.assert(
    fc.property(edgesArb, fc.func(fc.integer()), (edges, key) => {
      const sessions = [...new Set(edges.flatMap((e) => [e.pid, e.blockingPid]))].map((pid) => session(pid));
      const shuffle = <T>(xs: T[]): T[] =>
        xs
          .map((x, i) => ({ x, k: key(i) }))
          .sort((a, b) => a.k - b.k)
          .map((p) => p.x);
      assert.deepEqual(buildBlockingForest(shuffle([...edges]), shuffle([...sessions])), buildBlockingForest(edges, sessions));
    }),
    { numRuns: 300 },
  );
});
