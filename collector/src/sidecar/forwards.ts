/**
 * SQL forwards in the sidecar: for each forward in desired.json, a local Unix socket
 * DIR/sql/<id>/.s.PGSQL.<port> that the server's slot-0 master forwards to a Unix socket on
 * the server (`ssh -S <control socket> -O forward -L local:remote`). The collector's pg client
 * connects to it like to a local PostgreSQL; every connection is one channel of the master.
 *
 * The decisions are forward-plan.ts; this file carries them out. The operations on one forward
 * (bind, unlink a stale socket, cancel) run one after another in its own queue, so an unlink
 * for a lost master never removes the socket that the next master has just bound, and a
 * forward removed and added again with the same id waits for its removal to finish.
 */
import { mkdir, rm, unlink } from 'node:fs/promises';

import type { Logger } from '@pglog/common/observability/logger.ts';
import { type DesiredForward, type DesiredServer, forwardDir, type ForwardStatus, type StatusError } from '@pglog/common/sidecar/contract.ts';
import { fullJitterDelay } from '@pglog/common/time/backoff.ts';

import { Child } from './children.ts';
import { type ForwardPhase, type ForwardSnapshot, planForwards } from './forward-plan.ts';
import { forwardClientArgs, forwardSocketPath } from './openssh-args.ts';
import { meaningfulLines } from './openssh-errors.ts';
import type { PidsFile } from './sidecar-files.ts';

/** A master that accepts forwards now. */
export interface UpMaster {
  server: DesiredServer;
  slot: number;
  /** SshMaster.connection: which run of the master this is. */
  connection: number;
}

export interface ForwardContext {
  dir: string;
  sshBinary: string;
  pids: PidsFile;
  log: Logger;
  backoff: { baseMs: number; capMs: number; random?: () => number };
  /** The server's slot-0 master, if it is up. */
  upMaster(server: string): UpMaster | undefined;
  /** Something about a forward changed: report it, and reconcile again. */
  onChange(): void;
}

/** An `ssh -O` that gets no answer from its master within this long is killed (a frozen master). */
const MUX_CLIENT_TIMEOUT_MS = 10_000;
/** Failed forwards are tried again after at least this long. */
const MIN_RETRY_MS = 50;

class ForwardRun {
  readonly spec: DesiredForward;
  phase: ForwardPhase = 'pending';
  connection: number | null = null;
  retryAt = 0;
  failures = 0;
  error: StatusError | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(spec: DesiredForward) {
    this.spec = spec;
  }

  /** Runs `op` after everything queued before it; never rejects. */
  enqueue(op: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(op).catch(() => undefined);
    return this.queue;
  }

  snapshot(): ForwardSnapshot {
    return { ...this.spec, phase: this.phase, connection: this.connection, retryAt: this.retryAt };
  }
}

export class Forwards {
  private readonly ctx: ForwardContext;
  private readonly runs = new Map<string, ForwardRun>();
  /** Forwards being cancelled, by id: a forward added again with that id waits for it. */
  private readonly removing = new Map<string, Promise<void>>();
  private readonly retryTimers = new Set<NodeJS.Timeout>();
  private stopped = false;

  constructor(ctx: ForwardContext) {
    this.ctx = ctx;
  }

  localDir(id: string): string {
    return `${this.ctx.dir}/${forwardDir(id)}`;
  }

  /** Plans against desired.json and the masters that are up, and starts what the plan says. */
  reconcile(desired: readonly DesiredForward[], upConnections: ReadonlyMap<string, number>): void {
    if (this.stopped) return;
    const plan = planForwards(
      desired,
      [...this.runs.values()].map((r) => r.snapshot()),
      upConnections,
      Date.now(),
    );
    for (const id of plan.remove) {
      const run = this.runs.get(id);
      if (run === undefined) continue;
      this.runs.delete(id);
      const done = run
        .enqueue(() => this.cancel(run))
        .finally(() => {
          if (this.removing.get(id) === done) this.removing.delete(id);
        });
      this.removing.set(id, done);
    }
    for (const spec of plan.add) {
      this.runs.set(spec.id, new ForwardRun(spec));
      this.ctx.log.debug({ forward: spec.id, server: spec.server, remoteSocket: spec.remoteSocket }, `forward ${spec.id} added`);
    }
    for (const id of plan.lost) {
      const run = this.runs.get(id);
      if (run === undefined) continue;
      if (run.phase === 'ready')
        this.ctx.log.info({ forward: id, server: run.spec.server }, `forward ${id} lost with its master; pending until the next one is up`);
      run.phase = 'pending';
      run.connection = null;
      run.failures = 0;
      // The dead master's socket file would refuse connections: better no file at all.
      void run.enqueue(() => this.removeSocket(run.spec));
    }
    for (const { id, connection } of plan.open) {
      const run = this.runs.get(id);
      if (run === undefined) continue;
      run.phase = 'opening';
      run.connection = connection;
      void run.enqueue(() => this.open(run, connection));
    }
  }

