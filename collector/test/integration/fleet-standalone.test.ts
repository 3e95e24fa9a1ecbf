/**
 * A fleet into one standalone collector (issue 46), at a size that fits CI: 200 simulated
 * servers (test-support/src/fleet-sim/: a real sshd each, on an address of its own, with the
 * MaxStartups a real server has), one log each written at a log-normal rate and rotated as
 * PostgreSQL rotates, one known_hosts and one key for the whole fleet, a few percent of the
 * servers hot enough for the sidecar.
 *   - every server streams (its first marker is stored);
 *   - the collector is SIGKILLed while every log is being written, and a new one started: every
 *     server's next line is stored again;
 *   - writing stopped: every marker of every server stored exactly once, statement rows equal
 *     to the entries written; no handshake refused by any sshd (MaxStartups); the collector
 *     logged no error.
 * How long each of these takes is the benchmark's (bench/fleet-bench.ts), not this test's.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { type CollectorProcess, isErrorRecord, startCollector, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { compareFleet, formatFleetCheck, newestMarkers, storedByTarget } from '@pglog/test-support/fleet-sim/check.ts';
import { type SimulatedFleet, startSimulatedFleet } from '@pglog/test-support/fleet-sim/fleet.ts';
import { DEFAULT_RATE_SHAPE, promotionThreshold } from '@pglog/test-support/fleet-sim/rates.ts';
import { MAX_STARTUPS_REFUSAL } from '@pglog/test-support/fleet-sim/servers.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { sleep } from '@pglog/test-support/wait.ts';
import pg from 'pg';

const SERVERS = 200;
/** Generous: only against a hang; the benchmark measures the time. */
const WAIT_MS = 300_000;

describe(`a fleet of ${SERVERS} servers into one standalone collector`, { timeout: 900_000 }, () => {
  let store: TestPostgres;
  let pool: pg.Pool;
  let fleet: SimulatedFleet;
  let dir: string;
  let collector: CollectorProcess | null = null;
  const promoteBits = Math.round(promotionThreshold(DEFAULT_RATE_SHAPE, 0.05) * 8);
  const start = (run: string): CollectorProcess =>
    startCollector({
      targetsFile: writeTargetsFile(dir, fleet.targets('auto')),
      storeUrl: store.url,
      outputFile: join(dir, `collector-${run}.log`),
      args: ['--start-at', 'oldest', '--log-level', 'info', '--promote-above', String(promoteBits), '--demote-below', String(Math.round(promoteBits * 0.6))],
    });
  /** Waits until every server has a marker above `before` stored (logged at or after `since`). */
  const everyServerStreams = async (what: string, before: ReadonlyMap<string, number>, since: number): Promise<void> => {
    let missing: string[] = [];
    for (const deadline = Date.now() + WAIT_MS; Date.now() < deadline; await sleep(1000)) {
      const newest = await newestMarkers(pool, since).catch((e: unknown) => {
        if ((e as { code?: string }).code === '42P01') return new Map<string, number>(); // no schema yet
        throw e;
      });
      missing = fleet.logs.map((l) => l.name).filter((name) => (newest.get(name) ?? 0) <= (before.get(name) ?? 0));
      if (missing.length === 0) return;
    }
    assert.fail(
      `${what}: ${missing.length} of ${SERVERS} servers never streamed (${missing.slice(0, 10).join(', ')} ...)\n${collector?.output().slice(-3000) ?? ''}`,
    );
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pglog-fleet-test-'));
    chmodSync(dir, 0o755); // the servers' login user reads the logs and authorized_keys below it
    const fleetStarted = Date.now();
    [store, fleet] = await Promise.all([
      startPostgres(),
      startSimulatedFleet({ count: SERVERS, dir: join(dir, 'fleet'), keyCache: join(homedir(), '.cache/pglog/fleet-keys') }),
    ]);
    pool = new pg.Pool({ connectionString: store.url, max: 2 });
    fleet.startWriting();
    collector = start('first');
    await everyServerStreams('after start', new Map(), fleetStarted - 60_000);
  });
  after(async () => {
    await collector?.stop().catch(() => undefined);
    await pool?.end();
    await fleet?.dispose();
    await store?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  test('killed while every log is written and started again: every server streams again', async () => {
    await sleep(10_000);
    collector!.kill('SIGKILL');
    await collector!.exited;
    const before = new Map(fleet.written(await fleet.snapshot()).map((w) => [w.name, w.markers]));
    const killedAt = Date.now();
    collector = start('second');
    await everyServerStreams('after the restart', before, killedAt - 1000);
  });

  test('every marker of every server once, as many statement rows as entries written, no refused handshake, no error logged', async () => {
    await sleep(5_000);
    const written = fleet.written(await fleet.stopWriting());
    let check = compareFleet(written, await storedByTarget(pool));
    for (const deadline = Date.now() + WAIT_MS; (check.lostMarkers > 0 || check.rowDifference < 0) && Date.now() < deadline; await sleep(2000)) {
      check = compareFleet(written, await storedByTarget(pool));
    }
    assert.equal(check.whole, SERVERS, formatFleetCheck(check));
    assert.equal(check.duplicatedMarkers, 0, formatFleetCheck(check));
    assert.equal(fleet.servers.countLogLines(MAX_STARTUPS_REFUSAL), 0, 'no handshake refused by sshd');
    const errors = collector!.logRecords().filter(isErrorRecord);
    assert.deepEqual(
      errors.map((r) => r['msg']),
      [],
    );
  });
});
