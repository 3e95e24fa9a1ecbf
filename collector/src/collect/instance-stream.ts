/**
 * One PostgreSQL instance's log, from the server into the batcher:
 *
 *   LogFollower (remote bytes, file switches) ─> LogParser (entries → events) ─> Batcher
 *
 * The stream owns its read position: the end of the last entry it parsed (an entry boundary)
 * in the file it is reading. A log never collected before gets its first position from the
 * follower's start point (newest, oldest, now), stored under the stream's claim before the
 * first byte is read (docs/decisions/0011-durable-first-start.md): a process killed before its
 * first commit leaves that start behind, and the next one resumes there, across rotations. Every handover to the batcher carries that position, so the
 * store commits offsets only together with the events before them. Whatever goes wrong (the
 * connection drops, the server freezes, the store refuses for a while) the stream starts
 * following again from that boundary after a jittered backoff: a partly received entry is
 * simply read again, and nothing is handed over twice.
 *
 * Backpressure: the follower is pulled with `for await`; while the batcher has no room for
 * this target the loop waits before pulling the next chunk, so the transport stops the remote
 * side (ssh2 withholds window adjustments).
 */
import { isPglogError, PglogError } from '@pglog/common/errors.ts';
import { pause, untilAborted } from '@pglog/common/time/clock.ts';
import { backoffDelay } from '@pglog/common/time/retry.ts';

import type { FollowedFile, FollowItem, FollowPosition } from '../follow/follower.ts';
import type { EncodingConfig } from '../logformat/decode.ts';
import type { EventKind, PglogEvent } from '../logformat/events.ts';
import { LogParser, type ParseCounters, type SlowEntry, ZERO_COUNTERS } from '../logformat/log-parser.ts';
import type { TemplateCache } from '../logformat/normalize/normalize.ts';
import type { LogFormat } from '../logformat/record.ts';
import { isErrorSeverity, type SqlstateClass, sqlstateClassOf } from '../observability/sqlstate-class.ts';
import type { StatementRows } from '../store/encoded-rows.ts';
import type { StorePosition } from '../store/store-writer.ts';
import type { Batcher } from './batcher.ts';
import { mayGoOn, nextTurn } from './turns.ts';

/** What the stream needs of a follower (the LogFollower; a scripted fake in unit tests). */
export interface Follower {
  /** Where a log never read before starts (null once `signal` aborts). */
  chooseStart(signal: AbortSignal): Promise<FollowPosition | null>;
  follow(start: FollowPosition | null, signal: AbortSignal): AsyncIterable<FollowItem>;
  /** The file being read with its best identity so far (it grows with the file's head). */
  currentFile(): FollowedFile | null;
}

/** The events handed over since the last progress report, counted. */
export interface EventTally {
  /** Events by kind. */
  readonly kinds: ReadonlyMap<EventKind, number>;
  /**
   * ERROR, FATAL and PANIC entries (`error` and `deadlock` events) by SQLSTATE class, the
   * label set bounded by sqlstateClassOf whatever the log holds.
   */
  readonly errorClasses: ReadonlyMap<SqlstateClass, number>;
}

/** Counts events by kind and errors by SQLSTATE class, and `statements` more taken as rows (pure; the stream's progress report). */
export function tallyEvents(events: readonly PglogEvent[], statements = 0): EventTally {
  const kinds = new Map<EventKind, number>();
  if (statements > 0) kinds.set('statement', statements);
  const errorClasses = new Map<SqlstateClass, number>();
  // Indexed, not for-of: here V8 made an iterator result per event, 4 % of what the collector allocated (issue 15).
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!;
    kinds.set(e.kind, (kinds.get(e.kind) ?? 0) + 1);
    if ((e.kind === 'error' || e.kind === 'deadlock') && isErrorSeverity(e.severity)) {
      const cls = sqlstateClassOf(e.sqlstate);
      errorClasses.set(cls, (errorClasses.get(cls) ?? 0) + 1);
    }
  }
  return { kinds, errorClasses };
}

