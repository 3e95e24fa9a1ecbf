/**
 * The operator benchmark's end-to-end part (bench/operator-bench.ts, part 2): a real
 * kube-apiserver and etcd, the CRDs and the real `pglog operator` CLI; PostgresTargets created
 * through the API, a CollectorPool converging on its shards, then scaled by one replica.
 */

import type { KubeObject } from '@pglog/common/kube/client-types.ts';

import { createCleanup } from '../lib/cleanup.ts';

export interface E2eOptions {
  /** PostgresTargets to create. */
  count: number;
  /** The pool's replicas before the scale step. */
  replicas: number;
  /** How long each wait may take. */
  timeoutMs: number;
  say: (line: string) => void;
}

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

export async function e2e(o: E2eOptions): Promise<E2eResult> {
  const { count, replicas, timeoutMs, say } = o;
  // Loaded only here: --skip-e2e runs without the operator's modules.
  const { startControlPlane } = await import('@pglog/test-support/control-plane.ts');
  const { startOperator } = await import('../../operator/test/helpers/operator-process.ts');
  const { installCrds } = await import('../../operator/test/helpers/crds.ts');
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
    await installCrds(cp);
    await cp.kubectl(['create', 'namespace', NS]);
    const client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    cleanup.push(() => client.close());

    const operatorStarted = Date.now();
    const operator = await startOperator({
      kubeconfig: cp.kubeconfig,
      namespace: NS,
      identity: 'bench-operator',
      leaseSeconds: 15,
      extraArgs: ['--log-level', 'info'],
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
    await guard(
      eventually(
        'the operator leads',
        60_000,
        async () => {
          const lease = await client.get<KubeObject & { spec?: { holderIdentity?: string } }>(LEASES, NS, 'pglog-operator');
          return lease?.spec?.holderIdentity === 'bench-operator' ? true : undefined;
        },
        describe,
      ),
    );
    const leaderSeconds = (Date.now() - operatorStarted) / 1000;
    say(`e2e: operator leads after ${leaderSeconds.toFixed(1)} s`);

    say(`e2e: creating ${count} PostgresTargets`);
    const names = Array.from({ length: count }, (_, i) => `db${String(i).padStart(5, '0')}`);
    const created = performance.now();
    await guard(
      createAll(
        client,
        names.map((n) => targetObject(NS, n, POOL)),
      ),
    );
    const createSeconds = (performance.now() - created) / 1000;
    say(`e2e: created in ${createSeconds.toFixed(1)} s (${(count / createSeconds).toFixed(0)}/s)`);

    type Assignment = Awaited<ReturnType<typeof assignmentOf>>;
    const converged =
      (shards: number, extra: (a: Assignment) => boolean = () => true) =>
      async (): Promise<Assignment | undefined> => {
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
    const after = await guard(
      eventually(
        `${replicas + 1} CollectorShards holding all targets`,
        timeoutMs,
        converged(replicas + 1, (a) => (a.shards[replicas]?.spec.targets.length ?? 0) > 0),
        describe,
      ),
    );
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
      targets: count,
      replicas,
      createSeconds,
      leaderSeconds,
      shardsSeconds,
      statusSeconds,
      scaleShardsSeconds,
      scaleStatusSeconds,
      moved,
      newShardTargets: after.shards[replicas]?.spec.targets.length ?? 0,
      stableAfterScale,
      perShard: { min: Math.min(...sizes), max: Math.max(...sizes) },
      beforeScale,
      end: await snapshot(),
    };
  } finally {
    await cleanup.run();
  }
}

function reconcileText(beforeScale: OperatorSnapshot, end: OperatorSnapshot): string {
  if (end.reconcile.size === 0) return 'no reconcile duration series';
  const mean = (count: number, sum: number): string => (count > 0 ? `mean ${((sum / count) * 1000).toFixed(1)} ms` : 'none');
  return [...end.reconcile]
    .map(([controller, e]) => {
      const b = beforeScale.reconcile.get(controller) ?? { count: 0, sum: 0 };
      return (
        `${controller}: ${e.count} reconciles, ${mean(e.count, e.sum)}; until every status was written ${b.count}, ${mean(b.count, b.sum)}; ` +
        `from there through the scale step to the end ${e.count - b.count}, ${mean(e.count - b.count, e.sum - b.sum)}`
      );
    })
    .join('; ');
}

export function e2eSection(r: E2eResult): string {
  const s = (n: number): string => n.toFixed(1);
  const ideal = 1 / (r.replicas + 1);
  const fraction = r.moved / r.targets;
  const mean = r.targets / r.replicas;
  return [
    '### End to end: the operator on a real API server',
    '',
    `A real kube-apiserver and etcd on this machine (operator/test/helpers/control-plane.ts, no controller manager: StatefulSets stay without pods), the CRDs, and the real \`pglog operator\` CLI (one replica, \`--resync 5\`, log level info). ` +
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