  status(masterError: (server: string) => StatusError | undefined): Record<string, ForwardStatus> {
    const out: Record<string, ForwardStatus> = {};
    for (const run of this.runs.values()) {
      const { id, server, remoteSocket, port } = run.spec;
      const state = run.phase === 'ready' ? 'ready' : run.phase === 'failed' ? 'failed' : 'pending';
      const error = state === 'failed' ? run.error : state === 'pending' ? masterError(server) : undefined;
      out[id] = { state, server, remoteSocket, port, localDir: this.localDir(id), ...(error === undefined ? {} : { error }) };
    }
    return out;
  }

  /** Sidecar shutdown (after its masters are stopped, which took the forwards): removes every socket. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.retryTimers) clearTimeout(t);
    const runs = [...this.runs.values()];
    await Promise.all([...runs.map((r) => r.enqueue(() => this.removeSocket(r.spec))), ...this.removing.values()]);
  }

  private async open(run: ForwardRun, connection: number): Promise<void> {
    await this.removing.get(run.spec.id);
    const { id, server: serverName, remoteSocket, port } = run.spec;
    if (this.runs.get(id) !== run || run.phase !== 'opening' || run.connection !== connection) return;
    const master = this.ctx.upMaster(serverName);
    if (master === undefined || master.connection !== connection) {
      // The master ended or was replaced while this waited: pending for the next one.
      run.phase = 'pending';
      run.connection = null;
      this.ctx.onChange();
      return;
    }
    const local = forwardSocketPath(this.ctx.dir, id, port);
    let failure: string | null = null;
    try {
      await mkdir(this.localDir(id), { recursive: true, mode: 0o700 });
      failure = await this.mux(master, 'forward', local, remoteSocket);
    } catch (e) {
      failure = (e as Error).message;
    }
    if (this.runs.get(id) !== run || run.connection !== connection) return;
    if (failure === null) {
      run.phase = 'ready';
      run.failures = 0;
      run.error = undefined;
      this.ctx.log.info({ forward: id, server: serverName, remoteSocket, local }, `forward ${id} ready: ${local} -> ${serverName}:${remoteSocket}`);
    } else if (this.ctx.upMaster(serverName)?.connection !== connection) {
      // The master ended under the request ("Control socket connect ... No such file"): not
      // this forward's failure; it is pending for the next master.
      run.phase = 'pending';
      run.connection = null;
    } else {
      const { baseMs, capMs, random } = this.ctx.backoff;
      const delay = Math.max(MIN_RETRY_MS, fullJitterDelay(run.failures++, baseMs, capMs, random ?? Math.random));
      run.phase = 'failed';
      run.retryAt = Date.now() + delay;
      run.error = {
        code: 'SIDECAR_UNAVAILABLE',
        message: `forward ${id} (${serverName}:${remoteSocket}): the master did not bind ${local}: ${failure}`.slice(0, 400),
      };
      this.ctx.log.warn({ forward: id, server: serverName, code: run.error.code, retryInMs: delay }, run.error.message);
      this.retryLater(delay);
    }
    this.ctx.onChange();
  }

  /** Cancels a removed forward on its master when that master still runs, then removes its socket. */
  private async cancel(run: ForwardRun): Promise<void> {
    const { id, server, remoteSocket, port } = run.spec;
    const master = this.ctx.upMaster(server);
    if (master !== undefined && master.connection === run.connection && (run.phase === 'ready' || run.phase === 'opening' || run.phase === 'failed')) {
      const failure = await this.mux(master, 'cancel', forwardSocketPath(this.ctx.dir, id, port), remoteSocket).catch((e: unknown) => (e as Error).message);
      // Only the listener stays behind in the master then; the socket file goes anyway.
      if (failure !== null) this.ctx.log.warn({ forward: id, server }, `forward ${id}: ssh -O cancel failed: ${failure}`);
    }
    await this.removeSocket(run.spec);
    this.ctx.log.info({ forward: id, server, remoteSocket }, `forward ${id} removed`);
  }

  private async removeSocket(spec: DesiredForward): Promise<void> {
    await unlink(forwardSocketPath(this.ctx.dir, spec.id, spec.port)).catch(() => undefined);
    await rm(this.localDir(spec.id), { recursive: true, force: true });
  }

  /** Runs `ssh -O forward|cancel`; resolves to null on success or to what went wrong. */
  private async mux(master: UpMaster, op: 'forward' | 'cancel', local: string, remote: string): Promise<string | null> {
    const child = new Child(this.ctx.sshBinary, forwardClientArgs(this.ctx.dir, master.server, master.slot, op, local, remote), this.ctx.pids);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.signal('SIGKILL');
    }, MUX_CLIENT_TIMEOUT_MS);
    const exit = await child.exited;
    clearTimeout(timer);
    if (exit.spawnError !== undefined) return `${this.ctx.sshBinary} could not be started: ${exit.spawnError}`;
    if (timedOut) return `no answer from the master within ${MUX_CLIENT_TIMEOUT_MS} ms`;
    if (exit.code === 0) return null;
    const said = meaningfulLines(child.stderr).slice(0, 3).join(' / ');
    return `ssh -O ${op} ${exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`}${said === '' ? '' : `: ${said}`}`;
  }

  private retryLater(delayMs: number): void {
    if (this.stopped) return;
    const timer = setTimeout(() => {
      this.retryTimers.delete(timer);
      this.ctx.onChange();
    }, delayMs + 1);
    this.retryTimers.add(timer);
  }
}
