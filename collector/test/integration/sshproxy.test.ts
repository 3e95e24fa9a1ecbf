/**
 * `pglog sshproxy` against real OpenSSH servers (test-support/src/sshd.ts), run as the
 * real CLI in a child process. The test plays the collector: it copies keys into DIR/keys
 * (0600), writes desired.json atomically, opens the FIFOs non-blocking (the collector's own
 * openFifoReader) and follows status.json.
 *
 * (a) exact bytes through the .out FIFO, stderr through .err, exit statuses;
 * (b) 12 streams with MaxSessions 5: 3 masters, 3 TCP connections, all complete;
 * (c) a changed host key: refused (SSH_HOST_KEY_CHANGED naming host:port), the stream never runs;
 * (d) a key file with mode 0644 is refused before ssh sees it (SSH_KEY_INVALID), and accepted once 0600;
 * (e) sshd stopped and started: the master backs off and comes back, new streams run;
 * (f) a stream removed from desired.json: its process group is killed, its FIFOs removed;
 * (g) a SIGKILLed sidecar: the next one kills what the old one left, reports a new instance, runs streams;
 * (h) a malformed desired.json (or one of another version) keeps the previous state and reports desiredError;
 * plus OpenSSH's real stderr through the classifier, SIGTERM, and bad command lines.
 */
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { type DesiredServer, type DesiredStream, parseSidecarStatus, type SidecarStatus, streamFifos } from '@pglog/common/sidecar/contract.ts';
import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import { cmdline, descendants } from '@pglog/test-support/process-tree.ts';
import { launchSidecar, type RunningSidecar, TEST_SIDECAR_ARGS } from '@pglog/test-support/sidecar-process.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { sleep, within } from '@pglog/test-support/wait.ts';

import { masterArgs } from '../../src/sidecar/openssh-args.ts';
import { classifyOpenSshError } from '../../src/sidecar/openssh-errors.ts';
import { isAlive } from '../../src/sidecar/sidecar-files.ts';
import { openFifoReader } from '../../src/transport/fifo-reader.ts';

const MAIN = fileURLToPath(new URL('../../../cli/src/main.ts', import.meta.url));

// ---- processes ----

/** Every live process whose command line mentions `dir` (what a sidecar on `dir` started). */
function processesMentioning(dir: string): number[] {
  return readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .filter((pid) => pid !== process.pid && isAlive(pid) && cmdline(pid).some((a) => a.includes(`${dir}/`)));
}

/** The sidecar's ssh masters (its children with -M). */
function masterPids(sidecarPid: number): number[] {
  return descendants(sidecarPid).filter((pid) => {
    const a = cmdline(pid);
    return a[0] === 'ssh' && a.includes('-M');
  });
}

function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

async function until(what: string, check: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(25);
  }
}

// ---- the sidecar as a child process ----

const sidecars: RunningSidecar[] = [];

function startSidecar(dir: string, extra: string[] = []): RunningSidecar {
  const s = launchSidecar(dir, [...TEST_SIDECAR_ARGS, ...extra]);
  sidecars.push(s);
  return s;
}

// ---- the directory, as the collector writes it ----

interface Workspace {
  dir: string;
  generation: number;
  servers: DesiredServer[];
  streams: DesiredStream[];
}

const workspaces: Workspace[] = [];

function workspace(): Workspace {
  // Short on purpose: control sockets live in it (see MAX_DIR_LENGTH).
  const dir = mkdtempSync(join(tmpdir(), 'sp-'));
  mkdirSync(join(dir, 'keys'), { mode: 0o700 });
  const w = { dir, generation: 0, servers: [], streams: [] };
  workspaces.push(w);
  return w;
}

function addServer(w: Workspace, name: string, ssh: TestSshServer, overrides: Partial<DesiredServer> = {}, keyMode = 0o600): DesiredServer {
  const identityFile = `${name}.key`;
  const knownHostsFile = `${name}.known_hosts`;
  copyFileSync(ssh.privateKeyFile, join(w.dir, 'keys', identityFile));
  chmodSync(join(w.dir, 'keys', identityFile), keyMode);
  copyFileSync(ssh.knownHostsFile, join(w.dir, 'keys', knownHostsFile));
  chmodSync(join(w.dir, 'keys', knownHostsFile), 0o600);
  const server: DesiredServer = {
    name,
    host: ssh.host,
    port: ssh.port,
    user: ssh.user,
    identityFile,
    knownHostsFile,
    maxSessions: 5,
    serverAliveIntervalS: 2,
    connectTimeoutS: 5,
    ...overrides,
  };
  w.servers = [...w.servers.filter((s) => s.name !== name), server];
  return server;
}

