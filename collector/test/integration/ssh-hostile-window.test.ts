/**
 * A hostile SSH server that ignores the channel window, against the collector's in-process
 * transport: ssh2's own Server on 127.0.0.1 with a host key made here, accepting the
 * collector's key. It answers the follower's probe honestly (run here with /bin/sh on a real
 * log directory), then answers the segment the follower opens to read the log with one line
 * and 64 MiB of raw CHANNEL_DATA written through its protocol layer, past the window the
 * collector granted (ssh2's server-side channel would respect it). The follower's consumer
 * does not pull meanwhile, as when the store is slow.
 *
 * The collector must cut that connection with SSH_WINDOW_EXCEEDED, hold no more than one window
 * plus one packet of it, and keep following another target of the same connection pool, on a
 * real OpenSSH sshd, exactly.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { appendFileSync, chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

import { isPglogError, type PglogError } from '@pglog/common/errors.ts';
import { sshConnectionOptions } from '@pglog/test-support/ssh-connection.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { sleep, within } from '@pglog/test-support/wait.ts';
import ssh2, { type Connection, type ServerChannel } from 'ssh2';

import { LogFollower } from '../../src/follow/follower.ts';
import type { FollowItem } from '../../src/follow/types.ts';
import type { RemoteProcess, RemoteShell } from '../../src/transport/remote-shell.ts';
import type { SshConnectionState } from '../../src/transport/ssh-connection.ts';
import { SshConnectionPool } from '../../src/transport/ssh-pool.ts';
import { DEFAULT_CHANNEL_WINDOW_BYTES } from '../../src/transport/ssh-window.ts';
import { WINDOW_OVERRUN_TOLERANCE_BYTES } from '../../src/transport/ssh-window-guard.ts';
import { fastFollowerOptions } from '../helpers/fast-follower.ts';

// ssh2 is CommonJS: Client is a named export Node can see, Server and utils are not.
const { Server, utils } = ssh2;

const MiB = 1024 * 1024;
/** What the hostile server sends past the window. */
const FLOOD_BYTES = 64 * MiB;
/** 32 KiB less one: ssh2's own check (a window count of exactly 0) is never met. */
const PACKET_BYTES = 32 * 1024 - 1;
/** The hostile server keeps at most this much in its socket's buffer (its own memory counts in this process). */
const SEND_BUFFER_BYTES = MiB;
const WAIT_MS = 30_000;
const line = (what: string): string => `2024-01-01 00:00:00.000 UTC [1] LOG:  ${what}\n`;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
/**
 * Bytes of Buffers still referenced: the collector's buffered channel data among them. V8 frees
 * the memory of dead Buffers in the background after a collection, so this collects, waits a
 * moment and collects again, else a few MiB of just-dead packets may still be counted.
 */
async function retainedBuffers(): Promise<number> {
  gc();
  await sleep(50);
  gc();
  return process.memoryUsage().arrayBuffers;
}

/** A log directory as PostgreSQL's logging collector leaves it, readable by an SSH login. */
function logDirectory(root: string, name: string): { data: string; log: string; file: string } {
  const data = join(root, name);
  const log = join(data, 'log');
  mkdirSync(log, { recursive: true, mode: 0o755 });
  chmodSync(data, 0o755);
  const file = join(log, 'postgresql.log');
  writeFileSync(file, line('database system is ready to accept connections'), { mode: 0o644 });
  writeFileSync(join(data, 'current_logfiles'), 'stderr log/postgresql.log\n', { mode: 0o644 });
  return { data, log, file };
}

interface Flood {
  /** Bytes written past the first line when the collector cut the connection (or the flood ended). */
  sent: number;
  /** Whether the connection was cut before all of FLOOD_BYTES went out. */
  cut: boolean;
}

interface HostileServer {
  port: number;
  knownHosts: string;
  clientKey: Buffer;
  /** Lets the segments answered so far flood (they send one line, then wait for this). */
  release(): void;
  /** Settles when a flood is over: cut off, or all sent. */
  flooded: Promise<Flood>;
  /** Called after every batch the flood writes (the test samples the collector's memory). */
  onBatch: () => void;
  close(): Promise<void>;
}

interface ServerInternals {
  _protocol: { channelData(id: number, data: Buffer): void };
  _sock: Socket;
}

/** Writes raw CHANNEL_DATA packets past any window, paced by the socket's buffer, until cut off or done. */
function flood(conn: Connection, channel: ServerChannel, server: HostileServer, done: (f: Flood) => void): void {
  const { _protocol: protocol, _sock: sock } = conn as unknown as ServerInternals;
  const id = (channel as unknown as { outgoing: { id: number } }).outgoing.id;
  const packet = Buffer.alloc(PACKET_BYTES, 0x61);
  let sent = 0;
  let over = false;
  const finish = (cut: boolean): void => {
    if (over) return;
    over = true;
    done({ sent, cut });
  };
  sock.once('close', () => finish(sent < FLOOD_BYTES));
  const step = (): void => {
    if (over || sock.destroyed || !sock.writable) return finish(true);
    while (sent < FLOOD_BYTES && sock.writableLength < SEND_BUFFER_BYTES) {
      protocol.channelData(id, packet);
      sent += packet.length;
    }
    server.onBatch();
    if (sent >= FLOOD_BYTES) return finish(false);
    sock.once('drain', step);
  };
  step();
}

