/**
 * The operator benchmark's end-to-end part (bench/operator-bench.ts, part 2): for each fleet
 * size a fresh kube-apiserver and etcd, the CRDs and the real `pglog operator` CLI (this
 * checkout's, or another one's for a baseline side by side); PostgresTargets created through
 * the API, then a CollectorPool converging on its shards and writing every target's status; the
 * largest size is then scaled by one replica. What each step cost is read from /proc (API
 * server, etcd, operator, the bench) and from the operator's own metrics.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { KubeObject } from '@pglog/common/kube/client-types.ts';

import { createCleanup } from '../lib/cleanup.ts';
import { writeReports } from './collector-reports.ts';
import { type E2eRun, type OperatorSnapshot, parseOperatorMetrics, type ReportRound, type ScaleResult, type SizeResult } from './e2e-report.ts';
import { type Assignment, FleetWatch, until } from './fleet-watch.ts';
import { controlPlanePids, cpuBetween, readCpu } from './proc-cpu.ts';

export interface E2eOptions {
  /** PostgresTargets per run, one fresh control plane each; the last size also gets the scale step. */
  sizes: readonly number[];
  /** The pool's replicas before the scale step. */
  replicas: number;
  /** How long each wait may take. */
  timeoutMs: number;
  /** Create the pool right after the last target, not once their NoPool statuses are written. */
  poolAtOnce: boolean;
  /** Rounds of collector reports written to every shard at the end of each size (collector-reports.ts). */
  reportRounds: number;
  /** The operators to run, each on every size: a label and a `pglog` launcher (undefined: this checkout's). */
  operators: ReadonlyArray<{ label: string; pglog: string | undefined }>;
  say: (line: string) => void;
}

/** Every size for every operator, interleaved per size so that both see the same machine. */
export async function e2e(o: E2eOptions): Promise<E2eRun[]> {
  const runs: E2eRun[] = o.operators.map((op) => ({ label: op.label, sizes: [], leaderSeconds: 0 }));
  for (const [i, size] of o.sizes.entries()) {
    const last = i === o.sizes.length - 1;
    for (const [j, op] of o.operators.entries()) {
      o.say(`e2e: ${op.label}, ${size} targets`);
      const r = await runSize({ ...o, size, pglog: op.pglog, scale: last, label: op.label });
      runs[j]!.sizes.push(r.size);
      runs[j]!.leaderSeconds = r.leaderSeconds;
      if (r.scale !== undefined) runs[j]!.scale = r.scale;
      if (r.end !== undefined) runs[j]!.end = r.end;
    }
  }
  return runs;
}

interface SizeRun {
  size: number;
  pglog: string | undefined;
  label: string;
  scale: boolean;
  poolAtOnce: boolean;
  reportRounds: number;
  replicas: number;
  timeoutMs: number;
  say: (line: string) => void;
}

const NS = 'bench';
const POOL = 'bench';
/** After the last create, the unassigned targets' `NoPool` statuses are written; the pool waits until they are quiet this long. */
const QUIET_MS = 2000;
/** How long no-op passes are watched once every status is written. */
const STEADY_MS = 12_000;

