/**
 * `make bench` (operator part): how the operator's sharding behaves and what it costs.
 *
 *   node bench/operator-bench.ts [--targets 10000] [--shards 100] [--runs 7]
 *                                [--e2e-targets 10000] [--skip-e2e] [--out FILE.md]
 *
 * 1. Pure sharding (operator/src/sharding/, no I/O), bounded consistent hashing (the
 *    operator's strategy) against modulo hashing (the baseline), on one seeded fleet of
 *    --targets targets with log-normal byte rates (median 20 kB/s, σ 2) and 10 % unmeasured
 *    (null, weighed at the floor):
 *    - time per assignment over --shards shards, from scratch (empty previous) and as a
 *      recompute (previous = the last result), best and median of --runs after warm-up runs;
 *    - load balance of that assignment: max and min shard load over the mean;
 *    - moves per scale step N → N+1 and back N+1 → N for N in 5, 15, 50, 100: the fraction of
 *      the total weight on another shard afterwards (movedWeight / total), against the ideal:
 *      1/(N+1) up (the new shard's fair share), the removed shard's share down (only its
 *      targets have to move). A StatefulSet scale-down removes the highest ordinal.
 * 2. End to end (unless --skip-e2e): a real kube-apiserver and etcd (operator/test/helpers/
 *    control-plane.ts; binaries in PGLOG_KUBE_BIN or ~/.cache/pglog/kube/v1.37.2/bin), the CRDs,
 *    the real `pglog operator` CLI; --e2e-targets PostgresTargets created through the API
 *    (timed on their own), then a CollectorPool of 20 replicas: the time until every target is
 *    in exactly one of the 20 CollectorShards, until every target's status.shard is written,
 *    then a merge patch of spec.replicas to 21 (what `kubectl scale` does through the scale
 *    subresource): the time to re-converge and the fraction of targets moved against 1/21
 *    (no collector reports rates here, so every target weighs the floor and load = count).
 *    The operator's own metrics give the mean reconcile time.
 */
import { writeFileSync } from 'node:fs';
import { cpus, release } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import {
  boundedConsistentHashing, DEFAULT_SHARDING_OPTIONS, moduloHashing, movedWeight, planBoundedAssignment,   type ShardingStrategy, type ShardingTarget,
shardLoads, targetWeights,
} from '@pglog/operator/sharding/index.ts';

import { createCleanup } from './lib/cleanup.ts';

const { values } = parseArgs({
  options: {
    targets: { type: 'string', default: '10000' },
    shards: { type: 'string', default: '100' },
    runs: { type: 'string', default: '7' },
    'e2e-targets': { type: 'string', default: '10000' },
    'e2e-replicas': { type: 'string', default: '20' },
    'e2e-timeout': { type: 'string', default: '600' },
    'skip-e2e': { type: 'boolean', default: false },
    out: { type: 'string' },
  },
});

const TARGETS = positiveInt('targets');
const SHARDS = positiveInt('shards');
const RUNS = positiveInt('runs');
const WARMUP_RUNS = 3;
const SCALE_STEPS = [5, 15, 50, 100] as const;
const MEDIAN_RATE = 20_000;
const SIGMA = 2;
const NEW_FRACTION = 0.1;
const SEED = 20261123;

const say = (line: string): void => { process.stderr.write(`${line}\n`); };

function positiveInt(name: 'targets' | 'shards' | 'runs' | 'e2e-targets' | 'e2e-replicas' | 'e2e-timeout'): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`--${name} must be a whole number >= 1, got ${values[name]}`);
  return n;
}

// ---------------------------------------------------------------------------------------------
// The fleet: seeded, so every run measures the same targets.

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function fleet(count: number): ShardingTarget[] {
  const random = mulberry32(SEED);
  const normal = (): number => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Array.from({ length: count }, (_, i) => {
    const rate = Math.round(MEDIAN_RATE * Math.exp(SIGMA * normal()));
    return { name: `db${String(i).padStart(5, '0')}`, bytesPerSecond: random() < NEW_FRACTION ? null : rate };
  });
}

