/**
 * `make bench` (operator part): how the operator's sharding behaves and what it costs.
 *
 *   node bench/operator-bench.ts [--targets 10000] [--shards 100] [--runs 7]
 *                                [--e2e-sizes 250,500,1000,2000,10000] [--e2e-replicas 20]
 *                                [--baseline-pglog PATH] [--skip-e2e] [--out FILE.md]
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
 * 2. One pool pass alone, for each of the sizes below (bench/operator/pass-cost.ts): the real
 *    PoolReconciler over in-memory caches and a client that answers at once: the first pass,
 *    idle passes, and passes after collector reports that only move numbers, with their writes.
 * 3. End to end (unless --skip-e2e): for each of --e2e-sizes (--e2e-targets N is one size) a
 *    fresh kube-apiserver and etcd (test-support/src/control-plane.ts; binaries in
 *    PGLOG_KUBE_BIN or ~/.cache/pglog/kube/v1.37.2/bin), the CRDs, the real `pglog operator`
 *    CLI; that many PostgresTargets created through the API (timed on their own), then a
 *    CollectorPool of --e2e-replicas: the time until every target is in exactly one of its
 *    CollectorShards and until every target's status.shard is written (against the 10 s goal
 *    of issue 46 at 10,000), the status writes, the CPU of API server, etcd and operator
 *    meanwhile, the pool's reconcile passes then and once idle. The largest size is then
 *    scaled by one replica (a merge patch of spec.replicas, what `kubectl scale` does): the
 *    time to re-converge and the fraction of targets moved against 1/(N+1) (no collector
 *    reports rates here, so every target weighs the floor). --baseline-pglog PATH runs
 *    another checkout's launcher (e.g. a `git worktree` of HEAD) on every size too,
 *    interleaved, and prints the ratios.
 */
import { cpus, release } from 'node:os';
import { parseArgs } from 'node:util';

import {
  boundedConsistentHashing,
  DEFAULT_SHARDING_OPTIONS,
  moduloHashing,
  movedWeight,
  planBoundedAssignment,
  type ShardingStrategy,
  type ShardingTarget,
  shardLoads,
  targetWeights,
} from '@pglog/operator/sharding/index.ts';

import { emitReport } from './lib/emit-report.ts';
import { e2e } from './operator/e2e.ts';
import { e2eSection } from './operator/e2e-report.ts';
import { type PassCost, passCost, passCostSection } from './operator/pass-cost.ts';

const { values } = parseArgs({
  options: {
    targets: { type: 'string', default: '10000' },
    shards: { type: 'string', default: '100' },
    runs: { type: 'string', default: '7' },
    'e2e-targets': { type: 'string' },
    'e2e-sizes': { type: 'string', default: '250,500,1000,2000,10000' },
    'baseline-pglog': { type: 'string' },
    'pool-at-once': { type: 'boolean', default: false },
    'report-rounds': { type: 'string', default: '3' },
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

const say = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

function positiveInt(name: 'targets' | 'shards' | 'runs' | 'e2e-targets' | 'e2e-replicas' | 'e2e-timeout'): number {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`--${name} must be a whole number >= 1, got ${values[name]}`);
  return n;
}

/** --e2e-targets N alone, else the --e2e-sizes list, ascending. */
function e2eSizes(): number[] {
  if (values['e2e-targets'] !== undefined) return [positiveInt('e2e-targets')];
  const sizes = values['e2e-sizes'].split(',').map((t) => Number(t.trim()));
  if (sizes.length === 0 || sizes.some((n) => !Number.isInteger(n) || n < 1))
    throw new RangeError(`--e2e-sizes must list whole numbers >= 1, got ${values['e2e-sizes']}`);
  return [...new Set(sizes)].sort((a, b) => a - b);
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

interface Timing {
  best: number;
  median: number;
}
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
    const first = timed(() => {
      last = strategy.assign({ shards, targets, previous: empty });
    });
    const settled = last;
    const recompute = timed(() => {
      last = strategy.assign({ shards, targets, previous: settled });
    });
    if (movedWeight(settled, last, weights) !== 0 && strategy === boundedConsistentHashing) throw new Error('a no-op recompute moved targets');
    const loads = [...shardLoads(last, weights, shards).values()];
    say(
      `${strategy.name}: from scratch best ${first.best.toFixed(1)} ms, median ${first.median.toFixed(1)}; recompute best ${recompute.best.toFixed(1)}, median ${recompute.median.toFixed(1)}`,
    );
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
  say(
    `fleet: ${TARGETS} targets, ${unmeasured} unmeasured, total ${(total / 1e6).toFixed(1)} MB/s, heaviest ${(heaviest / 1e6).toFixed(2)} MB/s; ${plan.dedicated.length} dedicated, ${plan.overBound.length} over the bound at ${SHARDS} shards`,
  );
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
    ...timings.map(
      (t) =>
        `| ${t.name} | ${ms(t.first.best)} | ${ms(t.first.median)} | ${ms(t.recompute.best)} | ${ms(t.recompute.median)} | ${x(t.maxOverMean)} | ${x(t.minOverMean)} |`,
    ),
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

const started = Date.now();
const parts = [pureSection()];
const passCosts: PassCost[] = [];
for (const size of e2eSizes()) passCosts.push(await passCost(size, positiveInt('e2e-replicas')));
parts.push(passCostSection(passCosts, positiveInt('e2e-replicas')));
let failed = false;
if (values['skip-e2e']) {
  parts.push('*End to end part skipped (--skip-e2e).*\n');
} else {
  try {
    parts.push(
      e2eSection(
        await e2e({
          sizes: e2eSizes(),
          replicas: positiveInt('e2e-replicas'),
          timeoutMs: positiveInt('e2e-timeout') * 1000,
          poolAtOnce: values['pool-at-once'],
          reportRounds: Number(values['report-rounds']),
          operators: [
            ...(values['baseline-pglog'] === undefined ? [] : [{ label: 'baseline', pglog: values['baseline-pglog'] }]),
            { label: 'this checkout', pglog: undefined },
          ],
          say,
        }),
        positiveInt('e2e-replicas'),
      ),
    );
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
emitReport(text, values.out);
// A failed wait may still be polling a stopped API server: end here.
if (failed) process.exit(1);
