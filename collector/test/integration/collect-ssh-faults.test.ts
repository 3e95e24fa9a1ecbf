// `pglog collect` against SSH servers that fail under load, with real OpenSSH and PostgreSQL:
// (a) the SSH server is stopped and started again: the collector reconnects and resumes from
//     its committed offsets: 0 lost, 0 duplicated;
// (b) one of two SSH servers freezes (SIGSTOP: TCP stays open, nothing answers): keepalives
//     detect it (SSH_TIMEOUT) while the other target's rows keep arriving; after the thaw
//     both are complete: 0 lost, 0 duplicated;
// (c) a server whose host key changed is refused (SSH_HOST_KEY_CHANGED naming host:port), no
//     row of it is stored, a healthy target is collected, and the process stays up.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { formatCheck, storeCatchUp } from '@pglog/test-support/checker.ts';
import { type CollectorProcess, sshTarget, startCollector, type TargetSpec, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const targetOf = (name: string, ssh: TestSshServer, server: LogServer): TargetSpec => sshTarget(name, ssh, server);

type LogRecord = Record<string, unknown>;

const codeOf = (rec: LogRecord): unknown => rec.code ?? (rec.err as { code?: unknown } | undefined)?.code;
const str = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? ''));
const textOf = (rec: LogRecord): string => `${str(rec.msg)} ${str((rec.err as { message?: unknown } | undefined)?.message)}`;

