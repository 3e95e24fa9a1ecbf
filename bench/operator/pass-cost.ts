/**
 * The operator benchmark's pass-cost part: the CPU of one pool reconcile pass alone, without an
 * API server (the end-to-end part's pass times include waiting for it and a shared machine).
 * The real PoolReconciler over in-memory caches and a client that answers at once by writing
 * into them, as the informers would: per fleet size the first pass (every status written),
 * passes with nothing to do, and a pass after every shard reported all its targets with rates a
 * few per cent off and a newer entry time (the steady state), with the writes each made.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import type { KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { OperatorMetrics } from '@pglog/operator/controller/operator-metrics.ts';
import { PoolReconciler } from '@pglog/operator/controller/pool-reconciler.ts';

import { Cache, samplePool, sampleTarget } from '../../operator/test/helpers/pool-fixtures.ts';
import { reportedStatus } from './collector-reports.ts';

export interface PassCost {
  targets: number;
  firstMs: number;
  firstWrites: number;
  /** Passes with nothing new: best and median. */
  idleMs: { best: number; median: number };
  idleWrites: number;
  /** Passes after a round of reports that only moved numbers: best and median, and writes per pass. */
  reportMs: { best: number; median: number };
  reportWrites: number;
}

const RUNS = 7;

function bestAndMedian(ms: number[]): { best: number; median: number } {
  const sorted = [...ms].sort((a, b) => a - b);
  return { best: sorted[0]!, median: sorted[Math.floor(sorted.length / 2)]! };
}

export async function passCost(targets: number, replicas: number): Promise<PassCost> {
  let rv = 1;
  const caches: Record<string, Cache<KubeObject>> = {};
  const cache = <T extends KubeObject>(plural: string): Cache<T> => (caches[plural] ??= new Cache<KubeObject>()) as unknown as Cache<T>;
  const pools = cache<CollectorPool>('collectorpools');
  const targetCache = cache<TargetObject>('postgrestargets');
  const shards = cache<CollectorShard>('collectorshards');
  const pool = samplePool({ replicas });
  pools.put({ ...pool, metadata: { ...pool.metadata, resourceVersion: String(rv++) } });
  for (let i = 0; i < targets; i++) {
    const t = sampleTarget({ name: `db${String(i).padStart(5, '0')}`, pool: pool.metadata.name });
    targetCache.put({ ...t, metadata: { ...t.metadata, generation: 1, resourceVersion: String(rv++) } });
  }
  let writes = 0;
  const store = (type: ResourceType, o: KubeObject): Promise<KubeObject> => {
    writes++;
    const stored = { ...o, metadata: { ...o.metadata, uid: o.metadata.uid ?? `uid-${o.metadata.name}`, resourceVersion: String(rv++) } };
    cache(type.plural).put(stored);
    return Promise.resolve(stored);
  };
  const client = {
    mergePatch: (type: ResourceType, namespace: string, name: string, patch: { status?: unknown }) =>
      store(type, { ...cache(type.plural).get(namespace, name)!, status: patch.status } as KubeObject),
    create: store,
    replace: store,
    apply: store,
    get: () => Promise.resolve(null),
    delete: () => Promise.resolve(true),
  } as unknown as KubeClient;
  const reconciler = new PoolReconciler({
    client,
    pools,
    targets: targetCache,
    shards,
    statefulSets: cache('statefulsets'),
    services: cache('services'),
    podDisruptionBudgets: cache('poddisruptionbudgets'),
    events: { record: () => Promise.resolve() },
    metrics: new OperatorMetrics({ defaultMetrics: false }),
    defaultImage: 'registry.example/pglog:bench',
    fieldManager: 'bench',
    now: Date.now,
  });
  const pass = async (): Promise<{ ms: number; writes: number }> => {
    writes = 0;
    const started = performance.now();
    await reconciler.reconcile(pool.metadata.namespace ?? '', pool.metadata.name);
    return { ms: performance.now() - started, writes };
  };

  const first = await pass();
  const idle: number[] = [];
  let idleWrites = 0;
  for (let i = 0; i < RUNS; i++) {
    const p = await pass();
    idle.push(p.ms);
    idleWrites += p.writes;
  }
  // Every shard reports every target (round 1 makes them Ready), then rounds that only move numbers.
  const report = (round: number): void => {
    const now = new Date(Date.now() + round * 10_000);
    for (const s of shards.list()) shards.put({ ...s, status: reportedStatus(s, round, now), metadata: { ...s.metadata, resourceVersion: String(rv++) } });
  };
  report(1);
  await pass();
  const reported: number[] = [];
  let reportWrites = 0;
  for (let i = 0; i < RUNS; i++) {
    report(i + 2);
    const p = await pass();
    reported.push(p.ms);
    reportWrites += p.writes;
  }
  return {
    targets,
    firstMs: first.ms,
    firstWrites: first.writes,
    idleMs: bestAndMedian(idle),
    idleWrites: idleWrites / RUNS,
    reportMs: bestAndMedian(reported),
    reportWrites: reportWrites / RUNS,
  };
}

export function passCostSection(results: readonly PassCost[], replicas: number): string {
  const f = (n: number): string => (n < 10 ? n.toFixed(1) : n.toFixed(0));
  return [
    '### One pool pass alone (no API server)',
    '',
    `The operator's PoolReconciler over in-memory caches and a client that answers at once (bench/operator/pass-cost.ts), ${replicas} replicas: ` +
      `the first pass (every target's status written), passes with nothing new (best and median of ${RUNS}), and passes after each shard reported all its targets ` +
      `with rates ±3 % and a newer entry time (the steady state once collectors run; best and median of ${RUNS}), with the objects each wrote.`,
    '',
    '| targets | first pass (ms) | its writes | idle pass best / median (ms) | its writes | pass after a report best / median (ms) | its writes |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...results.map(
      (r) =>
        `| ${r.targets.toLocaleString('en-US')} | ${f(r.firstMs)} | ${r.firstWrites} | ${f(r.idleMs.best)} / ${f(r.idleMs.median)} | ${r.idleWrites} | ` +
        `${f(r.reportMs.best)} / ${f(r.reportMs.median)} | ${r.reportWrites} |`,
    ),
    '',
  ].join('\n');
}
