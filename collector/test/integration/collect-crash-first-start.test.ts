// Nothing lost, nothing twice when `pglog collect` is SIGKILLed before it ever committed, at
// every stage of its start-up, while PostgreSQL rotates its log (by size, 256 kB, and by
// `pg_ctl logrotate` between the stages) and busy loops keep every core of the machine
// occupied; through both transports (the in-process ssh2 client and the sshproxy sidecar).
//
// The stages are held open by table locks the test takes in the store (helpers/store-locks.ts):
//   - before the claim: pglog.stream_claims is locked, the claim waits;
//   - after the claim, before the first read: pglog.read_position_state is locked and the
//     stream has no position yet, so storing its start waits;
//   - after reading, before the first commit: read_position_state is locked once the collector
//     reads (or before it starts, when the start is stored already); every commit waits.
// A killed collector's waiting session never commits: its client is gone when the lock is
// released. Before the fix a stream with no committed position began at byte 0 of the newest
// file on every start, so each process skipped the files the one before it had begun on.
//
// Also a quiet log: no rows for a while, and rotations while the collector is down.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { formatCheck, storeCatchUp } from '@pglog/test-support/checker.ts';
import { type CollectorProcess, sshTarget, startCollector, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { migrateStore, startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { killTree } from '@pglog/test-support/process-tree.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { type CpuHog, startCpuHog } from '../helpers/cpu-hog.ts';
import { connectStoreLocks, type StoreLocks, type StoreTable } from '../helpers/store-locks.ts';

/** Kills after the load started, cycling through the stages a stored start can still reach. */
const LATER_KILLS = 4;

async function query(url: string, sql: string): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: url, application_name: 'pglog-test' });
  await client.connect();
  try {
    return (await client.query(sql)).rows as Array<Record<string, unknown>>;
  } finally {
    await client.end();
  }
}

/** The read positions the store holds (an empty list before any). */
async function storedPositions(storeUrl: string): Promise<string[]> {
  const rows = await query(storeUrl, 'SELECT file, "offset" FROM pglog.read_positions ORDER BY target, instance');
  return rows.map((r) => `${String(r['file'])}@${String(r['offset'])}`);
}

/** A test's processes: collectors with one output file each, killed with everything they started. */
class Collectors {
  private readonly work: string;
  private readonly targetsFile: string;
  private readonly storeUrl: string;
  private n = 0;
  current: CollectorProcess | null = null;

  constructor(work: string, targetsFile: string, storeUrl: string) {
    this.work = work;
    this.targetsFile = targetsFile;
    this.storeUrl = storeUrl;
  }

  start(args: string[] = []): CollectorProcess {
    this.current = startCollector({ targetsFile: this.targetsFile, storeUrl: this.storeUrl, args, outputFile: join(this.work, `collector-${++this.n}.log`) });
    return this.current;
  }

  /** SIGKILL to the collector and its sidecar and ssh children at once, as when its pod is killed. */
  async kill(): Promise<void> {
    const c = this.current;
    if (c === null) return;
    this.current = null;
    killTree(c.pid);
    const exit = await c.exited;
    assert.equal(exit.signal, 'SIGKILL');
  }
}

function lastLines(c: CollectorProcess | null, n = 25): string {
  return c === null
    ? ''
    : c
        .output()
        .split('\n')
        .filter((l) => l !== '')
        .slice(-n)
        .map((l) => l.slice(0, 400))
        .join('\n');
}

