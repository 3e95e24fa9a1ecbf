/**
 * The in-process SSH transport against real OpenSSH servers (test-support/src/sshd.ts):
 * exact bytes, host key refusal, authentication, session limits, reconnects, keepalive loss,
 * backpressure, and the cipher actually negotiated.
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { sshConnectionOptions } from '@pglog/test-support/ssh-connection.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { sleep, within } from '@pglog/test-support/wait.ts';

import { ConnectLimiter } from '../../src/transport/connect-limiter.ts';
import { type RemoteProcess, runRemote } from '../../src/transport/remote-shell.ts';
import { cryptoBindingAvailable } from '../../src/transport/ssh-algorithms.ts';
import { SshConnection, type SshConnectionOptions } from '../../src/transport/ssh-connection.ts';
import { SshConnectionPool } from '../../src/transport/ssh-pool.ts';
import { DEFAULT_CHANNEL_WINDOW_BYTES } from '../../src/transport/ssh-window.ts';

/** Every connection of this file paces handshakes through one limiter, with no start-up spread. */
const limiter = new ConnectLimiter({ spreadMs: 0 });
const opened: SshConnection[] = [];

function connect(server: TestSshServer, overrides: Partial<SshConnectionOptions> = {}): SshConnection {
  const connection = new SshConnection(sshConnectionOptions(server, { limiter, ...overrides }));
  opened.push(connection);
  return connection;
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<Error> {
  const error = await within(
    30_000,
    `expecting ${code}`,
    promise.then(
      () => assert.fail(`resolved, expected ${code}`),
      (e: unknown) => e,
    ),
  );
  assert.ok(isPglogError(error), `expected a PglogError ${code}, got ${String(error)}`);
  assert.equal(error.code, code, error.message);
  return error;
}

describe('ssh2 transport against OpenSSH', { timeout: 120_000 }, () => {
  let server: TestSshServer;
  before(async () => {
    server = await within(30_000, 'starting sshd', startSshServer());
  });
  after(async () => {
    await Promise.allSettled(opened.map((c) => c.close()));
    await server?.dispose();
  });

  test('runs a command: exit code, stdout, stderr; the native binding negotiates AES-GCM', async () => {
    const connection = connect(server);
    const result = await within(30_000, 'runRemote', runRemote(connection, 'printf "out\\n"; printf "err\\n" >&2; exit 7'));
    assert.equal(result.stdout.toString(), 'out\n');
    assert.equal(result.stderr, 'err\n');
    assert.deepEqual(result.exit, { code: 7, signal: null });
    assert.equal(cryptoBindingAvailable(), true, 'ssh2 native crypto binding (npm ci builds it)');
    assert.equal(connection.negotiatedCipher, 'aes128-gcm@openssh.com');
    assert.equal(connection.state, 'ready');
    assert.equal(connection.connects, 1);
  });

  test('every one of many short commands reports its exit status, even when ssh2 gets the reply, the status and the close in one read', async () => {
    // A short command's exec reply, exit-status and close often arrive together; the status is
    // emitted synchronously while handing over the channel, before awaiting code runs.
    const connection = connect(server, { maxSessions: 10 });
    const busy = setInterval(() => {
      const until = Date.now() + 5;
      while (Date.now() < until) {
        /* keep the event loop late */
      }
    }, 1);
    try {
      const exits = await within(
        90_000,
        '400 short commands',
        Promise.all(Array.from({ length: 400 }, () => runRemote(connection, 'exit 7').then((r) => r.exit))),
      );
      const wrong = exits.filter((e) => e.code !== 7);
      assert.equal(wrong.length, 0, `${wrong.length} of 400 commands ended without their exit status: ${JSON.stringify(wrong.slice(0, 3))}`);
    } finally {
      clearInterval(busy);
    }
  });

  test('delivers a few MB of random bytes exactly (binary safe)', async () => {
    const connection = connect(server);
    const file = join(server.dir, 'random.bin');
    const bytes = 5 * 1024 * 1024 + 17;
    const proc = await within(30_000, 'spawn', connection.spawn(`head -c ${bytes} /dev/urandom | tee ${file}`));
    const hash = createHash('sha256');
    let received = 0;
    for await (const chunk of proc.stdout) {
      hash.update(chunk as Buffer);
      received += (chunk as Buffer).length;
    }
    assert.deepEqual(await within(30_000, 'exit', proc.exit), { code: 0, signal: null });
    assert.equal(received, bytes);
    const remote = await within(30_000, 'sha256sum', runRemote(connection, `sha256sum ${file}`));
    assert.equal(hash.digest('hex'), remote.stdout.toString().split(' ')[0]);
  });

  test('a known_hosts hashed by ssh-keygen -H is accepted', async () => {
    const hashedFile = join(server.dir, 'known_hosts.hashed');
    writeFileSync(hashedFile, readFileSync(server.knownHostsFile));
    execFileSync('ssh-keygen', ['-H', '-f', hashedFile], { stdio: 'ignore' });
    const text = readFileSync(hashedFile, 'utf8');
    assert.match(text, /^\|1\|/m);
    const connection = connect(server, { knownHosts: { text, source: hashedFile } });
    const result = await within(30_000, 'runRemote', runRemote(connection, 'echo ok'));
    assert.equal(result.stdout.toString(), 'ok\n');
  });

  test('a refused TCP connect is SSH_CONNECT_FAILED; the next spawn waits out the backoff instead of reconnecting', async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, server.host, () => {
        const address = probe.address();
        probe.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
      });
    });
    const states: string[] = [];
    const connection = connect(server, {
      port: closedPort,
      // The retry is due 30 s after the failure: far beyond this test.
      backoff: { baseMs: 60_000, capMs: 60_000, random: () => 0.5 },
      onStateChange: (s) => states.push(s),
    });
    const error = await expectCode(connection.spawn('true'), 'SSH_CONNECT_FAILED');
    assert.match(error.message, /ECONNREFUSED/);
    assert.ok(error.message.includes(`${server.host}:${closedPort}`), error.message);
    await assert.rejects(connection.spawn('true', { signal: AbortSignal.timeout(300) }), { name: 'TimeoutError' });
    assert.deepEqual(states, ['connecting', 'backoff'], 'no second attempt during the backoff');
  });

  test('a host missing from known_hosts is refused (UNKNOWN) before any command runs', async () => {
    const marker = join(server.dir, 'unknown-ran');
    const listedElsewhere = readFileSync(server.knownHostsFile, 'utf8').replace(/^\S+/gm, 'elsewhere.example');
    const connection = connect(server, { knownHosts: { text: listedElsewhere, source: 'test known_hosts' } });
    const error = await expectCode(connection.spawn(`touch ${marker}`), 'SSH_HOST_KEY_UNKNOWN');
    assert.match(error.message, new RegExp(`${server.host}:${server.port}`));
    assert.match(error.message, /SHA256:[A-Za-z0-9+/]{43}/);
    assert.equal(existsSync(marker), false);
    assert.equal(connection.state, 'backoff');
    assert.equal(connection.lastError, error);
  });

  test('a wrong private key is SSH_AUTH_FAILED; an unparsable one SSH_KEY_INVALID without the key in the message', async () => {
    const otherKeyFile = join(server.dir, 'other-key');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', otherKeyFile], { stdio: 'ignore' });
    const wrongKey = connect(server, { privateKey: readFileSync(otherKeyFile), privateKeySource: otherKeyFile });
    const auth = await expectCode(wrongKey.spawn('true'), 'SSH_AUTH_FAILED');
    assert.ok(auth.message.includes(otherKeyFile));

    const garbage = 'not a key but a secret-looking string 0123456789';
    const badKey = connect(server, { privateKey: Buffer.from(garbage), privateKeySource: '/keys/id_bad' });
    const invalid = await expectCode(badKey.spawn('true'), 'SSH_KEY_INVALID');
    assert.match(invalid.message, /\/keys\/id_bad/);
    assert.ok(!invalid.message.includes(garbage));
  });

  test('more spawns than MaxSessions queue; never more than maxSessions run at once', async () => {
    const limited = await within(30_000, 'starting sshd with MaxSessions 2', startSshServer({ maxSessions: 2 }));
    try {
      const connection = connect(limited, { maxSessions: 2 });
      let peak = 0;
      const runs = [1, 2, 3, 4, 5].map(async (i) => {
        const r = await runRemote(connection, `date +%s%N; sleep 0.3; date +%s%N; echo ${i}`);
        peak = Math.max(peak, connection.openSessions);
        return r;
      });
      const results = await within(60_000, 'five queued commands', Promise.all(runs));
      const intervals = results.map((r, i) => {
        assert.deepEqual(r.exit, { code: 0, signal: null });
        const [start, end, id] = r.stdout.toString().trim().split('\n');
        assert.equal(id, String(i + 1));
        return [BigInt(start ?? '0'), BigInt(end ?? '0')] as const;
      });
      // The remote commands' own clocks: at no start were more than two running.
      for (const [start] of intervals) {
        const running = intervals.filter(([s, e]) => s <= start && start < e).length;
        assert.ok(running <= 2, `${running} commands ran at once`);
      }
      assert.ok(peak <= 2);
      assert.equal(connection.openSessions, 0, 'every slot released');

      // Configured above the server's MaxSessions: the server refuses the third channel.
      const overcommitted = connect(limited, { maxSessions: 3 });
      const held = await within(30_000, 'two sessions', Promise.all([overcommitted.spawn('sleep 30'), overcommitted.spawn('sleep 30')]));
      const refused = await expectCode(overcommitted.spawn('echo third'), 'SSH_CHANNEL_FAILED');
      assert.match(refused.message, /MaxSessions/);
      for (const p of held) p.close();
      await within(30_000, 'closed sessions', Promise.all(held.map((p) => p.exit)));
      assert.equal(overcommitted.openSessions, 0);
    } finally {
      await limited.dispose();
    }
  });

  test('an abort while waiting for a session slot rejects that spawn only', async () => {
    const connection = connect(server, { maxSessions: 1 });
    const holder = await within(30_000, 'spawn', connection.spawn('sleep 30'));
    const controller = new AbortController();
    const waiting = connection.spawn('echo never', { signal: controller.signal });
    controller.abort(new Error('stream stopped'));
    await assert.rejects(within(10_000, 'aborted spawn', waiting), /stream stopped/);
    holder.close();
    assert.deepEqual(
      await within(
        30_000,
        'closed exit',
        holder.exit.then(() => 'settled'),
      ),
      'settled',
    );
    const next = await within(30_000, 'next command', runRemote(connection, 'echo next'));
    assert.equal(next.stdout.toString(), 'next\n');
  });

  /** Pauses `proc`'s stdout until nothing more arrives; returns what it then buffers. */
  async function bufferedWhenStalled(proc: RemoteProcess): Promise<number> {
    proc.stdout.pause();
    let previous = -1;
    let stableFor = 0;
    for (let i = 0; i < 200 && stableFor < 5; i++) {
      await sleep(100);
      const buffered = proc.stdout.readableLength;
      stableFor = buffered === previous && buffered > 0 ? stableFor + 1 : 0;
      previous = buffered;
    }
    assert.equal(stableFor, 5, 'the buffered amount stopped growing');
    const exitState = await Promise.race([proc.exit.then(() => 'exited'), sleep(200).then(() => 'running')]);
    assert.equal(exitState, 'running', 'the remote writer is blocked, not finished');
    return previous;
  }

  for (const windowBytes of [undefined, 64 * 1024, 2 * 1024 * 1024]) {
    const window = windowBytes ?? DEFAULT_CHANNEL_WINDOW_BYTES;
    test(`a paused consumer stops the remote writer after at most the window (${window / 1024} KiB${windowBytes === undefined ? ', the default' : ''}); resuming completes the stream`, async () => {
      const connection = connect(server, windowBytes === undefined ? {} : { channelWindowBytes: windowBytes });
      const total = 64 * 1024 * 1024;
      const proc = await within(30_000, 'spawn', connection.spawn(`yes | head -c ${total}`));
      // ssh2 alone: a 2 MiB window re-granted at half, up to about 4 MiB buffered (ssh-window.ts).
      const buffered = await bufferedWhenStalled(proc);
      assert.ok(buffered <= window, `buffered ${buffered} bytes while paused, window ${window}`);
      let received = 0;
      proc.stdout.on('data', (b: Buffer) => {
        received += b.length;
      });
      proc.stdout.resume();
      assert.deepEqual(await within(60_000, 'stream after resume', proc.exit), { code: 0, signal: null });
      assert.equal(received, total);
    });
  }

  test('the bounded window delivers every byte to a consumer that reads slowly, with stderr sharing the window', async () => {
    const connection = connect(server, { channelWindowBytes: 64 * 1024 });
    // 8 MiB of numbered lines on stdout, a status line on stderr every 1000 lines (as the
    // follower's segment loop reports sizes on stderr while its stdout waits for the consumer).
    const script =
      'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); echo "line $i of the log, padded to about forty"; [ $((i % 1000)) -eq 0 ] && echo "status $i" >&2; done';
    const expected = createHash('sha256');
    for (let i = 1; i <= 200000; i++) expected.update(`line ${i} of the log, padded to about forty\n`);
    const proc = await within(30_000, 'spawn', connection.spawn(`sh -c '${script}'`));
    const errLines: string[] = [];
    proc.stderr.on('data', (b: Buffer) => errLines.push(b.toString()));
    const got = createHash('sha256');
    let most = 0;
    let reads = 0;
    for await (const chunk of proc.stdout as AsyncIterable<Buffer>) {
      got.update(chunk);
      most = Math.max(most, proc.stdout.readableLength + chunk.length);
      // Every 50th chunk the consumer stops for a while: the server fills the window and waits.
      if (++reads % 50 === 0) await sleep(20);
    }
    assert.deepEqual(await within(120_000, 'exit', proc.exit), { code: 0, signal: null });
    assert.equal(got.digest('hex'), expected.digest('hex'));
    assert.equal(
      errLines
        .join('')
        .split('\n')
        .filter((l) => l.startsWith('status ')).length,
      200,
    );
    assert.ok(most <= 64 * 1024, `held ${most} bytes at once`);
  });

  test('close() of a running command ends it and frees its slot', async () => {
    const connection = connect(server, { maxSessions: 1 });
    const proc = await within(30_000, 'spawn', connection.spawn('echo started; sleep 30'));
    const first = await within(10_000, 'first output', new Promise<Buffer>((resolve) => proc.stdout.once('data', resolve)));
    assert.equal(first.toString(), 'started\n');
    proc.close();
    proc.close(); // idempotent
    const exit = await within(30_000, 'exit after close', proc.exit);
    assert.equal(exit.code === 0, false, `a closed command does not report success: ${JSON.stringify(exit)}`);
    assert.equal(connection.openSessions, 0);
  });

  test('a stopped and restarted server: running commands fail, the next spawn reconnects', async () => {
    const restartable = await within(30_000, 'starting sshd', startSshServer());
    try {
      const states: string[] = [];
      const connection = connect(restartable, { onStateChange: (s) => states.push(s) });
      const running = await within(30_000, 'spawn', connection.spawn('sleep 30'));
      running.stdout.resume();
      await within(30_000, 'stop sshd', restartable.stop());
      const lost = await expectCode(running.exit, 'SSH_CONNECT_FAILED');
      assert.match(lost.message, /closed the connection/);
      await within(30_000, 'restart sshd', restartable.start());
      const again = await within(30_000, 'spawn after restart', runRemote(connection, 'echo back'));
      assert.equal(again.stdout.toString(), 'back\n');
      assert.equal(connection.connects, 2);
      assert.equal(connection.reconnects, 1);
      assert.deepEqual(states, ['connecting', 'ready', 'backoff', 'connecting', 'ready']);
    } finally {
      await restartable.dispose();
    }
  });

  test('a frozen server fails its commands with SSH_TIMEOUT; another server is unaffected', async () => {
    const frozen = await within(30_000, 'starting sshd', startSshServer());
    try {
      const keepaliveIntervalMs = 300;
      const keepaliveCountMax = 2;
      const a = connect(frozen, { target: 'frozen', keepaliveIntervalMs, keepaliveCountMax });
      // Default keepalives: the point is that A's loss does not touch B, not B's own detection
      // (small limits on B could trip on a loaded CI machine).
      const b = connect(server, { target: 'healthy' });
      const stuck = await within(30_000, 'spawn', a.spawn('sleep 30'));
      stuck.stdout.resume();
      stuck.stderr.resume();
      const steady = await within(30_000, 'spawn', b.spawn('for i in $(seq 1 20); do echo $i; sleep 0.1; done'));
      let steadyLines = '';
      steady.stdout.on('data', (c: Buffer) => {
        steadyLines += c.toString();
      });
      frozen.freeze();
      try {
        // keepaliveInterval * (countMax + 1) is about 0.9 s; the bound is only against hangs.
        const error = await expectCode(stuck.exit, 'SSH_TIMEOUT');
        assert.match(error.message, /keepalive/);
        assert.equal(a.state, 'backoff');
        assert.equal(b.state, 'ready');
      } finally {
        frozen.thaw();
      }
      assert.deepEqual(await within(30_000, 'healthy stream', steady.exit), { code: 0, signal: null });
      assert.equal(steadyLines, Array.from({ length: 20 }, (_, i) => `${i + 1}\n`).join(''));
      const recovered = await within(30_000, 'spawn after thaw', runRemote(a, 'echo thawed'));
      assert.equal(recovered.stdout.toString(), 'thawed\n');
    } finally {
      await frozen.dispose();
    }
  });

  test('a changed host key is refused (CHANGED) and no command runs', async () => {
    const rekeyed = await within(30_000, 'starting sshd', startSshServer());
    try {
      const before = readFileSync(rekeyed.knownHostsFile, 'utf8');
      const marker = join(rekeyed.dir, 'changed-ran');
      const trusting = connect(rekeyed);
      assert.equal((await within(30_000, 'first command', runRemote(trusting, 'echo first'))).stdout.toString(), 'first\n');
      await within(30_000, 'changeHostKey', rekeyed.changeHostKey());
      const connection = connect(rekeyed, { knownHosts: { text: before, source: 'old known_hosts' } });
      const error = await expectCode(connection.spawn(`touch ${marker}; echo leaked`), 'SSH_HOST_KEY_CHANGED');
      assert.match(error.message, /has changed/);
      assert.match(error.message, /old known_hosts line \d+ expects/);
      assert.equal(existsSync(marker), false, 'the command never ran');
      assert.equal(connection.connects, 0);
      assert.equal(connection.openSessions, 0);
    } finally {
      await rekeyed.dispose();
    }
  });

  test('close() ends running commands and refuses new spawns; the pool closes all', async () => {
    const pool = new SshConnectionPool({ limiter });
    const options = {
      target: 'pooled',
      host: server.host,
      port: server.port,
      username: server.user,
      privateKey: readFileSync(server.privateKeyFile),
      knownHosts: { text: readFileSync(server.knownHostsFile, 'utf8'), source: server.knownHostsFile },
    };
    const connection = pool.get(options);
    assert.equal(pool.get(options), connection, 'one connection per target');
    const proc = await within(30_000, 'spawn', connection.spawn('sleep 30'));
    proc.stdout.resume();
    await within(30_000, 'pool close', pool.closeAll());
    await within(
      30_000,
      'exit after close',
      proc.exit.then(
        () => undefined,
        () => undefined,
      ),
    );
    assert.equal(connection.state, 'closed');
    await expectCode(connection.spawn('true'), 'SSH_CONNECT_FAILED');
  });
});