const shardNames = (n: number): string[] => Array.from({ length: n }, (_, i) => `bench-${i}`);

// ---------------------------------------------------------------------------------------------
// 1. Pure sharding.

interface Timing { best: number; median: number }
interface StrategyResult {
  name: string;
  first: Timing;
  recompute: Timing;
  maxOverMean: number;
  minOverMean: number;
}

const STRATEGIES: readonly ShardingStrategy[] = [boundedConsistentHashing, moduloHashing];

function timed(fn: () => void): Timing {
  for (let i = 0; i < WARMUP_RUNS; i++) fn();
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    fn();
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  return { best: samples[0]!, median: samples[Math.floor(samples.length / 2)]! };
}

function timeStrategies(targets: readonly ShardingTarget[], weights: ReadonlyMap<string, number>): StrategyResult[] {
  const shards = shardNames(SHARDS);
  const total = [...weights.values()].reduce((a, b) => a + b, 0);
  const mean = total / SHARDS;
  return STRATEGIES.map((strategy) => {
    const empty = new Map<string, string>();
    let last = strategy.assign({ shards, targets, previous: empty });
    const first = timed(() => { last = strategy.assign({ shards, targets, previous: empty }); });
    const settled = last;
    const recompute = timed(() => { last = strategy.assign({ shards, targets, previous: settled }); });
    if (movedWeight(settled, last, weights) !== 0 && strategy === boundedConsistentHashing) throw new Error('a no-op recompute moved targets');
    const loads = [...shardLoads(last, weights, shards).values()];
    say(`${strategy.name}: from scratch best ${first.best.toFixed(1)} ms, median ${first.median.toFixed(1)}; recompute best ${recompute.best.toFixed(1)}, median ${recompute.median.toFixed(1)}`);
    return { name: strategy.name, first, recompute, maxOverMean: Math.max(...loads) / mean, minOverMean: Math.min(...loads) / mean };
  });
}

interface StepResult {
  n: number;
  up: { ideal: number; moved: Map<string, number> };
  down: { ideal: Map<string, number>; moved: Map<string, number> };
  newShardOverMean: number;
}

function scaleSteps(targets: readonly ShardingTarget[], weights: ReadonlyMap<string, number>): StepResult[] {
  const total = [...weights.values()].reduce((a, b) => a + b, 0);
  return SCALE_STEPS.map((n) => {
    const small = shardNames(n);
    const large = shardNames(n + 1);
    const removed = `bench-${n}`;
    const step: StepResult = { n, up: { ideal: 1 / (n + 1), moved: new Map() }, down: { ideal: new Map(), moved: new Map() }, newShardOverMean: NaN };
    for (const strategy of STRATEGIES) {
      const atN = strategy.assign({ shards: small, targets, previous: new Map() });
      const up = strategy.assign({ shards: large, targets, previous: atN });
      const down = strategy.assign({ shards: small, targets, previous: up });
      step.up.moved.set(strategy.name, movedWeight(atN, up, weights) / total);
      step.down.moved.set(strategy.name, movedWeight(up, down, weights) / total);
      const removedLoad = shardLoads(up, weights, large).get(removed) ?? 0;
      step.down.ideal.set(strategy.name, removedLoad / total);
      if (strategy === boundedConsistentHashing) step.newShardOverMean = removedLoad / (total / (n + 1));
    }
    return step;
  });
}