/** What the stream reports (metrics and logs are wired here by the collector). */
export interface StreamHooks {
  /**
   * Bytes and lines read, events by kind and errors by SQLSTATE class, parse problems: deltas
   * since the last call; `file` and `offset` say where reading stands (for messages about the
   * problems).
   */
  progress?(delta: ParseCounters, tally: EventTally, where: { file: string; offset: number }): void;
  /** Bytes between the read position and the end of the file on the server. */
  lag?(bytes: number): void;
  /**
   * The change of the bytes written to the log but not yet received, since the last `size`
   * within the same follow (none at a follow's first: that is the backlog it starts with).
   * Added to the bytes read, it gives what the server wrote: the log's own rate, which a
   * catch-up after a restart does not inflate (issue 46: a restarted collector promoted and
   * demoted its catching-up targets to and from the sidecar).
   */
  backlog?(deltaBytes: number): void;
  /** The stream is reading (true) or waiting to retry (false). */
  connected?(up: boolean): void;
  /** A failure the stream recovers from by following again after `delayMs`. */
  failed?(error: unknown, delayMs: number, position: FollowPosition | null): void;
  /** Log bytes were skipped (the committed file is gone). */
  gap?(item: Extract<FollowItem, { kind: 'gap' }>): void;
  /** Paused for the store (true) or reading again (false). */
  paused?(on: boolean): void;
  /** A new file is being read. */
  file?(file: FollowedFile, offset: number): void;
  /** The log was never collected before: it starts here, and the store says so from now on. */
  started?(file: FollowedFile, offset: number): void;
  /** An entry of `file` took the parser longer than its time budget. */
  slowEntry?(file: string, entry: SlowEntry): void;
}

export interface InstanceStreamOptions {
  target: string;
  instance: string;
  format: LogFormat;
  prefix: string;
  encodings: EncodingConfig;
  maxEntryBytes: number;
  templates: TemplateCache;
  follower: Follower;
  batcher: Batcher;
  /**
   * Where the parser puts statements instead of making events of them (the store writer's
   * StatementRows, encoded-rows.ts): with it, they are rows from their entry's bytes.
   */
  statementRows?: StatementRows | undefined;
  /** Takes ownership of the stream in the store: the fencing epoch and the committed position. */
  claim(): Promise<{ epoch: number; position: StorePosition | null }>;
  /**
   * Stores the first position of a stream that has none, under its claim (`epoch`), before
   * anything is read; returns the position stored (another one when one was there already).
   */
  storeStart(start: StorePosition, epoch: number): Promise<StorePosition>;
  hooks?: StreamHooks;
  retryBaseMs?: number;
  retryCapMs?: number;
  now?: () => number;
}

/** Most log bytes parsed in one go before the budget is checked and the event loop may run. */
const SLICE_BYTES = 64 * 1024;
const NO_BYTES = Buffer.alloc(0);
const NO_EVENTS: readonly PglogEvent[] = Object.freeze([]);

export class InstanceStream {
  private readonly o: InstanceStreamOptions;
  private readonly hooks: StreamHooks;
  private readonly now: () => number;
  private epoch = 0;
  /** The file being read and the end of the last entry parsed in it. */
  private file: FollowedFile | null = null;
  private position = 0;
  /** Where reading stands in `file`: its offset plus the bytes received since. */
  private received = 0;
  private parser: LogParser | null = null;
  /** Bytes written but not received at the last `size` of this follow; null before its first. */
  private unreceived: number | null = null;
  private reported: ParseCounters = ZERO_COUNTERS;
  /**
   * The events parsed since the last handover; null between handovers. Made by the first event
   * of a push and handed over before the push returns, never kept waiting for the next round:
   * an array that waited a round has been promoted to V8's old generation by then, and once
   * dropped it would keep every event pushed into it alive through the scavenges until the
   * next mark-compact (issue 15, docs/benchmarks.md).
   */
  private parsed: PglogEvent[] | null = null;
  private follower: Follower;
  /** Set by switchFollower until the run loop takes it. */
  private nextFollower: Follower | null = null;
  private following: AbortController | null = null;
  /** Aborted to cut a retry wait short when a switch arrives. */
  private switchRequested = new AbortController();
  private switchDone: (() => void) | null = null;

  constructor(options: InstanceStreamOptions) {
    this.o = options;
    this.follower = options.follower;
    this.hooks = options.hooks ?? {};
    this.now = options.now ?? Date.now;
  }

  /** Where the stream would resume now: the end of the last entry it parsed. */
  get resumePosition(): FollowPosition | null {
    return this.file === null ? null : { file: this.file, offset: this.position };
  }

