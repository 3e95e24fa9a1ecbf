/**
 * The `pglog sshproxy` supervisor: follows desired.json, keeps the masters and streams it
 * asks for (decisions in reconcile.ts, processes in master-process.ts and stream-process.ts),
 * and reports in status.json. SQL forwards (forwards.ts) ride on the slot-0 masters. The
 * contract is in contract.ts; docs/sshproxy.md tells the story.
 *
 * A wrong entry of desired.json (a server whose user would be an ssh option, a stream of an
 * unknown server ...) is refused alone: reported in status.json (`failed` with CONFIG_INVALID
 * under its id, `refusedServers`), never run, while every other entry is applied.
 *
 * Every event (a new desired state, a master up or down, a stream that ended) marks the state
 * dirty; one reconcile pass per turn of the event loop computes a plan from a snapshot and
 * carries it out. Stopping masters and killing streams take time; they are tracked so that a
 * new master never binds a socket an old one still holds, and so that shutdown waits for them.
 */
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';

import { PglogError } from '@pglog/common/errors.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';
import {
  type DesiredRefusals,
  type DesiredState,
  forwardDir,
  type ForwardStatus,
  HEARTBEAT_MS,
  type MasterState,
  type MasterStatus,
  PROTOCOL_VERSION,
  type SidecarStatus,
  STATUS_FILE,
  type StreamStatus,
} from '@pglog/common/sidecar/contract.ts';

import { DESIRED_POLL_MS, DesiredWatcher } from './desired-watcher.ts';
import { Forwards, type UpMaster } from './forwards.ts';
import { DEFAULT_MASTER_BACKOFF, type MasterBackoffOptions, SshMaster } from './master-process.ts';
import { dirTooLong } from './openssh-args.ts';
import { EMPTY_DESIRED, type Plan, reconcile, type Snapshot } from './reconcile.ts';
import { cleanStaleDir, PidsFile, prepareDir, writeFileAtomic } from './sidecar-files.ts';
import { StreamRun } from './stream-process.ts';

export interface SidecarOptions {
  dir: string;
  log: Logger;
  backoff?: Partial<MasterBackoffOptions>;
  /** The OpenSSH client (default `ssh` from PATH). */
  sshBinary?: string;
  /** The sidecar's uid, owner required of the key files (default process.getuid()). */
  uid?: number;
  heartbeatMs?: number;
  pollMs?: number;
  /** How long the session of a killed stream counts as still held by the server (see Snapshot.reserved). */
  sessionLingerMs?: number;
}

/** Twice the collector's follow-loop heartbeat (2 s), plus a margin. */
export const DEFAULT_SESSION_LINGER_MS = 5000;

/** Status changes within this long are written once. */
const STATUS_COALESCE_MS = 10;

const masterKey = (server: string, slot: number): string => `${server}\0${slot}`;

export class Sidecar {
  readonly dir: string;
  readonly instance = randomUUID();
  private readonly log: Logger;
  private readonly startedAt = new Date().toISOString();
  private readonly pids: PidsFile;
  private readonly sshBinary: string;
  private readonly uid: number;
  private readonly backoff: MasterBackoffOptions;
  private readonly heartbeatMs: number;
  private readonly watcher: DesiredWatcher;
  private desired: DesiredState = EMPTY_DESIRED;
  private desiredError: string | undefined;
  private desiredErrorGeneration: number | null = null;
  /** The entries of the applied desired.json that were refused (reported, never run). */
  private refused: DesiredRefusals = { servers: {}, streams: {}, forwards: {}, unnamed: [] };
  private loggedRefusals = new Set<string>();
  private readonly masters = new Map<string, SshMaster>();
  private readonly streams = new Map<string, StreamRun>();
  private readonly forwards: Forwards;
  /** Masters and streams being stopped, by socket path (masters) or id (streams). */
  private readonly stoppingMasters = new Map<string, Promise<void>>();
  private readonly removingStreams = new Set<Promise<void>>();
  private readonly sessionLingerMs: number;
  private reserved: { server: string; slot: number; until: number }[] = [];
  private reconcileQueued = false;
  private stopped = false;
  private statusTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private statusWriting: Promise<void> = Promise.resolve();