function pureSection(): string {
  const targets = fleet(TARGETS);
  const weights = targetWeights(targets, DEFAULT_SHARDING_OPTIONS);
  const total = [...weights.values()].reduce((a, b) => a + b, 0);
  const unmeasured = targets.filter((t) => t.bytesPerSecond === null).length;
  const heaviest = Math.max(...weights.values());
  const plan = planBoundedAssignment({ shards: shardNames(SHARDS), targets, previous: new Map() });
  say(`fleet: ${TARGETS} targets, ${unmeasured} unmeasured, total ${(total / 1e6).toFixed(1)} MB/s, heaviest ${(heaviest / 1e6).toFixed(2)} MB/s; ${plan.dedicated.length} dedicated, ${plan.overBound.length} over the bound at ${SHARDS} shards`);
  const dedicatedShards = new Set(plan.dedicated.map((t) => plan.assignment.get(t)));
  const sharedLoads = [...shardLoads(plan.assignment, weights, shardNames(SHARDS))].filter(([shard]) => !dedicatedShards.has(shard)).map(([, load]) => load);
  const sharedMax = Math.max(...sharedLoads) / (total / SHARDS);
  const timings = timeStrategies(targets, weights);
  const steps = scaleSteps(targets, weights);

  const ms = (n: number): string => n.toFixed(1);
  const x = (n: number): string => `${n.toFixed(2)}×`;
  const pct = (n: number): string => `${(n * 100).toFixed(2)} %`;
  const bch = boundedConsistentHashing.name;
  const mod = moduloHashing.name;
  const byName = new Map(timings.map((t) => [t.name, t]));
  const b = byName.get(bch)!;
  const m = byName.get(mod)!;
  const ratio = (a: number, c: number): string => (c > 0 ? `${(a / c).toFixed(1)}×` : '—');

  const lines = [
    '### Sharding alone (operator/src/sharding/, no I/O)',
    '',
    `One seeded fleet of ${TARGETS.toLocaleString('en-US')} targets: byte rates log-normal (median ${MEDIAN_RATE / 1000} kB/s, σ ${SIGMA}), ${unmeasured.toLocaleString('en-US')} of them unmeasured (null: new targets, weighed at the ${DEFAULT_SHARDING_OPTIONS.minWeightBytesPerSecond} B/s floor); ` +
      `${(total / 1e6).toFixed(0)} MB/s in all, the heaviest ${(heaviest / 1e6).toFixed(1)} MB/s. Default options (loadFactor ${DEFAULT_SHARDING_OPTIONS.loadFactor}, ${DEFAULT_SHARDING_OPTIONS.virtualNodes} virtual nodes). ` +
      `Time of one \`assign()\` over ${SHARDS} shards, ${WARMUP_RUNS} warm-up runs then best and median of ${RUNS}, in ms: *from scratch* with an empty previous assignment, *recompute* with the previous result as previous (nothing changed: the operator's steady state).`,
    '',
    `| strategy | from scratch best | from scratch median | recompute best | recompute median | max load / mean | min load / mean |`,
    '|---|---:|---:|---:|---:|---:|---:|',
    ...timings.map((t) => `| ${t.name} | ${ms(t.first.best)} | ${ms(t.first.median)} | ${ms(t.recompute.best)} | ${ms(t.recompute.median)} | ${x(t.maxOverMean)} | ${x(t.minOverMean)} |`),
    `| *bounded / modulo* | ${ratio(b.first.best, m.first.best)} | ${ratio(b.first.median, m.first.median)} | ${ratio(b.recompute.best, m.recompute.best)} | ${ratio(b.recompute.median, m.recompute.median)} | | |`,
    '',
    `At ${SHARDS} shards the bound C = ${DEFAULT_SHARDING_OPTIONS.loadFactor} × mean is ${(plan.capacity / 1e6).toFixed(1)} MB/s (bounded consistent hashing); ` +
      (plan.dedicated.length === 0
        ? `no target is heavier than C; `
        : `${plan.dedicated.length} target(s) heavier than C get a shard of their own (the maximum above is the heaviest one's rate), the other shards carry at most ${x(sharedMax)} the mean; `) +
      `${plan.overBound.length} shard(s) over the bound.`,
    '',
    `**Moves per scale step**: the share of the total weight that is on another shard after the step (\`movedWeight / total\`). Up N → N+1, the ideal is the new shard's fair share 1/(N+1); down N+1 → N (the highest ordinal goes, as in a StatefulSet), the ideal is the removed shard's share of the load in that strategy's own N+1 assignment. *new shard* is the load the N+1-th shard got from bounded consistent hashing, over the mean.`,
    '',
    '| step | bounded CH: ideal | moved | moved / ideal | modulo: ideal | moved | moved / ideal | new shard / mean (bounded CH) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...steps.flatMap((s) => {
      const row = (step: string, idealB: number, movedB: number, idealM: number, movedM: number, extra: string): string =>
        `| ${step} | ${pct(idealB)} | ${pct(movedB)} | ${x(movedB / idealB)} | ${pct(idealM)} | ${pct(movedM)} | ${x(movedM / idealM)} | ${extra} |`;
      return [
        row(`${s.n} → ${s.n + 1}`, s.up.ideal, s.up.moved.get(bch)!, s.up.ideal, s.up.moved.get(mod)!, x(s.newShardOverMean)),
        row(`${s.n + 1} → ${s.n}`, s.down.ideal.get(bch)!, s.down.moved.get(bch)!, s.down.ideal.get(mod)!, s.down.moved.get(mod)!, ''),
      ];
    }),
    '',
  ];
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// 2. End to end on a real API server.

