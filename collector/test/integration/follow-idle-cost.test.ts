/**
 * What an idle followed log costs its server (ADR 0014), on a real OpenSSH sshd through the
 * ssh2 transport, with the follower's production intervals: the segment's remote shell and
 * everything it starts are counted (`perf stat`, the kernel's task creation tracepoint,
 * inherited: exact whatever else runs on the machine) over a window of silence, and it must
 * start at most one process a second. The same window
 * with the polling loop (`idleWait: 'polling'`, the loop before) shows the count sees its
 * forks. After the silence a new line must still arrive, exactly (the wait did not stall).
 */
import assert from 'node:assert/strict';
import { appendFileSync, chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { sshConnectionOptions } from '@pglog/test-support/ssh-connection.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { sleep, within } from '@pglog/test-support/wait.ts';

import { LogFollower, type LogFollowerOptions } from '../../src/follow/follower.ts';
import type { FollowItem } from '../../src/follow/types.ts';
import { SshConnection } from '../../src/transport/ssh-connection.ts';
import { countProcessStarts, cpuSecondsOf, processesWithCommandLine } from '../helpers/process-starts.ts';

/** The window of silence measured; long enough to hold several heartbeats and rotation checks. */
const WINDOW_S = 12;
/** Silence before the window: the loop's full checks back off to one per heartbeat by then. */
const SETTLE_MS = 4_000;
const WAIT_MS = 30_000;

interface Case {
  idleWait: NonNullable<LogFollowerOptions['idleWait']>;
  /** Write `<data>/current_logfiles` as PostgreSQL's logging collector does; else the active file is found by listing. */
  currentLogfiles: boolean;
}

interface Measured {
  starts: number;
  seconds: number;
  cpuSeconds: number;
  received: Buffer;
  content: Buffer;
}

describe('an idle followed log on a real sshd', { timeout: 300_000 }, () => {
  let server: TestSshServer;
  let connection: SshConnection;
  let root: string;
  let n = 0;

  before(async () => {
    server = await within(30_000, 'starting sshd', startSshServer());
    connection = new SshConnection(sshConnectionOptions(server, { target: 'idle' }));
    root = mkdtempSync(join(tmpdir(), 'pglog-idle-'));
    chmodSync(root, 0o755); // the login user reads the logs
  });
  after(async () => {
    await connection?.close();
    await server?.dispose();
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  });

  async function measure(c: Case): Promise<Measured> {
    const data = join(root, `case-${++n}-${c.idleWait}`);
    const log = join(data, 'log');
    mkdirSync(log, { recursive: true, mode: 0o755 });
    chmodSync(data, 0o755);
    const file = join(log, 'postgresql.log');
    writeFileSync(file, '2024-01-01 00:00:00.000 UTC [1] LOG:  database system is ready to accept connections\n', { mode: 0o644 });
    if (c.currentLogfiles) writeFileSync(join(data, 'current_logfiles'), 'stderr log/postgresql.log\n', { mode: 0o644 });
    const follower = new LogFollower(connection, {
      target: 'idle',
      instance: 'main',
      dataDirectory: data,
      logDirectory: log,
      logFormat: 'stderr',
      idleWait: c.idleWait,
    });
    const controller = new AbortController();
    const chunks: Buffer[] = [];
    const kinds: FollowItem['kind'][] = [];
    let failure: unknown = null;
    const done = (async () => {
      try {
        for await (const item of follower.follow(null, controller.signal)) {
          kinds.push(item.kind);
          if (item.kind === 'data') chunks.push(item.chunk);
        }
      } catch (e) {
        failure = e;
      }
    })();
    const until = async (what: string, condition: () => boolean): Promise<void> => {
      const deadline = Date.now() + WAIT_MS;
      while (!condition()) {
        if (failure !== null) throw failure as Error;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; items ${kinds.join(',')}`);
        await sleep(20);
      }
    };
    try {
      const content = readFileSync(file);
      await until('the first line', () => Buffer.concat(chunks).length >= content.length);
      await until('silence', () => kinds.at(-1) === 'idle' || kinds.at(-1) === 'size');
      await sleep(SETTLE_MS);
      const roots = processesWithCommandLine(data);
      assert.equal(roots.length, 1, `one remote segment loop reading ${data}, found ${roots.join(',')}`);
      const pid = roots[0]!;
      const counter = await countProcessStarts(pid);
      const cpuBefore = cpuSecondsOf(pid);
      await sleep(WINDOW_S * 1000);
      const cpuSeconds = cpuSecondsOf(pid) - cpuBefore;
      const { starts, seconds } = await counter.stop();
      // Data after a long silence is still delivered, exactly.
      appendFileSync(file, '2024-01-01 00:01:00.000 UTC [2] LOG:  checkpoint starting: time\n');
      const all = readFileSync(file);
      await until('the line written after the silence', () => Buffer.concat(chunks).length >= all.length);
      return { starts, seconds, cpuSeconds, received: Buffer.concat(chunks), content: all };
    } finally {
      controller.abort();
      await done;
    }
  }

  for (const currentLogfiles of [true, false]) {
    it(`starts at most one process a second while idle (${currentLogfiles ? 'current_logfiles' : 'active file by listing'}), and delivers data written after the silence`, async (t) => {
      const m = await measure({ idleWait: 'builtins', currentLogfiles });
      t.diagnostic(`${m.starts} process starts in ${m.seconds.toFixed(1)} s, ${m.cpuSeconds.toFixed(2)} CPU s`);
      assert.ok(m.seconds >= WINDOW_S, `counted over ${m.seconds} s`);
      assert.ok(m.starts <= m.seconds, `${m.starts} process starts in ${m.seconds.toFixed(1)} s of silence`);
      assert.equal(m.received.toString('latin1'), m.content.toString('latin1'));
    });
  }

  it("counts the polling loop's processes (the baseline: several a second)", async (t) => {
    const m = await measure({ idleWait: 'polling', currentLogfiles: true });
    t.diagnostic(`${m.starts} process starts in ${m.seconds.toFixed(1)} s, ${m.cpuSeconds.toFixed(2)} CPU s`);
    // Several a second at full speed; more than the bound above even on a loaded machine.
    assert.ok(m.starts > m.seconds, `${m.starts} process starts in ${m.seconds.toFixed(1)} s of silence`);
    assert.equal(m.received.toString('latin1'), m.content.toString('latin1'));
  });
});