/** Writes desired.json the collector's way: a temp name, then rename. */
function writeDesired(w: Workspace): number {
  w.generation++;
  const path = join(w.dir, 'desired.json');
  writeFileSync(`${path}.tmp`, JSON.stringify({ version: 1, generation: w.generation, servers: w.servers, streams: w.streams }));
  renameSync(`${path}.tmp`, path);
  return w.generation;
}

function readStatus(w: Workspace): SidecarStatus | null {
  try {
    return parseSidecarStatus(readFileSync(join(w.dir, 'status.json'), 'utf8'));
  } catch {
    return null;
  }
}

async function waitStatus(w: Workspace, what: string, check: (s: SidecarStatus) => boolean, timeoutMs = 20_000): Promise<SidecarStatus> {
  const deadline = Date.now() + timeoutMs;
  let last: SidecarStatus | null = null;
  for (;;) {
    last = readStatus(w);
    if (last !== null && check(last)) return last;
    if (Date.now() > deadline) {
      const log = sidecars.at(-1)?.output().split('\n').slice(-30).join('\n') ?? '';
      throw new Error(`${what}: not within ${timeoutMs} ms\nlast status: ${JSON.stringify(last, null, 1)}\nsidecar log tail:\n${log}`);
    }
    await sleep(25);
  }
}

interface StreamOutput {
  out: Promise<Buffer>;
  err: Promise<string>;
  readers: Socket[];
}

function drain(reader: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    reader.on('data', (b: Buffer) => chunks.push(b));
    reader.once('end', () => resolve(Buffer.concat(chunks)));
    reader.once('error', reject);
  });
}

/** Opens both FIFOs of a stream for reading, as the collector does. */
function openStream(w: Workspace, id: string): StreamOutput {
  const f = streamFifos(id);
  const out = openFifoReader(join(w.dir, f.out));
  const err = openFifoReader(join(w.dir, f.err));
  return { out: drain(out), err: drain(err).then((b) => b.toString('utf8')), readers: [out, err] };
}

function addStream(w: Workspace, id: string, server: string, command: string): void {
  w.streams = [...w.streams, { id, server, command }];
}

const running =
  (id: string) =>
  (s: SidecarStatus): boolean =>
    s.streams[id]?.state === 'running';
const ended =
  (id: string) =>
  (s: SidecarStatus): boolean =>
    s.streams[id]?.state === 'exited' || s.streams[id]?.state === 'failed';

/**
 * A command that runs until its output goes away, as the collector's follow loops do: it
 * writes a heartbeat, and the write after the channel closed ends it (a remote `sleep` would
 * outlive the channel, as sshd does not kill a session's command).
 */
const LONG = 'echo started; while sleep 0.2; do echo .; done';

/**
 * A workspace with the server `db` (`server` with `overrides`) and `streams` (id: command) on it,
 * written to desired.json, and a sidecar started on it that runs them all.
 */
async function sidecarRunning(
  server: TestSshServer,
  streams: Record<string, string>,
  overrides: Partial<DesiredServer> = {},
): Promise<{ w: Workspace; sidecar: RunningSidecar; generation: number; status: SidecarStatus }> {
  const w = workspace();
  addServer(w, 'db', server, overrides);
  for (const [id, command] of Object.entries(streams)) addStream(w, id, 'db', command);
  const generation = writeDesired(w);
  const sidecar = startSidecar(w.dir);
  const ids = Object.keys(streams);
  const status = await waitStatus(w, `${ids.join(', ')} running`, (st) => ids.every((id) => running(id)(st)));
  return { w, sidecar, generation, status };
}

function seqText(n: number): string {
  let s = '';
  for (let i = 1; i <= n; i++) s += `${i}\n`;
  return s;
}

