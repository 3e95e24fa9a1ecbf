// Transport switches on the real thing: a PostgreSQL 15 logging every statement, a real
// OpenSSH sshd, the real `pglog collect` with its real `pglog sshproxy` child. The checker
// compares the sequence numbers the server logged with the rows in the store.
//   - 20 switches of one server between inproc and proxy under 500 entries/s: 0 lost,
//     0 duplicated, each switch reading again within 10 s;
//   - the sidecar SIGKILLed mid-stream: the collector notices, starts it again, the streams
//     resume from committed offsets, nothing lost;
//   - a changed host key: the sidecar refuses it and says so; nothing of that server stored;
//   - `auto`: a server above the promotion rate moves to the sidecar, and back once it is quiet.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { type CheckResult, checkStore, formatCheck, storeCatchUp } from '@pglog/test-support/checker.ts';
import { freePort, metricSum, scrapeMetrics } from '@pglog/test-support/collect-scenario.ts';
import {
  type CollectorProcess,
  sshTarget,
  startCollector,
  type TargetSpec,
  untilReading,
  waitFor,
  writeTargetsFile,
} from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { withClient } from '@pglog/test-support/pg-client.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { descendants } from '@pglog/test-support/process-tree.ts';
import { startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';

import { isAlive, strayProcesses } from '../../src/sidecar/sidecar-files.ts';

const SWITCHES = 20;

/** The pids below `root` whose command line runs `pglog sshproxy`. */
function sidecarPids(root: number): number[] {
  return descendants(root).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('sshproxy');
    } catch {
      return false;
    }
  });
}

/** Switch-done log records: `{to, switchMs}` in order. */
function switches(c: CollectorProcess): Array<{ to: string; ms: number }> {
  return c
    .logRecords()
    .filter((r) => typeof r['switchMs'] === 'number')
    .map((r) => ({ to: String(r['to']), ms: Number(r['switchMs']) }));
}