describe('pglog collect when SSH servers fail under load', { timeout: 300_000 }, () => {
  let work: string;
  let store: TestPostgres;
  let storeClient: pg.Client;
  const disposables: Array<{ dispose(): Promise<void> }> = [];
  const loads: SeqLoad[] = [];
  const collectors: CollectorProcess[] = [];

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-ssh-faults-'));
    store = await startPostgres();
  });

  after(async () => {
    await Promise.allSettled(loads.map((l) => l.stop()));
    for (const c of collectors) {
      c.kill('SIGKILL');
      await c.exited;
    }
    await storeClient?.end().catch(() => undefined);
    await Promise.allSettled([...disposables.map((d) => d.dispose()), store?.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  /** Rows of `target` in pglog.statements (0 before the collector created the schema). */
  async function storedRows(target: string): Promise<number> {
    if (storeClient === undefined) {
      storeClient = new pg.Client({ connectionString: store.url });
      await storeClient.connect();
    }
    try {
      const r = await storeClient.query<{ n: number }>('SELECT count(*)::int AS n FROM pglog.statements WHERE target = $1', [target]);
      return r.rows[0]!.n;
    } catch (e) {
      if ((e as { code?: string }).code === '42P01' || (e as { code?: string }).code === '3F000') return 0; // no schema yet
      throw e;
    }
  }

  async function sshServer(): Promise<TestSshServer> {
    const s = await startSshServer();
    disposables.push(s);
    return s;
  }

  async function logServer(): Promise<LogServer> {
    const s = await startLogServer();
    disposables.push(s);
    return s;
  }

  function collect(name: string, targets: TargetSpec[], args: string[] = []): CollectorProcess {
    const dir = join(work, name);
    mkdirSync(dir);
    const c = startCollector({
      targetsFile: writeTargetsFile(dir, targets),
      storeUrl: store.url,
      args: ['--batch-ms', '200', ...args],
      outputFile: join(dir, 'collector.log'),
    });
    collectors.push(c);
    void c.exited.then((e) => {
      exits.set(c, `the collector exited (code ${e.code}, signal ${e.signal})`);
    });
    return c;
  }

  const exits = new Map<CollectorProcess, string>();
  /** waitFor that gives up at once when the collector is gone. */
  function waitAlive(
    collector: CollectorProcess,
    check: () => boolean | Promise<boolean>,
    what: string,
    timeoutMs: number,
    detail: () => string = () => '',
  ): Promise<void> {
    const tail = (): string => collector.output().slice(-4000);
    return waitFor(
      async () => {
        const exit = exits.get(collector);
        if (exit !== undefined) throw new Error(`${exit} while waiting for ${what}:\n${tail()}`);
        return check();
      },
      what,
      timeoutMs,
      () => `${detail()}\n${tail()}`,
    );
  }

  function load(server: LogServer, ratePerSecond: number): SeqLoad {
    const l = startSeqLoad(server.url, { ratePerSecond, payloadBytes: 100 });
    loads.push(l);
    return l;
  }

  /** Waits until the store holds everything `server` logged for `l`, then asserts 0 lost, 0 duplicated. */
  async function assertComplete(what: string, collector: CollectorProcess, server: LogServer, l: SeqLoad): Promise<string> {
    const started = Date.now();
    const catchUp = storeCatchUp(store.url, l.run, server.logDirectory);
    await waitAlive(collector, catchUp.caughtUp, `${what} to catch up`, 120_000, catchUp.summary);
    const caughtUpMs = Date.now() - started;
    await sleep(1_000); // anything read twice would be committed by now too
    const r = await catchUp.check();
    assert.equal(r.lost.length, 0, `${what}: ${formatCheck(r)}`);
    assert.equal(r.duplicated.length, 0, `${what}: ${formatCheck(r)}`);
    assert.equal(r.unexpected.length, 0, `${what}: ${formatCheck(r)}`);
    assert.ok(r.expected >= l.completed().length * 0.99, `${what}: the server logged what the load completed (${r.expected} of ${l.completed().length})`);
    return `${what}: caught up ${caughtUpMs} ms after the load stopped; ${formatCheck(r)}`;
  }

  test('the SSH server stopped for 5 s and started again under load: reconnect, 0 lost, 0 duplicated', async (t) => {
    const [ssh, server] = await Promise.all([sshServer(), logServer()]);
    const collector = collect('restart', [targetOf('restart', ssh, server)]);
    const l = load(server, 250);
    const tail = (): string => collector.output().slice(-4000);
    await waitAlive(collector, async () => (await storedRows('restart')) > 0, 'the first rows', 60_000);
    await sleep(2_000);
    await ssh.stop();
    const stoppedAt = Date.now();
    // The collector notices the lost connection (sshd and its session processes are gone).
    await waitAlive(
      collector,
      () => collector.logRecords().some((rec) => rec.target === 'restart' && String(codeOf(rec)).startsWith('SSH_')),
      'the collector to log the lost connection',
      30_000,
    );
    await sleep(Math.max(0, 5_000 - (Date.now() - stoppedAt)));
    const beforeRestart = collector.logRecords().length;
    await ssh.start();
    await sleep(3_000);
    await l.stop();
    t.diagnostic(await assertComplete('restart', collector, server, l));
    // After the restart: a new SSH session and the stream reading again.
    const afterRestart = collector.logRecords().slice(beforeRestart);
    assert.ok(
      afterRestart.some((rec) => rec.target === 'restart' && /reading again/.test(String(rec.msg))),
      `the collector logs that it reads again after the restart:\n${tail()}`,
    );
    assert.match(ssh.readLog(), /Accepted publickey/);
    const stopped = await collector.stop();
    assert.equal(stopped.code, 0, tail());
  });

  test('one of two SSH servers frozen for 15 s: SSH_TIMEOUT for it, the other keeps arriving; after the thaw 0 lost, 0 duplicated on both', async (t) => {
    const [sshSteady, sshFrozen, steadyPg, frozenPg] = await Promise.all([sshServer(), sshServer(), logServer(), logServer()]);
    const collector = collect('freeze', [targetOf('steady', sshSteady, steadyPg), targetOf('frozen', sshFrozen, frozenPg)], ['--keepalive-ms', '1000']);
    const steadyLoad = load(steadyPg, 150);
    const frozenLoad = load(frozenPg, 150);
    const tail = (): string => collector.output().slice(-4000);
    await waitAlive(collector, async () => (await storedRows('steady')) > 0 && (await storedRows('frozen')) > 0, 'the first rows of both targets', 60_000);
    await sleep(2_000);

    sshFrozen.freeze();
    const frozenAt = Date.now();
    let thawed = false;
    try {
      // 3 keepalives of 1 s unanswered: detected within a few seconds (bounded generously).
      await waitAlive(
        collector,
        () => collector.logRecords().some((rec) => rec.target === 'frozen' && codeOf(rec) === 'SSH_TIMEOUT'),
        'SSH_TIMEOUT for the frozen target',
        12_000,
      );
      const detectedMs = Date.now() - frozenAt;
      // The other target is not held up: its rows keep arriving during the freeze.
      const steadyBefore = await storedRows('steady');
      const frozenBefore = await storedRows('frozen');
      await sleep(4_000);
      const steadyAfter = await storedRows('steady');
      assert.ok(steadyAfter > steadyBefore, `rows of the steady target arrive during the freeze (${steadyBefore} → ${steadyAfter})`);
      const frozenAfter = await storedRows('frozen');
      assert.equal(frozenAfter, frozenBefore, 'nothing of the frozen target can arrive while its server is frozen');
      await sleep(Math.max(0, 15_000 - (Date.now() - frozenAt)));
      sshFrozen.thaw();
      thawed = true;
      // Both keep going after the thaw, then the load stops and both must be complete.
      await sleep(3_000);
      await Promise.all([steadyLoad.stop(), frozenLoad.stop()]);
      t.diagnostic(await assertComplete('steady', collector, steadyPg, steadyLoad));
      t.diagnostic(await assertComplete('frozen', collector, frozenPg, frozenLoad));
      assert.ok(
        !collector.logRecords().some((rec) => rec.target === 'steady' && String(codeOf(rec)).startsWith('SSH_')),
        'the steady target never lost its connection',
      );
      const stopped = await collector.stop();
      assert.equal(stopped.code, 0, tail());
      t.diagnostic(`SSH_TIMEOUT after ${detectedMs} ms`);
    } finally {
      if (!thawed) sshFrozen.thaw();
    }
  });

  test('a changed host key: the target is refused with SSH_HOST_KEY_CHANGED, a healthy target is collected, the process stays up', async () => {
    const [sshHealthy, sshRekeyed, server] = await Promise.all([sshServer(), sshServer(), logServer()]);
    // known_hosts keeps the old key. The refused target reads the same instance as the healthy
    // one, as the same user: any row of it would mean the refusal let the session through.
    await sshRekeyed.changeHostKey();
    const collector = collect('hostkey', [targetOf('healthy', sshHealthy, server), targetOf('rekeyed', sshRekeyed, server)]);
    const l = load(server, 100);
    const tail = (): string => collector.output().slice(-4000);
    const endpoint = `${sshRekeyed.host}:${sshRekeyed.port}`;
    const refusal = (rec: LogRecord): boolean => codeOf(rec) === 'SSH_HOST_KEY_CHANGED' && textOf(rec).includes(endpoint);
    await waitAlive(collector, () => collector.logRecords().some(refusal), `an SSH_HOST_KEY_CHANGED error naming ${endpoint}`, 30_000);
    await waitAlive(collector, async () => (await storedRows('healthy')) > 0, "the healthy target's rows", 60_000);
    await sleep(5_000);
    const healthyBefore = await storedRows('healthy');
    await sleep(2_000);
    assert.ok((await storedRows('healthy')) > healthyBefore, 'the healthy target keeps arriving');
    assert.equal(await storedRows('rekeyed'), 0, 'no row of the refused target');
    const rec = collector.logRecords().find(refusal)!;
    // An error object with the code, logged at warn or above (pino levels by label or number).
    assert.equal((rec.err as { code?: unknown } | undefined)?.code, 'SSH_HOST_KEY_CHANGED', `the refusal carries the error: ${JSON.stringify(rec)}`);
    assert.ok(
      ['warn', 'error', 'fatal'].includes(String(rec.level)) || Number(rec.level) >= 40,
      `the refusal is logged as a warning or error: ${JSON.stringify(rec)}`,
    );
    assert.ok(!/Accepted publickey/.test(sshRekeyed.readLog()), 'the collector never authenticated to the server it refused');
    // Still running: it neither crashed nor exited.
    const exited = await Promise.race([collector.exited.then(() => true), sleep(500).then(() => false)]);
    assert.equal(exited, false, `the collector stays up:\n${tail()}`);
    await l.stop();
    const stopped = await collector.stop();
    assert.equal(stopped.code, 0, tail());
  });
});
