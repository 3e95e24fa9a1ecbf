/**
 * The operator benchmark's end-to-end results (bench/operator/e2e.ts) and their Markdown: per
 * fleet size the time until every target is in a shard and until every target's status is
 * written, the status writes it took, who spent the CPU meanwhile, the operator's reconcile
 * passes (from its own metrics), the scale step; with a baseline operator, the ratios.
 */
import type { CpuReading } from './proc-cpu.ts';

/** The 10,000-target status goal of issue 46, in seconds. */
export const STATUS_GOAL_SECONDS = 10;

export interface OperatorSnapshot {
  reconcile: Map<string, { count: number; sum: number }>;
  moves: number | null;
  cpuSeconds: number | null;
  rssMB: number | null;
  heapMB: number | null;
}

export interface SizeResult {
  targets: number;
  createSeconds: number;
  /** From the pool's creation. */
  shardsSeconds: number;
  statusSeconds: number;
  /** Target status changes seen from the pool's creation until every status was written. */
  statusWrites: number;
  /** Those writes by the Ready reason before and after (`NoPool → Assigned`). */
  transitions: ReadonlyMap<string, number>;
  /** CPU seconds from the pool's creation until every status was written. */
  cpu: CpuReading;
  /** Operator metrics at the pool's creation and when every status was written. */
  burst: { before: OperatorSnapshot; after: OperatorSnapshot };
  /** Operator metrics over the steady state that followed (passes with nothing to do). */
  steady: { before: OperatorSnapshot; after: OperatorSnapshot };
  steadyWrites: number;
  /** Rounds of collector reports (collector-reports.ts) and the target status writes each caused. */
  reports: ReportRound[];
  perShard: { min: number; max: number };
}

export interface ReportRound {
  round: number;
  writes: number;
  /** From the round's first shard write to the last target status write it caused (or the round's end). */
  seconds: number;
  apiserverCpu: number | null;
}

export interface ScaleResult {
  replicas: number;
  scaleShardsSeconds: number;
  scaleStatusSeconds: number;
  moved: number;
  newShardTargets: number;
  stableAfterScale: boolean;
}

/** One operator (this checkout's, or a baseline) over every size. */
export interface E2eRun {
  label: string;
  leaderSeconds: number;
  sizes: SizeResult[];
  scale?: ScaleResult;
  end?: OperatorSnapshot;
}

/** What the bench reads from the operator's /metrics (Prometheus text format). */
export function parseOperatorMetrics(text: string): OperatorSnapshot {
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
  const heap = sample('pglog_operator_nodejs_heap_size_used_bytes');
  return {
    reconcile,
    moves,
    cpuSeconds: sample('pglog_operator_process_cpu_seconds_total'),
    rssMB: rss === null ? null : rss / 1024 / 1024,
    heapMB: heap === null ? null : heap / 1024 / 1024,
  };
}

/** Pool passes between two snapshots: how many, and their mean in ms (null when none). */
export function passes(w: { before: OperatorSnapshot; after: OperatorSnapshot }, controller = 'pool'): { count: number; meanMs: number | null } {
  const b = w.before.reconcile.get(controller) ?? { count: 0, sum: 0 };
  const a = w.after.reconcile.get(controller) ?? { count: 0, sum: 0 };
  const count = a.count - b.count;
  return { count, meanMs: count > 0 ? ((a.sum - b.sum) / count) * 1000 : null };
}

const s1 = (n: number | null): string => (n === null ? '—' : n.toFixed(1));
const ms = (n: number | null): string => (n === null ? '—' : n < 10 ? n.toFixed(2) : n.toFixed(0));
const ratio = (a: number | null, b: number | null): string => (a === null || b === null || b === 0 ? '—' : `${(a / b).toFixed(2)}×`);

function sizeRow(r: SizeResult): string {
  const burst = passes(r.burst);
  const steady = passes(r.steady);
  const c = r.cpu;
  const perWrite = c.apiserver === null || r.statusWrites === 0 ? null : (c.apiserver / r.statusWrites) * 1000;
  return (
    `| ${r.targets.toLocaleString('en-US')} | ${s1(r.shardsSeconds)} | **${s1(r.statusSeconds)}** | ${r.statusWrites.toLocaleString('en-US')} | ` +
    `${(r.statusWrites / r.statusSeconds).toFixed(0)} | ${burst.count} × ${ms(burst.meanMs)} | ${steady.count} × ${ms(steady.meanMs)} | ${r.steadyWrites} | ` +
    `${s1(c.apiserver)} / ${s1(c.etcd)} / ${s1(c.operator)} / ${s1(c.bench)} / ${s1(c.others)} | ${ms(perWrite)} | ${reportCell(r)} |`
  );
}

/** Target status writes per report round, how long until the last of them, and the API server's CPU meanwhile. */
function reportCell(r: SizeResult): string {
  if (r.reports.length === 0) return '—';
  return r.reports.map((x) => `${x.writes.toLocaleString('en-US')} (${s1(x.seconds)} s, ${s1(x.apiserverCpu)} s CPU)`).join(' / ');
}

function runTable(run: E2eRun): string[] {
  return [
    `**${run.label}**`,
    '',
    '| targets | pool → all in shards (s) | pool → every status (s) | status writes | writes/s | pool passes meanwhile (n × ms) | no-op passes after (n × ms) | writes in those | CPU s meanwhile: API server / etcd / operator / bench / other processes | API server ms per write | collector report rounds: target status writes (s, API server CPU s) |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...run.sizes.map(sizeRow),
    '',
  ];
}