  /**
   * Runs until `signal` aborts (a stop, or the stream was fenced). Never rejects for
   * transient failures; rejects only with STORE_FENCED when another owner took the stream.
   */
  async run(signal: AbortSignal): Promise<void> {
    const claimed = await this.claimWithRetry(signal);
    if (claimed === null) return;
    this.epoch = claimed.epoch;
    if (claimed.position !== null) {
      this.file = { path: claimed.position.file, identity: claimed.position.identity };
      this.position = claimed.position.offset;
    }
    for (let attempt = 1; !signal.aborted; attempt++) {
      let readSomething = false;
      // One follow of one follower; a switch ends it without ending the stream.
      const following = new AbortController();
      const stop = (): void => following.abort();
      signal.addEventListener('abort', stop, { once: true });
      this.following = following;
      this.unreceived = null;
      if (this.nextFollower !== null) following.abort();
      try {
        // Never collected: where it starts is stored before a byte is read.
        const started = this.file !== null || (await this.storeFirstPosition(following.signal));
        if (started) {
          for await (const item of this.follower.follow(this.resumePosition, following.signal)) {
            if (following.signal.aborted) break;
            if (!readSomething && item.kind === 'data') {
              readSomething = true;
              this.hooks.connected?.(true);
            }
            // The new transport is reading: data arrived, or the log is quiet and it waits.
            if (item.kind === 'data' || item.kind === 'idle') this.settleSwitch();
            await this.handle(item, following.signal);
          }
        }
      } catch (e) {
        if (isPglogError(e) && e.code === 'STORE_FENCED') throw e;
        if (!following.signal.aborted) {
          // A partly received entry is read again from `position`.
          this.parser = null;
          this.parsed = null;
          if (readSomething) attempt = 1;
          const delay = backoffDelay(attempt, this.o.retryBaseMs ?? 1_000, this.o.retryCapMs ?? 30_000);
          this.hooks.connected?.(false);
          this.hooks.failed?.(e, delay, this.resumePosition);
          await pause(delay, AbortSignal.any([signal, this.switchRequested.signal]));
          continue;
        }
      } finally {
        signal.removeEventListener('abort', stop);
        this.following = null;
      }
      if (signal.aborted) break;
      if (this.nextFollower !== null) {
        await this.changeFollower(signal);
        attempt = 0;
      }
    }
    this.settleSwitch();
  }

  /**
   * Moves the stream to another transport: the current follow ends at the last entry
   * boundary, everything handed over up to it is committed, and `follower` follows on from
   * exactly there. Resolves once the new follower reads (data, or a quiet log), or the stream stops.
   */
  switchFollower(follower: Follower): Promise<void> {
    this.nextFollower = follower;
    const done = new Promise<void>((resolve) => {
      const previous = this.switchDone;
      this.switchDone = (): void => {
        previous?.();
        resolve();
      };
    });
    this.following?.abort();
    this.switchRequested.abort();
    return done;
  }

  /** Between two followers: drop the partial entry, commit what was handed over, swap. */
  private async changeFollower(signal: AbortSignal): Promise<void> {
    const next = this.nextFollower;
    if (next === null) return;
    this.nextFollower = null;
    this.switchRequested = new AbortController();
    this.parser = null;
    this.parsed = null;
    // The old follower's last boundary becomes a committed offset before the new one reads.
    await untilAborted(this.o.batcher.flush(), signal);
    this.follower = next;
  }

  private settleSwitch(): void {
    const done = this.switchDone;
    this.switchDone = null;
    done?.();
  }

  /** Chooses the start of a log never collected and stores it; false when `signal` aborted first. */
  private async storeFirstPosition(signal: AbortSignal): Promise<boolean> {
    const chosen = await this.follower.chooseStart(signal);
    if (chosen === null || signal.aborted) return false;
    const { target, instance } = this.o;
    const stored = await this.o.storeStart({ target, instance, file: chosen.file.path, identity: chosen.file.identity, offset: chosen.offset }, this.epoch);
    this.file = { path: stored.file, identity: stored.identity };
    this.position = stored.offset;
    this.hooks.started?.(this.file, this.position);
    return true;
  }

  private async claimWithRetry(signal: AbortSignal): Promise<{ epoch: number; position: StorePosition | null } | null> {
    for (let attempt = 1; !signal.aborted; attempt++) {
      try {
        return await this.o.claim();
      } catch (e) {
        if (isPglogError(e) && e.code === 'STORE_FENCED') throw e;
        const delay = backoffDelay(attempt, this.o.retryBaseMs ?? 1_000, this.o.retryCapMs ?? 30_000);
        this.hooks.failed?.(e, delay, null);
        await pause(delay, signal);
      }
    }
    return null;
  }

