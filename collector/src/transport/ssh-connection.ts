/**
 * The in-process SSH transport: one ssh2 Client per server, shared by every stream of every
 * PostgreSQL instance on it (each stream is one session channel).
 *
 * - Connects lazily on the first spawn and again on demand after a loss, never before the
 *   jittered backoff has passed (a refused host key or key goes straight to the cap).
 * - Handshakes are paced process-wide by a shared ConnectLimiter; a handshake slot is taken only
 *   once the server has identified itself on the TCP connection (ssh-socket.ts).
 * - The host key is checked against known_hosts inside key exchange (fail closed), so no
 *   command is ever sent to, and no byte read from, a server that was not recognized.
 * - Keepalives detect a dead or hung server; every command of the lost connection then fails
 *   with the cause (SSH_TIMEOUT, SSH_CONNECT_FAILED) so its stream can resume elsewhere.
 * - At most maxSessions channels are open at once (OpenSSH's MaxSessions refuses more);
 *   further spawns wait in order for a slot.
 * - A server that sends past a channel's SSH window is cut off (SSH_WINDOW_EXCEEDED,
 *   ssh-window-guard.ts): one broken or hostile server cannot fill the heap that every other
 *   target of the process shares.
 */
import type { Socket } from 'node:net';

import { isLastingSshFailure, PglogError } from '@pglog/common/errors.ts';
import { Backoff, type BackoffOptions } from '@pglog/common/time/backoff.ts';
import { type Clock, realClock } from '@pglog/common/time/clock.ts';
import { type CipherAlgorithm, Client, type ClientChannel } from 'ssh2';

import type { ConnectLimiter } from './connect-limiter.ts';
import { type KnownHosts, knownHostsFor, knownKeyTypes, parseKnownHosts, sshKeyType, verifyHostKey } from './known-hosts.ts';
import type { RemoteProcess, RemoteShell } from './remote-shell.ts';
import { Semaphore } from './semaphore.ts';
import { clientAlgorithms, PREFERRED_CIPHERS } from './ssh-algorithms.ts';
import { describeEndpoint, isChannelOpenRefusal, type SshEndpoint, toSshError, windowExceededError } from './ssh-errors.ts';
import { SshRemoteProcess, watchExit } from './ssh-process.ts';
import { openSshSocket } from './ssh-socket.ts';
import { DEFAULT_CHANNEL_WINDOW_BYTES, holdWindow, openSessionsWithWindow } from './ssh-window.ts';

export type SshConnectionState = 'idle' | 'connecting' | 'ready' | 'backoff' | 'closed';

export interface SshConnectionOptions {
  /** Target name, for messages. */
  target: string;
  host: string;
  port: number;
  username: string;
  /** The private key (OpenSSH or PEM). Never logged. */
  privateKey: Buffer;
  /** Where the key came from (file path or "secret NAME"), for messages. Default: "key of target NAME". */
  privateKeySource?: string;
  knownHosts: { text: string; source: string };
  /**
   * knownHosts already parsed (the pool parses each distinct text once); the connection keeps
   * only the entries that name its server.
   */
  parsedKnownHosts?: KnownHosts;
  /** Handshake pacing shared by every connection of the process. */
  limiter: ConnectLimiter;
  /** Session channels open at once: the server's MaxSessions. Default 10 (OpenSSH's default). */
  maxSessions?: number;
  /** Default 5000 ms. */
  keepaliveIntervalMs?: number;
  /** Unanswered keepalives before the connection counts as lost. Default 3. */
  keepaliveCountMax?: number;
  /** TCP connect until the server identifies itself (ssh-socket.ts). Default 10000 ms. */
  connectTimeoutMs?: number;
  /** Key exchange and authentication. Default 20000 ms. */
  readyTimeoutMs?: number;
  backoff?: BackoffOptions;
  /**
   * Most bytes of a command's output held in the collector while its consumer does not read
   * (the SSH window of each session channel: ssh-window.ts), MIN_ to MAX_CHANNEL_WINDOW_BYTES,
   * as --ssh-window is checked. Default DEFAULT_CHANNEL_WINDOW_BYTES.
   */
  channelWindowBytes?: number;
  /** Cipher preference (benchmarks); default PREFERRED_CIPHERS. */
  ciphers?: readonly CipherAlgorithm[];
  clock?: Clock;
  /** Every state change; `error` is the cause when the connection failed or was lost. */
  onStateChange?(state: SshConnectionState, error?: PglogError): void;
}

