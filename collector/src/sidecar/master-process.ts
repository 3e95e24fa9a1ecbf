/**
 * One OpenSSH ControlMaster (`ssh -M -N`) for one (server, slot), kept up: `connecting` until
 * its control socket appears (ssh binds it only once authenticated), then `up`; when ssh
 * exits or cannot be started, `backoff` with the classified error, and started again after a
 * capped, jittered exponential delay. Failures that retrying cannot fix (host key, refused
 * key, unusable key file) wait the full cap, so a refused server is not hammered.
 */
import { stat, unlink } from 'node:fs/promises';

import type { ErrorCode } from '@pglog/common/errors.ts';
import { isLastingSshFailure } from '@pglog/common/errors.ts';
import type { DesiredServer, MasterState, StatusError } from '@pglog/common/sidecar/contract.ts';
import { Backoff } from '@pglog/common/time/backoff.ts';

import { Child, type ChildExit } from './children.ts';
import { controlSocketPath, masterArgs, serverFingerprint } from './openssh-args.ts';
import { classifyOpenSshError } from './openssh-errors.ts';
import { checkKeyFile, type PidsFile } from './sidecar-files.ts';

export interface MasterBackoffOptions {
  /** First delay ceiling (default 1000 ms), doubling per failure. */
  baseMs: number;
  /** Largest delay (default 30000 ms). */
  capMs: number;
  /** Uniform random in [0, 1) (default Math.random). */
  random?: () => number;
}

export const DEFAULT_MASTER_BACKOFF: MasterBackoffOptions = { baseMs: 1000, capMs: 30_000 };

export interface MasterContext {
  dir: string;
  uid: number;
  sshBinary: string;
  pids: PidsFile;
  backoff: MasterBackoffOptions;
  /** Called after every state change (and error change). */
  onChange(master: SshMaster, previous: MasterState): void;
  /**
   * The master printed "channel N: open failed: ...": the server refused a connection through
   * one of its forwards (typically: no PostgreSQL socket at the remote path). The client
   * only sees its connection closed, so this line is the sidecar's to log.
   */
  onChannelRefused?(master: SshMaster, line: string): void;
  /** Resolves once no earlier master holds `socket` any more (a stop still in progress). */
  socketFree(socket: string): Promise<void>;
}

/** Numbers the runs of all masters that came up (see SshMaster.connection). */
let connections = 0;

/** How often the control socket is looked for while connecting. */
const SOCKET_POLL_MS = 50;
/** SIGTERM, then SIGKILL after this long. */
const STOP_GRACE_MS = 2000;

export class SshMaster {
  readonly server: DesiredServer;
  readonly slot: number;
  readonly fingerprint: string;
  readonly socket: string;
  state: MasterState = 'connecting';
  /** Starts after the first one. */
  restarts = 0;
  error: StatusError | undefined;
  /**
   * Which run of ssh this is, new every time the master comes up: forwards set up on an
   * earlier run are gone with it (forward-plan.ts). 0 before it was ever up.
   */
  connection = 0;
  /** The delay before the restart, while in backoff (for the log line). */
  retryDelayMs = 0;
  private readonly ctx: MasterContext;
  private readonly backoff: Backoff;
  private child: Child | null = null;
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private attempt = 0;

  constructor(server: DesiredServer, slot: number, ctx: MasterContext) {
    this.server = server;
    this.slot = slot;
    this.fingerprint = serverFingerprint(server);
    this.socket = controlSocketPath(ctx.dir, server, slot);
    this.ctx = ctx;
    this.backoff = new Backoff({ baseMs: ctx.backoff.baseMs, capMs: ctx.backoff.capMs, resetAfterMs: 60_000, random: ctx.backoff.random ?? Math.random });
  }

  get name(): string {
    return `${this.server.name}/${this.slot}`;
  }

  /** The ssh master's pid while it runs. */
  get pid(): number | null {
    return this.child?.running === true ? this.child.pid : null;
  }

