/**
 * Cluster mode, the launcher (`pglog collect --shard NAME` without `--launched`): reads the
 * shard's spec.tuning and runs the real collector as a child with it (launch-command.ts).
 * SIGTERM/SIGINT go to the child; the launcher exits with the child's status, so Kubernetes
 * restarts the container after a crash. A child that ends with EXIT_TUNING_CHANGED stopped
 * cleanly for a new tuning: the launcher reads the tuning again and starts another.
 *
 * Small on purpose: it stays resident next to the collector for the pod's life.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';

import type { CollectorShard, ShardTuning } from '@pglog/common/api/collector-shard.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_SHARDS } from '@pglog/common/kube/resources.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';
import { pause } from '@pglog/common/time/clock.ts';
import { backoffDelay } from '@pglog/common/time/retry.ts';

import { exitStatusOf, launchCommand, tuningNodeFlags } from './launch-command.ts';
import { EXIT_TUNING_CHANGED } from './tuning.ts';

export interface LauncherOptions {
  kube: KubeClient;
  namespace: string;
  shard: string;
  /** How this program runs: [node, ...node flags, main script]. */
  selfCommand: readonly string[];
  /** This process's `collect` arguments, passed on to the child. */
  collectArgs: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  log: Logger;
  /** Aborted when the launcher is asked to stop (the signal is forwarded to the child). */
  stop: AbortSignal;
  /** Which signal asked it to stop. */
  stopSignal(): NodeJS.Signals;
}

export async function runLauncher(o: LauncherOptions): Promise<number> {
  while (!o.stop.aborted) {
    // Whatever the shard says now: a child started with a tuning that is already stale sees so and ends again.
    const tuning = await readTuning(o);
    if (tuning === null) return 0; // asked to stop while waiting for the shard
    const launch = launchCommand(o.selfCommand, o.collectArgs, tuning, o.env);
    o.log.info({ shard: o.shard, tuning }, `starting the collector with UV_THREADPOOL_SIZE=${tuning.uvThreadpoolSize} ${tuningNodeFlags(tuning).join(' ')}`);
    const child = spawn(launch.command, launch.args, { stdio: ['ignore', 'inherit', 'inherit'], env: launch.env });
    const forward = (): void => {
      child.kill(o.stopSignal());
    };
    o.stop.addEventListener('abort', forward, { once: true });
    if (o.stop.aborted) forward(); // asked to stop while it was being started
    const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.once('error', (e) => {
        o.log.error({ err: e }, `the collector could not be started: ${e.message}`);
        resolve({ code: 1, signal: null });
      });
      child.once('exit', (c, s) => resolve({ code: c, signal: s }));
    });
    o.stop.removeEventListener('abort', forward);
    if (code === EXIT_TUNING_CHANGED && !o.stop.aborted) {
      o.log.info({ shard: o.shard, pid: child.pid }, 'the collector stopped for a new tuning; starting it again');
      continue;
    }
    // Stopped cleanly for a new tuning just as the pod is stopped: a clean exit.
    if (code === EXIT_TUNING_CHANGED) return 0;
    const status = exitStatusOf(code, signal, constants.signals);
    if (!o.stop.aborted) o.log.error({ shard: o.shard, code, signal, pid: child.pid }, `the collector ended (exit status ${status})`);
    return status;
  }
  return 0;
}

/** The shard's tuning, waiting (with backoff) while it cannot be read; null once stopped. */
async function readTuning(o: LauncherOptions): Promise<ShardTuning | null> {
  for (let attempt = 1; !o.stop.aborted; attempt++) {
    let why: string;
    try {
      const shard = await o.kube.get<CollectorShard>(COLLECTOR_SHARDS, o.namespace, o.shard);
      if (shard !== null && shard.spec?.tuning !== undefined) return shard.spec.tuning;
      why = shard === null ? 'KUBE_NOT_FOUND: it does not exist (yet)' : 'it has no spec.tuning';
    } catch (e) {
      why = `${isPglogError(e) ? e.code : 'UNKNOWN'}: ${(e as Error).message}`;
    }
    const delay = backoffDelay(attempt, 1000, 30_000);
    o.log.warn({ shard: o.shard, retryInMs: delay }, `CollectorShard ${o.namespace}/${o.shard}: cannot read its tuning (${why}); trying again in ${delay} ms`);
    await pause(delay, o.stop);
  }
  return null;
}