/**
 * Pauses between retries of a refused channel open (see openSession): about 3 s in all. On a
 * loaded machine sshd took longer than the 0.75 s of an earlier version to free a closed
 * session (a CI run refused one of 400 short commands).
 */
const CHANNEL_OPEN_RETRY_DELAYS_MS = [50, 100, 200, 400, 800, 1600];

/** How long close() waits for channels and the server to finish before cutting the socket. */
const CLOSE_GRACE_MS = 2000;

export class SshConnection implements RemoteShell {
  /** The options but known_hosts, of which only the server's own entries are kept (below). */
  private readonly o: Omit<SshConnectionOptions, 'knownHosts' | 'parsedKnownHosts'>;
  private readonly windowBytes: number;
  private readonly endpoint: SshEndpoint;
  private readonly keySource: string;
  private readonly knownHosts: KnownHosts;
  private readonly sessions: Semaphore;
  private readonly backoff: Backoff;
  private readonly clock: Clock;
  /** Aborted by close(): ends backoff waits, limiter waits and session waits. */
  private readonly closing = new AbortController();
  private readonly processes = new Set<SshRemoteProcess>();
  private currentState: SshConnectionState = 'idle';
  private client: Client | null = null;
  private connecting: Promise<Client> | null = null;
  private retryAt = -Infinity;
  private spreadDone = false;
  private closed: Promise<void> | null = null;
  private error: PglogError | null = null;
  private cipher: string | null = null;
  private connectCount = 0;
  /** The socket of the attempt in progress, between its TCP connect and ssh2 taking it. */
  private socket: Socket | null = null;

  constructor(options: SshConnectionOptions) {
    const { knownHosts: _text, parsedKnownHosts: _parsed, ...kept } = options;
    this.o = kept;
    // Validated once, where it is parsed (collect-config.ts --ssh-window).
    this.windowBytes = options.channelWindowBytes ?? DEFAULT_CHANNEL_WINDOW_BYTES;
    this.endpoint = { target: options.target, host: options.host, port: options.port, username: options.username };
    this.keySource = options.privateKeySource ?? `key of target ${options.target}`;
    const parsed = options.parsedKnownHosts ?? parseKnownHosts(options.knownHosts.text, options.knownHosts.source);
    this.knownHosts = knownHostsFor(parsed, options.host, options.port);
    this.sessions = new Semaphore(options.maxSessions ?? 10);
    this.backoff = new Backoff(options.backoff);
    this.clock = options.clock ?? realClock;
  }

  get state(): SshConnectionState {
    return this.currentState;
  }

  /** The most recent connect failure or loss (kept after a successful reconnect, for status). */
  get lastError(): PglogError | null {
    return this.error;
  }

  /** Successful connections, the first included. */
  get connects(): number {
    return this.connectCount;
  }

  /** Successful connections after the first. */
  get reconnects(): number {
    return Math.max(0, this.connectCount - 1);
  }

  /** Cipher negotiated (client to server) by the latest key exchange, e.g. `aes128-gcm@openssh.com`. */
  get negotiatedCipher(): string | null {
    return this.cipher;
  }

  /** Session channels open now. */
  get openSessions(): number {
    return this.sessions.inUse;
  }

  /** Spawns waiting for a session slot. */
  get waitingSessions(): number {
    return this.sessions.waiting;
  }

  async spawn(command: string, options?: { signal?: AbortSignal | undefined }): Promise<RemoteProcess> {
    if (this.closed !== null) throw this.closedError();
    const signal = this.untilClosed(options?.signal);
    const release = await this.sessions.acquire(signal);
    try {
      const client = await this.readyClient(signal);
      const channel = await this.openSession(client, command);
      const proc = new SshRemoteProcess(channel, () => {
        this.processes.delete(proc);
        release();
      });
      this.processes.add(proc);
      if (signal.aborted) {
        proc.close();
        throw signal.reason;
      }
      return proc;
    } catch (e) {
      release();
      throw e;
    }
  }

