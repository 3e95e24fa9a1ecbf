/**
 * LogFollower: the log of one PostgreSQL instance as a stream of file bytes with exact
 * positions, over any RemoteShell (ssh2, the sidecar, a local shell in tests).
 *
 *   probe (list files, active file, head checksums) ─> planner ─> segment script ─> items
 *
 * Each segment reads one file from one offset; when it ends (end of a rotated-away file,
 * rotation, truncation, the file gone) the follower probes again and the planner decides what
 * comes next. The consumer's offset is always `file` item offset + data bytes since, so any
 * entry boundary it commits can be resumed exactly with `follow(position)`.
 *
 * Backpressure: stdout is read a chunk at a time (chunk-puller.ts) only when the consumer pulls
 * the next item, so a consumer that does not pull stops the transport's reading and the remote
 * command.
 *
 * Identity upgrades: a file first seen shorter than HEAD_BYTES gets a stronger identity as it
 * grows. `currentFile()` returns the file of the last `file` item with the best identity known
 * (same path, same inode); commit positions with it.
 */
import type { LogFormat, StartPoint } from '@pglog/common/api/postgres-target.ts';
import { isPglogError, PglogError } from '@pglog/common/errors.ts';
import { pause } from '@pglog/common/time/clock.ts';

import { type RemoteExit, type RemoteProcess, type RemoteShell, runRemote } from '../transport/remote-shell.ts';
import { ChunkPuller, type Pulled } from './chunk-puller.ts';
import { formatIdentity, parseIdentity } from './identity.ts';
import { type Plan, planNext, planStart, type ReadStep } from './planner.ts';
import { buildProbeScript, type ChecksumRequest, parseProbeOutput, type ProbeResult } from './probe-script.ts';
import { buildSegmentScript, type IdleWait, parseSegmentStatus, SEGMENT_EXIT, type SegmentStatus } from './segment-script.ts';
import type { FollowedFile, FollowItem, FollowPosition } from './types.ts';

export type { FollowedFile, FollowItem, FollowPosition } from './types.ts';

export interface LogFollowerOptions {
  target: string;
  instance: string;
  /** The instance's data directory (where `current_logfiles` is). */
  dataDirectory: string;
  /** Absolute log directory. */
  logDirectory: string;
  logFormat: LogFormat;
  /** How often an idle segment looks for growth: the most the first bytes after a silence wait. Default 200 ms. */
  pollIntervalMs?: number;
  /**
   * How long a segment waits after a round that read data before it reads again. Default
   * four times pollIntervalMs (800 ms), at most four fifths of idleMs but never under the
   * poll. While a log is written steadily every round reads, and each read costs the collector
   * about the same whatever it carries (SSH packets, the stream's wake-ups, a handover and what
   * it allocates: about 0.5 ms with 50 logs, ADR 0025). Rows are committed once a second (the
   * batcher), so a longer wait costs little latency. Kept under `idleMs`, so that a log
   * written steadily does not look idle between two reads.
   */
  dataIntervalMs?: number;
  /**
   * The builtin wait: the longest wait after a round with data, for a log whose rounds are
   * small (segment-script-bash.ts SMALL_ROUND_BYTES). Default 3200 ms: a quiet log is read in
   * fewer, fuller rounds (ADR 0025's amendment).
   */
  dataIntervalMaxMs?: number;
  /** Silence after which an `idle` item is yielded while following. Default 4000 ms (above dataIntervalMaxMs, ADR 0025). */
  idleMs?: number;
  /** How often an idle segment checks whether another file became active. Default 1000 ms. */
  rotationCheckMs?: number;
  /** How often an idle segment writes a heartbeat (`size`), so a closed channel ends it. Default 2000 ms. */
  heartbeatMs?: number;
  /**
   * The builtin wait: the longest wait between two looks for data once a silence lasted a
   * heartbeat (the wait doubles from pollIntervalMs up to this). Default 1000 ms: the first line
   * after a long silence waits at most a second, as long as a batch waits to commit (issue 46).
   */
  idlePollMaxMs?: number;
  /**
   * The builtin wait: how often a long silence takes the file's size with a process (`stat`);
   * heartbeats in between check without one that the file did not become empty. Default 10000 ms.
   */
  sizeCheckMs?: number;
  /** Between probes while there is nothing to read (no file yet, next file still empty). Default 1000 ms. */
  waitMs?: number;
  /** Where a log never read before starts (chooseStart, follow without a position). Default 'newest'. */
  startAt?: StartPoint;
  /**
   * How an idle segment waits (segment-prelude.ts): 'builtins' (default) starts almost no
   * process on the server while nothing is written; 'polling' is the portable loop of a few
   * processes per poll interval (the benchmark's baseline).
   */
  idleWait?: IdleWait;
}

