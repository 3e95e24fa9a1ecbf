// The store goes away for 30 s while `pglog collect` is copying under load, then comes back.
//
// A PostgreSQL logs ~300 statements/s of ~2 kB each; the real CLI commits every 50 ms. The
// store is stopped with `pg_ctl stop -m immediate` while the collector's COPY runs in it,
// kept down 30 s, then started again. The collector must stay up, say in its log that the
// store is unavailable (STORE_UNAVAILABLE) and later that it commits again, hold no more than
// its memory budget meanwhile (its stream pauses: the SSH window closes, reading stops while
// the log keeps growing), and in the end hold every statement the server logged exactly once.
// The store URL carries a canary password and the SSH key is a real one: neither may appear
// in anything the collector wrote, the outage's connection errors included.
//
// Catching a COPY: a batch of 50 ms of this load is ~30 kB and the store takes it in a few ms
// (the collector's connection shows an active COPY in ~2% of samples), so a stop "at a random
// moment" almost always falls between two transactions. Instead, a row trigger is put on the
// event table that sleeps, but only in the store's current incarnation (it compares
// pg_postmaster_start_time()): the next COPY stops inside the server with its rows sent, the
// test sees it in pg_stat_activity, and the store is stopped right then. After the restart
// the trigger does nothing and is dropped.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { checkStore, formatCheck, storeCatchUp } from '@pglog/test-support/checker.ts';
import {
  type CollectScenario,
  freePort,
  leakedSecrets,
  metricSum,
  MiB,
  mib,
  processMemory,
  scrapeMetrics,
  startCollectScenario,
  withPassword,
} from '@pglog/test-support/collect-scenario.ts';
import { type CollectorProcess, waitFor } from '@pglog/test-support/collector-process.ts';
import { withClient } from '@pglog/test-support/pg-client.ts';
import { PG_BIN } from '@pglog/test-support/postgres.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { isRoot, serverUser } from '@pglog/test-support/server-user.ts';
import pg from 'pg';

import { currentLogFile } from '../helpers/current-log-file.ts';

const OUTAGE_MS = 30_000;
const MEMORY_BUDGET = 64 * MiB;
const TARGET_BUDGET = 8 * MiB;
/**
 * What the process needs beyond the bytes it holds for the store: Node.js itself, the code,
 * ssh2, pg, the parser's caches, the events' objects (the budget counts log bytes) and garbage
 * not yet collected. Measured: ~130 MiB resident in steady state, ~150 MiB at the end of the
 * outage, up to ~205 MiB while catching up afterwards.
 */
const MEMORY_MARGIN = 192 * MiB;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** pg_ctl as the store's owner: `stop -m immediate` (a crash: every session is killed at once). */
function stopStoreImmediately(store: { socketDir: string }): Promise<void> {
  // pg-cluster.ts keeps the data directory next to the socket directory.
  const dataDir = join(dirname(store.socketDir), 'data');
  const ids = isRoot() ? { uid: serverUser().uid, gid: serverUser().gid } : {};
  return new Promise((resolve, reject) => {
    execFile(`${PG_BIN}/pg_ctl`, ['-D', dataDir, '-m', 'immediate', '-w', 'stop'], { timeout: 60_000, ...ids }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`pg_ctl stop -m immediate: ${err.message}\n${stdout}\n${stderr}`));
      else resolve();
    });
  });
}

interface Sample {
  at: number;
  rss: number;
  peakRss: number;
  paused: number;
  pendingBytes: number;
  pendingBytesTarget: number;
  readBytes: number;
  logBytes: number;
}