/** Runs the follower's probe here, on the real directory it names, and answers with its output and status. */
function answerHonestly(channel: ServerChannel, command: string): void {
  execFile('/bin/sh', ['-c', command], { encoding: 'buffer', maxBuffer: 16 * MiB }, (error, stdout, stderr) => {
    channel.stderr.write(stderr);
    channel.write(stdout);
    const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
    channel.exit(code);
    channel.end();
  });
}

async function startHostileServer(): Promise<HostileServer> {
  const hostKey = utils.generateKeyPairSync('ed25519');
  const clientKey = utils.generateKeyPairSync('ed25519');
  const clientPublic = utils.parseKey(clientKey.public);
  if (clientPublic instanceof Error) throw clientPublic;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let flooded!: (f: Flood) => void;
  const server: HostileServer = {
    port: 0,
    knownHosts: '',
    clientKey: Buffer.from(clientKey.private),
    release,
    flooded: new Promise<Flood>((resolve) => (flooded = resolve)),
    onBatch: () => undefined,
    close: () => new Promise<void>((resolve) => ssh.close(() => resolve())),
  };
  const ssh = new Server({ hostKeys: [hostKey.private] }, (conn) => {
    conn.on('error', () => undefined); // the collector cuts it
    conn.on('authentication', (ctx) => {
      if (ctx.method !== 'publickey' || ctx.key.algo !== clientPublic.type || !ctx.key.data.equals(clientPublic.getPublicSSH()))
        return ctx.reject(['publickey']);
      if (ctx.signature === undefined || clientPublic.verify(ctx.blob!, ctx.signature, ctx.hashAlgo)) return ctx.accept();
      ctx.reject(['publickey']);
    });
    conn.on('ready', () => {
      conn.on('session', (accept) => {
        accept().on('exec', (acceptExec, _reject, info) => {
          const channel = acceptExec();
          // The segment script reports its state in `PGLOG` lines; the probe does not.
          if (!info.command.includes('PGLOG ')) return answerHonestly(channel, info.command);
          channel.write(line('the first line, within the window'));
          void released.then(() => flood(conn, channel, server, flooded));
        });
      });
    });
  });
  await new Promise<void>((resolve) => ssh.listen(0, '127.0.0.1', resolve));
  server.port = (ssh.address() as { port: number }).port;
  server.knownHosts = `[127.0.0.1]:${server.port} ${hostKey.public.split(' ').slice(0, 2).join(' ')}\n`;
  return server;
}

/** Follows a log in the background and keeps what arrived per announced file. */
function record(follower: LogFollower, signal: AbortSignal): { files: Array<{ offset: number; chunks: Buffer[] }>; done: Promise<void> } {
  const files: Array<{ offset: number; chunks: Buffer[] }> = [];
  const done = (async () => {
    for await (const item of follower.follow(null, signal)) {
      if (item.kind === 'file') files.push({ offset: item.offset, chunks: [] });
      else if (item.kind === 'data') files.at(-1)!.chunks.push(Buffer.from(item.chunk));
    }
  })();
  return { files, done };
}