/** Bounded so a chatty failing command cannot grow memory. */
const MAX_DIAGNOSTIC_CHARS = 4096;
const MAX_PROBE_ROUNDS = 4;

type SegmentEnd = 'replan' | 'gone' | 'aborted';

/** LogFollowerOptions' intervals when not given (ADR 0014, ADR 0025). */
export const FOLLOW_DEFAULTS = {
  pollIntervalMs: 200,
  dataIntervalMaxMs: 3200,
  idleMs: 4000,
  rotationCheckMs: 1000,
  heartbeatMs: 2000,
  idlePollMaxMs: 1000,
  sizeCheckMs: 10_000,
  waitMs: 1000,
} as const;

/** LogFollowerOptions.dataIntervalMs when not given: four polls, kept well under the idle silence, never under the poll. */
export function defaultDataInterval(pollIntervalMs: number, idleMs: number): number {
  return Math.max(pollIntervalMs, Math.min(4 * pollIntervalMs, Math.floor(0.8 * idleMs)));
}

export class LogFollower {
  private readonly shell: RemoteShell;
  private readonly o: Required<LogFollowerOptions>;
  private current: FollowedFile | null = null;

  constructor(shell: RemoteShell, options: LogFollowerOptions) {
    this.shell = shell;
    const defaults = {
      ...FOLLOW_DEFAULTS,
      startAt: 'newest',
      idleWait: 'builtins',
    } as const;
    const o = { ...defaults, ...options };
    this.o = { ...o, dataIntervalMs: o.dataIntervalMs ?? defaultDataInterval(o.pollIntervalMs, o.idleMs) };
  }

  /** The file being read with its best identity so far (null before the first `file` item). */
  currentFile(): FollowedFile | null {
    return this.current;
  }

  /**
   * Where a log never read before starts, by the start point (planner.ts `planStart`): a
   * position in a file that has bytes. Waits while no file has any; null once `signal` aborts.
   * Throws a PglogError when the transport or the probe fails.
   */
  async chooseStart(signal: AbortSignal): Promise<FollowPosition | null> {
    try {
      while (!signal.aborted) {
        const requests: ChecksumRequest[] = [];
        for (let round = 0; round < MAX_PROBE_ROUNDS; round++) {
          const plan = planStart(await this.probe(requests, signal), this.o.startAt);
          if (plan.kind === 'start') return plan.position;
          if (plan.kind === 'wait') break;
          requests.push(...plan.requests);
        }
        await pause(this.o.waitMs, signal);
      }
    } catch (e) {
      if (signal.aborted) return null;
      throw e;
    }
    return null;
  }

