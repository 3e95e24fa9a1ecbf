/**
 * Cluster mode, the collector child (`pglog collect --shard NAME --launched TUNING`): watches
 * its CollectorShard, resolves the assigned targets and their Secrets, hands the assignment
 * to the Collector, and reports the shard status. When the shard's tuning is no longer the
 * one this process was started with, it drains (every stream stops, what they handed over is
 * committed, positions are in the store) and ends with EXIT_TUNING_CHANGED so the launcher
 * starts a process with the new tuning.
 */
import type { CollectorShard, ShardTarget, ShardTuning } from '@pglog/common/api/collector-shard.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';
import { pause } from '@pglog/common/time/clock.ts';
import { settleWithin } from '@pglog/common/time/retry.ts';

import type { Collector } from '../collect/collector.ts';
import { buildShardStatus } from './shard-status.ts';
import { ShardWatcher } from './shard-watcher.ts';
import { StatusReporter } from './status-reporter.ts';
import { TargetResolver } from './target-resolver.ts';
import { sameTuning } from './tuning.ts';

export interface ShardCollectorOptions {
  kube: KubeClient;
  namespace: string;
  shard: string;
  pod: string | null;
  /** The tuning this process runs with. */
  tuning: ShardTuning;
  collector: Collector;
  statusIntervalMs: number;
  resolveIntervalMs: number;
  /** Longest wait for the drain before a tuning restart (then stop's deadline takes over). */
  drainTimeoutMs: number;
  log: Logger;
}

/** How the run ended: stopped from outside, or the tuning changed (a restart is wanted). */
export type ShardRunEnd = 'stopped' | 'tuning-changed';

export class ShardCollector {
  private readonly o: ShardCollectorOptions;
  private readonly watcher: ShardWatcher;
  private readonly resolver: TargetResolver;
  private readonly reporter: StatusReporter;
  /** The spec being collected: its generation and targets. */
  private applied: { generation: number | undefined; targets: readonly ShardTarget[]; key: string } | null = null;
  private unresolved = new Map<string, string>();
  private resolving: Promise<void> | null = null;
  private resolveAgain = false;
  private readonly ended: Promise<ShardRunEnd>;
  private end!: (how: ShardRunEnd) => void;

  constructor(options: ShardCollectorOptions) {
    this.o = options;
    this.ended = new Promise((resolve) => {
      this.end = resolve;
    });
    this.resolver = new TargetResolver(options.kube, options.namespace);
    this.watcher = new ShardWatcher({
      kube: options.kube,
      namespace: options.namespace,
      name: options.shard,
      log: options.log,
      onShard: (s) => this.onShard(s),
    });
    this.reporter = new StatusReporter({
      kube: options.kube,
      namespace: options.namespace,
      name: options.shard,
      shard: () => this.watcher.shard,
      intervalMs: options.statusIntervalMs,
      log: options.log,
      build: (previous) => {
        if (this.applied === null) return null;
        return buildShardStatus({
          generation: this.applied.generation,
          pod: this.o.pod,
          tuning: this.o.tuning,
          assigned: this.applied.targets,
          running: this.o.collector.targetSnapshots(),
          unresolved: this.unresolved,
          shardProblem: this.watcher.health().reason,
          previousReady: previous?.conditions?.find((c) => c.type === 'Ready'),
          now: new Date(),
        });
      },
    });
  }

  /** Ready: the shard is read and current (the collector's own readiness is added by the caller). */
  readiness(): { ready: boolean; reasons: string[] } {
    const h = this.watcher.health();
    return { ready: h.ok, reasons: h.reason === null ? [] : [h.reason] };
  }

  /**
   * Runs until `stop` aborts ('stopped') or the tuning changes ('tuning-changed'; the
   * collector is drained by then). The caller stops the collector afterwards.
   */
  async run(stop: AbortSignal): Promise<ShardRunEnd> {
    const inner = new AbortController();
    const both = AbortSignal.any([stop, inner.signal]);
    stop.addEventListener('abort', () => this.end('stopped'), { once: true });
    const loops = [this.watcher.run(both), this.reporter.run(both), this.refreshLoop(both)];
    const how = await this.ended;
    if (how === 'tuning-changed') {
      await settleWithin(this.o.collector.drain(), this.o.drainTimeoutMs);
      this.o.log.info({ shard: this.o.shard }, 'drained for the new tuning: every stream stopped, what it handed over is committed');
    }
    inner.abort();
    await Promise.allSettled(loops);
    // The last word (bounded: stopping must not wait on the API server).
    this.reporter.requestWrite();
    await settleWithin(this.reporter.round(), 2000);
    return how;
  }

  private onShard(shard: CollectorShard | null): void {
    if (shard !== null && !sameTuning(shard.spec.tuning, this.o.tuning)) {
      this.o.log.info(
        { shard: this.o.shard, from: this.o.tuning, to: shard.spec.tuning },
        `CollectorShard ${this.o.shard}: tuning changed; stopping cleanly to start again with it`,
      );
      this.end('tuning-changed');
      return;
    }
    const targets = shard?.spec.targets ?? [];
    // Status writes (ours included) arrive here too: only a new spec is work.
    const key = JSON.stringify(targets);
    if (this.applied !== null && this.applied.key === key) {
      this.applied.generation = shard?.metadata.generation;
      return;
    }
    this.applied = { generation: shard?.metadata.generation, targets, key };
    this.scheduleResolve();
  }

  private scheduleResolve(): void {
    if (this.resolving !== null) {
      this.resolveAgain = true;
      return;
    }
    this.resolving = this.resolve().finally(() => {
      this.resolving = null;
      if (this.resolveAgain) {
        this.resolveAgain = false;
        this.scheduleResolve();
      }
    });
  }

  private async resolve(): Promise<void> {
    const applied = this.applied;
    if (applied === null) return;
    const resolved = await this.resolver.resolve(applied.targets);
    const unresolved = new Map<string, string>();
    for (const r of resolved) {
      if (r.ok) continue;
      unresolved.set(r.name, r.code);
      // Told once per new failure; the same one again at every refresh only at debug.
      const level = this.unresolved.get(r.name) === r.code ? 'debug' : 'warn';
      this.o.log[level]({ shard: this.o.shard, target: r.name, code: r.code }, `target ${r.name} not collected: ${r.message}`);
    }
    this.unresolved = unresolved;
    await this.o.collector.assign(resolved.flatMap((r) => (r.ok ? [r.assignment] : [])));
    this.reporter.requestWrite();
  }

  /** Targets and Secrets are read again now and then: edits and key rotation arrive without a spec change. */
  private async refreshLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await pause(this.o.resolveIntervalMs, signal);
      if (!signal.aborted && this.applied !== null) this.scheduleResolve();
    }
  }
}