describe('pglog collect: the store stopped (immediate) for 30 s while copying under load', { timeout: 300_000 }, () => {
  let s: CollectScenario;
  let load: SeqLoad;
  let c: CollectorProcess;
  let metricsPort: number;
  const canary = `CANARY-${randomBytes(6).toString('hex')}`;
  let exitedEarly: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  let stoppedAt = 0;
  let restartedAt = 0;
  const samples: Sample[] = [];
  const tail = (): string => c.output().slice(-4000);
  const metrics = (): Promise<string> => scrapeMetrics(metricsPort);
  const show = (x: Sample): string =>
    `${(x.at / 1000).toFixed(1)}s rss=${mib(x.rss)} peak=${mib(x.peakRss)} paused=${x.paused} pending=${mib(x.pendingBytes)} pending{db1}=${mib(x.pendingBytesTarget)} read=${mib(x.readBytes)} log=${mib(x.logBytes)}`;
  const sampleText = (): string =>
    samples
      .filter((_, i) => i % 4 === 0)
      .map(show)
      .join('\n');

  before(async () => {
    s = await startCollectScenario({ name: 'store-outage' });
    // The test stores run with synchronous_commit off (speed): an immediate stop would then
    // lose commits the server had already acknowledged, which no client can make up for. A
    // real store acknowledges only what is durable, so this one does too.
    await withClient(s.store.url, async (admin) => {
      await admin.query('ALTER SYSTEM SET synchronous_commit = on');
      await admin.query('SELECT pg_reload_conf()');
    });
    metricsPort = await freePort();
  });

  after(async () => {
    await load?.stop().catch(() => undefined);
    await s?.dispose();
  });

  test('the store is stopped mid-COPY and kept down 30 s: the collector stays up and logs STORE_UNAVAILABLE, then "store commits again"', async (t) => {
    // Trust authentication over the socket: any password is accepted, so the canary is "real".
    c = s.startCollector(
      [
        '--listen',
        `127.0.0.1:${metricsPort}`,
        '--batch-ms',
        '50',
        '--memory-budget',
        '64MiB',
        // 8 MiB per target: at ~0.7 MB/s of log the stream pauses ~12 s into the outage.
        '--target-memory-budget',
        '8MiB',
      ],
      withPassword(s.store.url, canary),
    );
    void c.exited.then((e) => {
      exitedEarly = e;
    });

    load = startSeqLoad(s.server.url, { ratePerSecond: 300, payloadBytes: 2000, connections: 3 });
    await waitFor(
      async () => {
        try {
          return metricSum(await metrics(), 'pglog_batches_total', { outcome: 'committed' }) >= 20;
        } catch {
          return false;
        }
      },
      'the collector to commit batches',
      60_000,
      tail,
    );
    await waitFor(async () => (await checkStore(s.store.url, load.run, { numbers: [] })).stored > 300, 'rows of the load in the store', 60_000, tail);
    const steady = processMemory(c.pid);
    assert.ok(steady !== null, 'the collector runs');
    t.diagnostic(`steady state before the outage: RSS ${mib(steady.rssBytes)}, peak ${mib(steady.peakRssBytes)}`);

    // Hold the next COPY inside the server (this incarnation only), and stop the store then.
    const watcher = new pg.Client({ connectionString: s.store.url, application_name: 'pglog-test-watcher' });
    watcher.on('error', () => {
      /* the store is about to be killed */
    });
    await watcher.connect();
    const startTime = (await watcher.query<{ t: string }>('SELECT pg_postmaster_start_time()::text AS t')).rows[0]!.t;
    await watcher.query(`CREATE FUNCTION public.pglog_test_hold_copy() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN
        IF pg_postmaster_start_time() = '${startTime}'::timestamptz THEN PERFORM pg_sleep(60); END IF;
        RETURN NEW;
      END $f$`);
    await watcher.query(
      'CREATE TRIGGER pglog_test_hold_copy BEFORE INSERT ON pglog.statement_events FOR EACH ROW EXECUTE FUNCTION public.pglog_test_hold_copy()',
    );
    let held: { pid: number; query: string } | undefined;
    await waitFor(
      async () => {
        const r = await watcher.query<{ pid: number; query: string }>(
          "SELECT pid, left(query, 80) AS query FROM pg_stat_activity WHERE application_name = 'pglog collect' AND state = 'active' AND query ILIKE 'COPY%' AND wait_event = 'PgSleep'",
        );
        held = r.rows[0];
        return held !== undefined;
      },
      "the collector's COPY to be held in the store",
      20_000,
      tail,
    );
    stoppedAt = Date.now();
    await stopStoreImmediately(s.store);
    await watcher.end().catch(() => undefined);
    t.diagnostic(`stopped the store while backend ${held!.pid} ran ${JSON.stringify(held!.query)}`);

    // 30 s down: sample memory, pause and reading.
    const logFile = currentLogFile(s.server.dataDirectory);
    const downUntil = stoppedAt + OUTAGE_MS;
    while (Date.now() < downUntil) {
      assert.equal(exitedEarly, null, `the collector exited during the outage: ${JSON.stringify(exitedEarly)}\n${tail()}`);
      const mem = processMemory(c.pid);
      const text = await metrics();
      if (mem !== null) {
        samples.push({
          at: Date.now() - stoppedAt,
          rss: mem.rssBytes,
          peakRss: mem.peakRssBytes,
          paused: metricSum(text, 'pglog_paused_streams'),
          pendingBytes: metricSum(text, 'pglog_pending_bytes'),
          pendingBytesTarget: metricSum(text, 'pglog_pending_bytes_target', { target: 'db1' }),
          readBytes: metricSum(text, 'pglog_read_bytes_total'),
          logBytes: statSync(logFile).size,
        });
      }
      await sleep(Math.min(500, Math.max(0, downUntil - Date.now())));
    }
    restartedAt = Date.now();
    await s.store.startServer();
    await withClient(s.store.url, async (admin) => {
      await admin.query('DROP TRIGGER pglog_test_hold_copy ON pglog.statement_events');
      await admin.query('DROP FUNCTION public.pglog_test_hold_copy()');
    });
    t.diagnostic(`during the outage:\n${sampleText()}`);

    // The log says why, and says when it is over.
    await waitFor(
      () => c.logRecords().some((r) => r.msg === 'store commits again' && Date.parse(String(r.time)) >= restartedAt),
      '"store commits again" in the collector log after the store came back',
      60_000,
      tail,
    );
    assert.equal(exitedEarly, null, `the collector exited: ${JSON.stringify(exitedEarly)}\n${tail()}`);
    const records = c.logRecords();
    const failures = records.filter(
      (r) => r.code === 'STORE_UNAVAILABLE' && Date.parse(String(r.time)) >= stoppedAt && Date.parse(String(r.time)) < restartedAt + 1_000,
    );
    t.diagnostic(
      `store failures logged during the outage (first 3):\n${failures
        .slice(0, 3)
        .map((r) => JSON.stringify(r))
        .join('\n')}`,
    );
    assert.ok(failures.length > 0, `the collector logged STORE_UNAVAILABLE during the outage\n${tail()}`);
    assert.ok(
      failures.some((r) => r.level === 'warn' || r.level === 'error'),
      `STORE_UNAVAILABLE is logged as a warning or an error: ${JSON.stringify(failures[0])}`,
    );
    // The batch whose COPY was cut off failed as such (not only the reconnects after it).
    assert.ok(
      failures.some((r) => /committing a batch failed on/.test(String(r.msg))),
      `the commit under way when the store was stopped is reported as failed\n${failures
        .slice(0, 5)
        .map((r) => JSON.stringify(r))
        .join('\n')}`,
    );
  });

  test('while the store is down the stream pauses: reading stops and memory stays within budget', () => {
    assert.ok(samples.length >= 20, `sampled the outage (${samples.length} samples)`);
    assert.ok(
      samples.some((x) => x.paused >= 1),
      `a stream paused for the store (pglog_paused_streams):\n${sampleText()}`,
    );
    const lastTen = samples.filter((x) => x.at >= OUTAGE_MS - 10_000);
    const readGrowth = lastTen[lastTen.length - 1]!.readBytes - lastTen[0]!.readBytes;
    const logGrowth = lastTen[lastTen.length - 1]!.logBytes - lastTen[0]!.logBytes;
    assert.ok(logGrowth > 3 * MiB, `the server kept logging in the last 10 s of the outage (${mib(logGrowth)})`);
    assert.ok(
      readGrowth < MiB,
      `a paused stream stops reading: ${mib(readGrowth)} read in the last 10 s of the outage while the log grew ${mib(logGrowth)}\n${sampleText()}`,
    );
    const peakDuring = Math.max(...samples.map((x) => x.peakRss));
    assert.ok(
      peakDuring < MEMORY_BUDGET + MEMORY_MARGIN,
      `peak RSS (VmHWM) during the outage ${mib(peakDuring)} stays under --memory-budget ${mib(MEMORY_BUDGET)} + ${mib(MEMORY_MARGIN)}`,
    );
  });

  test('back online: 0 lost, 0 duplicated, peak RSS over the whole run within budget + margin, clean exit on SIGTERM', async (t) => {
    await load.stop();
    assert.equal(load.failures(), 0, 'the monitored server answered every statement');
    const catchUp = storeCatchUp(s.store.url, load.run, s.server.logDirectory);
    await waitFor(catchUp.caughtUp, 'the collector to catch up after the outage', 120_000, () => `${catchUp.summary()}\n${tail()}`);
    const r = await catchUp.check();
    t.diagnostic(formatCheck(r));
    assert.equal(r.lost.length, 0, formatCheck(r));
    assert.equal(r.duplicated.length, 0, formatCheck(r));
    assert.equal(r.unexpected.length, 0, formatCheck(r));
    assert.equal(r.expected, load.completed().length, `the server logged every completed statement: ${formatCheck(r)}`);
    const end = processMemory(c.pid);
    assert.ok(end !== null, `the collector still runs\n${tail()}`);
    t.diagnostic(`peak RSS over the run: ${mib(end.peakRssBytes)}; ${load.completed().length} statements`);
    assert.ok(
      end.peakRssBytes < MEMORY_BUDGET + MEMORY_MARGIN,
      `peak RSS (VmHWM) over the whole run, catch-up included, ${mib(end.peakRssBytes)} stays under ${mib(MEMORY_BUDGET + MEMORY_MARGIN)}`,
    );
    const stopped = await c.stop();
    assert.equal(stopped.code, 0, `exit status after SIGTERM\n${tail()}`);
  });

  test('no secret in the output: neither the store password nor a line of the SSH private key', () => {
    const output = readFileSync(s.outputFile, 'utf8');
    assert.ok(output.includes('STORE_UNAVAILABLE'), "the output holds the outage's messages (the ones most likely to quote a connection string)");
    assert.deepEqual(leakedSecrets(output, { passwords: [canary], privateKeyFiles: [s.ssh.privateKeyFile] }), [], 'the collector output holds no secret');
  });

  test('pglog_pending_bytes and pglog_pending_bytes_target report the bytes held for the store while paused', () => {
    // docs/metrics.md: "bytes held in memory for the store". A stream pauses only once its
    // target holds --target-memory-budget, so while paused the gauge must show at least that.
    const paused = samples.filter((x) => x.paused >= 1);
    assert.ok(paused.length > 0, 'samples while paused');
    const last = paused[paused.length - 1]!;
    assert.ok(
      last.pendingBytesTarget >= TARGET_BUDGET && last.pendingBytesTarget <= MEMORY_BUDGET + 2 * MiB,
      `pglog_pending_bytes_target{target="db1"} while paused is ${mib(last.pendingBytesTarget)}, expected between ${mib(TARGET_BUDGET)} and ${mib(MEMORY_BUDGET)}\n${sampleText()}`,
    );
    assert.ok(last.pendingBytes >= last.pendingBytesTarget, `pglog_pending_bytes (${mib(last.pendingBytes)}) is the sum over targets`);
    // A stream checks the budget after handing over one chunk's entries: it may go over by that much.
    const maxHeld = Math.max(...samples.map((x) => x.pendingBytesTarget));
    assert.ok(maxHeld <= TARGET_BUDGET + 2 * MiB, `the bytes held for db1 never went past --target-memory-budget (+ one chunk): max ${mib(maxHeld)}`);
  });
});