  private constructor(options: SidecarOptions, dir: string) {
    this.dir = dir;
    this.log = options.log;
    this.pids = new PidsFile(dir);
    this.sshBinary = options.sshBinary ?? 'ssh';
    this.uid = options.uid ?? process.getuid?.() ?? 0;
    this.backoff = { ...DEFAULT_MASTER_BACKOFF, ...options.backoff };
    this.heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
    this.sessionLingerMs = options.sessionLingerMs ?? DEFAULT_SESSION_LINGER_MS;
    this.watcher = new DesiredWatcher(
      dir,
      {
        onDesired: (state) => {
          const { refused, ...desired } = state;
          this.desired = desired;
          this.refused = refused;
          this.log.debug(
            { generation: state.generation, servers: state.servers.length, streams: state.streams.length, forwards: state.forwards.length },
            'desired state applied',
          );
          // Each refusal is logged once, not with every later file that still holds it (the
          // collector rewrites desired.json on every stream change); status.json always has it.
          const messages = new Set([
            ...Object.values(refused.servers).map((e) => e.message),
            ...Object.values(refused.streams).map((e) => e.error.message),
            ...Object.values(refused.forwards).map((e) => e.error.message),
            ...refused.unnamed,
          ]);
          for (const message of messages) {
            if (!this.loggedRefusals.has(message))
              this.log.warn({ code: 'CONFIG_INVALID', generation: state.generation }, `${message}; this entry is refused, the others are applied`);
          }
          this.loggedRefusals = messages;
          this.changed();
        },
        onError: (message, generation) => {
          const refusedGeneration = message === null ? null : (generation ?? null);
          if ((message ?? undefined) === this.desiredError && refusedGeneration === this.desiredErrorGeneration) return;
          if (message !== null && message !== this.desiredError) this.log.warn({ code: 'CONFIG_INVALID' }, message);
          this.desiredError = message ?? undefined;
          this.desiredErrorGeneration = refusedGeneration;
          this.statusChanged();
        },
      },
      options.pollMs ?? DESIRED_POLL_MS,
    );
    this.forwards = new Forwards({
      dir,
      sshBinary: this.sshBinary,
      pids: this.pids,
      log: this.log,
      backoff: this.backoff,
      upMaster: (server) => this.upMaster(server),
      onChange: () => this.changed(),
    });
  }

  /** Checks DIR, cleans what a previous sidecar left there, and starts following desired.json. */
  static async start(options: SidecarOptions): Promise<Sidecar> {
    const dir = resolve(options.dir);
    const tooLong = dirTooLong(dir);
    if (tooLong !== null) throw new PglogError('CONFIG_INVALID', `sshproxy: ${tooLong}`);
    await prepareDir(dir);
    const stale = await cleanStaleDir(dir);
    const sidecar = new Sidecar(options, dir);
    if (stale.killed.length > 0 || stale.removedFiles > 0) {
      sidecar.log.warn({ killed: stale.killed, removedFiles: stale.removedFiles }, 'cleaned up after a previous sidecar on this directory');
    }
    sidecar.log.info({ dir, instance: sidecar.instance }, 'pglog sshproxy starting');
    await sidecar.writeStatus();
    sidecar.heartbeat = setInterval(() => sidecar.statusChanged(), sidecar.heartbeatMs);
    await sidecar.watcher.start();
    return sidecar;
  }

