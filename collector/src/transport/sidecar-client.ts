/**
 * The collector's side of the sshproxy directory contract (see sidecar/contract.ts): keeps
 * desired.json in step with the streams the collector wants, writes the keys the sidecar
 * needs (mode 0600), and follows status.json to tell each waiting stream how it is doing.
 *
 * Writes are coalesced: any number of stream changes in one turn of the event loop become one
 * rename of desired.json. Status is read on every change notice of the directory (inotify via
 * fs.watch, cheap on an emptyDir) and on a short poll as a fallback, since notices can be
 * dropped.
 *
 * The sidecar counts as gone when its status is older than STALE_STATUS_MS, when its
 * `instance` changed under a stream (it restarted: everything it ran is gone), or when the
 * process that started it says so (`markGone`, standalone mode). Every stream waiting on it
 * then fails with SIDECAR_UNAVAILABLE, and the streams resume from their own offsets.
 *
 * A wrong entry (a server whose user the sidecar refuses, say) is refused by the sidecar alone:
 * it reports the entry's streams and forwards `failed` with CONFIG_INVALID, and the waits
 * (proxy-shell.ts, sidecar-forward.ts) fail at once with that code; the other targets of the
 * pod carry on. A whole desired.json refused (`desiredError`) fails the streams and forwards
 * it holds the same way (`desiredRefusal`).
 *
 * SQL forwards (`forward`, sidecar-forward.ts) are lasting state instead: one per server,
 * remote socket and port, kept in desired.json until removed, re-established by the sidecar
 * whenever the server's master comes up again.
 *
 * Servers are registered for every target (`setServer`, in memory) but enter desired.json, with
 * their key files (sidecar-keys.ts), only once a stream or forward of theirs is asked for: most
 * of a fleet never goes through the sidecar, and a desired.json of thousands of servers would be
 * rewritten and parsed on every stream change (issue 46).
 */