async function runSize(o: SizeRun): Promise<{ size: SizeResult; leaderSeconds: number; scale?: ScaleResult; end?: OperatorSnapshot }> {
  const { size: count, replicas, timeoutMs, say } = o;
  // Loaded only here: --skip-e2e runs without the operator's modules.
  const { startControlPlane } = await import('@pglog/test-support/control-plane.ts');
  const { startOperator } = await import('../../operator/test/helpers/operator-process.ts');
  const { installCrds } = await import('../../operator/test/helpers/crds.ts');
  const { createAll, poolObject, targetObject } = await import('@pglog/test-support/fleet.ts');
  const { createKubeClient } = await import('@pglog/common/kube/client.ts');
  const { loadKubeconfigFile } = await import('@pglog/common/kube/config.ts');
  const { COLLECTOR_POOLS, LEASES } = await import('@pglog/common/kube/resources.ts');

  const cleanup = createCleanup(say);
  try {
    const cp = await startControlPlane();
    cleanup.push(() => cp.stop());
    await installCrds(cp);
    await cp.kubectl(['create', 'namespace', NS]);
    const client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    cleanup.push(() => client.close());
    const watch = new FleetWatch(client, NS);
    cleanup.push(() => watch.close());
    await watch.synced();

    const operatorStarted = performance.now();
    const operator = await startOperator({
      kubeconfig: cp.kubeconfig,
      namespace: NS,
      identity: 'bench-operator',
      leaseSeconds: 15,
      extraArgs: ['--log-level', 'info'],
      ...(o.pglog === undefined ? {} : { pglog: o.pglog }),
    });
    let stopping = false;
    cleanup.push(async () => {
      stopping = true;
      await operator.stop();
    });
    const describe = (): string => `--- operator\n${operator.output().slice(-6000)}`;
    // An operator that exits fails the run at once instead of at the next timeout.
    const died = new Promise<never>((_, reject) =>
      operator.child.once('exit', (code, signal) => {
        if (!stopping) reject(new Error(`the operator exited (${code ?? signal}):\n${operator.output().slice(-3000)}`));
      }),
    );
    died.catch(() => {
      /* reported through guard() */
    });
    const guard = <T>(p: Promise<T>): Promise<T> => Promise.race([p, died]);
    const pids = { ...controlPlanePids(cp.server), operator: operator.child.pid };
    const snapshot = async (): Promise<OperatorSnapshot> => parseOperatorMetrics(await (await fetch(operator.metricsUrl)).text());
    for (;;) {
      const lease = await client.get<KubeObject & { spec?: { holderIdentity?: string } }>(LEASES, NS, 'pglog-operator');
      if (lease?.spec?.holderIdentity === 'bench-operator') break;
      if (performance.now() - operatorStarted > 60_000) throw new Error(`the operator does not lead\n${describe()}`);
      await guard(new Promise((r) => setTimeout(r, 100)));
    }
    const leaderSeconds = (performance.now() - operatorStarted) / 1000;

    const names = Array.from({ length: count }, (_, i) => `db${String(i).padStart(5, '0')}`);
    const created = performance.now();
    await guard(
      createAll(
        client,
        names.map((n) => targetObject(NS, n, POOL)),
      ),
    );
    const createSeconds = (performance.now() - created) / 1000;
    say(`e2e: created ${count} in ${createSeconds.toFixed(1)} s (${(count / createSeconds).toFixed(0)}/s)`);
    // The unassigned targets' statuses (Ready False, NoPool) settle before the pool comes, unless
    // the pool is to come at once (as `kubectl apply -f` of a directory with both does).
    const createdAt = performance.now();
    if (!o.poolAtOnce) {
      await guard(
        until('the targets settle', timeoutMs, () =>
          watch.targetCount() === count && performance.now() - Math.max(createdAt, watch.lastStatusChangeAt) > QUIET_MS ? true : undefined,
        ),
      );
    }

    const cpu0 = readCpu(pids);
    const metrics0 = await snapshot();
    const writes0 = watch.statusChanges;
    watch.transitions.clear();
    const poolCreated = performance.now();
    await client.create(COLLECTOR_POOLS, poolObject(NS, POOL, replicas));
    const converged =
      (shards: number, extra: (a: Assignment) => boolean = () => true) =>
      (): Assignment | undefined => {
        const a = watch.assignment(POOL);
        return a.shards.length === shards && a.byTarget.size === count && a.duplicates === 0 && extra(a) ? a : undefined;
      };
    const first = await guard(until(`${replicas} CollectorShards holding all ${count} targets`, timeoutMs, converged(replicas), 50, describe));
    const shardsSeconds = (performance.now() - poolCreated) / 1000;
    await guard(until('every status.shard written', timeoutMs, () => (watch.statusesMatching(first.byTarget) === count ? true : undefined), 50, describe));
    const statusSeconds = (performance.now() - poolCreated) / 1000;
    const cpu = cpuBetween(cpu0, readCpu(pids));
    const statusWrites = watch.statusChanges - writes0;
    const transitions = new Map(watch.transitions);
    say(
      `e2e: ${o.label}, ${count} targets: shards after ${shardsSeconds.toFixed(1)} s, every status after ${statusSeconds.toFixed(1)} s (${statusWrites} writes: ${[...transitions].map(([k, n]) => `${k} ${n}`).join(', ')})`,
    );

    // The pass that wrote them ends (its time counts with the burst); then passes with nothing to do
    // (resync, the 10 s look at auto targets).
    await guard(until('writes quiet', timeoutMs, () => (performance.now() - watch.lastStatusChangeAt > QUIET_MS ? true : undefined)));
    const metrics1 = await snapshot();
    const steadyWrites0 = watch.statusChanges;
    await guard(new Promise((r) => setTimeout(r, STEADY_MS)));
    const metrics3 = await snapshot();
    const sizes = first.shards.map((s) => s.spec.targets.length);
    const steadyWrites = watch.statusChanges - steadyWrites0;

    let scale: ScaleResult | undefined;
    if (o.scale) {
      // Scale up by one: a merge patch of spec.replicas, as `kubectl scale` does through /scale.
      const scaled = performance.now();
      await client.mergePatch(COLLECTOR_POOLS, NS, POOL, { spec: { replicas: replicas + 1 } });
      const after = await guard(
        until(
          `${replicas + 1} CollectorShards holding all targets`,
          timeoutMs,
          converged(replicas + 1, (a) => (a.shards[replicas]?.spec.targets.length ?? 0) > 0),
          50,
          describe,
        ),
      );
      const scaleShardsSeconds = (performance.now() - scaled) / 1000;
      await guard(until('every status.shard updated', timeoutMs, () => (watch.statusesMatching(after.byTarget) === count ? true : undefined), 50, describe));
      const scaleStatusSeconds = (performance.now() - scaled) / 1000;
      let moved = 0;
      for (const [t, s] of first.byTarget) if (after.byTarget.get(t) !== s) moved++;
      // Settled, not caught in the middle of a rewrite: the same assignment a few seconds later.
      await new Promise((r) => setTimeout(r, 3000));
      const later = watch.assignment(POOL);
      const stableAfterScale = later.byTarget.size === count && [...after.byTarget].every(([t, s]) => later.byTarget.get(t) === s);
      scale = { replicas, scaleShardsSeconds, scaleStatusSeconds, moved, newShardTargets: after.shards[replicas]?.spec.targets.length ?? 0, stableAfterScale };
    }

    // Collectors' reports: the first makes every target Ready; the later ones change only numbers.
    const reports: ReportRound[] = [];
    for (let round = 1; round <= o.reportRounds; round++) {
      const writes0 = watch.statusChanges;
      watch.transitions.clear();
      const cpuBefore = readCpu(pids);
      const started = performance.now();
      const weight = await writeReports(client, watch.assignment(POOL).shards, round);
      const written = performance.now();
      // A pass has read the whole round once the pool's status shows its weight (the pool's
      // status is written after the targets'); then the target writes it caused have arrived.
      for (;;) {
        const p = await client.get<CollectorPool>(COLLECTOR_POOLS, NS, POOL);
        const shown = (p?.status?.shards ?? []).reduce((a, l) => a + l.bytesPerSecond, 0);
        if (shown === weight && performance.now() - Math.max(written, watch.lastStatusChangeAt) > QUIET_MS) break;
        if (performance.now() - written > timeoutMs) throw new Error(`report round ${round}: not read within ${timeoutMs} ms\n${describe()}`);
        await guard(new Promise((r) => setTimeout(r, 250)));
      }
      const last = Math.max(written, watch.lastStatusChangeAt);
      reports.push({
        round,
        writes: watch.statusChanges - writes0,
        seconds: (last - started) / 1000,
        apiserverCpu: cpuBetween(cpuBefore, readCpu(pids)).apiserver,
      });
      say(
        `e2e: ${o.label}, ${count} targets: report round ${round}: ${reports.at(-1)!.writes} target status writes (${[...watch.transitions].map(([k, n]) => `${k} ${n}`).join(', ')})`,
      );
    }

    const result: SizeResult = {
      targets: count,
      createSeconds,
      shardsSeconds,
      statusSeconds,
      statusWrites,
      transitions,
      cpu,
      burst: { before: metrics0, after: metrics1 },
      steady: { before: metrics1, after: metrics3 },
      steadyWrites,
      reports,
      perShard: { min: Math.min(...sizes), max: Math.max(...sizes) },
    };
    return { size: result, leaderSeconds, ...(scale === undefined ? {} : { scale }), end: await snapshot() };
  } finally {
    await cleanup.run();
  }
}