  /**
   * Follows the log from `start` (null: the active file, see `startAt`) until `signal` aborts
   * or the consumer stops iterating (either ends the remote command). Throws a PglogError when
   * the transport or a remote command fails; the consumer follows again from its own position.
   */
  async *follow(start: FollowPosition | null, signal: AbortSignal): AsyncGenerator<FollowItem, void, undefined> {
    let position = start;
    let announced = false;
    try {
      while (!signal.aborted) {
        const plan = await this.plan(position, signal);
        if (plan.kind === 'wait') {
          if (plan.drained && announced) {
            announced = false;
            yield { kind: 'end-of-file' };
          }
          await pause(this.o.waitMs, signal);
          continue;
        }
        const step = plan.read;
        if (!plan.continues) {
          if (announced && plan.gap === null) yield { kind: 'end-of-file' };
          if (plan.gap !== null) yield { kind: 'gap', ...plan.gap };
          position = { file: step.file, offset: step.offset };
          this.current = step.file;
          announced = true;
          yield { kind: 'file', file: step.file, offset: step.offset };
        } else if (!announced && position !== null) {
          // A resume: the consumer starts a parser at its own position.
          this.current = position.file;
          announced = true;
          yield { kind: 'file', file: position.file, offset: position.offset };
        }
        if (position === null) throw new Error('unreachable: a read without a position');
        const reading = { position };
        const end = yield* this.readSegment(step, reading, signal);
        position = reading.position;
        if (end === 'aborted') return;
        if (end === 'gone') await pause(this.o.pollIntervalMs, signal);
      }
    } catch (e) {
      if (signal.aborted) return;
      throw e;
    }
  }

  private where(): string {
    return `${this.o.target}/${this.o.instance}`;
  }

  private async plan(position: FollowPosition | null, signal: AbortSignal): Promise<Exclude<Plan, { kind: 'checksums' }>> {
    const requests: ChecksumRequest[] = [];
    const id = position === null ? null : parseIdentity(position.file.identity);
    // Most plans need our own head checksum: ask for it in the first round.
    if (position !== null && id !== null) requests.push({ path: position.file.path, length: id.headLength });
    for (let round = 0; round < MAX_PROBE_ROUNDS; round++) {
      const plan = planNext(position, await this.probe(requests, signal), { startAt: this.o.startAt });
      if (plan.kind !== 'checksums') return plan;
      for (const r of plan.requests) if (!requests.some((q) => q.path === r.path && q.length === r.length)) requests.push(r);
    }
    // The directory kept changing under the probes: look again after a pause.
    return { kind: 'wait', reason: 'log files kept changing while probing', drained: false };
  }

  private async probe(checksums: readonly ChecksumRequest[], signal: AbortSignal): Promise<ProbeResult> {
    const script = buildProbeScript({ logDirectory: this.o.logDirectory, dataDirectory: this.o.dataDirectory, format: this.o.logFormat, checksums });
    const { stdout, stderr, exit } = await runRemote(this.shell, script, { signal });
    if (exit.code !== 0) {
      const why =
        stderr.trim() ||
        (exit.code !== null
          ? `exit status ${exit.code}`
          : exit.signal !== null
            ? `ended by signal ${exit.signal}`
            : 'the server closed the session without an exit status');
      throw new PglogError('REMOTE_COMMAND_FAILED', `${this.where()}: cannot list ${this.o.logDirectory}: ${why.slice(0, MAX_DIAGNOSTIC_CHARS)}`);
    }
    try {
      return parseProbeOutput(stdout, this.o.logFormat);
    } catch (e) {
      throw new PglogError('REMOTE_COMMAND_FAILED', `${this.where()}: unexpected output listing ${this.o.logDirectory}: ${(e as Error).message}`, { cause: e });
    }
  }

