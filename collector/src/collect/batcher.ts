/**
 * Gathers the events of every stream of the process into batches and commits them, each
 * batch with the read positions it reaches, in one store transaction.
 *
 * A batch is cut by rows, bytes or time, whichever comes first. While one batch commits, the
 * next one fills. With `lanes` above 1, that many batches commit at once (one per store
 * connection, docs/store.md "Parallel commits"): each stream belongs to one lane for the life
 * of the batcher, and a lane commits its batches one after another, so a stream's batches
 * still commit in the order it handed them over and never two at once. A batch the store cannot take (it is down, a transaction failed) is kept
 * and retried with capped, jittered backoff, never dropped: its offsets are not committed
 * until its events are. Memory is bounded by a budget for the whole process and one per
 * target: a stream whose events would go over it waits in `waitForRoom()` before reading on,
 * which is what makes a slow store pause the remote `tail` (the SSH window stays closed).
 */
import { PglogError } from '@pglog/common/errors.ts';
import { backoffDelay, settleWithin } from '@pglog/common/time/retry.ts';

import type { PglogEvent } from '../logformat/events.ts';
import { stringHeapBytes } from '../logformat/heap-bytes.ts';
import { type EncodedRows, newestLogMs } from '../store/encoded-rows.ts';
import { type BatchItem, type CommitResult, type SourceRef, type StoreBatch, type StorePosition, streamKeyOf } from '../store/store-writer.ts';

export interface BatcherOptions {
  /** Commit once this many events are pending. */
  maxRows: number;
  /** Commit once the pending entries hold this many bytes of log. */
  maxBytes: number;
  /** Commit at most this long after the oldest pending event arrived. */
  maxDelayMs: number;
  /** Process-wide bound on bytes held for the store (pending plus committing). */
  budgetBytes: number;
  /** Bound on bytes held for one target. */
  targetBudgetBytes: number;
  /** Backoff between retries of a batch the store did not take. */
  retryBaseMs: number;
  retryCapMs: number;
  /** Batches committed at once (the store writer's connections); each stream keeps to one lane. */
  lanes: number;
}

export const DEFAULT_BATCHER_OPTIONS: BatcherOptions = {
  maxRows: 20_000,
  maxBytes: 16 * 1024 * 1024,
  maxDelayMs: 1_000,
  // What is held is encoded rows (ADR 0019), counted at about what they cost, and is most of
  // what a collector that cannot keep up takes (issue 15: at most 300 MB at 20 MB/s offered).
  // 20 MiB of them hold more rows than the 32 MiB of counted events did before (about 230
  // bytes an entry against 775); at 20 MB/s offered 20 MiB gave a peak RSS of 282 and 300 MB
  // against 313 and 334 with 32 MiB (docs/benchmarks.md, ingest side by side with the
  // collector before ADR 0019). The per-target budget keeps its half.
  budgetBytes: 20 * 1024 * 1024,
  targetBudgetBytes: 10 * 1024 * 1024,
  retryBaseMs: 500,
  retryCapMs: 15_000,
  lanes: 1,
};

/** What commits a batch: the StoreWriter (a fake in unit tests). */
export interface BatchCommitter {
  commit(batch: StoreBatch, epochs: ReadonlyMap<string, number>): Promise<CommitResult>;
  /**
   * Maps and encodes a handover's events into what the batch will send (the StoreWriter's
   * encode()): the batcher then holds the encoded rows, about a third of the events' memory,
   * and counts them by what they hold. Without it the events are held and committed as items.
   */
  encode?(source: SourceRef, events: readonly PglogEvent[], readAt: number, lane: number): EncodedRows;
  /** Encoded handovers whose batch committed: their memory may be reused. */
  recycle?(list: readonly EncodedRows[]): void;
}

export interface BatcherHooks {
  /**
   * A batch committed; `oldestReadAt` is when its oldest entry was read (commit latency);
   * `newest` holds, per stream, the log time (ms) of the newest entry committed, where known.
   */
  committed?(
    result: CommitResult,
    info: {
      rows: number;
      bytes: number;
      oldestReadAt: number;
      ms: number;
      newest: ReadonlyArray<{ target: string; instance: string; ms: number }>;
      positions: readonly StorePosition[];
    },
  ): void;
  /** A batch failed and will be retried after `delayMs`. */
  retrying?(error: unknown, attempt: number, delayMs: number): void;
  /** A newer owner holds this stream's position: the stream must stop. */
  fenced?(target: string, instance: string, epoch: number): void;
}

