/**
 * The collector's store over its life: opened with retries until it answers (a store that is
 * down at start-up delays collecting, it does not fail it; a store of an unsupported PostgreSQL
 * version is refused once, not retried), then maintained once an hour (partitions ahead,
 * retention) until the collector stops.
 */
import { isPglogError } from '@pglog/common/errors.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';
import { pause } from '@pglog/common/time/clock.ts';
import { backoffDelay } from '@pglog/common/time/retry.ts';

import type { CollectorMetrics } from '../observability/metrics.ts';
import { StoreWriter } from '../store/store-writer.ts';
import type { CollectConfig } from './collect-types.ts';

/** Maintenance (partitions ahead, retention, the rollup's compaction) once an hour; partitions also at start (open). */
const MAINTENANCE_INTERVAL_MS = 60 * 60 * 1000;
/**
 * The first round, which compacts the rollup, comes this long after start: not at start, where
 * it held a restarted collector's first reads back (fleet scale), and not an hour later, which a
 * collector restarted more often than hourly would never reach.
 */
const FIRST_MAINTENANCE_MS = 5 * 60 * 1000;

/** The store writer, once the store answers; null when `signal` aborts first. */
export async function openStoreWhenUp(config: CollectConfig, log: Logger, metrics: CollectorMetrics, signal: AbortSignal): Promise<StoreWriter | null> {
  for (let attempt = 1; !signal.aborted; attempt++) {
    try {
      return await StoreWriter.open({
        url: config.storeUrl,
        applicationName: 'pglog collect',
        retentionDays: config.retentionDays,
        connections: config.storeConnections,
        log: (level: 'info' | 'warn' | 'error', msg: string, fields?: object) => {
          log[level](fields ?? {}, msg);
        },
      });
    } catch (e) {
      const code = isPglogError(e) ? e.code : undefined;
      metrics.storeError(code ?? 'UNKNOWN');
      if (code === 'STORE_VERSION_UNSUPPORTED') {
        // Another try cannot fix the store's version: said once, then nothing is collected until stopped.
        log.error({ err: e, code }, `store refused, not retried: ${(e as Error).message}`);
        while (!signal.aborted) await pause(60 * 60 * 1000, signal);
        return null;
      }
      const delay = backoffDelay(attempt, 500, 15_000);
      log.warn({ err: e, code, retryInMs: delay }, `store not available: ${(e as Error).message}`);
      await pause(delay, signal);
    }
  }
  return null;
}

/** Maintains the store 5 minutes after start, then once an hour until `signal` aborts; a failed round is logged and the next one tried. */
export async function maintainStore(writer: StoreWriter, log: Logger, signal: AbortSignal): Promise<void> {
  for (let round = 0; !signal.aborted; round++) {
    await pause(round === 0 ? FIRST_MAINTENANCE_MS : MAINTENANCE_INTERVAL_MS, signal);
    if (signal.aborted) return;
    try {
      const { created, dropped, compacted, compaction } = await writer.maintain();
      if (created.length + dropped.length > 0) log.info({ created, dropped }, 'store partitions maintained');
      log.debug({ compacted, compaction }, compaction === 'done' ? 'statement rollup compacted' : 'statement rollup compaction left to another collector');
    } catch (e) {
      log.warn({ err: e }, `store partition maintenance failed: ${(e as Error).message}`);
    }
  }
}