  private async handle(item: FollowItem, signal: AbortSignal): Promise<void> {
    switch (item.kind) {
      case 'file':
        this.startFile(item.file, item.offset);
        return;
      case 'data': {
        const parser = this.parser;
        if (parser === null)
          throw new PglogError('REMOTE_COMMAND_FAILED', `${this.o.target}/${this.o.instance}: data arrived before the follower named its file`);
        // A stream that was held back hands over everything its transport buffered in one
        // chunk (megabytes). Parsing it in slices, checking the budget and yielding to the
        // event loop between them, keeps memory near the budget and other streams, the store
        // and /metrics served while 50 streams resume at once.
        const chunk = item.chunk;
        this.received += chunk.length;
        for (let at = 0; at < chunk.length && !signal.aborted; at += SLICE_BYTES) {
          this.openRows();
          parser.push(at === 0 && chunk.length <= SLICE_BYTES ? chunk : chunk.subarray(at, Math.min(chunk.length, at + SLICE_BYTES)));
          this.handOver();
          if (!this.o.batcher.hasRoom(this.o.target)) {
            this.hooks.paused?.(true);
            await this.o.batcher.waitForRoom(this.o.target, signal);
            this.hooks.paused?.(false);
          } else if (!mayGoOn()) {
            // The streams have held the event loop long enough: the rest waits a turn (turns.ts).
            await nextTurn();
          }
        }
        // Parsed: the follower's suspended generators still hold the item until the next one.
        item.chunk = NO_BYTES;
        return;
      }
      case 'idle':
        this.openRows();
        this.parser?.flushIdle();
        this.handOver();
        return;
      case 'end-of-file':
        this.openRows();
        this.parser?.end();
        this.handOver();
        this.parser = null;
        // The whole file is parsed: its end is a boundary, committed even when its last bytes
        // made no event, so a quiet log's place never stays behind in a file it finished.
        if (this.received > this.position) {
          this.position = this.received;
          this.o.batcher.add(this.source(), [], this.storePosition(), this.epoch, this.now());
        }
        return;
      case 'size': {
        this.hooks.lag?.(Math.max(0, item.size - this.position));
        const unreceived = Math.max(0, item.size - this.received);
        if (this.unreceived !== null) this.hooks.backlog?.(unreceived - this.unreceived);
        this.unreceived = unreceived;
        return;
      }
      case 'gap':
        this.hooks.gap?.(item);
        return;
    }
  }

  private startFile(file: FollowedFile, offset: number): void {
    this.file = file;
    this.position = offset;
    this.received = offset;
    this.reported = ZERO_COUNTERS;
    this.parser = new LogParser(
      {
        format: this.o.format,
        prefix: this.o.prefix,
        encodings: this.o.encodings,
        maxEntryBytes: this.o.maxEntryBytes,
        startOffset: offset,
        templates: this.o.templates,
        statements: this.o.statementRows,
        onSlowEntry: (entry) => this.hooks.slowEntry?.(file.path, entry),
      },
      { events: (batch) => this.takeParsed(batch) },
    );
    this.hooks.file?.(file, offset);
    // A new file (or a resume) is a position of its own: committed even before its first event.
    this.o.batcher.add(this.source(), [], this.storePosition(), this.epoch, this.now());
  }

  /** Keeps a push's events (the parser's own array, new for each push) until handOver. */
  private takeParsed(batch: PglogEvent[]): void {
    if (this.parsed === null) this.parsed = batch;
    else for (let i = 0; i < batch.length; i++) this.parsed.push(batch[i]!);
  }

  /**
   * Opens this stream's next handover in the StatementRows (when it has them) before its
   * parser runs: the statements it takes go there, and handOver() follows in the same
   * synchronous step.
   */
  private openRows(): void {
    this.o.statementRows?.open(this.source(), this.now());
  }

  /** Gives the events parsed so far (and the statements taken as rows) and the position they reach to the batcher. */
  private handOver(): void {
    const delta = this.parser === null ? ZERO_COUNTERS : this.counterDelta(this.parser);
    const events = this.parsed ?? NO_EVENTS;
    this.parsed = null;
    const rows = this.o.statementRows;
    const taken = rows === undefined ? 0 : rows.taken;
    if (events.length > 0 || taken > 0) {
      // Entries arrive in log order: the stream has read up to the end of the last one, event or row.
      this.position = Math.max(events.length > 0 ? events[events.length - 1]!.end : 0, taken > 0 ? rows!.lastEnd : 0);
      this.o.batcher.add(this.source(), events, this.storePosition(), this.epoch, this.now(), taken);
    }
    if (this.hooks.progress === undefined || (delta.bytes === 0 && events.length === 0 && taken === 0)) return;
    this.hooks.progress(delta, tallyEvents(events, taken), { file: this.file?.path ?? '', offset: this.position });
  }

  private counterDelta(parser: LogParser): ParseCounters {
    const now = parser.counters;
    const before = this.reported;
    this.reported = now;
    const delta = { ...ZERO_COUNTERS };
    for (const k of Object.keys(delta) as (keyof ParseCounters)[]) delta[k] = now[k] - before[k];
    return delta;
  }

  private source(): { target: string; instance: string; file: string } {
    return { target: this.o.target, instance: this.o.instance, file: this.file?.path ?? '' };
  }

  private storePosition(): StorePosition {
    // The follower learns a file's identity better as its head fills up (see follow/).
    const current = this.follower.currentFile();
    const file = current !== null && this.file !== null && current.path === this.file.path ? current : this.file;
    return { target: this.o.target, instance: this.o.instance, file: file?.path ?? '', identity: file?.identity ?? '', offset: this.position };
  }
}