describe('pglog sshproxy against OpenSSH', { timeout: 240_000 }, () => {
  let ssh: TestSshServer;
  const servers: TestSshServer[] = [];
  const unregister = onProcessExit(() => {
    for (const s of sidecars) s.proc.kill('SIGKILL');
    for (const w of workspaces) killAll(processesMentioning(w.dir));
  });

  before(async () => {
    ssh = await within(30_000, 'starting sshd', startSshServer({ maxSessions: 5 }));
    servers.push(ssh);
  });

  afterEach(async () => {
    for (const s of sidecars.splice(0)) {
      s.proc.kill('SIGKILL');
      await s.exited;
    }
    for (const w of workspaces.splice(0)) {
      killAll(processesMentioning(w.dir));
      rmSync(w.dir, { recursive: true, force: true });
    }
  });

  after(async () => {
    await Promise.allSettled(servers.map((s) => s.dispose()));
    unregister();
  });

  async function ownServer(options: { maxSessions?: number } = {}): Promise<TestSshServer> {
    const s = await within(30_000, 'starting sshd', startSshServer(options));
    servers.push(s);
    return s;
  }

  test('(a) a stream delivers its output exactly, its stderr through the .err FIFO, and its exit status', async () => {
    const { w, sidecar, generation, status } = await sidecarRunning(ssh, {
      seq: 'seq 1 200000',
      fails: 'echo to-stdout; echo "to-stderr: no such file" >&2; exit 3',
    });
    assert.equal(status.appliedGeneration, generation);
    assert.equal(status.pid, sidecar.pid);
    assert.deepEqual(
      status.masters.map((m) => [m.server, m.slot, m.state]),
      [['db', 0, 'up']],
    );

    const seq = openStream(w, 'seq');
    const fails = openStream(w, 'fails');
    const out = await within(30_000, 'seq output', seq.out);
    assert.equal(out.length, Buffer.byteLength(seqText(200000)));
    assert.ok(out.equals(Buffer.from(seqText(200000))), 'exact bytes');
    assert.equal(await seq.err, '');
    assert.equal((await fails.out).toString(), 'to-stdout\n');
    assert.equal(await fails.err, 'to-stderr: no such file\n');

    const done = await waitStatus(w, 'both exited', (s) => ended('seq')(s) && ended('fails')(s));
    assert.deepEqual(done.streams.seq, { state: 'exited', server: 'db', exitCode: 0, signal: null });
    assert.deepEqual(done.streams.fails, { state: 'exited', server: 'db', exitCode: 3, signal: null });
    // Slot 0 stays up while the server has streams, ended or not.
    assert.deepEqual(
      done.masters.map((m) => [m.state, m.streams]),
      [['up', 0]],
    );
  });

  test('(b) 12 streams on a server with MaxSessions 5: 3 masters, one TCP connection each, all complete', async () => {
    const server = await ownServer({ maxSessions: 5 });
    const streams = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`s${i}`, `seq 1 ${1000 + i}; sleep 2`]));
    const { w, sidecar, status } = await sidecarRunning(server, streams, { maxSessions: 5 });
    assert.deepEqual(
      status.masters.map((m) => [m.slot, m.state, m.streams]),
      [
        [0, 'up', 5],
        [1, 'up', 5],
        [2, 'up', 2],
      ],
    );
    assert.equal(masterPids(sidecar.pid).length, 3);

    const outputs = Array.from({ length: 12 }, (_, i) => openStream(w, `s${i}`));
    // While all 12 commands sleep after their output, count the connections to sshd.
    const firstBytes = outputs.map((o) => new Promise<void>((resolve) => o.readers[0]!.once('data', () => resolve())));
    await within(20_000, 'every stream started', Promise.all(firstBytes));
    const connections = await new Promise<string>((resolve, reject) =>
      execFile('ss', ['-Htn', 'state', 'established', 'dst', `${server.host}:${server.port}`], (e, out) =>
        e === null ? resolve(out) : reject(new Error(`ss: ${e.message}`)),
      ),
    );
    assert.equal(
      connections
        .trim()
        .split('\n')
        .filter((l) => l !== '').length,
      3,
      connections,
    );

    for (let i = 0; i < 12; i++) assert.equal((await within(20_000, `s${i}`, outputs[i]!.out)).toString(), seqText(1000 + i));
    const done = await waitStatus(w, 'all exited', (s) => Object.values(s.streams).every((st) => st.state === 'exited'));
    for (let i = 0; i < 12; i++) assert.equal(done.streams[`s${i}`]?.exitCode, 0);
    // Ended streams free their slots: masters 1 and 2 are stopped, 0 stays for the next streams.
    await waitStatus(w, 'only slot 0 left', (s) => s.masters.length === 1);
    await until('one master process left', () => masterPids(sidecar.pid).length === 1);
  });

  test('(c) a changed host key: refused with SSH_HOST_KEY_CHANGED naming host:port, the stream never runs, the sidecar stays up', async () => {
    const server = await ownServer();
    const w = workspace();
    addServer(w, 'db', server); // known_hosts with the key as first started
    await server.changeHostKey();
    addStream(w, 'never', 'db', 'echo must-not-run');
    writeDesired(w);
    const sidecar = startSidecar(w.dir);
    const status = await waitStatus(w, 'refused, retried once', (s) => (s.masters[0]?.restarts ?? 0) >= 1 && s.masters[0]?.state === 'backoff');
    const master = status.masters[0]!;
    assert.equal(master.error?.code, 'SSH_HOST_KEY_CHANGED');
    assert.ok(master.error.message.includes(`${server.host}:${server.port}`), master.error.message);
    assert.deepEqual(status.streams.never?.state, 'waiting');
    assert.equal(status.streams.never?.error?.code, 'SSH_HOST_KEY_CHANGED');
    assert.equal(existsSync(join(w.dir, streamFifos('never').out)), false, 'no FIFO: nothing can run');
    const before = Date.parse(status.updatedAt);
    const later = await waitStatus(w, 'heartbeat', (s) => Date.parse(s.updatedAt) > before + 500);
    assert.notEqual(later.streams.never?.state, 'running');
    assert.equal(sidecar.proc.exitCode, null, 'the sidecar is still running');
    assert.match(sidecar.output(), /"code":"SSH_HOST_KEY_CHANGED"/);
  });

  test('(d) a key file with mode 0644 is refused with SSH_KEY_INVALID before ssh runs; once 0600 it connects', async () => {
    const w = workspace();
    addServer(w, 'db', ssh, {}, 0o644);
    addStream(w, 'k', 'db', 'echo key-ok');
    writeDesired(w);
    const sidecar = startSidecar(w.dir);
    const status = await waitStatus(w, 'refused twice', (s) => (s.masters[0]?.restarts ?? 0) >= 1 && s.masters[0]?.state === 'backoff');
    assert.equal(status.masters[0]?.error?.code, 'SSH_KEY_INVALID');
    assert.match(status.masters[0]?.error?.message ?? '', /keys\/db\.key has mode 0644; it must be 0600/);
    assert.equal(status.streams.k?.error?.code, 'SSH_KEY_INVALID');
    assert.deepEqual(masterPids(sidecar.pid), [], 'ssh never started with it');
    assert.ok(!sidecar.output().includes(readFileSync(ssh.privateKeyFile, 'utf8').split('\n')[1]!), 'no key material in the log');

    chmodSync(join(w.dir, 'keys', 'db.key'), 0o600);
    await waitStatus(w, 'running once the mode is fixed', running('k'));
    const k = openStream(w, 'k');
    assert.equal((await k.out).toString(), 'key-ok\n');
    const done = await waitStatus(w, 'exited', ended('k'));
    assert.equal(done.streams.k?.exitCode, 0);
    assert.equal(done.masters[0]?.error?.code, 'SSH_KEY_INVALID', 'the last failure is kept for status');
  });

  test('(e) sshd stopped and started: the master backs off, comes back (restart counted), new streams run', async () => {
    const server = await ownServer();
    const { w } = await sidecarRunning(server, { first: 'echo one' });
    assert.equal((await openStream(w, 'first').out).toString(), 'one\n');
    await waitStatus(w, 'first exited', ended('first'));

    await server.stop();
    const down = await waitStatus(w, 'master in backoff', (s) => s.masters[0]?.state === 'backoff');
    assert.equal(down.masters[0]?.error?.code, 'SSH_CONNECT_FAILED');
    assert.ok(down.masters[0]?.error?.message.includes(`${server.host}:${server.port}`));
    // A stream asked for while the server is away waits, showing why.
    addStream(w, 'second', 'db', 'echo two; exit 0');
    writeDesired(w);
    const waiting = await waitStatus(w, 'second waits with the error', (s) => s.streams.second?.state === 'waiting' && s.streams.second.error !== undefined);
    assert.equal(waiting.streams.second?.error?.code, 'SSH_CONNECT_FAILED');

    await server.start();
    const up = await waitStatus(w, 'master up again', (s) => s.masters[0]?.state === 'up');
    assert.ok((up.masters[0]?.restarts ?? 0) >= 1);
    await waitStatus(w, 'second running', running('second'));
    assert.equal((await openStream(w, 'second').out).toString(), 'two\n');
    assert.equal((await waitStatus(w, 'second exited', ended('second'))).streams.second?.exitCode, 0);
  });

  test('(f) a stream removed from desired.json: its ssh (or its waiting shell) is killed and its FIFOs removed', async () => {
    const { w, sidecar } = await sidecarRunning(ssh, { long: LONG, unread: 'echo never-read' });
    const long = openStream(w, 'long');
    await within(10_000, 'first bytes', new Promise((resolve) => long.readers[0]!.once('data', resolve)));
    const longClient = descendants(sidecar.pid).filter((pid) => {
      const a = cmdline(pid);
      return a[0] === 'ssh' && a.at(-1) === LONG;
    });
    assert.equal(longClient.length, 1, 'the mux client runs');
    // The never-opened stream is a shell blocked opening its .out FIFO.
    const unreadShell = descendants(sidecar.pid).filter((pid) => cmdline(pid).some((a) => a.endsWith('/streams/unread.out')));
    assert.equal(unreadShell.length, 1);

    w.streams = [];
    writeDesired(w);
    const status = await waitStatus(w, 'streams gone', (s) => Object.keys(s.streams).length === 0);
    assert.deepEqual(status.streams, {});
    await until('the processes ended', () => !isAlive(longClient[0]!) && !isAlive(unreadShell[0]!));
    for (const id of ['long', 'unread']) {
      assert.equal(existsSync(join(w.dir, streamFifos(id).out)), false);
      assert.equal(existsSync(join(w.dir, streamFifos(id).err)), false);
    }
    // The reader sees the end of its stream once the writer is gone.
    assert.match((await within(5_000, 'reader ends', long.out)).toString(), /^started\n(\.\n)*$/);
    await waitStatus(w, 'no master left', (s) => s.masters.length === 0);
  });

  test('(f2) a stream replaced in one write on a full master: the killed session still counts, the new one goes to a second master and runs', async () => {
    // sshd keeps a session until its command exits, and this one notices the closed channel
    // only at its next write, 3 s later: a new session on the same connection would be refused.
    const server = await ownServer({ maxSessions: 2 });
    const slow = 'echo started; while sleep 3; do echo .; done';
    const { w } = await sidecarRunning(server, { a: slow, b: slow }, { maxSessions: 2 });
    const a = openStream(w, 'a');
    const b = openStream(w, 'b');
    await within(10_000, 'both started', Promise.all([a, b].map((o) => new Promise((resolve) => o.readers[0]!.once('data', resolve)))));

    w.streams = w.streams.filter((s) => s.id !== 'b');
    addStream(w, 'c', 'db', 'echo replacement');
    writeDesired(w);
    const status = await waitStatus(w, 'c running', running('c'));
    assert.deepEqual(
      status.masters.map((m) => [m.slot, m.state, m.streams]),
      [
        [0, 'up', 1],
        [1, 'up', 1],
      ],
    );
    assert.equal((await within(10_000, 'c output', openStream(w, 'c').out)).toString(), 'replacement\n');
    assert.deepEqual((await waitStatus(w, 'c exited', ended('c'))).streams.c, { state: 'exited', server: 'db', exitCode: 0, signal: null });
    for (const r of [...a.readers, ...b.readers]) r.destroy();
  });

  test('(g) a SIGKILLed sidecar: the next one kills what it left, reports a new instance, and runs streams', async () => {
    const { w, sidecar: first, status: firstStatus } = await sidecarRunning(ssh, { old: LONG, blocked: 'echo blocked' });
    const old = openStream(w, 'old');
    await until("the old stream's client exists", () => descendants(first.pid).some((pid) => cmdline(pid).includes(LONG)));
    const leftovers = descendants(first.pid).filter((pid) => pid !== first.pid);
    assert.ok(leftovers.length >= 3, `master, client and blocked shell: ${leftovers.length}`);
    first.proc.kill('SIGKILL');
    await first.exited;
    assert.ok(leftovers.every(isAlive), 'orphans outlive a killed sidecar');
    assert.ok(existsSync(join(w.dir, 'sidecar.pids')));

    const second = startSidecar(w.dir);
    const fresh = await waitStatus(w, 'a new instance', (s) => s.instance !== firstStatus.instance);
    assert.equal(fresh.pid, second.pid);
    await until('the old processes are gone', () => !leftovers.some(isAlive));
    await within(5_000, 'old reader ends', old.out);
    // desired.json still lists both: the new sidecar runs them as new runs (the collector,
    // seeing the new instance, withdraws them and asks again from its offsets).
    await waitStatus(w, 'streams run again', (s) => running('old')(s) && running('blocked')(s));
    addStream(w, 'new', 'db', 'seq 1 3');
    writeDesired(w);
    await waitStatus(w, 'new running', running('new'));
    assert.equal((await openStream(w, 'new').out).toString(), '1\n2\n3\n');
    assert.equal((await waitStatus(w, 'new exited', ended('new'))).streams.new?.exitCode, 0);
    assert.match(second.output(), /cleaned up after a previous sidecar/);
  });

  test('(h) a malformed desired.json keeps the previous state and reports desiredError until a good one comes', async () => {
    const w = workspace();
    addServer(w, 'db', ssh);
    addStream(w, 'keep', 'db', LONG);
    const generation = writeDesired(w);
    startSidecar(w.dir);
    await waitStatus(w, 'keep running', running('keep'));
    const keep = openStream(w, 'keep');
    await sleep(300);

    const path = join(w.dir, 'desired.json');
    writeFileSync(`${path}.tmp`, '{"version": 1, "generation": 2, "servers": [');
    renameSync(`${path}.tmp`, path);
    const bad = await waitStatus(w, 'desiredError', (s) => s.desiredError !== undefined);
    assert.match(bad.desiredError ?? '', /desired\.json: not JSON/);
    assert.equal(bad.appliedGeneration, generation);
    assert.equal(bad.streams.keep?.state, 'running');
    assert.equal(bad.masters[0]?.state, 'up');

    // A file of another protocol version is refused whole, and says which generation it was
    // (the collector fails the streams that file holds). A wrong entry alone is refused alone:
    // sshproxy-refusals.test.ts.
    writeFileSync(`${path}.tmp`, JSON.stringify({ version: 2, generation: 3, servers: w.servers, streams: [] }));
    renameSync(`${path}.tmp`, path);
    const invalid = await waitStatus(w, 'the next error', (s) => /version must be 1/.test(s.desiredError ?? ''));
    assert.equal(invalid.desiredErrorGeneration, 3);
    assert.equal(invalid.streams.keep?.state, 'running');

    w.generation = 3;
    addStream(w, 'more', 'db', 'echo more');
    const good = writeDesired(w);
    const fixed = await waitStatus(w, 'applied', (s) => s.appliedGeneration === good && s.desiredError === undefined);
    assert.equal(fixed.streams.keep?.state, 'running', 'the running stream was never disturbed');
    assert.ok(fixed.streams.more !== undefined);
    for (const r of keep.readers) r.destroy();
  });

  test('SIGTERM: streams and masters are ended, a last status is written, exit code 0', async () => {
    const w = workspace();
    addServer(w, 'db', ssh);
    addStream(w, 'long', 'db', LONG);
    writeDesired(w);
    const sidecar = startSidecar(w.dir);
    await waitStatus(w, 'running', running('long'));
    const long = openStream(w, 'long');
    await until('client and master run', () => masterPids(sidecar.pid).length === 1 && descendants(sidecar.pid).length >= 3);
    const children = descendants(sidecar.pid).filter((pid) => pid !== sidecar.pid);
    sidecar.proc.kill('SIGTERM');
    assert.deepEqual(await within(15_000, 'exit', sidecar.exited), { code: 0, signal: null });
    assert.ok(!children.some(isAlive), 'no child left');
    const last = readStatus(w)!;
    // Killed by TERM, or (when ssh had its handler installed) exit status 255, ssh's own failure.
    const long0 = last.streams.long;
    assert.equal(long0?.state, 'exited');
    assert.ok(long0.signal === 'TERM' || long0.exitCode === 255, JSON.stringify(long0));
    assert.deepEqual(last.masters, []);
    assert.deepEqual(readdirSync(join(w.dir, 'streams')), []);
    assert.deepEqual(readdirSync(join(w.dir, 'ctl')), []);
    for (const r of long.readers) r.destroy();
  });

  test('bad command lines: a missing --dir is a usage error, a directory too long for socket paths says the limit', async () => {
    const run = (args: string[]): Promise<{ code: number | null; stderr: string }> =>
      new Promise((resolve) => {
        execFile(process.execPath, ['--disable-warning=ExperimentalWarning', MAIN, 'sshproxy', ...args], (e, _out, stderr) =>
          resolve({ code: e === null ? 0 : ((e as { code?: number }).code ?? null), stderr }),
        );
      });
    const missing = await run([]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--dir DIR is required/);
    const long = await run(['--dir', `/tmp/${'x'.repeat(80)}`]);
    assert.equal(long.code, 1);
    assert.match(long.stderr, /must be at most 70 because its control sockets/);
    assert.equal(existsSync(`/tmp/${'x'.repeat(80)}`), false, 'nothing created');
    assert.equal((await run(['--dir', '/tmp/x', '--backoff-base-ms', 'soon'])).code, 2);
  });

  test("OpenSSH's real complaints, from the master command line, are classified", async () => {
    const w = workspace();
    const server = addServer(w, 'db', ssh);
    const keys = join(w.dir, 'keys');
    const attempt = (s: DesiredServer): Promise<string> =>
      new Promise((resolve) => {
        execFile('ssh', masterArgs(w.dir, s, 0), { timeout: 20_000 }, (_e, _out, stderr) => resolve(stderr));
      });
    const classify = async (s: DesiredServer): Promise<{ code: string; message: string }> =>
      classifyOpenSshError(await attempt(s), s, { code: 255, signal: null });

    writeFileSync(join(keys, 'empty.known_hosts'), '', { mode: 0o600 });
    const unknown = await classify({ ...server, knownHostsFile: 'empty.known_hosts' });
    assert.equal(unknown.code, 'SSH_HOST_KEY_UNKNOWN', unknown.message);

    await new Promise<void>((resolve, reject) =>
      execFile('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(keys, 'other.key')], (e) =>
        e === null ? resolve() : reject(new Error(`ssh-keygen: ${e.message}`)),
      ),
    );
    const refused = await classify({ ...server, identityFile: 'other.key' });
    assert.equal(refused.code, 'SSH_AUTH_FAILED', refused.message);
    assert.ok(refused.message.includes(`${server.host}:${server.port}`));

    writeFileSync(join(keys, 'garbage.key'), 'not a key\n', { mode: 0o600 });
    const garbage = await classify({ ...server, identityFile: 'garbage.key' });
    assert.equal(garbage.code, 'SSH_KEY_INVALID', garbage.message);

    copyFileSync(ssh.privateKeyFile, join(keys, 'open.key'));
    chmodSync(join(keys, 'open.key'), 0o644);
    const open = await classify({ ...server, identityFile: 'open.key' });
    assert.equal(open.code, 'SSH_KEY_INVALID', open.message);
    assert.match(open.message, /0644/);

    const refusedPort = await classify({ ...server, port: 1 }); // nothing listens on port 1 of a loopback address
    assert.equal(refusedPort.code, 'SSH_CONNECT_FAILED', refusedPort.message);
    assert.match(refusedPort.message, /Connection refused/);

    const changedServer = await ownServer();
    const kh = `${changedServer.host.replace(/\./g, '_')}.known_hosts`;
    copyFileSync(changedServer.knownHostsFile, join(keys, kh));
    await changedServer.changeHostKey();
    const changed = await classify({ ...server, host: changedServer.host, port: changedServer.port, knownHostsFile: kh });
    assert.equal(changed.code, 'SSH_HOST_KEY_CHANGED', changed.message);
    assert.ok(changed.message.includes(`${changedServer.host}:${changedServer.port}`));
  });
});