  /**
   * Opens a `direct-streamlocal@openssh.com` channel to a Unix socket on the server (the SQL
   * session to PostgreSQL's socket): bytes go both ways over this connection, and no TCP port
   * is opened on the server. It does not take a session slot (MaxSessions counts sessions,
   * not forwarded channels). Rejects with SQL_CONNECT_FAILED when the server cannot connect
   * to the socket (nothing listens there: PostgreSQL is down, or the path is wrong), with an
   * SSH_* code when the connection itself fails.
   */
  async openStreamLocal(socketPath: string, options?: { signal?: AbortSignal | undefined }): Promise<ClientChannel> {
    if (this.closed !== null) throw this.closedError();
    const signal = this.untilClosed(options?.signal);
    const client = await this.readyClient(signal);
    const channel = await new Promise<ClientChannel>((resolve, reject) => {
      try {
        client.openssh_forwardOutStreamLocal(socketPath, (err, ch) => {
          if (err === undefined || err === null) resolve(ch);
          // sshd answers a failed connect(2) to the socket with "open failed".
          else
            reject(
              this.channelFailure(
                client,
                () =>
                  new PglogError(
                    'SQL_CONNECT_FAILED',
                    `${describeEndpoint(this.endpoint)}: the server could not connect to the Unix socket ${socketPath} (${err.message}): is PostgreSQL running there, and are sql.socketDirectory and sql.port right?`,
                    { cause: err },
                  ),
              ),
            );
        });
      } catch (e) {
        reject(
          new PglogError('SSH_CONNECT_FAILED', `${describeEndpoint(this.endpoint)}: the connection was lost before the socket forward could open`, {
            cause: e,
          }),
        );
      }
    });
    if (signal.aborted) {
      channel.destroy();
      throw signal.reason;
    }
    return channel;
  }

  /** Ends every command and the connection; later spawns reject. Idempotent. */
  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async shutdown(): Promise<void> {
    const closedError = this.closedError();
    this.setState('closed');
    this.closing.abort(closedError);
    this.sessions.rejectWaiters(closedError);
    const client = this.client;
    this.client = null;
    const procs = [...this.processes];
    for (const p of procs) p.close();
    const graceEnd = this.clock.now() + CLOSE_GRACE_MS;
    const sleepUntilGraceEnd = (): Promise<void> => realClock.sleep(graceEnd - this.clock.now());
    await Promise.race([Promise.allSettled(procs.map((p) => p.exit)), sleepUntilGraceEnd()]);
    if (client !== null) {
      const gone = new Promise<void>((resolve) => client.once('close', () => resolve()));
      client.end();
      await Promise.race([gone, sleepUntilGraceEnd()]);
      client.destroy();
    }
    for (const p of procs) p.fail(closedError);
  }

  private closedError(): PglogError {
    return new PglogError('SSH_CONNECT_FAILED', `${describeEndpoint(this.endpoint)}: the connection was closed by the collector`);
  }

  private setState(state: SshConnectionState, error?: PglogError): void {
    if (this.currentState === 'closed') return;
    this.currentState = state;
    this.o.onStateChange?.(state, error);
  }

  /** The connected client, connecting first if needed; concurrent callers share one attempt. */
  private readyClient(signal: AbortSignal): Promise<Client> {
    if (this.client !== null) return Promise.resolve(this.client);
    if (this.connecting === null) {
      const attempt = this.connectOnce().finally(() => {
        this.connecting = null;
      });
      attempt.catch(() => undefined); // awaited by the spawns below; a lone rejection is not unhandled
      this.connecting = attempt;
    }
    return raceAbort(this.connecting, signal);
  }

