/**
 * One run of one stream: its two FIFOs and the ssh mux client whose output goes into them.
 *
 * The client is started through `sh`, which opens the FIFOs for writing and then execs ssh.
 * Opening a FIFO for writing blocks until the collector opens it for reading, and it blocks
 * in that shell, not in the sidecar: the sidecar never opens a FIFO itself, so none of its
 * threads can be held by a collector that is late. ssh then has real O_WRONLY FIFOs as its
 * standard output and error, and a reader that goes away makes its next write fail (EPIPE),
 * which ends the channel. The paths reach the shell as positional parameters, never as text
 * of its script.
 */
import { execFile } from 'node:child_process';
import { unlink } from 'node:fs/promises';
import { promisify } from 'node:util';

import { type DesiredServer, type StatusError, streamFifos } from '@pglog/common/sidecar/contract.ts';

import { Child, type ChildExit } from './children.ts';
import { streamClientArgs } from './openssh-args.ts';
import type { PidsFile } from './sidecar-files.ts';

const run = promisify(execFile);

/** `waiting` for its master, `starting` (making FIFOs), `running`, then `exited` or `failed`. */
export type StreamRunState = 'waiting' | 'starting' | 'running' | 'exited' | 'failed';

/** $1 and $2 are the FIFOs, the rest is the ssh command line. */
const OPEN_FIFOS_AND_EXEC = 'out=$1 err=$2; shift 2; exec "$@" >"$out" 2>"$err"';
const KILL_GRACE_MS = 2000;

export interface StreamContext {
  dir: string;
  sshBinary: string;
  pids: PidsFile;
  onChange(stream: StreamRun): void;
}

export class StreamRun {
  readonly id: string;
  readonly server: string;
  readonly command: string;
  slot: number;
  state: StreamRunState = 'waiting';
  exitCode: number | null = null;
  signal: string | null = null;
  error: StatusError | undefined;
  private readonly ctx: StreamContext;
  private child: Child | null = null;
  /** Removed from desired.json: nothing about it is reported any more. */
  private removed = false;
  /** Removed or killed at shutdown: it must not be started any more. */
  private cancelled = false;

  constructor(id: string, server: string, command: string, slot: number, ctx: StreamContext) {
    this.id = id;
    this.server = server;
    this.command = command;
    this.slot = slot;
    this.ctx = ctx;
  }

  get fifos(): { out: string; err: string } {
    const f = streamFifos(this.id);
    return { out: `${this.ctx.dir}/${f.out}`, err: `${this.ctx.dir}/${f.err}` };
  }

  /** The pid of its process group (the shell, then ssh), while it runs. */
  get pid(): number | null {
    return this.child?.running === true ? this.child.pid : null;
  }

  /** Makes the FIFOs and starts the client on `server`'s master `slot`. Never throws: a failure is state `failed`. */
  async start(server: DesiredServer): Promise<void> {
    if (this.state !== 'waiting' || this.cancelled) return;
    this.setState('starting');
    const { out, err } = this.fifos;
    try {
      await removeFifos(out, err);
      // Node has no mkfifo(3); the binary is cheap to spawn from this small-heap process.
      await run('mkfifo', ['-m', '600', out, err]);
    } catch (e) {
      this.fail(`the FIFOs could not be made: ${(e as Error).message.split('\n')[0] ?? ''}`);
      return;
    }
    if (this.cancelled) {
      await removeFifos(out, err);
      return;
    }
    const child = new Child(
      'sh',
      ['-c', OPEN_FIFOS_AND_EXEC, 'pglog-sshproxy-stream', out, err, this.ctx.sshBinary, ...streamClientArgs(this.ctx.dir, server, this.slot, this.command)],
      this.ctx.pids,
    );
    this.child = child;
    this.setState('running');
    void child.exited.then((exit) => this.ended(child, exit)); // never rejects
  }

  /** Removed from desired.json: kills its process group (shell or ssh) and removes the FIFOs. */
  async remove(): Promise<void> {
    this.removed = true;
    this.cancelled = true;
    const child = this.child;
    if (child !== null) await child.terminate(KILL_GRACE_MS);
    await removeFifos(this.fifos.out, this.fifos.err);
  }

  /** Sidecar shutdown: kills it and records how it ended, keeping the FIFOs' removal for later. */
  async kill(): Promise<void> {
    this.cancelled = true;
    const child = this.child;
    if (child !== null) await child.terminate(KILL_GRACE_MS);
  }

  private ended(child: Child, exit: ChildExit): void {
    if (this.child === child) this.child = null;
    if (this.removed) return;
    if (exit.spawnError !== undefined) {
      this.fail(`sh could not be started: ${exit.spawnError}`);
      return;
    }
    // ssh's standard error is the .err FIFO; anything on the pipe came from the shell before
    // exec (a FIFO it could not open, ssh not found): the stream never ran.
    const shellSaid = child.stderr.trim();
    if (shellSaid !== '') {
      this.fail(`the ssh client could not be started: ${shellSaid.split('\n')[0] ?? ''}`);
      return;
    }
    this.exitCode = exit.code;
    this.signal = exit.signal === null ? null : exit.signal.replace(/^SIG/, '');
    this.setState('exited');
  }

  private fail(why: string): void {
    this.error = { code: 'SIDECAR_UNAVAILABLE', message: `stream ${this.id}: ${why}`.slice(0, 400) };
    this.setState('failed');
  }

  private setState(next: StreamRunState): void {
    this.state = next;
    this.ctx.onChange(this);
  }
}

async function removeFifos(out: string, err: string): Promise<void> {
  await unlink(out).catch(() => undefined);
  await unlink(err).catch(() => undefined);
}