/**
 * Bytes of memory charged for an event while it waits for the store, when the committer does
 * not encode handovers (the StoreWriter does: then the encoded rows' own cost counts, ADR
 * 0019): what it costs in the heap, not on disk. Its texts count as V8 stores them (heap-bytes.ts): one byte per
 * character, or two as soon as one character is beyond Latin-1, so a megabyte of log with one
 * Cyrillic letter in it costs two; texts the parser derives (a statement's normalized form)
 * count too. The entry's log bytes are added on top: a field may be a slice of the whole
 * line's text and keep it alive (jsonlog), and arrays of pids and numbers are in proportion to
 * them. Measured against heapUsed + arrayBuffers after GC (42,238 events of the generated test
 * logs, each with a BatchItem): stderr 439 bytes an event counted 740, csvlog 482 counted
 * 1,031, jsonlog 1,025 counted 1,190: an upper bound, not a guess that can fall short.
 */
const EVENT_OVERHEAD_BYTES = 256;
export function eventCost(event: PglogEvent): number {
  return EVENT_OVERHEAD_BYTES + textBytes(event, 2) + (event.end - event.offset);
}

/** The heap bytes of the strings of a value, nested `depth` levels into arrays and objects. */
function textBytes(value: object, depth: number): number {
  let bytes = 0;
  const fields = value as Record<string, unknown>;
  for (const key in fields) {
    const v = fields[key];
    if (typeof v === 'string') bytes += stringHeapBytes(v);
    else if (depth > 0 && typeof v === 'object' && v !== null) bytes += textBytes(v, depth - 1);
  }
  return bytes;
}

/** One handover of a stream: its events (or their encoded rows) and the position right after them. */
interface Handover {
  key: string;
  source: SourceRef;
  events: readonly PglogEvent[];
  encoded: EncodedRows | null;
  /** Events handed over (encoded or not). */
  rows: number;
  position: StorePosition;
  cost: number;
  readAt: number;
  at: number;
  /** Its number in its lane (1, 2, ...): flush() waits for the numbers it saw. */
  seq: number;
}

/** A batch: whole handovers, so each stream's position is exactly the end of its events in it. */
interface Pending {
  items: BatchItem[];
  encoded: EncodedRows[];
  rows: number;
  /** Log time of the newest entry per stream, where known. */
  newest: Map<string, { target: string; instance: string; ms: number }>;
  positions: Map<string, StorePosition>;
  bytes: number;
  byTarget: Map<string, number>;
  oldestReadAt: number;
  /** The number of its last handover. */
  lastSeq: number;
}

/** The handovers of some streams, committed one batch at a time, in order. */
interface Lane {
  /** Its place among the lanes (the committer's memory for its rows, ADR 0019). */
  index: number;
  queue: Handover[];
  queuedRows: number;
  queuedBytes: number;
  streams: number;
  /** Number of the last handover added, and of the last one committed (or given up). */
  added: number;
  done: number;
  flushRequested: boolean;
  wake: (() => void) | null;
  wakeRetry: (() => void) | null;
}

export class Batcher {
  private readonly committer: BatchCommitter;
  private readonly options: BatcherOptions;
  private readonly hooks: BatcherHooks;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly lanes: Lane[];
  /** The lane of each stream seen: fixed, so that its batches commit one after another. */
  private readonly laneOf = new Map<string, Lane>();
  /** Bytes per target held by the pending batches and those being committed. */
  private readonly heldByTarget = new Map<string, number>();
  private held = 0;
  private readonly epochs = new Map<string, number>();
  private readonly fencedKeys = new Set<string>();
  private roomWaiters: Array<{ target: string; resolve: () => void }> = [];
  /** flush() calls waiting: each for every lane to have committed what it held then. */
  private flushWaiters: Array<{ upTo: number[]; resolve: () => void }> = [];
  private stopping = false;
  private giveUpAt = Infinity;
  private readonly workers: Promise<void>;