describe('a server that ignores the SSH window', { timeout: 180_000 }, () => {
  let root: string;
  let sshd: TestSshServer;
  let hostile: HostileServer;
  const pool = new SshConnectionPool({ limiter: { spreadMs: 0 } });
  const stop = new AbortController();

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'pglog-hostile-window-'));
    chmodSync(root, 0o755); // the sshd login user reads the healthy target's log
    sshd = await within(WAIT_MS, 'starting sshd', startSshServer());
    hostile = await startHostileServer();
  });
  after(async () => {
    stop.abort();
    await pool.closeAll();
    await hostile?.close();
    await sshd?.dispose();
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  test('is cut off with SSH_WINDOW_EXCEEDED holding at most a window and a packet; another target keeps streaming', async (t) => {
    // The healthy target: a log written every 20 ms, followed over a real sshd.
    const healthyDirs = logDirectory(root, 'healthy');
    const healthy = pool.get(sshConnectionOptions(sshd, { target: 'healthy' }));
    const healthyRecord = record(new LogFollower(healthy, fastFollowerOptions(healthyDirs, { target: 'healthy' })), stop.signal);
    let n = 0;
    const writer = setInterval(() => appendFileSync(healthyDirs.file, line(`healthy ${++n}`)), 20);
    try {
      const receivedHealthy = (): string => Buffer.concat(healthyRecord.files.flatMap((f) => f.chunks)).toString();
      await within(
        WAIT_MS,
        'the healthy target streaming',
        waitUntil(() => receivedHealthy().includes('healthy 3')),
      );

      // The hostile target, in the same pool, its segments' processes kept to look at.
      const states: Array<{ state: SshConnectionState; error?: PglogError }> = [];
      const hostileConnection = pool.get({
        target: 'hostile',
        host: '127.0.0.1',
        port: hostile.port,
        username: 'postgres',
        privateKey: hostile.clientKey,
        knownHosts: { text: hostile.knownHosts, source: 'the test' },
        backoff: { baseMs: 50, capMs: 1000 },
        onStateChange: (state, error) => states.push({ state, ...(error === undefined ? {} : { error }) }),
      });
      const procs: RemoteProcess[] = [];
      const shell: RemoteShell = {
        spawn: async (command, options) => {
          const proc = await hostileConnection.spawn(command, options);
          procs.push(proc);
          return proc;
        },
      };
      const hostileDirs = logDirectory(root, 'hostile');
      const items = new LogFollower(shell, fastFollowerOptions(hostileDirs, { target: 'hostile' })).follow(null, stop.signal);
      // The consumer takes the file and the first data, then stops pulling: a slow store.
      let item: IteratorResult<FollowItem>;
      do item = await within(WAIT_MS, 'the hostile segment starting', items.next());
      while (item.done !== true && item.value.kind !== 'data');
      assert.equal(item.done, false);

      const segment = procs.at(-1)!;
      const held = (): number => segment.stdout.readableLength + segment.stderr.readableLength;
      const baseline = await retainedBuffers();
      let maxHeld = 0;
      hostile.onBatch = () => {
        maxHeld = Math.max(maxHeld, held());
      };
      const healthyBefore = n;
      hostile.release();
      // The collector's side, sampled while it runs as well as at each of the server's batches.
      const sampler = setInterval(hostile.onBatch, 1);
      const flooded = await within(WAIT_MS, 'the flood ending', hostile.flooded).finally(() => clearInterval(sampler));
      hostile.onBatch();
      const retained = (await retainedBuffers()) - baseline;

      t.diagnostic(
        `the hostile channel held at most ${maxHeld} bytes; the server wrote ${flooded.sent} bytes past the first line before ` +
          `${flooded.cut ? 'the cut' : 'it was done'}; ${retained} more bytes of Buffers retained`,
      );
      const bound = DEFAULT_CHANNEL_WINDOW_BYTES + WINDOW_OVERRUN_TOLERANCE_BYTES;
      assert.ok(maxHeld <= bound, `the hostile channel held ${maxHeld} bytes, more than a window plus a packet (${bound})`);
      assert.ok(flooded.cut, `the collector read all ${flooded.sent} bytes the hostile server sent past the window without cutting it off`);
      assert.ok(flooded.sent < 16 * MiB, `the hostile server got ${flooded.sent} bytes out before the cut`);
      assert.ok(retained < 8 * MiB, `${retained} more bytes of Buffers retained after the flood`);
      const error = hostileConnection.lastError;
      assert.equal(error?.code, 'SSH_WINDOW_EXCEEDED', error?.message);
      assert.match(
        error.message,
        new RegExp(`^target hostile \\(postgres@127\\.0\\.0\\.1:${hostile.port}\\): the server sent \\d+ bytes beyond the SSH window on a session channel`),
      );
      // What the transport reports to the target's log and metrics (target-transports.ts).
      assert.ok(
        states.some((s) => s.state === 'backoff' && s.error?.code === 'SSH_WINDOW_EXCEEDED'),
        JSON.stringify(states.map((s) => s.state)),
      );
      // The consumer pulls again: the stream fails with the cause, which the collector follows again from.
      await assert.rejects(within(WAIT_MS, 'the hostile stream failing', drain(items)), (e: unknown) => isPglogError(e) && e.code === 'SSH_WINDOW_EXCEEDED');

      // The healthy target kept streaming through it, and gets what is written after it, exactly.
      appendFileSync(healthyDirs.file, line('after the hostile server was cut off'));
      await within(
        WAIT_MS,
        'the healthy target after the cut',
        waitUntil(() => receivedHealthy().includes('after the hostile server was cut off')),
      );
      assert.ok(n > healthyBefore, 'the healthy log was written during the flood');
      clearInterval(writer);
      await sleep(500);
      assert.equal(healthy.state, 'ready');
      const content = readFileSync(healthyDirs.file);
      assert.equal(healthyRecord.files.length, 1, 'one file, read without a break');
      const [file] = healthyRecord.files;
      await within(
        WAIT_MS,
        'the healthy target catching up',
        waitUntil(() => file!.offset + Buffer.concat(file!.chunks).length === content.length),
      );
      assert.ok(Buffer.concat(file!.chunks).equals(content.subarray(file!.offset)), 'the healthy log arrived exactly');
    } finally {
      clearInterval(writer);
    }
  });
});

async function waitUntil(check: () => boolean): Promise<void> {
  while (!check()) await sleep(20);
}

async function drain(items: AsyncGenerator<FollowItem>): Promise<void> {
  for (;;) if ((await items.next()).done === true) return;
}