interface E2eResult {
  targets: number;
  replicas: number;
  createSeconds: number;
  leaderSeconds: number;
  shardsSeconds: number;
  statusSeconds: number;
  scaleShardsSeconds: number;
  scaleStatusSeconds: number;
  moved: number;
  newShardTargets: number;
  stableAfterScale: boolean;
  perShard: { min: number; max: number };
  /** The operator's metrics once every status was written (before the scale step) and at the end. */
  beforeScale: OperatorSnapshot;
  end: OperatorSnapshot;
}

interface OperatorSnapshot {
  reconcile: Map<string, { count: number; sum: number }>;
  moves: number | null;
  cpuSeconds: number | null;
  rssMB: number | null;
}

/** What the bench reads from the operator's /metrics (Prometheus text format). */
function parseOperatorMetrics(text: string): OperatorSnapshot {
  const sample = (name: string, labels = ''): number | null => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
    return line === undefined ? null : Number(line.slice(line.lastIndexOf(' ') + 1));
  };
  const reconcile = new Map<string, { count: number; sum: number }>();
  for (const match of text.matchAll(/^pglog_operator_reconcile_duration_seconds_count\{controller="([^"]+)"\} (\S+)$/gm)) {
    const controller = match[1]!;
    reconcile.set(controller, { count: Number(match[2]), sum: sample('pglog_operator_reconcile_duration_seconds_sum', `{controller="${controller}"}`) ?? NaN });
  }
  let moves: number | null = null;
  for (const match of text.matchAll(/^pglog_operator_target_moves_total\{[^}]*\} (\S+)$/gm)) moves = (moves ?? 0) + Number(match[1]);
  const rss = sample('pglog_operator_process_resident_memory_bytes');
  return { reconcile, moves, cpuSeconds: sample('pglog_operator_process_cpu_seconds_total'), rssMB: rss === null ? null : rss / 1024 / 1024 };
}