for (const transport of ['inproc', 'proxy'] as const) {
  describe(
    `pglog collect (${transport}) SIGKILLed before its first commit at every stage of start-up, rotations in between, all cores busy`,
    { timeout: 480_000 },
    () => {
      let work: string;
      let store: TestPostgres;
      let ssh: TestSshServer;
      let server: LogServer;
      let locks: StoreLocks;
      let collectors: Collectors;
      let hog: CpuHog | null = null;
      let load: SeqLoad | null = null;

      before(async () => {
        work = mkdtempSync(join(tmpdir(), `pglog-first-start-${transport}-`));
        [store, ssh, server] = await Promise.all([startPostgres(), startSshServer(), startLogServer({ logRotationSizeKb: 256 })]);
        // The schema exists before the first collector, so that the test can lock its tables.
        await migrateStore(store.url);
        locks = await connectStoreLocks(store.url);
        const targetsFile = writeTargetsFile(work, [sshTarget('db1', ssh, server, { transport })]);
        collectors = new Collectors(work, targetsFile, store.url);
      });

      after(async () => {
        await hog?.stop();
        await load?.stop().catch(() => undefined);
        await collectors?.kill().catch(() => undefined);
        await locks?.release().catch(() => undefined);
        await locks?.close();
        await Promise.allSettled([ssh?.dispose(), server?.dispose(), store?.stop()]);
        rmSync(work, { recursive: true, force: true });
      });

      /** Starts a collector under `held` locks and waits until it waits for them (one more waiting session). */
      async function startBlocked(held: readonly StoreTable[], what: string, alsoWaitFor?: (c: CollectorProcess) => boolean): Promise<void> {
        await locks.hold(held);
        const waitingBefore = await locks.waiting();
        const c = collectors.start(['--batch-ms', '5000']);
        await waitFor(
          async () => (alsoWaitFor?.(c) ?? true) && (await locks.waiting()) > waitingBefore,
          what,
          120_000,
          () => lastLines(c),
        );
      }

      /** The kill at a stage: PostgreSQL rotates (by hand, and by size when the load runs), then SIGKILL, then the locks go. */
      async function rotateAndKill(filesAtLeast: number): Promise<void> {
        await server.rotate();
        // Bytes in the new file (statements of no run), so that a collector has something to read there.
        await query(server.url, "SELECT 'after a rotation'");
        await waitFor(
          () => server.logFiles().length >= filesAtLeast,
          `PostgreSQL to have ${filesAtLeast} log files`,
          60_000,
          () => server.logFiles().join(' '),
        );
        await collectors.kill();
        await locks.release();
      }

      test('0 lost, 0 duplicated', async () => {
        hog = startCpuHog();
        const reading = (c: CollectorProcess): boolean => c.output().includes('reading ');

        // 1. Before the claim.
        await startBlocked(['stream_claims', 'read_position_state'], 'the first collector to wait for its claim');
        await rotateAndKill(server.logFiles().length + 1);

        // 2. After the claim, before the first read: nothing is stored yet, storing the start waits.
        await startBlocked(['read_position_state'], 'the second collector to wait for the store after its claim');
        await rotateAndKill(server.logFiles().length + 1);

        // 3. After reading, before the first commit (the batch waits 5 s, the lock comes first).
        // The load starts once this collector reads, so no file before its start holds any of it.
        const third = collectors.start(['--batch-ms', '5000']);
        await waitFor(
          () => reading(third),
          'the third collector to read',
          120_000,
          () => lastLines(third),
        );
        await locks.hold(['read_position_state']);
        load = startSeqLoad(server.url, { ratePerSecond: 250, payloadBytes: 120 });
        const stored = await storedPositions(store.url);
        await waitFor(
          async () => (await locks.waiting()) > 0,
          'the third collector to wait for its first commit',
          120_000,
          () => lastLines(third),
        );
        await rotateAndKill(server.logFiles().length + 2);

        // 4. With the load running: killed before the claim, and after reading before a commit.
        for (let i = 0; i < LATER_KILLS; i++) {
          if (i % 2 === 0) await startBlocked(['stream_claims', 'read_position_state'], `collector ${4 + i} to wait for its claim`);
          else await startBlocked(['read_position_state'], `collector ${4 + i} to read and wait for its first commit`, reading);
          await rotateAndKill(server.logFiles().length + 2);
        }
        await load.stop();

        // 5. A collector left alone catches up, cores still busy.
        const last = collectors.start(['--batch-ms', '200']);
        const catchUp = storeCatchUp(store.url, load.run, server.logDirectory);
        await waitFor(
          catchUp.caughtUp,
          'the last collector to store every logged statement',
          180_000,
          () => `${catchUp.summary()}\nfiles: ${server.logFiles().join(' ')}\n${lastLines(last, 40)}`,
        );
        const r = await catchUp.check();
        await hog.stop();
        hog = null;
        assert.equal(r.lost.length, 0, formatCheck(r));
        assert.equal(r.duplicated.length, 0, formatCheck(r));
        assert.ok(r.expected >= load.completed().length * 0.99, `the server logged what the load completed (${r.expected} of ${load.completed().length})`);
        assert.equal(stored.length, 1, `the start was stored before the third collector read a byte (${stored.join(', ') || 'nothing stored'})`);
        assert.ok(server.logFiles().length >= 10, `PostgreSQL rotated its log (${server.logFiles().length} files)`);
        console.log(`# ${transport}: ${formatCheck(r)} ${server.logFiles().length} log files; start stored: ${stored.join(', ')}`);
        const stopped = await last.stop();
        collectors.current = null;
        assert.equal(stopped.code, 0);
      });
    },
  );
}