  constructor(
    committer: BatchCommitter,
    options: Partial<BatcherOptions> = {},
    hooks: BatcherHooks = {},
    clock: { now?: () => number; random?: () => number } = {},
  ) {
    this.committer = committer;
    this.options = { ...DEFAULT_BATCHER_OPTIONS, ...options };
    if (!Number.isSafeInteger(this.options.lanes) || this.options.lanes < 1) {
      throw new PglogError('CONFIG_INVALID', `batcher lanes must be a whole number >= 1, got ${this.options.lanes}`);
    }
    this.hooks = hooks;
    this.now = clock.now ?? Date.now;
    this.random = clock.random ?? Math.random;
    this.lanes = Array.from({ length: this.options.lanes }, (_, index) => ({
      index,
      queue: [],
      queuedRows: 0,
      queuedBytes: 0,
      streams: 0,
      added: 0,
      done: 0,
      flushRequested: false,
      wake: null,
      wakeRetry: null,
    }));
    this.workers = Promise.all(this.lanes.map((lane) => this.run(lane))).then(() => undefined);
  }

  /** Bytes held for the store, pending and committing. */
  get heldBytes(): number {
    return this.held;
  }
  heldBytesOf(target: string): number {
    return this.heldByTarget.get(target) ?? 0;
  }
  /** Events waiting for the next batches. */
  get pendingRows(): number {
    let rows = 0;
    for (const lane of this.lanes) rows += lane.queuedRows;
    return rows;
  }

  /**
   * Hands over the events a stream parsed and the position they reach (an entry boundary):
   * committed together. `epoch` is the stream's fencing token from its claim. `taken`: the
   * statements the committer's StatementRows took from the stream since it opened this
   * handover (encoded-rows.ts), which its encode() adds; only with a committer that encodes.
   */
  add(source: SourceRef, events: readonly PglogEvent[], position: StorePosition, epoch: number, readAt: number, taken = 0): void {
    const key = streamKeyOf(source.target, source.instance);
    if (this.fencedKeys.has(key)) {
      throw new PglogError('STORE_FENCED', `${source.target}/${source.instance}: a newer owner holds this stream's read position; not collecting it here`);
    }
    if (this.stopping && this.now() > this.giveUpAt) return;
    this.epochs.set(key, epoch);
    let cost = 0;
    let encoded: EncodedRows | null = null;
    const lane = this.laneFor(key);
    const rows = events.length + taken;
    // Statements taken as rows are only in what encode() makes: a committer without it has none.
    if (this.committer.encode !== undefined && rows > 0) {
      encoded = this.committer.encode(source, events, readAt, lane.index);
      cost = encoded.cost;
    } else if (taken > 0)
      throw new PglogError('STORE_ENCODING', `${source.target}/${source.instance}: statements were taken as rows by a committer that does not encode`);
    else for (const event of events) cost += eventCost(event);
    lane.queue.push({
      key,
      source,
      events: encoded === null ? events : [],
      encoded,
      rows,
      position,
      cost,
      readAt,
      at: this.now(),
      seq: ++lane.added,
    });
    lane.queuedRows += rows;
    lane.queuedBytes += cost;
    this.held += cost;
    this.heldByTarget.set(source.target, (this.heldByTarget.get(source.target) ?? 0) + cost);
    if (this.due(lane)) lane.wake?.();
  }

  /**
   * A stream claimed again with a newer epoch (cluster mode: the target came back to this
   * collector): its earlier fence no longer applies.
   */
  unfence(target: string, instance: string): void {
    this.fencedKeys.delete(streamKeyOf(target, instance));
  }

  /** True when a stream of `target` may read on without going over a budget. */
  hasRoom(target: string): boolean {
    return this.held < this.options.budgetBytes && this.heldBytesOf(target) < this.options.targetBudgetBytes;
  }