async function e2e(): Promise<E2eResult> {
  const count = positiveInt('e2e-targets');
  const replicas = positiveInt('e2e-replicas');
  const timeoutMs = positiveInt('e2e-timeout') * 1000;
  // Loaded only here: --skip-e2e runs without the operator's modules.
  const { startControlPlane } = await import('@pglog/test-support/control-plane.ts');
  const { startOperator } = await import('../operator/test/helpers/operator-process.ts');
  const { assignmentOf, createAll, eventually, poolObject, targetObject } = await import('@pglog/test-support/fleet.ts');
  const { createKubeClient } = await import('@pglog/common/kube/client.ts');
  const { loadKubeconfigFile } = await import('@pglog/common/kube/config.ts');
  const { COLLECTOR_POOLS, LEASES, POSTGRES_TARGETS } = await import('@pglog/common/kube/resources.ts');

  const NS = 'bench';
  const POOL = 'bench';
  const cleanup = createCleanup(say);
  try {
    say('e2e: starting etcd and kube-apiserver');
    const cp = await startControlPlane();
    cleanup.push(() => cp.stop());
    const crdDir = join(import.meta.dirname, '../crds');
    for (const f of ['pglog.io_postgrestargets.yaml', 'pglog.io_collectorpools.yaml', 'pglog.io_collectorshards.yaml']) await cp.kubectl(['apply', '-f', join(crdDir, f)]);
    await cp.kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/postgrestargets.pglog.io', 'crd/collectorpools.pglog.io', 'crd/collectorshards.pglog.io']);
    await cp.kubectl(['create', 'namespace', NS]);
    const client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    cleanup.push(() => client.close());

    const operatorStarted = Date.now();
    const operator = await startOperator({ kubeconfig: cp.kubeconfig, namespace: NS, identity: 'bench-operator', leaseSeconds: 15, extraArgs: ['--log-level', 'info'] });
    let stopping = false;
    cleanup.push(async () => { stopping = true; await operator.stop(); });
    const describe = (): string => `--- operator\n${operator.output().slice(-6000)}`;
    // An operator that exits fails the run at once instead of at the next timeout.
    const died = new Promise<never>((_, reject) => operator.child.once('exit', (code, signal) => {
      if (!stopping) reject(new Error(`the operator exited (${code ?? signal}):\n${operator.output().slice(-3000)}`));
    }));
    died.catch(() => { /* reported through guard() */ });
    const guard = <T>(p: Promise<T>): Promise<T> => Promise.race([p, died]);
    await guard(eventually('the operator leads', 60_000, async () => {
      const lease = await client.get<KubeObject & { spec?: { holderIdentity?: string } }>(LEASES, NS, 'pglog-operator');
      return lease?.spec?.holderIdentity === 'bench-operator' ? true : undefined;
    }, describe));
    const leaderSeconds = (Date.now() - operatorStarted) / 1000;
    say(`e2e: operator leads after ${leaderSeconds.toFixed(1)} s`);

    say(`e2e: creating ${count} PostgresTargets`);
    const names = Array.from({ length: count }, (_, i) => `db${String(i).padStart(5, '0')}`);
    const created = performance.now();
    await guard(createAll(client, names.map((n) => targetObject(NS, n, POOL))));
    const createSeconds = (performance.now() - created) / 1000;
    say(`e2e: created in ${createSeconds.toFixed(1)} s (${(count / createSeconds).toFixed(0)}/s)`);

    type Assignment = Awaited<ReturnType<typeof assignmentOf>>;
    const converged = (shards: number, extra: (a: Assignment) => boolean = () => true) => async (): Promise<Assignment | undefined> => {
      const a = await assignmentOf(client, NS, POOL);
      return a.shards.length === shards && a.byTarget.size === count && a.duplicates.length === 0 && extra(a) ? a : undefined;
    };
    // Every target's status.shard equals `want` (or just is set, when want is undefined).
    // A full list of the targets is heavy for the API server: at most one a second.
    const statuses = (want?: ReadonlyMap<string, number>) => async (): Promise<true | undefined> => {
      await new Promise((r) => setTimeout(r, 800));
      const { items } = await client.list<KubeObject & { status?: { shard?: number } }>(POSTGRES_TARGETS, NS, { limit: 1000 });
      let ok = 0;
      for (const t of items) {
        const shard = t.status?.shard;
        if (typeof shard === 'number' && (want === undefined || want.get(t.metadata.name) === shard)) ok++;
      }
      return ok === count ? true : undefined;
    };

    const poolCreated = performance.now();
    await client.create(COLLECTOR_POOLS, poolObject(NS, POOL, replicas));
    const first = await guard(eventually(`${replicas} CollectorShards holding all ${count} targets`, timeoutMs, converged(replicas), describe));
    const shardsSeconds = (performance.now() - poolCreated) / 1000;
    say(`e2e: all targets in ${replicas} shards after ${shardsSeconds.toFixed(1)} s`);
    await guard(eventually('every status.shard written', timeoutMs, statuses(first.byTarget), describe));
    const statusSeconds = (performance.now() - poolCreated) / 1000;
    say(`e2e: every status.shard written after ${statusSeconds.toFixed(1)} s`);
    const sizes = first.shards.map((s) => s.spec.targets.length);
    const snapshot = async (): Promise<OperatorSnapshot> => parseOperatorMetrics(await (await fetch(operator.metricsUrl)).text());
    const beforeScale = await snapshot();

    // Scale up by one: a merge patch of spec.replicas, as `kubectl scale` does through /scale.
    const scaled = performance.now();
    await client.mergePatch(COLLECTOR_POOLS, NS, POOL, { spec: { replicas: replicas + 1 } });
    const after = await guard(eventually(`${replicas + 1} CollectorShards holding all targets`, timeoutMs,
      converged(replicas + 1, (a) => (a.shards[replicas]?.spec.targets.length ?? 0) > 0), describe));
    const scaleShardsSeconds = (performance.now() - scaled) / 1000;
    say(`e2e: re-converged on ${replicas + 1} shards after ${scaleShardsSeconds.toFixed(1)} s`);
    await guard(eventually('every status.shard updated', timeoutMs, statuses(after.byTarget), describe));
    const scaleStatusSeconds = (performance.now() - scaled) / 1000;
    let moved = 0;
    for (const [t, s] of first.byTarget) if (after.byTarget.get(t) !== s) moved++;
    // Settled, not caught in the middle of a rewrite: the same assignment a few seconds later.
    await new Promise((r) => setTimeout(r, 3000));
    const later = await assignmentOf(client, NS, POOL);
    const stableAfterScale = later.byTarget.size === count && [...after.byTarget].every(([t, s]) => later.byTarget.get(t) === s);

    return {
      targets: count, replicas, createSeconds, leaderSeconds, shardsSeconds, statusSeconds, scaleShardsSeconds, scaleStatusSeconds,
      moved, newShardTargets: after.shards[replicas]?.spec.targets.length ?? 0, stableAfterScale,
      perShard: { min: Math.min(...sizes), max: Math.max(...sizes) },
      beforeScale, end: await snapshot(),
    };
  } finally {
    await cleanup.run();
  }
}

