/**
 * The generic controller loop, as controller-runtime's internal controller: workers take keys
 * from the de-duplicating work queue and run a reconcile function on each. The outcome decides
 * what happens to the key: a `Result` forgets its backoff (and looks again after
 * `requeueAfterMs` if asked); a `TerminalError` (an invalid spec: retrying cannot help) is
 * counted and logged but not retried, the object is reconciled again when it changes; a
 * conflict is retried at once (the caches bring the new version); any other error is retried
 * with the key's exponential backoff. Knows nothing of pools: the key, the reconcile and the
 * metric hooks are given.
 */
import { type ErrorCode, isPglogError, PglogError } from '../errors.ts';
import type { Logger } from '../observability/logger.ts';
import { isKubeError } from './errors.ts';
import type { WorkQueue } from './workqueue.ts';

/** What a reconcile returns when it did its work: nothing, or when to look again. */
export interface Result {
  requeueAfterMs?: number;
}

/**
 * A failure that retrying cannot cure (the object's spec is invalid). The reconciler has said so
 * in the object's status (a condition whose reason is `code`) before throwing it.
 */
export class TerminalError extends PglogError {
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'TerminalError';
  }
}

export function isTerminalError(e: unknown): e is TerminalError {
  return e instanceof TerminalError;
}

/** How one reconcile ended, as the metrics count it. */
export type LoopOutcome = 'success' | 'requeue' | 'error';

export interface ControllerLoopOptions<K extends string> {
  queue: WorkQueue<K>;
  workers: number;
  reconcile: (key: K) => Promise<Result>;
  /** The metric label of a key (which controller reconciles it). */
  controllerOf: (key: K) => string;
  /** Outcome hooks: every reconcile, with its duration in seconds and an error's code. */
  reconciled: (controller: string, outcome: LoopOutcome, seconds: number, code?: ErrorCode | 'UNKNOWN') => void;
  /** The queue's depth each time a worker takes a key. */
  queueDepth?: (depth: number) => void;
  log: Pick<Logger, 'debug' | 'warn'>;
  /** Milliseconds for durations; `performance.now` by default (tests pass a fake clock's). */
  now?: () => number;
}

/** Runs `workers` workers until the queue is shut down or `signal` aborts. */
export async function runControllerLoop<K extends string>(o: ControllerLoopOptions<K>, signal: AbortSignal): Promise<void> {
  const now = o.now ?? (() => performance.now());
  const processOne = async (key: K): Promise<void> => {
    const controller = o.controllerOf(key);
    const started = now();
    try {
      const result = await o.reconcile(key);
      o.queue.forget(key);
      if (result.requeueAfterMs !== undefined) o.queue.addAfter(key, result.requeueAfterMs);
      o.reconciled(controller, result.requeueAfterMs === undefined ? 'success' : 'requeue', (now() - started) / 1000);
    } catch (e) {
      const code = isPglogError(e) ? e.code : 'UNKNOWN';
      o.reconciled(controller, 'error', (now() - started) / 1000, code);
      if (isTerminalError(e)) {
        // The status says why; a retry would fail the same way until someone changes the object.
        o.queue.forget(key);
        o.log.warn({ key, err: e, code }, `reconcile of ${key} failed (${code}); not retried until the object changes`);
        return;
      }
      if (isKubeError(e, 'KUBE_CONFLICT')) {
        // Someone else wrote first: read again (the informer brings the new version) and retry soon.
        o.log.debug({ key }, 'conflict; reconciling again');
      } else {
        o.log.warn({ key, err: e, code }, `reconcile of ${key} failed (${code}); retrying with backoff`);
      }
      o.queue.addRateLimited(key);
    }
  };
  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await o.queue.get(signal);
      if (key === null) return;
      o.queueDepth?.(o.queue.length);
      try {
        await processOne(key);
      } finally {
        o.queue.done(key);
      }
    }
  };
  await Promise.all(Array.from({ length: o.workers }, worker));
}