  /** Kills every stream, then every master, writes a last status and returns. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.watcher.close();
    clearInterval(this.heartbeat);
    const streams = [...this.streams.values()];
    await Promise.all(streams.map((s) => s.kill()));
    await Promise.all([...this.removingStreams]);
    const masters = [...this.masters.values()];
    this.masters.clear();
    await Promise.all(masters.map((m) => m.stop()));
    await Promise.all([...this.stoppingMasters.values()]);
    await this.forwards.stop();
    clearTimeout(this.statusTimer);
    await this.statusWriting;
    await this.writeStatus();
    for (const s of streams) await s.remove();
    this.log.info('pglog sshproxy stopped');
  }

  /** The status as it would be written now. */
  status(): SidecarStatus {
    const masters: MasterStatus[] = [...this.masters.values()]
      .map((m) => ({
        server: m.server.name,
        slot: m.slot,
        state: m.state,
        restarts: m.restarts,
        streams: [...this.streams.values()].filter((s) => s.server === m.server.name && s.slot === m.slot && isLive(s)).length,
        ...(m.error === undefined ? {} : { error: m.error }),
      }))
      .sort((a, b) => (a.server < b.server ? -1 : a.server > b.server ? 1 : a.slot - b.slot));
    const streams: Record<string, StreamStatus> = {};
    for (const s of this.streams.values()) {
      const master = this.masters.get(masterKey(s.server, s.slot));
      const state = s.state === 'starting' ? 'waiting' : s.state;
      const error = s.state === 'failed' ? s.error : state === 'waiting' && master?.state !== 'up' ? master?.error : undefined;
      streams[s.id] = { state, server: s.server, exitCode: s.exitCode, signal: s.signal, ...(error === undefined ? {} : { error }) };
    }
    for (const [id, r] of Object.entries(this.refused.streams))
      streams[id] = { state: 'failed', server: r.server, exitCode: null, signal: null, error: r.error };
    const forwards: Record<string, ForwardStatus> = this.forwards.status((server) => {
      const m = this.masters.get(masterKey(server, 0));
      return m?.state === 'up' ? undefined : m?.error;
    });
    for (const [id, r] of Object.entries(this.refused.forwards)) {
      forwards[id] = {
        state: 'failed',
        server: r.server,
        remoteSocket: r.remoteSocket,
        port: r.port,
        localDir: `${this.dir}/${forwardDir(id)}`,
        error: r.error,
      };
    }
    const { servers: refusedServers, unnamed } = this.refused;
    return {
      version: PROTOCOL_VERSION,
      instance: this.instance,
      pid: process.pid,
      startedAt: this.startedAt,
      updatedAt: new Date().toISOString(),
      appliedGeneration: this.desired.generation,
      ...(this.desiredError === undefined ? {} : { desiredError: this.desiredError }),
      ...(this.desiredError === undefined || this.desiredErrorGeneration === null ? {} : { desiredErrorGeneration: this.desiredErrorGeneration }),
      ...(Object.keys(refusedServers).length === 0 ? {} : { refusedServers }),
      ...(unnamed.length === 0 ? {} : { refusedEntries: unnamed }),
      masters,
      streams,
      forwards,
    };
  }

  /** Something changed: reconcile (once per turn) and report. */
  private changed(): void {
    this.statusChanged();
    if (this.reconcileQueued || this.stopped) return;
    this.reconcileQueued = true;
    setImmediate(() => {
      this.reconcileQueued = false;
      if (!this.stopped) this.apply(reconcile(this.desired, this.snapshot()));
    });
  }

  private snapshot(): Snapshot {
    const now = Date.now();
    this.reserved = this.reserved.filter((r) => r.until > now);
    return {
      reserved: this.reserved.map((r) => ({ server: r.server, slot: r.slot })),
      masters: [...this.masters.values()].map((m) => ({ server: m.server.name, slot: m.slot, fingerprint: m.fingerprint, up: m.state === 'up' })),
      streams: [...this.streams.values()].map((s) => ({
        id: s.id,
        server: s.server,
        command: s.command,
        slot: s.slot,
        phase: s.state === 'waiting' ? 'waiting' : isLive(s) ? 'running' : 'done',
      })),
    };
  }

  private apply(plan: Plan): void {
    for (const id of plan.removeStreams) {
      const s = this.streams.get(id);
      if (s === undefined) continue;
      this.streams.delete(id);
      if (s.state === 'running') this.reserve(s.server, s.slot);
      this.track(this.removingStreams, s.remove(), `removing stream ${id}`);
    }
    const servers = new Map(this.desired.servers.map((s) => [s.name, s]));
    for (const a of plan.addStreams) {
      this.streams.set(
        a.id,
        new StreamRun(a.id, a.server, a.command, a.slot, {
          dir: this.dir,
          sshBinary: this.sshBinary,
          pids: this.pids,
          onChange: (s) => this.streamChanged(s),
        }),
      );
    }
    for (const m of plan.moveStreams) {
      const s = this.streams.get(m.id);
      if (s !== undefined) s.slot = m.slot;
    }
    for (const ref of plan.stopMasters) {
      const k = masterKey(ref.server, ref.slot);
      const m = this.masters.get(k);
      if (m === undefined) continue;
      this.masters.delete(k);
      this.log.info({ server: ref.server, slot: ref.slot }, `master ${m.name} stopping`);
      const done = m.stop().finally(() => {
        if (this.stoppingMasters.get(m.socket) === done) this.stoppingMasters.delete(m.socket);
      });
      this.stoppingMasters.set(m.socket, done);
    }
    for (const ref of plan.startMasters) {
      const server = servers.get(ref.server);
      if (server === undefined) continue;
      const m = new SshMaster(server, ref.slot, {
        dir: this.dir,
        uid: this.uid,
        sshBinary: this.sshBinary,
        pids: this.pids,
        backoff: this.backoff,
        onChange: (master, previous) => this.masterChanged(master, previous),
        onChannelRefused: (master, line) => {
          const forwards = this.desired.forwards.filter((f) => f.server === master.server.name).map((f) => f.remoteSocket);
          this.log.warn(
            { server: master.server.name, slot: master.slot, forwards },
            `master ${master.name}: the server refused a forwarded connection (${line}); is there a socket at ${forwards.join(', ') || "the forward's remote path"}?`,
          );
        },
        socketFree: (socket) => this.stoppingMasters.get(socket)?.catch(() => undefined) ?? Promise.resolve(),
      });
      this.masters.set(masterKey(ref.server, ref.slot), m);
      this.log.info({ server: ref.server, slot: ref.slot, state: m.state }, `master ${m.name} connecting`);
      m.start();
    }
    for (const id of plan.startStreams) {
      const s = this.streams.get(id);
      const server = s === undefined ? undefined : servers.get(s.server);
      if (s === undefined || server === undefined) continue;
      void s.start(server); // never rejects: failures become state `failed`
    }
    const up = new Map<string, number>();
    for (const m of this.masters.values()) if (m.slot === 0 && m.state === 'up') up.set(m.server.name, m.connection);
    this.forwards.reconcile(this.desired.forwards, up);
    this.statusChanged();
  }