  private async connectOnce(): Promise<Client> {
    const stop = this.closing.signal;
    const wait = this.retryAt - this.clock.now();
    if (wait > 0) await this.clock.sleep(wait, stop);
    this.setState('connecting');
    if (!this.spreadDone) {
      this.spreadDone = true;
      const spread = this.o.limiter.initialDelayMs();
      if (spread > 0) await this.clock.sleep(spread, stop);
    }
    let client: Client;
    let release: (() => void) | null = null;
    try {
      release = await this.openAndQueue(stop);
      client = await this.handshake(this.socket!);
    } catch (e) {
      const error = toSshError(e, this.endpoint, this.keySource);
      this.error = error;
      this.retryAt = this.clock.now() + (isLastingSshFailure(error.code) ? this.backoff.nextAtCap() : this.backoff.next());
      this.setState('backoff', error);
      throw error;
    } finally {
      this.socket = null;
      release?.();
    }
    if (this.closed !== null) {
      client.destroy();
      throw this.closedError();
    }
    this.client = client;
    this.connectCount++;
    this.backoff.connected(this.clock.now());
    this.watch(client);
    this.setState('ready');
    return client;
  }

  /**
   * Opens the TCP connection and waits for the server to identify itself, then for a handshake
   * slot; the connect permit is held until then, so only so many opened connections wait.
   * Leaves the socket in `this.socket`; resolves with the slot's release.
   */
  private async openAndQueue(stop: AbortSignal): Promise<() => void> {
    const releaseConnect = await this.o.limiter.acquireConnect(stop);
    try {
      const socket = await openSshSocket(this.endpoint, this.o.connectTimeoutMs ?? 10_000, stop);
      this.socket = socket;
      // Until ssh2 listens: a reset while waiting for the slot must not be an unhandled 'error'.
      socket.on('error', () => undefined);
      return await this.o.limiter.acquire(stop);
    } catch (e) {
      this.socket?.destroy();
      throw e;
    } finally {
      releaseConnect();
    }
  }

  /** Key exchange with the host key check and authentication, on a socket the server spoke on. */
  private handshake(socket: Socket): Promise<Client> {
    if (socket.destroyed) {
      return Promise.reject(
        new PglogError('SSH_CONNECT_FAILED', `${describeEndpoint(this.endpoint)}: the connection was closed while waiting for a handshake slot`),
      );
    }
    const client = new Client();
    let refusal: PglogError | null = null;
    client.on('handshake', (negotiated) => {
      this.cipher = negotiated.cs.cipher;
    });
    return new Promise<Client>((resolve, reject) => {
      let settled = false;
      const fail = (e: unknown): void => {
        if (settled) return;
        settled = true;
        client.destroy();
        // A refused host key surfaces from ssh2 as a generic handshake error: report ours.
        reject(refusal ?? toSshError(e, this.endpoint, this.keySource));
      };
      // ssh2 may emit more errors after the first; an EventEmitter without an 'error'
      // listener would throw them, so this one stays for the client's lifetime.
      client.on('error', fail);
      client.once('close', () =>
        fail(new PglogError('SSH_CONNECT_FAILED', `${describeEndpoint(this.endpoint)}: the server closed the connection during the handshake`)),
      );
      client.once('ready', () => {
        settled = true;
        // As OpenSSH's client does: our small packets (an SQL query, a window adjustment) go
        // out at once instead of waiting behind an unacknowledged one (Nagle + delayed ACK).
        client.setNoDelay(true);
        try {
          // A server that ignores the window is cut off with its own error: reported through
          // the client's error event, where watch() keeps the first cause, so every command on
          // the connection fails with it, and the socket destroyed, so nothing more is read.
          openSessionsWithWindow(client, this.windowBytes, (overrun) => {
            client.emit('error', windowExceededError(this.endpoint, overrun));
            client.destroy();
          });
        } catch (e) {
          client.destroy();
          reject(e instanceof PglogError ? e : new PglogError('SSH_CONNECT_FAILED', String(e), { cause: e }));
          return;
        }
        resolve(client);
      });
      try {
        client.connect({
          sock: socket,
          host: this.o.host,
          port: this.o.port,
          username: this.o.username,
          privateKey: this.o.privateKey,
          hostVerifier: (key: Buffer): boolean => {
            const verdict = verifyHostKey(this.knownHosts, this.o.host, this.o.port, sshKeyType(key) ?? 'unknown', key);
            if (verdict.ok) return true;
            refusal = new PglogError(verdict.code, `${describeEndpoint(this.endpoint)}: ${verdict.message}`);
            return false;
          },
          algorithms: clientAlgorithms(knownKeyTypes(this.knownHosts, this.o.host, this.o.port), this.o.ciphers ?? PREFERRED_CIPHERS),
          keepaliveInterval: this.o.keepaliveIntervalMs ?? 5000,
          keepaliveCountMax: this.o.keepaliveCountMax ?? 3,
          readyTimeout: this.o.readyTimeoutMs ?? 20_000,
          // Never fall back to an agent or password prompts: the configured key or nothing.
          tryKeyboard: false,
        });
      } catch (e) {
        fail(e); // thrown synchronously: the key cannot be parsed
      }
    });
  }