  /**
   * Runs one segment script and yields its bytes. `reading.position` advances with every
   * byte yielded (and takes identity upgrades), so it is exact whenever the consumer pulls.
   */
  private async *readSegment(step: ReadStep, reading: { position: FollowPosition }, signal: AbortSignal): AsyncGenerator<FollowItem, SegmentEnd, undefined> {
    const logical = parseIdentity(reading.position.file.identity);
    const script = buildSegmentScript({
      path: step.path,
      inode: step.inode,
      offset: step.offset,
      follow: step.follow,
      headLength: logical?.headLength ?? 0,
      logDirectory: this.o.logDirectory,
      dataDirectory: this.o.dataDirectory,
      format: this.o.logFormat,
      pollIntervalMs: this.o.pollIntervalMs,
      dataIntervalMs: this.o.dataIntervalMs,
      dataIntervalMaxMs: Math.max(this.o.dataIntervalMs, Math.min(this.o.dataIntervalMaxMs, Math.floor(0.8 * this.o.idleMs))),
      rotationCheckMs: this.o.rotationCheckMs,
      heartbeatMs: this.o.heartbeatMs,
      idlePollMaxMs: this.o.idlePollMaxMs,
      sizeCheckMs: this.o.sizeCheckMs,
      idleWait: this.o.idleWait,
    });
    const describe = (): string => `${this.where()}: reading ${step.path} (inode ${step.inode}) from offset ${step.offset}`;
    let proc: RemoteProcess;
    try {
      proc = await this.shell.spawn(script, { signal });
    } catch (e) {
      if (signal.aborted) return 'aborted';
      throw e;
    }
    // Everything that can wake the reader is posted to one mailbox. (Racing promises against a
    // long-lived one, like an abort promise, would retain every settled race and its chunk.)
    const box = new Mailbox<Wake>();
    const statuses = new StatusLines(() => box.post({ kind: 'status' }));
    proc.stderr.on('data', (b: Buffer) => statuses.push(b));
    const stderrEnded = new Promise<void>((resolve) => {
      proc.stderr.once('close', resolve);
      proc.stderr.once('end', resolve);
    });
    void proc.exit.then(
      (exit) => box.post({ kind: 'exit', exit }),
      (error: unknown) => box.post({ kind: 'error', error }),
    );
    const onAbort = (): void => box.post({ kind: 'abort' });
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    const out = new ChunkPuller(
      proc.stdout,
      (result) => box.post({ kind: 'data', result }),
      (error: unknown) => box.post({ kind: 'error', error }),
    );
    let nextRequested = false;
    let idleTimer: NodeJS.Timeout | undefined;
    let idleSeq = 0;
    const emit = function* (this: LogFollower): Generator<FollowItem> {
      for (const status of statuses.take()) {
        if (status.kind === 'size') yield { kind: 'size', size: status.size };
        else if (status.kind === 'head' && logical !== null && status.length > (parseIdentity(reading.position.file.identity)?.headLength ?? 0)) {
          const file = { path: reading.position.file.path, identity: formatIdentity({ inode: logical.inode, headLength: status.length, crc: status.crc }) };
          reading.position = { file, offset: reading.position.offset };
          this.current = file;
        }
      }
    }.bind(this);
    try {
      let quiet = false;
      let exit: RemoteExit | null = null;
      let stdoutDone = false;
      while (!stdoutDone || exit === null) {
        if (!nextRequested && !stdoutDone) {
          nextRequested = true;
          out.next();
        }
        // The silence is counted from the last data: a status line (a heartbeat every 2 s while
        // idle) neither ends it nor starts it again, or an idle silence longer than the
        // heartbeat would never be noticed.
        if (step.follow && !quiet && !stdoutDone && idleTimer === undefined) {
          const seq = ++idleSeq;
          idleTimer = setTimeout(() => box.post({ kind: 'idle', seq }), this.o.idleMs);
        }
        const wake = await box.take();
        if (wake.kind !== 'status') {
          clearTimeout(idleTimer);
          idleTimer = undefined;
        }
        yield* emit();
        switch (wake.kind) {
          case 'abort':
            return 'aborted';
          case 'error':
            throw wake.error;
          case 'status':
            break;
          case 'exit':
            exit = wake.exit;
            break;
          case 'idle':
            if (wake.seq === idleSeq) {
              quiet = true;
              yield { kind: 'idle' };
            }
            break;
          case 'data': {
            nextRequested = false;
            if (wake.result.done === true) {
              stdoutDone = true;
              break;
            }
            // Neither this generator's frame nor the iterator's result keeps the chunk once the
            // consumer is done with it (it empties the item): a suspended generator keeps its
            // locals, and the chunk would live until this stream's next one (issue 15: long
            // enough to be promoted, and V8 counts promoted external memory towards its next
            // mark-compact).
            const item: FollowItem = { kind: 'data', chunk: wake.result.value };
            (wake.result as { value: Buffer | undefined }).value = undefined;
            reading.position = { file: reading.position.file, offset: reading.position.offset + item.chunk.length };
            quiet = false;
            yield item;
            break;
          }
        }
      }
      // The exit status is known; the status lines that explain it may still be in flight.
      await stderrEnded;
      yield* emit();
      switch (exit.code) {
        case SEGMENT_EXIT.endOfFile:
        case SEGMENT_EXIT.rotated:
        case SEGMENT_EXIT.truncated:
          return 'replan';
        case SEGMENT_EXIT.gone:
          return 'gone';
        case null:
        default: {
          const how = exit.code === null ? `ended by signal ${exit.signal ?? '(none: the channel closed)'}` : `exited with status ${exit.code}`;
          const text = statuses.diagnostics();
          throw new PglogError('REMOTE_COMMAND_FAILED', `${describe()} failed: ${how}${text === '' ? '' : `: ${text}`}`);
        }
      }
    } catch (e) {
      if (signal.aborted) return 'aborted';
      if (isPglogError(e)) throw e;
      throw new PglogError('REMOTE_COMMAND_FAILED', `${describe()} failed: ${(e as Error).message}`, { cause: e });
    } finally {
      clearTimeout(idleTimer);
      signal.removeEventListener('abort', onAbort);
      out.close();
      proc.close();
    }
  }
}