import { randomBytes } from 'node:crypto';
import { type FSWatcher, watch } from 'node:fs';
import { chmod, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { PglogError } from '@pglog/common/errors.ts';
import {
  CONTROL_DIR,
  DESIRED_FILE,
  type DesiredForward,
  type DesiredServer,
  type DesiredState,
  type DesiredStream,
  HEARTBEAT_MS,
  KEYS_DIR,
  parseSidecarStatus,
  PROTOCOL_VERSION,
  remoteSocketProblem,
  type SidecarStatus,
  STALE_STATUS_MS,
  STATUS_FILE,
  type StatusError,
  STREAMS_DIR,
  type StreamStatus,
} from '@pglog/common/sidecar/contract.ts';

import { withoutCertAuthorities } from './known-hosts.ts';
import { DEFAULT_FORWARD_TIMEOUT_MS, forwardId, waitForwardReady } from './sidecar-forward.ts';
import { SidecarKeyFiles } from './sidecar-keys.ts';

export interface SidecarClientOptions {
  /** The shared directory. */
  dir: string;
  /** How often status.json is read when the directory cannot be watched (default 250 ms); watched, once a heartbeat as well. */
  pollMs?: number;
  /** Status older than this means the sidecar is gone. Default STALE_STATUS_MS. */
  staleMs?: number;
  /** How long `forward` waits for the sidecar to report a forward ready. Default 30 s. */
  forwardTimeoutMs?: number;
  now?: () => number;
}

/** Connection parameters of one server plus the credentials written for it into DIR/keys. */
export interface SidecarServer extends Omit<DesiredServer, 'identityFile' | 'knownHostsFile'> {
  privateKey: Buffer;
  knownHosts: string;
}

type Listener = () => void;

/** A status this many staleMs old by the clock is stale even if no read has ended since (reads stuck). */
const READ_STALL_FACTOR = 4;

export class SidecarClient {
  readonly dir: string;
  private readonly pollMs: number;
  private readonly staleMs: number;
  private readonly forwardTimeoutMs: number;
  private readonly now: () => number;
  /** Stream ids start with it, so a restarted collector never reuses one in the same directory. */
  private readonly idPrefix = randomBytes(4).toString('hex');
  private sequence = 0;
  /** Every server set, with its credentials (shared with the caller, not copied). */
  private readonly registered = new Map<string, SidecarServer>();
  /** The servers in desired.json: those a stream or forward was asked for. */
  private readonly servers = new Map<string, DesiredServer>();
  private readonly keyFiles: SidecarKeyFiles;
  private readonly streams = new Map<string, DesiredStream>();
  private readonly forwards = new Map<string, DesiredForward>();
  /** The desired.json generation that first held each forward: older statuses say nothing about it. */
  private readonly forwardGenerations = new Map<string, number>();
  /** The same for streams: a refusal of that generation's file (or a later one) is the stream's. */
  private readonly streamGenerations = new Map<string, number>();
  /**
   * Starts at the clock, not at 0: a restarted collector's generations stay above those the
   * running sidecar applied from its predecessor, so an old status never passes for a new one.
   */
  private generation = Date.now();
  private writing: Promise<void> | null = null;
  private dirty = false;
  private writeError: Error | null = null;
  private current: SidecarStatus | null = null;
  /** The instance that was reported gone: its status counts as stale even while fresh. */
  private goneInstance: string | null = null;
  private readonly listeners = new Set<Listener>();
  private watcher: FSWatcher | null = null;
  private poller: NodeJS.Timeout | null = null;
  private reading = false;
  /** When the newest read of status.json ended (read or not): staleness is judged as of then. */
  private readAt = Number.NEGATIVE_INFINITY;
  private closed = false;

  private constructor(options: SidecarClientOptions) {
    this.dir = options.dir;
    this.pollMs = options.pollMs ?? 250;
    this.staleMs = options.staleMs ?? STALE_STATUS_MS;
    this.forwardTimeoutMs = options.forwardTimeoutMs ?? DEFAULT_FORWARD_TIMEOUT_MS;
    this.now = options.now ?? Date.now;
    this.keyFiles = new SidecarKeyFiles(join(options.dir, KEYS_DIR));
  }

  /** Prepares the directory (keys/ with mode 0700), writes an empty desired state and starts following status. */
  static async open(options: SidecarClientOptions): Promise<SidecarClient> {
    const client = new SidecarClient(options);
    await mkdir(join(client.dir, KEYS_DIR), { recursive: true, mode: 0o700 });
    await chmod(join(client.dir, KEYS_DIR), 0o700);
    await mkdir(join(client.dir, STREAMS_DIR), { recursive: true, mode: 0o700 });
    await mkdir(join(client.dir, CONTROL_DIR), { recursive: true, mode: 0o700 });
    await client.writeDesired();
    client.follow();
    return client;
  }

  /** The newest status read, or null before the sidecar wrote one. */
  get status(): SidecarStatus | null {
    return this.current;
  }

  /**
   * True while the sidecar's status is fresh and it was not reported gone. Fresh is judged as
   * of the newest read of status.json, not of now: a collector whose own event loop was held
   * (a CPU-starved pod) found the status "older than 5000 ms" before it had read the newer one
   * waiting on disk, failed every proxied stream of its pod and had them all demoted (`make
   * fleet N=1000`, load 50). A read happens at least once a heartbeat; should none complete,
   * the status still counts as stale past READ_STALL_FACTOR × staleMs by the clock.
   */
  available(): boolean {
    if (this.current === null || this.current.instance === this.goneInstance) return false;
    const at = Date.parse(this.current.updatedAt);
    return Number.isFinite(at) && this.readAt - at <= this.staleMs && this.now() - at <= READ_STALL_FACTOR * this.staleMs;
  }

  /** Why the sidecar counts as unavailable, for messages. */
  unavailableReason(): string {
    if (this.current !== null && this.current.instance === this.goneInstance) return 'the sshproxy sidecar process ended; waiting for it to start again';
    if (this.current === null) return `the sshproxy sidecar has not written ${STATUS_FILE} in ${this.dir} yet`;
    return `the sshproxy sidecar's status in ${this.dir} is older than ${this.staleMs} ms (last ${this.current.updatedAt})`;
  }

  /**
   * The sidecar process ended (standalone mode, where the collector is its parent): every
   * stream fails now rather than when its status goes stale; a new sidecar's status (another
   * `instance`) makes it available again.
   */
  markGone(): void {
    this.goneInstance = this.current?.instance ?? null;
    this.notify();
  }

  /**
   * Adds or updates a server. It enters desired.json, with its key and known_hosts written (mode
   * 0600; `@cert-authority` lines left out, see known-hosts.ts), when a stream or forward of it
   * is first asked for; one already there is updated now (the sidecar restarts its masters).
   */
  async setServer(server: SidecarServer): Promise<void> {
    this.registered.set(server.name, server);
    if (!this.servers.has(server.name)) return;
    this.activate(server.name);
    this.scheduleWrite();
    await this.flushed();
  }

  /**
   * Forgets a server that left this collector: its streams are withdrawn, the sidecar closes
   * its master, and the copies of its key and known_hosts are deleted unless another server
   * still uses the same (a key is not kept on a pod that no longer collects the server).
   */
  async removeServer(name: string): Promise<void> {
    this.registered.delete(name);
    if (!this.servers.has(name)) return;
    for (const [id, stream] of this.streams) if (stream.server === name) this.removeStream(id);
    for (const [id, f] of this.forwards) if (f.server === name) this.deleteForward(id);
    this.servers.delete(name);
    this.keyFiles.release(name);
    this.scheduleWrite();
    await this.flushed();
  }

  /** Puts a registered server into desired.json with its files (written before desired.json names them). */
  private activate(name: string): void {
    const server = this.registered.get(name);
    if (server === undefined) throw new Error(`sidecar: no server ${name} was set`);
    const { privateKey, knownHosts, ...rest } = server;
    // Without CA lines: OpenSSH would accept host certificates, the in-process checker does not.
    const files = this.keyFiles.use(name, privateKey, Buffer.from(withoutCertAuthorities(knownHosts), 'utf8'));
    this.servers.set(name, { ...rest, ...files });
  }

  /** Asks the sidecar to run `command` on `server`; returns the new stream's id. */
  addStream(server: string, command: string): string {
    if (!this.servers.has(server)) this.activate(server);
    const id = `${this.idPrefix}-${server.slice(0, 50)}-${++this.sequence}`;
    this.streams.set(id, { id, server, command });
    this.scheduleWrite();
    return id;
  }

  /** Withdraws a stream: the sidecar stops its command and removes its FIFOs. */
  removeStream(id: string): void {
    this.streamGenerations.delete(id);
    if (this.streams.delete(id)) this.scheduleWrite();
  }

  /**
   * Asks the sidecar for a local Unix socket forwarded to `remoteSocketPath` on `server` (the
   * instance's PostgreSQL socket) and resolves with the local directory to give pg as `host`
   * (the socket in it is `.s.PGSQL.<port>`), once the sidecar reports it ready. Calls for the
   * same forward share it. Rejects with a PglogError: the sidecar's code (SSH_* from the
   * server's master, SIDECAR_UNAVAILABLE) naming server and remote socket; SIDECAR_UNAVAILABLE
   * after `forwardTimeoutMs` naming what it waited for; `signal.reason` when aborted.
   */
  async forward(server: string, remoteSocketPath: string, port: number, signal?: AbortSignal): Promise<string> {
    if (!this.registered.has(server)) throw new PglogError('SIDECAR_UNAVAILABLE', `sidecar: no server ${server} was set`);
    const problem = remoteSocketProblem(remoteSocketPath);
    if (problem !== null) throw new PglogError('CONFIG_INVALID', `${server}: the socket path ${JSON.stringify(remoteSocketPath)} ${problem}`);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new PglogError('CONFIG_INVALID', `${server}: port ${port} is not in 1..65535`);
    const id = forwardId(server, remoteSocketPath, port);
    let spec = this.forwards.get(id);
    if (spec === undefined) {
      if (!this.servers.has(server)) this.activate(server);
      spec = { id, server, remoteSocket: remoteSocketPath, port };
      this.forwards.set(id, spec);
      this.scheduleWrite();
    }
    return waitForwardReady({ client: this, spec, timeoutMs: this.forwardTimeoutMs, ...(signal === undefined ? {} : { signal }) });
  }

  /** Withdraws a forward: the sidecar cancels it and removes its socket (sessions through it end). */
  removeForward(server: string, remoteSocketPath: string, port: number): void {
    if (this.deleteForward(forwardId(server, remoteSocketPath, port))) this.scheduleWrite();
  }

  /** The generation of desired.json that first held the forward (undefined before it was written). */
  forwardGeneration(id: string): number | undefined {
    return this.forwardGenerations.get(id);
  }

  /** Why desired.json could not be written last time, or null. */
  get lastWriteError(): Error | null {
    return this.writeError;
  }

  /** The stream's status in the newest status.json, or null when the sidecar has not seen it yet. */
  streamStatus(id: string): StreamStatus | null {
    return this.current?.streams[id] ?? null;
  }

  /**
   * Why the sidecar refused the whole desired.json that holds this stream or forward (it then
   * never reports the entry at all), as CONFIG_INVALID; null when it did not. An entry the
   * sidecar refused alone is reported `failed` under its own id instead (streamStatus).
   */
  desiredRefusal(kind: 'stream' | 'forward', id: string): StatusError | null {
    const generation = (kind === 'stream' ? this.streamGenerations : this.forwardGenerations).get(id);
    const s = this.current;
    if (generation === undefined || s === null || s.desiredError === undefined || s.desiredErrorGeneration === undefined) return null;
    return s.desiredErrorGeneration >= generation ? { code: 'CONFIG_INVALID', message: s.desiredError } : null;
  }

  /** Calls `listener` after every status read and availability change; returns the unsubscribe. */
  onChange(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves once desired.json holds everything asked so far (rejects when it cannot be written). */
  async flushed(): Promise<void> {
    while (this.writing !== null) await this.writing;
    if (this.writeError !== null) throw this.writeError;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watcher?.close();
    if (this.poller !== null) clearInterval(this.poller);
    this.streams.clear();
    this.streamGenerations.clear();
    for (const id of [...this.forwards.keys()]) this.deleteForward(id);
    this.scheduleWrite();
    await this.flushed().catch(() => undefined);
  }

  private deleteForward(id: string): boolean {
    this.forwardGenerations.delete(id);
    return this.forwards.delete(id);
  }

  private scheduleWrite(): void {
    this.dirty = true;
    if (this.writing !== null) return;
    this.writing = (async () => {
      // One turn of the event loop gathers every change made in it into one write.
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (this.dirty) {
        this.dirty = false;
        try {
          await this.writeDesired();
          this.writeError = null;
        } catch (e) {
          this.writeError = new PglogError('SIDECAR_UNAVAILABLE', `cannot write ${join(this.dir, DESIRED_FILE)}: ${(e as Error).message}`, { cause: e });
        }
      }
      this.writing = null;
    })();
  }

  private async writeDesired(): Promise<void> {
    const state: DesiredState = {
      version: PROTOCOL_VERSION,
      generation: ++this.generation,
      servers: [...this.servers.values()],
      streams: [...this.streams.values()],
      forwards: [...this.forwards.values()],
    };
    const path = join(this.dir, DESIRED_FILE);
    const temp = `${path}.${process.pid}.tmp`;
    await this.keyFiles.writeNew();
    await writeFile(temp, JSON.stringify(state), { mode: 0o600 });
    await rename(temp, path);
    await this.keyFiles.deleteUnused();
    // Only forwards still wanted: one removed during the write must not get a generation.
    for (const f of state.forwards) {
      if (this.forwards.get(f.id) === f && !this.forwardGenerations.has(f.id)) this.forwardGenerations.set(f.id, state.generation);
    }
    for (const st of state.streams) {
      if (this.streams.get(st.id) === st && !this.streamGenerations.has(st.id)) this.streamGenerations.set(st.id, state.generation);
    }
    this.notify();
  }

  private follow(): void {
    try {
      this.watcher = watch(this.dir, { persistent: false }, (_event, name) => {
        if (name === STATUS_FILE) this.readStatus();
      });
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = null;
        this.startPolling();
      });
    } catch {
      // No inotify (or out of watches): the poll alone still works.
      this.watcher = null;
    }
    this.startPolling();
    this.readStatus();
  }

  /**
   * Reads the status every pollMs without a watcher, and once a heartbeat with one: the
   * watcher reports each new status, and the poll only covers a missed notice. (Four reads a
   * second, each an open, a read and a close through the threadpool, were a per-second cost
   * of every collector, issue 15.)
   */
  private startPolling(): void {
    if (this.poller !== null) clearInterval(this.poller);
    if (this.closed) return;
    this.poller = setInterval(() => this.readStatus(), this.watcher === null ? this.pollMs : Math.max(this.pollMs, HEARTBEAT_MS));
    this.poller.unref();
  }

  private readStatus(): void {
    if (this.reading || this.closed) return;
    this.reading = true;
    void readFile(join(this.dir, STATUS_FILE), 'utf8')
      .then(
        (text) => {
          try {
            this.current = parseSidecarStatus(text);
          } catch {
            // A status we cannot read counts as none; staleness then fails the streams.
          }
        },
        () => undefined,
      )
      .finally(() => {
        this.reading = false;
        this.readAt = this.now();
        this.notify();
      });
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }
}