  /** Starts the first attempt; failures are reported through onChange, never thrown. */
  start(): void {
    this.launch().catch((e: unknown) =>
      this.failed({ code: 'SSH_CONNECT_FAILED', message: `${this.describe()}: ssh could not be started: ${(e as Error).message}` }),
    );
  }

  /** Stops for good: cancels a pending restart, ends ssh, removes the socket. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    const child = this.child;
    if (child !== null) await child.terminate(STOP_GRACE_MS);
    await unlink(this.socket).catch(() => undefined);
  }

  private describe(): string {
    return `${this.server.user}@${this.server.host}:${this.server.port}`;
  }

  private async launch(): Promise<void> {
    const attempt = ++this.attempt;
    for (const file of [this.server.identityFile, this.server.knownHostsFile]) {
      const refused = await checkKeyFile(this.ctx.dir, file, this.ctx.uid);
      if (this.stopping) return;
      if (refused !== null) {
        this.failed({ code: refused.code, message: `${this.describe()}: ${refused.message}` });
        return;
      }
    }
    await this.ctx.socketFree(this.socket);
    // A socket left by a master that died must go: ssh refuses to bind over it and would run
    // on without multiplexing, while the stale file looked like a live master.
    await unlink(this.socket).catch(() => undefined);
    if (this.stopping) return;
    let partial = '';
    const child = new Child(this.ctx.sshBinary, masterArgs(this.ctx.dir, this.server, this.slot), this.ctx.pids, (chunk) => {
      const lines = (partial + chunk).split(/\r?\n/);
      partial = (lines.pop() ?? '').slice(-1000);
      for (const line of lines) if (/^channel \d+: open failed/.test(line)) this.ctx.onChannelRefused?.(this, line.trim());
    });
    this.child = child;
    const limitS = 2 * this.server.connectTimeoutS + 5;
    const deadline = Date.now() + limitS * 1000;
    let timedOut = false;
    // Child.exited never rejects.
    void child.exited.then((exit) => {
      if (this.child === child) this.child = null;
      if (this.stopping || attempt !== this.attempt) return;
      this.backoff.disconnected(Date.now());
      this.failed(
        timedOut ? { code: 'SSH_TIMEOUT', message: `${this.describe()}: no authenticated connection within ${limitS} s` } : this.exitError(child, exit),
      );
    });
    // ssh binds the control socket once it is authenticated: that is "up".
    while (this.child === child && this.state === 'connecting' && !this.stopping) {
      if (await isSocket(this.socket)) {
        if (this.child !== child || this.stopping) return;
        this.backoff.connected(Date.now());
        this.connection = ++connections;
        this.setState('up');
        return;
      }
      if (Date.now() > deadline) {
        timedOut = true;
        child.signal('SIGTERM');
        return;
      }
      await new Promise((r) => setTimeout(r, SOCKET_POLL_MS));
    }
  }

  private exitError(child: Child, exit: ChildExit): StatusError {
    if (exit.spawnError !== undefined)
      return { code: 'SSH_CONNECT_FAILED', message: `${this.describe()}: ${this.ctx.sshBinary} could not be started: ${exit.spawnError}` };
    return classifyOpenSshError(child.stderr, this.server, exit);
  }

  private failed(error: StatusError): void {
    if (this.stopping) return;
    this.error = error;
    const delay = isLastingSshFailure(error.code as ErrorCode) ? this.backoff.nextAtCap() : this.backoff.next();
    this.retryDelayMs = delay;
    this.setState('backoff');
    this.timer = setTimeout(() => {
      if (this.stopping) return;
      this.restarts++;
      this.setState('connecting');
      this.start();
    }, delay);
  }

  private setState(next: MasterState): void {
    const previous = this.state;
    this.state = next;
    this.ctx.onChange(this, previous);
  }
}

async function isSocket(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isSocket();
  } catch {
    return false;
  }
}