  /** After the handshake: a loss fails every unfinished command with its cause. */
  private watch(client: Client): void {
    let cause: PglogError | null = null;
    client.on('error', (e: unknown) => {
      cause ??= toSshError(e, this.endpoint, this.keySource);
    });
    // ssh2 emits the client's 'close' before it ends the channels, so commands fail here
    // before their stdout sees an end that could pass for a normal one.
    client.once('close', () => {
      if (this.client !== client) return;
      this.client = null;
      const error = cause ?? new PglogError('SSH_CONNECT_FAILED', `${describeEndpoint(this.endpoint)}: the server or the network closed the connection`);
      this.error = error;
      const now = this.clock.now();
      this.backoff.disconnected(now);
      this.retryAt = now + this.backoff.next();
      for (const p of [...this.processes]) p.fail(error);
      this.setState('backoff', error);
    });
  }

  /**
   * Runs `command` on a new session channel. OpenSSH frees a session only when it garbage-
   * collects the closed channel, which can come after it reads our next CHANNEL_OPEN in the
   * same batch: a channel opened right after another closed may be refused although our count
   * is within MaxSessions. Refusals are retried briefly; a server whose MaxSessions really is
   * lower than ours still fails, after about 3 s.
   */
  private async openSession(client: Client, command: string): Promise<ClientChannel> {
    for (const delayMs of CHANNEL_OPEN_RETRY_DELAYS_MS) {
      try {
        return await this.exec(client, command);
      } catch (e) {
        if (!(e instanceof PglogError) || !isChannelOpenRefusal(e.cause) || this.client !== client) throw e;
        await this.clock.sleep(delayMs, this.closing.signal);
      }
    }
    return this.exec(client, command);
  }

  /** `signal` (if any) together with close(): either ends a wait. */
  private untilClosed(signal: AbortSignal | undefined): AbortSignal {
    return signal === undefined ? this.closing.signal : AbortSignal.any([signal, this.closing.signal]);
  }

  /**
   * Why a channel request on `client` failed. One cut off by close() or a lost connection
   * fails with that cause (recorded before ssh2 fails the pending requests), not ssh2's "No
   * response"; otherwise with `own`, the refusal itself.
   */
  private channelFailure(client: Client, own: () => PglogError): PglogError {
    if (this.closed !== null) return this.closedError();
    if (this.client !== client && this.error !== null) return this.error;
    return own();
  }

  private exec(client: Client, command: string): Promise<ClientChannel> {
    return new Promise<ClientChannel>((resolve, reject) => {
      try {
        client.exec(command, (err, channel) => {
          if (err === undefined || err === null) {
            try {
              resolve(watchExit(holdWindow(client, channel, this.windowBytes)));
            } catch (e) {
              channel.close();
              reject(e instanceof PglogError ? e : new PglogError('SSH_CHANNEL_FAILED', String(e), { cause: e }));
            }
          } else reject(this.channelFailure(client, () => toSshError(err, this.endpoint, this.keySource)));
        });
      } catch (e) {
        // ssh2 throws "Not connected" when the socket died before we noticed.
        reject(
          new PglogError('SSH_CONNECT_FAILED', `${describeEndpoint(this.endpoint)}: the connection was lost before the command could start`, { cause: e }),
        );
      }
    });
  }
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}