describe('a quiet log: rotations while the collector is down lose nothing', { timeout: 240_000 }, () => {
  let work: string;
  let store: TestPostgres;
  let ssh: TestSshServer;
  let server: LogServer;
  let collectors: Collectors;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-quiet-'));
    [store, ssh, server] = await Promise.all([startPostgres(), startSshServer(), startLogServer()]);
    const targetsFile = writeTargetsFile(work, [sshTarget('db1', ssh, server)]);
    collectors = new Collectors(work, targetsFile, store.url);
  });

  after(async () => {
    await collectors?.kill().catch(() => undefined);
    await Promise.allSettled([ssh?.dispose(), server?.dispose(), store?.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  /** Statements while the collector is down, with a rotation among them and one after them (the newest file is empty again). */
  async function whileDown(): Promise<SeqLoad> {
    const load = startSeqLoad(server.url, { ratePerSecond: 200 });
    await waitFor(() => load.completed().length >= 150, 'statements before the rotation');
    await server.rotate();
    const before = load.completed().length;
    await waitFor(() => load.completed().length >= before + 150, 'statements after the rotation');
    await load.stop();
    await server.rotate();
    return load;
  }

  async function expectAllOnce(load: SeqLoad, c: CollectorProcess, what: string): Promise<string> {
    const catchUp = storeCatchUp(store.url, load.run, server.logDirectory);
    await waitFor(catchUp.caughtUp, what, 60_000, () => `${catchUp.summary()}\nfiles: ${server.logFiles().join(' ')}\n${lastLines(c, 40)}`);
    const r = await catchUp.check();
    assert.equal(r.duplicated.length, 0, formatCheck(r));
    return formatCheck(r);
  }

  test('first started on an empty newest file, then killed; later quiet and killed again: every statement once', async () => {
    // PostgreSQL opens the new file at the rotation: the newest file is empty, nothing to read.
    await server.rotate();
    collectors.start();
    // Its place is stored although it has nothing to read (before the fix nothing was stored: the wait runs out).
    let stored: string[] = [];
    await waitFor(async () => (stored = await storedPositions(store.url).catch(() => [])).length > 0, 'the start of the quiet log in the store', 20_000).catch(
      () => undefined,
    );
    await collectors.kill();
    const one = await whileDown();
    const second = collectors.start();
    const firstSummary = await expectAllOnce(one, second, 'the statements logged while down after the first start');
    assert.equal(stored.length, 1, 'the first collector stored where the quiet log starts');

    // Quiet while it runs (the newest file is empty), then down across rotations.
    await server.rotate();
    await waitFor(async () => (await storedPositions(store.url)).length === 1, 'a committed position');
    await collectors.kill();
    const two = await whileDown();
    const third = collectors.start();
    const secondSummary = await expectAllOnce(two, third, 'the statements logged while down the second time');
    console.log(`# quiet log: ${firstSummary} / ${secondSummary}`);
    await third.stop();
    collectors.current = null;
  });
});