function reconcileText(beforeScale: OperatorSnapshot, end: OperatorSnapshot): string {
  if (end.reconcile.size === 0) return 'no reconcile duration series';
  const mean = (count: number, sum: number): string => (count > 0 ? `mean ${((sum / count) * 1000).toFixed(1)} ms` : 'none');
  return [...end.reconcile].map(([controller, e]) => {
    const b = beforeScale.reconcile.get(controller) ?? { count: 0, sum: 0 };
    return `${controller}: ${e.count} reconciles, ${mean(e.count, e.sum)}; until every status was written ${b.count}, ${mean(b.count, b.sum)}; ` +
      `from there through the scale step to the end ${e.count - b.count}, ${mean(e.count - b.count, e.sum - b.sum)}`;
  }).join('; ');
}

function e2eSection(r: E2eResult): string {
  const s = (n: number): string => n.toFixed(1);
  const ideal = 1 / (r.replicas + 1);
  const fraction = r.moved / r.targets;
  const mean = r.targets / r.replicas;
  return [
    '### End to end: the operator on a real API server',
    '',
    `A real kube-apiserver and etcd on this machine (test-support/src/control-plane.ts, no controller manager: StatefulSets stay without pods), the CRDs, and the real \`pglog operator\` CLI (one replica, \`--resync 5\`, log level info). ` +
      `${r.targets.toLocaleString('en-US')} PostgresTargets created through the API (32 concurrent creates), then a CollectorPool with ${r.replicas} replicas. No collector runs, so no rates are reported: every target weighs the floor and load = number of targets. ` +
      `Times from the pool's creation (or the scale patch), polling the CollectorShards every 0.2 s, then the targets' statuses (a full list) every second.`,
    '',
    '| step | seconds |',
    '|---|---:|',
    `| operator start → leader (Lease) | ${s(r.leaderSeconds)} |`,
    `| create ${r.targets.toLocaleString('en-US')} PostgresTargets (${(r.targets / r.createSeconds).toFixed(0)}/s) | ${s(r.createSeconds)} |`,
    `| pool created → every target in exactly one of ${r.replicas} CollectorShards | ${s(r.shardsSeconds)} |`,
    `| pool created → every target's status.shard written | ${s(r.statusSeconds)} |`,
    `| replicas ${r.replicas} → ${r.replicas + 1} → re-converged CollectorShards | ${s(r.scaleShardsSeconds)} |`,
    `| replicas ${r.replicas} → ${r.replicas + 1} → every status.shard updated | ${s(r.scaleStatusSeconds)} |`,
    '',
    `At ${r.replicas} shards each holds ${r.perShard.min} to ${r.perShard.max} targets (mean ${mean.toFixed(0)}: ${(r.perShard.min / mean).toFixed(2)}× to ${(r.perShard.max / mean).toFixed(2)}×). ` +
      `The scale step moved **${r.moved.toLocaleString('en-US')} targets, ${(fraction * 100).toFixed(2)} %** (ideal 1/${r.replicas + 1} = ${(ideal * 100).toFixed(2)} %, ratio ${(fraction / ideal).toFixed(2)}); the new shard holds ${r.newShardTargets}. ` +
      `${r.stableAfterScale ? 'The assignment was unchanged 3 s later.' : '**The assignment changed again within 3 s after the scale step.**'}`,
    '',
    `Reconcile time from the operator's own metrics (\`pglog_operator_reconcile_duration_seconds\` sum / count): ${reconcileText(r.beforeScale, r.end)}.` +
      `${r.end.moves === null ? '' : ` \`pglog_operator_target_moves_total\`: ${r.end.moves}.`}` +
      `${r.end.cpuSeconds === null ? '' : ` The operator used ${r.end.cpuSeconds.toFixed(1)} s of CPU in all`}${r.end.rssMB === null ? '' : `, ${r.end.rssMB.toFixed(0)} MiB RSS at the end`}.`,
    '',
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------

const started = Date.now();
const parts = [pureSection()];
let failed = false;
if (values['skip-e2e']) {
  parts.push('*End to end part skipped (--skip-e2e).*\n');
} else {
  try {
    parts.push(e2eSection(await e2e()));
  } catch (e) {
    failed = true;
    say(`e2e failed: ${(e as Error).stack ?? String(e)}`);
    parts.push(`*End to end part failed: ${((e as Error).message.split('\n')[0] ?? '').slice(0, 300)}*\n`);
  }
}
const text = [
  '## Operator: sharding and reconciling (bench/operator-bench.ts)',
  '',
  `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}, Linux ${release()}, Node ${process.version}. Measured ${new Date().toISOString().slice(0, 10)}, ${((Date.now() - started) / 1000).toFixed(0)} s in all.`,
  '',
  ...parts,
].join('\n');
process.stdout.write(`${text}\n`);
if (values.out !== undefined) writeFileSync(values.out, text);
// A failed wait may still be polling a stopped API server: end here.
if (failed) process.exit(1);