  /** The server's slot-0 master while it is up: the one that carries the server's forwards. */
  private upMaster(server: string): UpMaster | undefined {
    const m = this.masters.get(masterKey(server, 0));
    return m?.state === 'up' ? { server: m.server, slot: 0, connection: m.connection } : undefined;
  }

  /** Counts a killed stream's session as held for a while, then reconciles again. */
  private reserve(server: string, slot: number): void {
    this.reserved.push({ server, slot, until: Date.now() + this.sessionLingerMs });
    setTimeout(() => this.changed(), this.sessionLingerMs + 1).unref();
  }

  private track(set: Set<Promise<void>>, work: Promise<void>, what: string): void {
    const p = work.catch((e: unknown) => this.log.warn({ err: e }, `${what} failed`)).finally(() => set.delete(p));
    set.add(p);
  }

  private masterChanged(m: SshMaster, previous: MasterState): void {
    if (this.masters.get(masterKey(m.server.name, m.slot)) !== m) return; // a stopped one
    const fields = { server: m.server.name, slot: m.slot, state: m.state, previous, restarts: m.restarts };
    if (m.state === 'backoff') this.log.warn({ ...fields, code: m.error?.code, retryInMs: m.retryDelayMs }, `master ${m.name} down: ${m.error?.message ?? ''}`);
    else this.log.info(fields, `master ${m.name} ${m.state}`);
    this.changed();
  }

  private streamChanged(s: StreamRun): void {
    if (this.streams.get(s.id) !== s) return;
    if (s.state === 'failed') {
      this.log.warn({ stream: s.id, server: s.server, code: s.error?.code }, s.error?.message ?? `stream ${s.id} failed`);
    } else if (s.state === 'exited') {
      const fields = { stream: s.id, server: s.server, exitCode: s.exitCode, signal: s.signal };
      if (s.exitCode === 0) this.log.debug(fields, `stream ${s.id} exited`);
      else this.log.warn(fields, `stream ${s.id} exited with ${s.signal === null ? `code ${s.exitCode}` : `signal ${s.signal}`}`);
    }
    this.changed();
  }

  /** Writes status.json soon; bursts of changes become one write. */
  private statusChanged(): void {
    // After stop() began, only its own final write remains.
    if (this.statusTimer !== undefined || this.stopped) return;
    this.statusTimer = setTimeout(() => {
      this.statusTimer = undefined;
      this.statusWriting = this.statusWriting.then(() => this.writeStatus());
    }, STATUS_COALESCE_MS);
  }

  private async writeStatus(): Promise<void> {
    try {
      await writeFileAtomic(`${this.dir}/${STATUS_FILE}`, `${JSON.stringify(this.status(), null, 1)}\n`);
    } catch (e) {
      this.log.error({ err: e }, `${STATUS_FILE} cannot be written`);
    }
  }
}

function isLive(s: StreamRun): boolean {
  return s.state === 'waiting' || s.state === 'starting' || s.state === 'running';
}