type Wake =
  | { kind: 'data'; result: Pulled }
  | { kind: 'exit'; exit: RemoteExit }
  | { kind: 'error'; error: unknown }
  | { kind: 'status' }
  | { kind: 'idle'; seq: number }
  | { kind: 'abort' };

/** A queue with one waiting reader; repeated `status` and `abort` wakes collapse into one. */
class Mailbox<T extends { kind: string }> {
  private readonly queue: T[] = [];
  private waiter: ((value: T) => void) | null = null;

  post(value: T): void {
    if (this.waiter !== null) {
      const waiter = this.waiter;
      this.waiter = null;
      waiter(value);
      return;
    }
    if ((value.kind === 'status' || value.kind === 'abort') && this.queue.some((q) => q.kind === value.kind)) return;
    this.queue.push(value);
  }

  take(): Promise<T> {
    const first = this.queue.shift();
    if (first !== undefined) return Promise.resolve(first);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }
}

/** The segment script's stderr: `PGLOG` status lines, and anything else kept for error messages. */
class StatusLines {
  private partial = '';
  private queue: SegmentStatus[] = [];
  private text = '';
  private readonly onStatus: () => void;

  constructor(onStatus: () => void) {
    this.onStatus = onStatus;
  }

  push(bytes: Buffer): void {
    const lines = (this.partial + bytes.toString('utf8')).split('\n');
    this.partial = (lines.pop() ?? '').slice(-MAX_DIAGNOSTIC_CHARS);
    for (const line of lines) {
      const status = parseSegmentStatus(line);
      if (status === null) {
        if (this.text.length < MAX_DIAGNOSTIC_CHARS) this.text += (this.text === '' ? '' : '; ') + line.slice(0, MAX_DIAGNOSTIC_CHARS);
      } else if (status.kind === 'size' || status.kind === 'head') {
        // Only the newest size matters; never let a stalled consumer pile them up.
        const last = this.queue.at(-1);
        if (last !== undefined && last.kind === status.kind) this.queue[this.queue.length - 1] = status;
        else this.queue.push(status);
      } else {
        this.queue.push(status);
        if (this.queue.length > 64) this.queue.shift();
      }
    }
    if (this.queue.length > 0) this.onStatus();
  }

  take(): SegmentStatus[] {
    const taken = this.queue;
    this.queue = [];
    return taken;
  }

  diagnostics(): string {
    return (this.text + (this.partial === '' ? '' : (this.text === '' ? '' : '; ') + this.partial)).trim();
  }
}