function comparison(base: E2eRun, current: E2eRun): string[] {
  const rows = current.sizes.map((c, i) => {
    const b = base.sizes[i]!;
    return (
      `| ${c.targets.toLocaleString('en-US')} | ${s1(b.statusSeconds)} → ${s1(c.statusSeconds)} | ${ratio(b.statusSeconds, c.statusSeconds)} | ` +
      `${b.statusWrites} → ${c.statusWrites} | ${s1(b.cpu.apiserver)} → ${s1(c.cpu.apiserver)} | ${ratio(b.cpu.apiserver, c.cpu.apiserver)} | ` +
      `${ms(passes(b.steady).meanMs)} → ${ms(passes(c.steady).meanMs)} | ${laterReports(b)} → ${laterReports(c)} |`
    );
  });
  return [
    `Side by side, ${base.label} → ${current.label} (ratio: ${base.label} / ${current.label}, above 1 is faster or cheaper now):`,
    '',
    '| targets | pool → every status (s) | ratio | status writes | API server CPU (s) | ratio | no-op pass (ms) | writes per later report round |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
    '',
  ];
}

/** Mean target status writes of the report rounds after the first (the first makes every target Ready). */
function laterReports(r: SizeResult): string {
  const later = r.reports.slice(1);
  return later.length === 0 ? '—' : (later.reduce((a, x) => a + x.writes, 0) / later.length).toFixed(0);
}

function goalLine(run: E2eRun): string {
  const big = run.sizes.find((r) => r.targets === 10_000);
  if (big === undefined) return `(${run.label}: no 10,000-target run: the goal of ${STATUS_GOAL_SECONDS} s is not measured)`;
  const met = big.statusSeconds < STATUS_GOAL_SECONDS;
  return `${run.label}: 10,000 target statuses in **${s1(big.statusSeconds)} s** against the goal of ${STATUS_GOAL_SECONDS} s: ${met ? 'met' : `**not met** (${(big.statusSeconds / STATUS_GOAL_SECONDS).toFixed(1)}× the goal)`}.`;
}

function scaleText(run: E2eRun): string[] {
  const r = run.scale;
  const big = run.sizes.at(-1);
  if (r === undefined || big === undefined) return [];
  const ideal = 1 / (r.replicas + 1);
  const fraction = r.moved / big.targets;
  const mean = big.targets / r.replicas;
  return [
    `${run.label}, ${big.targets.toLocaleString('en-US')} targets: at ${r.replicas} shards each holds ${big.perShard.min} to ${big.perShard.max} (mean ${mean.toFixed(0)}: ` +
      `${(big.perShard.min / mean).toFixed(2)}× to ${(big.perShard.max / mean).toFixed(2)}×). Replicas ${r.replicas} → ${r.replicas + 1}: CollectorShards re-converged after ` +
      `${s1(r.scaleShardsSeconds)} s, every status.shard updated after ${s1(r.scaleStatusSeconds)} s; **${r.moved.toLocaleString('en-US')} targets moved, ` +
      `${(fraction * 100).toFixed(2)} %** (ideal 1/${r.replicas + 1} = ${(ideal * 100).toFixed(2)} %, ratio ${(fraction / ideal).toFixed(2)}); the new shard holds ${r.newShardTargets}. ` +
      `${r.stableAfterScale ? 'The assignment was unchanged 3 s later.' : '**The assignment changed again within 3 s after the scale step.**'}` +
      `${run.end?.cpuSeconds == null ? '' : ` The operator used ${run.end.cpuSeconds.toFixed(1)} s of CPU in that run`}${run.end?.rssMB == null ? '' : `, ${run.end.rssMB.toFixed(0)} MiB RSS at the end`}${run.end?.heapMB == null ? '' : ` (${run.end.heapMB.toFixed(0)} MiB of JavaScript heap in use)`}.`,
    '',
  ];
}

export function e2eSection(runs: readonly E2eRun[], replicas: number): string {
  const current = runs.at(-1)!;
  const lines = [
    '### End to end: the operator on a real API server',
    '',
    `For each size a fresh kube-apiserver and etcd on this machine (test-support/src/control-plane.ts, no controller manager: StatefulSets stay without pods), the CRDs, and the real \`pglog operator\` CLI ` +
      `(one replica, \`--resync 5\`, log level info). The PostgresTargets are created through the API (32 at a time); once their \`NoPool\` statuses are written, a CollectorPool with ${replicas} replicas. ` +
      'No collector runs, so no rates are reported: every target weighs the floor. Times from the pool\u2019s creation, seen through watches (no polling lists: one list of 10,000 targets costs the API server about 2 s of CPU). ' +
      '*status writes*: target status changes seen meanwhile; *CPU*: /proc of each process over the same span; *passes*: the operator\u2019s `pglog_operator_reconcile_duration_seconds` for the pool.',
    '',
    ...runs.map(goalLine).flatMap((l) => [l, '']),
    ...runs.flatMap(runTable),
    ...(runs.length > 1 ? comparison(runs[0]!, current) : []),
    ...runs.flatMap(scaleText),
  ];
  return lines.join('\n');
}
