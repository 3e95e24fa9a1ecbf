/**
 * The real-server test harness itself: the OpenSSH sshd on loopback (sshd.ts), the PostgreSQL
 * that logs like production (log-server.ts), the numbered load (seq-load.ts) and the
 * loss/duplicate checker (checker.ts). The collect tests trust these, so they are checked here
 * against the real things: the OpenSSH client, real log files, a real store.
 */
import { strict as assert } from 'node:assert';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { basename } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { checkStore, compareNumbers, formatCheck, loggedNumbers, loggedStatementTags } from '@pglog/test-support/checker.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { migrateStore, startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { parseSeqTags, seqStatement, startSeqLoad, withDatabase } from '@pglog/test-support/seq-load.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { sleep, within } from '@pglog/test-support/wait.ts';
import pg from 'pg';

/** Polls `condition` every 50 ms until it holds; fails after `ms`. */
async function until(ms: number, what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms} ms`);
    await sleep(50);
  }
}

function sshArgs(server: TestSshServer, command: string): string[] {
  return [
    '-i',
    server.privateKeyFile,
    '-o',
    `UserKnownHostsFile=${server.knownHostsFile}`,
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    'BatchMode=yes',
    '-o',
    'ConnectTimeout=20',
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-F',
    '/dev/null',
    '-p',
    String(server.port),
    `${server.user}@${server.host}`,
    command,
  ];
}

interface SshResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `command` over the OpenSSH client; resolves with its exit code and output. */
function ssh(server: TestSshServer, command: string): Promise<SshResult> {
  return within(
    60_000,
    `ssh ${command}`,
    new Promise((resolve) => {
      execFile('ssh', sshArgs(server, command), { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 }, (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
        resolve({ code, stdout, stderr });
      });
    }),
  );
}

/** An OpenSSH client session that keeps running; its output accumulates in `output()`. */
function sshSession(server: TestSshServer, command: string): { child: ChildProcess; output(): string; exit: Promise<number | null> } {
  const child = spawn('ssh', sshArgs(server, command), { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (b: Buffer) => {
    out += b.toString();
  });
  child.stderr?.resume();
  const exit = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return { child, output: () => out, exit };
}

/** Whether host:port sends an SSH banner on a fresh TCP connection within `ms`. */
function bannerWithin(host: string, port: number, ms: number): Promise<'banner' | 'connected, silent'> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('connected, silent');
    }, ms);
    socket.once('data', (b: Buffer) => {
      clearTimeout(timer);
      socket.destroy();
      if (b.toString('latin1').startsWith('SSH-2.0-')) resolve('banner');
      else reject(new Error(`unexpected first bytes ${JSON.stringify(b.toString('latin1'))}`));
    });
    socket.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

describe('pure parts of the harness', () => {
  test('seqStatement pads to the payload size; parseSeqTags finds every tag of the run only', () => {
    assert.equal(seqStatement('pglog-seq', 'rabc', 7), "SELECT 'pglog-seq:rabc:7'");
    const padded = seqStatement('pglog-seq', 'rabc', 7, 120);
    assert.equal(padded.length, 120);
    assert.match(padded, /^SELECT 'pglog-seq:rabc:7' \/\* x+ \*\/$/);
    const text = "SELECT 'pglog-seq:rabc:7' ... pglog-seq:rother:8 ... pglog-seq:rabc:12 pglog-seq:rabc:7";
    assert.deepEqual(parseSeqTags(text, 'rabc'), [7, 12, 7]);
  });

  test('withDatabase replaces only the database of a socket URL', () => {
    assert.equal(
      withDatabase('postgresql://postgres@/postgres?host=%2Ftmp%2Fs&port=5432', 'legacy'),
      'postgresql://postgres@/legacy?host=%2Ftmp%2Fs&port=5432',
    );
    assert.equal(withDatabase('postgres://u@h:5/db', 'x y'), 'postgres://u@h:5/x%20y');
  });

  test('loggedStatementTags: stderr, csvlog and jsonlog duration entries; not error STATEMENT lines, not a tag cut off', () => {
    const stderr =
      "2026-01-01 00:00:00.000 UTC [12] postgres@postgres LOG:  duration: 0.051 ms  statement: SELECT 'pglog-seq:r1:5'\n" +
      "2026-01-01 00:00:00.000 UTC [12] postgres@postgres STATEMENT:  SELECT 'pglog-seq:r1:6'\n";
    const csv = `2026-01-01 00:00:00.000 UTC,"postgres","postgres",12,,,,,,,,"LOG","00000","duration: 0.051 ms  statement: SELECT ''pglog-seq:r1:7''",,,,,,,,,"",,0\n`;
    const json = `{"error_severity":"LOG","message":"duration: 0.051 ms  statement: SELECT 'pglog-seq:r1:8'"}\n{"error_severity":"ERROR","statement":"SELECT 'pglog-seq:r1:9'"}\n`;
    const cut = "LOG:  duration: 0.051 ms  statement: SELECT 'pglog-seq:r1:12";
    assert.deepEqual(loggedStatementTags(stderr + csv + json + cut, 'r1'), [5, 7, 8]);
  });

  test('compareNumbers and formatCheck: lost, duplicated, unexpected', () => {
    const r = compareNumbers([1, 2, 3, 4], [1, 2, 2, 4, 9]);
    assert.deepEqual(r, { expected: 4, stored: 5, lost: [3], duplicated: [2], unexpected: [9] });
    assert.match(formatCheck(r), /1 lost: 3; 1 duplicated: 2; 1 stored but never logged: 9/);
    assert.match(formatCheck(compareNumbers([1], [1])), /none lost; none duplicated\.$/);
  });
});

describe('test sshd on a loopback address', { timeout: 240_000 }, () => {
  let server: TestSshServer;
  before(async () => {
    server = await within(60_000, 'starting sshd', startSshServer());
  });
  after(async () => {
    await server?.dispose();
  });

  test('the OpenSSH client logs in with the key and the known_hosts file; stderr stays clean', async () => {
    assert.match(server.host, /^127\.0\.0\.\d+$/);
    assert.notEqual(server.host, '127.0.0.1');
    assert.equal(statSync(server.privateKeyFile).mode & 0o777, 0o600);
    assert.match(readFileSync(server.knownHostsFile, 'utf8'), new RegExp(`^\\[${server.host.replace(/\./g, '\\.')}\\]:${server.port} ssh-ed25519 \\S+\\n$`));
    const r = await ssh(server, 'echo ok; id -un; echo err >&2');
    assert.equal(r.code, 0, r.stderr + server.readLog());
    assert.equal(r.stdout, `ok\n${server.user}\n`);
    assert.equal(r.stderr, 'err\n');
    assert.match(server.readLog(), /Accepted publickey for \S+ from 127\.0\.0\.1/);
  });

  test('stop() ends running sessions and refuses connections; start() serves again on the same port and key', async () => {
    const session = sshSession(server, 'echo started; sleep 60');
    await until(30_000, 'session started', () => session.output() === 'started\n');
    await within(30_000, 'stop', server.stop());
    assert.notEqual(await within(30_000, 'session end after stop', session.exit), 0);
    const refused = await ssh(server, 'echo never');
    assert.equal(refused.code, 255);
    assert.match(refused.stderr, /Connection refused/);
    await within(30_000, 'start', server.start());
    const again = await ssh(server, 'echo again');
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, 'again\n');
  });

  test('freeze() stops the listener and running sessions (TCP open, silent); thaw() resumes both', async () => {
    const ticker = sshSession(server, 'i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo $i; sleep 0.05; done');
    try {
      await until(30_000, 'ticker running', () => ticker.output().split('\n').length > 3);
      server.freeze();
      try {
        await sleep(300); // let bytes already in flight arrive
        const frozenAt = ticker.output();
        assert.equal(await within(10_000, 'probe', bannerWithin(server.host, server.port, 1000)), 'connected, silent');
        assert.equal(ticker.output(), frozenAt, 'a frozen session produced output');
      } finally {
        server.thaw();
      }
      const thawedAt = ticker.output().length;
      await until(30_000, 'ticker resumed', () => ticker.output().length > thawedAt);
      assert.equal(await within(10_000, 'probe after thaw', bannerWithin(server.host, server.port, 10_000)), 'banner');
      const lines = ticker.output().trim().split('\n').map(Number);
      assert.deepEqual(
        lines,
        lines.map((_, i) => i + 1),
        'the session continued where it stopped',
      );
    } finally {
      ticker.child.kill();
      await within(30_000, 'ticker end', ticker.exit);
    }
  });

  test('changeHostKey(): the client refuses the server (host key verification), the old key stays in known_hosts', async () => {
    const changing = await within(60_000, 'starting a second sshd', startSshServer({ maxSessions: 2, authorizedKeyComment: 'harness-test' }));
    try {
      assert.notEqual(`${changing.host}:${changing.port}`, `${server.host}:${server.port}`);
      assert.equal((await ssh(changing, 'echo before')).stdout, 'before\n');
      const knownBefore = readFileSync(changing.knownHostsFile, 'utf8');
      await within(60_000, 'changeHostKey', changing.changeHostKey());
      assert.equal(readFileSync(changing.knownHostsFile, 'utf8'), knownBefore);
      const marker = `${changing.dir}/changed-ran`;
      const refused = await ssh(changing, `touch ${marker}; echo leaked`);
      assert.equal(refused.code, 255);
      assert.match(refused.stderr, /REMOTE HOST IDENTIFICATION HAS CHANGED/);
      assert.match(refused.stderr, /Host key verification failed/);
      assert.equal(refused.stdout, '');
      assert.throws(() => statSync(marker), { code: 'ENOENT' });
    } finally {
      await changing.dispose();
      await changing.dispose(); // idempotent
    }
  });
});

describe('log server, numbered load and checker', { timeout: 300_000 }, () => {
  let sshd: TestSshServer;
  let logServer: LogServer;
  let store: TestPostgres;
  before(async () => {
    [sshd, logServer, store] = await within(
      120_000,
      'starting sshd, a log server and a store',
      Promise.all([startSshServer(), startLogServer({ logRotationSizeKb: 16, databases: [{ name: 'legacy', encoding: 'WIN1251' }] }), startPostgres()]),
    );
    await migrateStore(store.url);
  });
  after(async () => {
    await Promise.allSettled([sshd?.dispose(), logServer?.dispose(), store?.stop()]);
  });

  let run = '';
  let completed: number[] = [];

  test('the load is logged once per statement into size-rotated files the ssh user can read', async () => {
    const load = startSeqLoad(logServer.url, { ratePerSecond: 400, connections: 3, payloadBytes: 200, database: 'legacy' });
    try {
      // 16 kB files and about 100 kB/s of log: several rotations.
      await until(60_000, 'three log files', () => logServer.logFiles().length >= 3);
    } finally {
      await within(30_000, 'load stop', load.stop());
    }
    run = load.run;
    completed = load.completed();
    assert.ok(completed.length > 0);
    assert.equal(new Set(completed).size, completed.length);
    // The logging collector writes asynchronously: wait until every completed statement is on disk.
    await until(30_000, 'completed statements on disk', () => {
      const logged = loggedNumbers(logServer.logDirectory, run);
      return completed.every((n) => logged.has(n));
    });
    const logged = loggedNumbers(logServer.logDirectory, run);
    assert.ok(logged.size >= completed.length);

    // Over SSH, as the login user, the same files hold the same statements.
    const files = logServer.logFiles();
    assert.ok(
      files.every((f) => (statSync(f).mode & 0o777) === 0o640),
      'log_file_mode 0640',
    );
    const listing = await ssh(sshd, `ls ${logServer.logDirectory}; cat ${logServer.dataDirectory}/current_logfiles`);
    assert.equal(listing.code, 0, listing.stderr);
    for (const f of files) assert.ok(listing.stdout.includes(basename(f)), `${basename(f)} listed over ssh`);
    assert.match(listing.stdout, /^stderr log\/postgresql-.*\.log$/m);
    const remote = await ssh(sshd, `cat ${files.join(' ')}`);
    assert.equal(remote.code, 0, remote.stderr);
    const overSsh = new Set(loggedStatementTags(remote.stdout, run));
    assert.deepEqual(
      [...overSsh].sort((a, b) => a - b),
      [...logged].sort((a, b) => a - b),
    );
    // Each statement is logged exactly once across the rotated files.
    assert.equal(loggedStatementTags(remote.stdout, run).length, overSsh.size);
  });

  test('rotate() switches to a new time-named file', async () => {
    const before = logServer.logFiles();
    await within(30_000, 'rotate', logServer.rotate());
    const current = readFileSync(`${logServer.dataDirectory}/current_logfiles`, 'utf8').trim().split(' ')[1] ?? '';
    assert.ok(!before.some((f) => f.endsWith(current)), `${current} is new`);
  });

  test('checkStore: an exact store passes; missing rows are lost, a row inserted twice is duplicated', async () => {
    assert.notEqual(run, '', 'needs the load of the first test');
    const logged = [...loggedNumbers(logServer.logDirectory, run)].sort((a, b) => a - b);
    const client = new pg.Client({ connectionString: store.url });
    await client.connect();
    try {
      const insert = async (numbers: number[]): Promise<void> => {
        await client.query(
          `INSERT INTO pglog.statement_events (ts, target, instance, database, query, file, file_offset)
           SELECT now(), 'harness', 'main', 'legacy', $1 || n || $2, 'postgresql.log', n * 100 FROM unnest($3::int8[]) AS n`,
          [`SELECT 'pglog-seq:${run}:`, `' /* padding */`, numbers],
        );
      };
      // Rows of another run never count.
      await client.query(`INSERT INTO pglog.statement_events (ts, target, instance, query, file, file_offset) VALUES (now(), 'harness', 'main', $1, 'f', 0)`, [
        `SELECT 'pglog-seq:rother:${logged[0]}'`,
      ]);

      await insert(logged);
      const exact = await within(30_000, 'check', checkStore(store.url, run, { logDirectory: logServer.logDirectory }));
      assert.deepEqual(exact, { expected: logged.length, stored: logged.length, lost: [], duplicated: [], unexpected: [] }, formatCheck(exact));
      const byCompleted = await within(30_000, 'check', checkStore(store.url, run, { numbers: completed }));
      assert.deepEqual(byCompleted.lost, [], formatCheck(byCompleted));

      const missing = [logged[0] as number, logged[Math.floor(logged.length / 2)] as number];
      await client.query('DELETE FROM pglog.statement_events WHERE query = ANY($1)', [missing.map((n) => `SELECT 'pglog-seq:${run}:${n}' /* padding */`)]);
      const twice = logged[logged.length - 1] as number;
      await insert([twice, 999_999]);
      const broken = await within(30_000, 'check', checkStore(store.url, run, { logDirectory: logServer.logDirectory }));
      assert.deepEqual(
        broken.lost,
        [...missing].sort((a, b) => a - b),
        formatCheck(broken),
      );
      assert.deepEqual(broken.duplicated, [twice], formatCheck(broken));
      assert.deepEqual(broken.unexpected, [999_999], formatCheck(broken));
      assert.equal(broken.stored, logged.length - 2 + 2);
      assert.match(formatCheck(broken), /2 lost: .*; 1 duplicated: /);
    } finally {
      await client.end();
    }
  });

  test('the load survives a server restart: failures are counted, never reported as completed', async () => {
    const load = startSeqLoad(logServer.url, { ratePerSecond: 200, connections: 2 });
    try {
      await until(30_000, 'some statements', () => load.completed().length >= 20);
      await within(60_000, 'log server stop', logServer.stop());
      await until(30_000, 'failures while down', () => load.failures() > 0);
      await within(60_000, 'log server start', logServer.start());
      const resumedFrom = load.completed().length;
      await until(30_000, 'statements after the restart', () => load.completed().length >= resumedFrom + 20);
    } finally {
      await within(30_000, 'load stop', load.stop());
    }
    const completedNow = load.completed();
    await until(30_000, 'completed statements on disk', () => {
      const logged = loggedNumbers(logServer.logDirectory, load.run);
      return completedNow.every((n) => logged.has(n));
    });
    assert.ok(load.failures() > 0);
  });

  test('a copy of a log file (logrotate copytruncate) does not make a statement logged twice', () => {
    const files = logServer.logFiles().filter((f) => f.endsWith('.log'));
    const source = files.find((f) => loggedStatementTags(readFileSync(f, 'latin1'), run).length > 0);
    assert.ok(source !== undefined);
    const before = loggedNumbers(logServer.logDirectory, run);
    writeFileSync(`${source}.1`, readFileSync(source));
    assert.deepEqual(loggedNumbers(logServer.logDirectory, run), before);
  });
});