  /** Resolves once `target` has room (at once when it has); the stream's backpressure point. */
  waitForRoom(target: string, signal?: AbortSignal): Promise<void> {
    if (this.hasRoom(target) || signal?.aborted === true) return Promise.resolve();
    // Full pending batches: commit them now rather than waiting for the timer.
    this.requestFlush();
    return new Promise((resolve) => {
      const waiter = {
        target,
        resolve: (): void => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        this.roomWaiters = this.roomWaiters.filter((w) => w !== waiter);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.roomWaiters.push(waiter);
    });
  }

  /** Commits everything added so far; resolves when it is committed (or the batcher stopped). */
  flush(): Promise<void> {
    if (this.lanes.every((l) => l.done === l.added)) return Promise.resolve();
    // What is added later does not hold this flush back (other streams may never pause).
    const upTo = this.lanes.map((l) => l.added);
    const done = new Promise<void>((resolve) => this.flushWaiters.push({ upTo, resolve }));
    this.requestFlush();
    return done;
  }

  /**
   * Commits what is pending and stops. Retries of an unavailable store go on until
   * `deadline` (ms since epoch); what is still uncommitted then is left to the read positions:
   * the next start reads it again from the last committed offset, so nothing is lost.
   */
  async stop(deadline: number): Promise<void> {
    this.stopping = true;
    this.giveUpAt = deadline;
    for (const lane of this.lanes) {
      lane.flushRequested = true;
      lane.wake?.();
      lane.wakeRetry?.();
    }
    // A commit in flight at the deadline is abandoned: its transaction never commits, so its
    // events are read again at the next start.
    await settleWithin(this.workers, deadline - this.now());
    for (const w of this.roomWaiters) w.resolve();
    this.roomWaiters = [];
  }

  /**
   * The lane of a stream: the one with the fewest streams when it is first seen, then always
   * that one. Streams that go quiet keep their lane; a lane's order is all that matters.
   */
  private laneFor(key: string): Lane {
    const known = this.laneOf.get(key);
    if (known !== undefined) return known;
    let lane: Lane = this.lanes[0]!;
    for (const l of this.lanes) if (l.streams < lane.streams) lane = l;
    lane.streams++;
    this.laneOf.set(key, lane);
    return lane;
  }

  private requestFlush(): void {
    for (const lane of this.lanes) {
      if (lane.queue.length === 0) continue;
      lane.flushRequested = true;
      lane.wake?.();
    }
  }

  private due(lane: Lane): boolean {
    if (lane.queue.length === 0) return false;
    return (
      lane.flushRequested ||
      lane.queuedRows >= this.options.maxRows ||
      lane.queuedBytes >= this.options.maxBytes ||
      this.now() - lane.queue[0]!.at >= this.options.maxDelayMs
    );
  }

  /**
   * Takes the oldest handovers of a lane into a batch of at most maxRows events and maxBytes
   * (but at least one handover): a slow commit does not turn the next batch into a giant one.
   */
  private takeBatch(lane: Lane): Pending {
    const batch: Pending = {
      items: [],
      encoded: [],
      rows: 0,
      newest: new Map(),
      positions: new Map(),
      bytes: 0,
      byTarget: new Map(),
      oldestReadAt: lane.queue[0]!.readAt,
      lastSeq: 0,
    };
    let taken = 0;
    for (const h of lane.queue) {
      if (taken > 0 && (batch.rows + h.rows > this.options.maxRows || batch.bytes + h.cost > this.options.maxBytes)) break;
      taken++;
      for (const event of h.events) batch.items.push({ source: h.source, event, readAt: h.readAt });
      if (h.encoded !== null) batch.encoded.push(h.encoded);
      batch.rows += h.rows;
      const ms = h.encoded === null ? newestLogMs(h.events) : h.encoded.newestMs;
      if (ms !== null) batch.newest.set(h.key, { target: h.source.target, instance: h.source.instance, ms });
      batch.positions.set(h.key, h.position);
      batch.bytes += h.cost;
      batch.byTarget.set(h.source.target, (batch.byTarget.get(h.source.target) ?? 0) + h.cost);
      if (h.readAt < batch.oldestReadAt) batch.oldestReadAt = h.readAt;
      batch.lastSeq = h.seq;
    }
    // splice from the front: O(taken) moves are fine here, a copy of the whole queue per
    // batch (slice) would be quadratic when a slow store lets the queue grow long.
    lane.queue.splice(0, taken);
    lane.queuedRows -= batch.rows;
    lane.queuedBytes -= batch.bytes;
    return batch;
  }

  private sleep(lane: Lane, ms: number): Promise<void> {
    return this.sleepUntilWoken(lane, 'wake', ms);
  }

  /** A retry wait that new events do not cut short (only stop() does). */
  private sleepBeforeRetry(lane: Lane, ms: number): Promise<void> {
    return this.sleepUntilWoken(lane, 'wakeRetry', ms);
  }

  /** Waits `ms`, or until the function the wait puts in `lane[slot]` is called; the slot is empty again after either. */
  private sleepUntilWoken(lane: Lane, slot: 'wake' | 'wakeRetry', ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        lane[slot] = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      lane[slot] = (): void => {
        clearTimeout(timer);
        done();
      };
    });
  }

  /** Resolves the flush() calls whose handovers are all committed (or given up). */
  private settleFlushes(): void {
    if (this.flushWaiters.length === 0) return;
    const still: typeof this.flushWaiters = [];
    for (const w of this.flushWaiters) {
      if (this.lanes.every((l, i) => l.done >= (w.upTo[i] ?? 0))) w.resolve();
      else still.push(w);
    }
    this.flushWaiters = still;
  }

  private async run(lane: Lane): Promise<void> {
    for (;;) {
      if (lane.queue.length === 0) {
        lane.flushRequested = false;
        this.settleFlushes();
        if (this.stopping) return;
        await this.sleep(lane, this.options.maxDelayMs);
        continue;
      }
      if (!this.due(lane)) {
        await this.sleep(lane, Math.max(1, lane.queue[0]!.at + this.options.maxDelayMs - this.now()));
        continue;
      }
      const batch = this.takeBatch(lane);
      const done = await this.commitWithRetry(lane, batch);
      if (done) {
        lane.done = batch.lastSeq;
        this.committer.recycle?.(batch.encoded);
      }
      this.release(batch);
      this.settleFlushes();
      if (!done) {
        // Stopped while the store was away: nothing more can be committed.
        for (const h of lane.queue) this.held -= h.cost;
        lane.queue = [];
        lane.queuedRows = 0;
        lane.queuedBytes = 0;
        lane.done = lane.added;
        this.settleFlushes();
        return;
      }
    }
  }

  /** Commits one batch, retrying until it commits or the stop deadline passes. */
  private async commitWithRetry(lane: Lane, batch: Pending): Promise<boolean> {
    const storeBatch: StoreBatch = { items: batch.items, encoded: batch.encoded, positions: [...batch.positions.values()] };
    const epochs = new Map<string, number>();
    for (const key of batch.positions.keys()) epochs.set(key, this.epochs.get(key) ?? 0);
    for (let attempt = 1; ; attempt++) {
      const started = this.now();
      try {
        const result = await this.committer.commit(storeBatch, epochs);
        for (const f of result.fenced) {
          this.fencedKeys.add(streamKeyOf(f.target, f.instance));
          this.hooks.fenced?.(f.target, f.instance, f.epoch);
        }
        const positions =
          result.fenced.length === 0 ? storeBatch.positions : storeBatch.positions.filter((p) => !this.fencedKeys.has(streamKeyOf(p.target, p.instance)));
        this.hooks.committed?.(result, {
          rows: batch.rows,
          bytes: batch.bytes,
          oldestReadAt: batch.oldestReadAt,
          ms: this.now() - started,
          newest: [...batch.newest.values()],
          positions,
        });
        return true;
      } catch (e) {
        const delay = backoffDelay(attempt, this.options.retryBaseMs, this.options.retryCapMs, this.random);
        if (this.stopping && this.now() + delay > this.giveUpAt) {
          this.hooks.retrying?.(e, attempt, -1);
          return false;
        }
        // Any failure is retried, not only STORE_UNAVAILABLE: dropping the batch would lose
        // data, and the hook reports the error as what it is.
        this.hooks.retrying?.(e, attempt, delay);
        await this.sleepBeforeRetry(lane, delay);
      }
    }
  }

  private release(batch: Pending): void {
    this.held -= batch.bytes;
    for (const [target, bytes] of batch.byTarget) {
      const left = (this.heldByTarget.get(target) ?? 0) - bytes;
      if (left <= 0) this.heldByTarget.delete(target);
      else this.heldByTarget.set(target, left);
    }
    if (this.roomWaiters.length === 0) return;
    const still: typeof this.roomWaiters = [];
    for (const w of this.roomWaiters) {
      if (this.hasRoom(w.target)) w.resolve();
      else still.push(w);
    }
    this.roomWaiters = still;
  }
}
