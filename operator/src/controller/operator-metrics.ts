/**
 * The operator's Prometheus metrics (docs/operator.md "Metrics"): reconcile outcomes and duration, shard load,
 * promotions and demotions, leadership and the work queue. Own Registry, prefix `pglog_`.
 */
import type { ErrorCode } from '@pglog/common/errors.ts';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export type ReconcileOutcome = 'success' | 'requeue' | 'error';

// Reconciling one pool: milliseconds from warm caches, seconds when 1,000 target statuses are
// written for the first time.
const RECONCILE_SECONDS_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The labels of the per-pool and the per-shard series. */
const POOL = ['namespace', 'pool'] as const;
const SHARD = [...POOL, 'shard'] as const;

export class OperatorMetrics {
  readonly registry = new Registry();
  private readonly reconciles: Counter<'controller' | 'outcome'>;
  private readonly reconcileErrors: Counter<'controller' | 'code'>;
  private readonly reconcileSeconds: Histogram<'controller'>;
  private readonly shardLoad: Gauge<'namespace' | 'pool' | 'shard'>;
  private readonly shardTargets: Gauge<'namespace' | 'pool' | 'shard'>;
  private readonly promotions: Counter<'namespace' | 'pool'>;
  private readonly demotions: Counter<'namespace' | 'pool'>;
  private readonly moves: Counter<'namespace' | 'pool'>;
  private readonly leaderGauge: Gauge;
  private readonly queueDepth: Gauge;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry, prefix: 'pglog_operator_' });
    const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> => new Counter({ name, help, labelNames, registers });
    const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[]): Gauge<L> => new Gauge({ name, help, labelNames, registers });
    this.reconciles = counter('pglog_operator_reconcile_total', 'Reconciles by controller and outcome (success, requeue, error).', ['controller', 'outcome']);
    this.reconcileErrors = counter('pglog_operator_reconcile_errors_total', 'Failed reconciles by error code.', ['controller', 'code']);
    this.reconcileSeconds = new Histogram({
      name: 'pglog_operator_reconcile_duration_seconds',
      help: 'Duration of one reconcile.',
      labelNames: ['controller'],
      buckets: RECONCILE_SECONDS_BUCKETS,
      registers,
    });
    this.shardLoad = gauge(
      'pglog_operator_shard_load_bytes_per_second',
      'Summed weight (smoothed byte rate, floored) of the targets assigned to a shard.',
      SHARD,
    );
    this.shardTargets = gauge('pglog_operator_shard_targets', 'Targets assigned to a shard.', SHARD);
    this.promotions = counter('pglog_operator_transport_promotions_total', 'Targets the operator moved to the sshproxy sidecar.', POOL);
    this.demotions = counter('pglog_operator_transport_demotions_total', 'Targets the operator moved back to the in-process client.', POOL);
    this.moves = counter('pglog_operator_target_moves_total', 'Targets assigned to another shard (rebalancing, scaling).', POOL);
    this.leaderGauge = new Gauge({ name: 'pglog_operator_leader', help: '1 while this replica holds the leader Lease.', registers });
    this.queueDepth = new Gauge({ name: 'pglog_operator_workqueue_depth', help: 'Keys waiting in the work queue.', registers });
  }

  reconciled(controller: string, outcome: ReconcileOutcome, seconds: number, code?: ErrorCode | 'UNKNOWN'): void {
    this.reconciles.inc({ controller, outcome });
    this.reconcileSeconds.observe({ controller }, seconds);
    if (code !== undefined) this.reconcileErrors.inc({ controller, code });
  }

  shards(namespace: string, pool: string, loads: ReadonlyArray<{ index: number; targets: number; bytesPerSecond: number }>, previousCount: number): void {
    for (const l of loads) {
      const labels = { namespace, pool, shard: String(l.index) };
      this.shardLoad.set(labels, l.bytesPerSecond);
      this.shardTargets.set(labels, l.targets);
    }
    // Shards removed by a scale-down leave no stale series behind.
    for (let i = loads.length; i < previousCount; i++) {
      this.shardLoad.remove({ namespace, pool, shard: String(i) });
      this.shardTargets.remove({ namespace, pool, shard: String(i) });
    }
  }

  transportChanges(namespace: string, pool: string, promoted: number, demoted: number, moved: number): void {
    if (promoted > 0) this.promotions.inc({ namespace, pool }, promoted);
    if (demoted > 0) this.demotions.inc({ namespace, pool }, demoted);
    if (moved > 0) this.moves.inc({ namespace, pool }, moved);
  }

  leader(isLeader: boolean): void {
    this.leaderGauge.set(isLeader ? 1 : 0);
  }

  queue(depth: number): void {
    this.queueDepth.set(depth);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  metricsText(): Promise<string> {
    return this.registry.metrics();
  }
}