describe('pglog collect moving a server between transports', { timeout: 300_000 }, () => {
  let work: string;
  let store: TestPostgres;
  let ssh: TestSshServer;
  let server: LogServer;
  let collector: CollectorProcess | null = null;
  let port: number;
  const spec = (transport: TargetSpec['transport']): TargetSpec => sshTarget('db1', ssh, server, { transport });

  /** Waits until every statement the server logged for `run` is stored; returns that check. */
  const everyStatementStored = async (run: string, what: string, timeoutMs: number, detail: () => string = () => ''): Promise<CheckResult> => {
    const catchUp = storeCatchUp(store.url, run, server.logDirectory);
    await waitFor(catchUp.caughtUp, what, timeoutMs, () => `${catchUp.summary()}\n${detail()}`);
    return catchUp.check();
  };

  /** Starts the collector (the one `after` stops) and waits until it reads. */
  const startReading = async (targetsFile: string, outputName: string, args: string[]): Promise<CollectorProcess> => {
    const c = startCollector({ targetsFile, storeUrl: store.url, args, outputFile: join(work, outputName) });
    collector = c;
    await untilReading(c);
    return c;
  };

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-transport-'));
    // Rotation by size every few seconds, so switches also land around file changes.
    [store, ssh, server] = await Promise.all([startPostgres(), startSshServer(), startLogServer({ logRotationSizeKb: 256 })]);
    port = await freePort();
  });

  after(async () => {
    if (collector !== null) {
      collector.kill('SIGKILL');
      await collector.exited;
      for (const pid of sidecarPids(collector.pid)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    }
    await Promise.allSettled([ssh?.dispose(), server?.dispose(), store?.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  test(`${SWITCHES} switches under 500 entries/s: 0 lost, 0 duplicated, each under 10 s`, async () => {
    const targetsFile = writeTargetsFile(work, [spec('inproc')]);
    const c = await startReading(targetsFile, 'switches.log', ['--batch-ms', '200', '--listen', `127.0.0.1:${port}`]);
    const load = startSeqLoad(server.url, { ratePerSecond: 500, payloadBytes: 60 });
    try {
      for (let i = 1; i <= SWITCHES; i++) {
        // Some reading on each transport before the next switch.
        await new Promise((r) => setTimeout(r, 700));
        const to = i % 2 === 1 ? 'proxy' : 'inproc';
        writeTargetsFile(work, [spec(to)]);
        c.kill('SIGHUP');
        await waitFor(
          () => switches(c).length >= i,
          `switch ${i} to ${to}`,
          30_000,
          () => c.output().split('\n').slice(-30).join('\n'),
        );
        assert.equal(switches(c)[i - 1]!.to, to);
      }
    } finally {
      await load.stop();
    }
    const r = await everyStatementStored(load.run, 'every logged statement in the store', 120_000);
    assert.equal(r.lost.length, 0, formatCheck(r));
    assert.equal(r.duplicated.length, 0, formatCheck(r));
    assert.ok(r.expected >= load.completed().length * 0.99, `the server logged what the load completed (${r.expected} of ${load.completed().length})`);
    const done = switches(c);
    assert.equal(done.length, SWITCHES);
    const slowest = Math.max(...done.map((s) => s.ms));
    assert.ok(slowest < 10_000, `every switch read again within 10 s (slowest ${slowest} ms)`);
    const metrics = await scrapeMetrics(port);
    assert.equal(metricSum(metrics, 'pglog_transport_promotions_total', { target: 'db1' }), SWITCHES / 2);
    assert.equal(metricSum(metrics, 'pglog_transport_demotions_total', { target: 'db1' }), SWITCHES / 2);
    assert.ok(metricSum(metrics, 'pglog_fifo_read_bytes_total', { target: 'db1' }) > 0, 'bytes were read through the FIFOs');
    assert.equal(metricSum(metrics, 'pglog_sidecar_up'), 1);
    console.log(`# ${SWITCHES} switches, ${r.expected} statements, switch times ms: ${done.map((s) => s.ms).join(' ')}`);
    const stopped = await c.stop();
    assert.equal(stopped.code, 0);
    collector = null;
  });

  test('the sidecar SIGKILLed mid-stream: noticed, started again, streams resume from committed offsets', async () => {
    const targetsFile = writeTargetsFile(work, [spec('proxy')]);
    const c = startCollector({ targetsFile, storeUrl: store.url, args: ['--batch-ms', '200'], outputFile: join(work, 'sidecar-kill.log') });
    collector = c;
    const load = startSeqLoad(server.url, { ratePerSecond: 300, payloadBytes: 60 });
    let sidecarDir = '';
    try {
      await waitFor(
        () => switches(c).length > 0 || /reading .*via|fifo/.test(c.output()) || sidecarPids(c.pid).length > 0,
        'the sidecar to start',
        30_000,
        () => c.output(),
      );
      await waitFor(
        async () => (await checkStore(store.url, load.run, { logDirectory: server.logDirectory })).stored > 0,
        'rows through the proxy',
        60_000,
        () => c.output().split('\n').slice(-30).join('\n'),
      );
      for (let k = 0; k < 2; k++) {
        const [pid] = sidecarPids(c.pid);
        assert.ok(pid !== undefined, 'a sidecar runs under the collector');
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        sidecarDir = argv[argv.indexOf('--dir') + 1]!;
        process.kill(pid, 'SIGKILL');
        await waitFor(
          () => c.output().split('sshproxy sidecar ended').length - 1 > k,
          'the collector to notice the sidecar ended',
          15_000,
          () => c.output(),
        );
        await waitFor(
          () => sidecarPids(c.pid).some((p) => p !== pid),
          'a new sidecar',
          30_000,
          () => c.output(),
        );
        await new Promise((r) => setTimeout(r, 2_000));
      }
    } finally {
      await load.stop();
    }
    const r = await everyStatementStored(load.run, 'every logged statement in the store after the sidecar came back', 120_000, () =>
      c.output().split('\n').slice(-40).join('\n'),
    );
    assert.equal(r.lost.length, 0, formatCheck(r));
    assert.equal(r.duplicated.length, 0, formatCheck(r));
    assert.ok(
      c.logRecords().some((x) => x['code'] === 'SIDECAR_UNAVAILABLE'),
      'the streams failed with SIDECAR_UNAVAILABLE while it was gone',
    );
    const stopped = await c.stop();
    assert.equal(stopped.code, 0);
    assert.deepEqual(sidecarPids(c.pid), [], 'no sidecar left behind');
    assert.deepEqual(await strayProcesses(sidecarDir), [], 'no stream shell or ssh client of the killed sidecars left behind');
    collector = null;
  });

  test('a changed host key: the sidecar refuses it and reports it, nothing of that server is stored', async () => {
    const other = await startSshServer();
    try {
      await other.changeHostKey();
      const targetsFile = writeTargetsFile(work, [
        { ...spec('proxy'), name: 'db2', host: other.host, port: other.port, knownHostsFile: other.knownHostsFile, privateKeyFile: other.privateKeyFile },
      ]);
      const c = startCollector({ targetsFile, storeUrl: store.url, outputFile: join(work, 'host-key.log') });
      collector = c;
      await waitFor(
        () => c.logRecords().some((x) => x['code'] === 'SSH_HOST_KEY_CHANGED'),
        'SSH_HOST_KEY_CHANGED in the log',
        60_000,
        () => c.output(),
      );
      const record = c.logRecords().find((x) => x['code'] === 'SSH_HOST_KEY_CHANGED')!;
      assert.match(String(record['msg']), new RegExp(`${other.host.replace(/\./g, '\\.')}.*${other.port}|db2`));
      // Streams wait for a sidecar that is still starting instead of failing at start-up.
      assert.equal(c.logRecords().filter((x) => x['code'] === 'SIDECAR_UNAVAILABLE').length, 0);
      const stopped = await c.stop();
      assert.equal(stopped.code, 0);
      collector = null;
      const { rows } = await withClient(store.url, (db) => db.query<{ n: string }>(`SELECT count(*) AS n FROM pglog.statements WHERE target = 'db2'`));
      assert.equal(Number(rows[0]!.n), 0);
    } finally {
      await other.dispose();
    }
  });

  test('auto: promoted above the rate, demoted once quiet, nothing lost', async () => {
    const targetsFile = writeTargetsFile(work, [spec('auto')]);
    // Thresholds scaled to what a test load offers (~300 kbit/s); a short rate window and dwell.
    const c = await startReading(targetsFile, 'auto.log', [
      '--batch-ms',
      '200',
      '--promote-above',
      '150kbit',
      '--demote-below',
      '50kbit',
      '--rate-window',
      '1000',
      '--min-dwell',
      '2000',
    ]);
    const load = startSeqLoad(server.url, { ratePerSecond: 400, payloadBytes: 60 });
    try {
      await waitFor(
        () => switches(c).some((s) => s.to === 'proxy'),
        'promotion to proxy',
        30_000,
        () => c.output().split('\n').slice(-20).join('\n'),
      );
      await new Promise((r) => setTimeout(r, 2_000));
    } finally {
      await load.stop();
    }
    await waitFor(
      () => switches(c).some((s) => s.to === 'inproc'),
      'demotion once the load stopped',
      30_000,
      () => c.output().split('\n').slice(-20).join('\n'),
    );
    const reasons = c
      .logRecords()
      .filter((r) => typeof r['reason'] === 'string')
      .map((r) => r['reason']);
    assert.deepEqual(reasons.slice(0, 2), ['promote', 'demote']);
    const r = await everyStatementStored(load.run, 'every logged statement in the store', 60_000);
    assert.equal(r.duplicated.length, 0, formatCheck(r));
    const stopped = await c.stop();
    assert.equal(stopped.code, 0);
    collector = null;
  });

  test('the collector SIGKILLed: its sidecar stops its ssh processes, removes its directory (key copies) and exits', async () => {
    const targetsFile = writeTargetsFile(work, [spec('proxy')]);
    const c = startCollector({ targetsFile, storeUrl: store.url, outputFile: join(work, 'collector-kill.log') });
    collector = c;
    await waitFor(
      () => sidecarPids(c.pid).length > 0 && descendants(sidecarPids(c.pid)[0]!).length > 0,
      'the sidecar and its ssh processes',
      30_000,
      () => c.output(),
    );
    const sidecar = sidecarPids(c.pid)[0]!;
    const argv = readFileSync(`/proc/${sidecar}/cmdline`, 'utf8').split('\0');
    const dir = argv[argv.indexOf('--dir') + 1]!;
    const processes = [sidecar, ...descendants(sidecar)];
    c.kill('SIGKILL');
    await c.exited;
    collector = null;
    const alive = (): number[] => processes.filter(isAlive);
    await waitFor(
      () => alive().length === 0,
      'the sidecar and its ssh processes to end',
      15_000,
      () => `still alive: ${alive().join(' ')}`,
    );
    assert.equal(existsSync(dir), false, `${dir} removed`);
  });
});
