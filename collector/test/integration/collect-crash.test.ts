// Nothing lost, nothing twice when the collector is SIGKILLed again and again under load,
// while PostgreSQL rotates its log by size every few seconds: every restart resumes from the
// offsets committed with the events, across file switches it never saw happen; the statement
// rollup committed with them counts each stored statement once as well.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { formatCheck, storeCatchUp } from '@pglog/test-support/checker.ts';
import { type CollectorProcess, sshTarget, startCollector, untilReading, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { withClient } from '@pglog/test-support/pg-client.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';

const KILLS = 6;

/** The collector's "reading FILE from byte N" lines and errors, for a failure message. */
function readingLines(output: string): string {
  return output
    .split('\n')
    .filter((l) => /reading |"level":(?:40|50)/.test(l))
    .map((l) => l.slice(0, 400))
    .join('\n');
}

describe('pglog collect SIGKILLed repeatedly under load, with size-based log rotation', { timeout: 240_000 }, () => {
  let work: string;
  let store: TestPostgres;
  let ssh: TestSshServer;
  let server: LogServer;
  let load: SeqLoad;
  let collector: CollectorProcess | null = null;
  let targetsFile: string;
  const outputFile = (): string => join(work, 'collector.log');
  const start = (): CollectorProcess => startCollector({ targetsFile, storeUrl: store.url, args: ['--batch-ms', '100'], outputFile: outputFile() });

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-crash-'));
    // 64 kB files at ~60 kB/s of log: PostgreSQL starts a new file about every second or two.
    [store, ssh, server] = await Promise.all([startPostgres(), startSshServer(), startLogServer({ logRotationSizeKb: 64 })]);
    targetsFile = writeTargetsFile(work, [sshTarget('db1', ssh, server)]);
  });

  after(async () => {
    await load?.stop().catch(() => undefined);
    if (collector !== null) {
      collector.kill('SIGKILL');
      await collector.exited;
    }
    await Promise.allSettled([ssh?.dispose(), server?.dispose(), store?.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  test(`${KILLS} SIGKILLs at random moments: 0 lost, 0 duplicated`, async () => {
    // Deterministic "random" moments, so a failure can be replayed.
    let seed = 20261123;
    const next = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    // A log never collected before is read from the beginning of its active file: the load
    // starts once the first collector has claimed the stream, so no earlier file is involved.
    const first = start();
    collector = first;
    await untilReading(first, 'the first collector to start reading');
    load = startSeqLoad(server.url, { ratePerSecond: 250, payloadBytes: 120 });
    for (let i = 0; i < KILLS; i++) {
      const victim = i === 0 ? first : start();
      collector = victim;
      await new Promise((r) => setTimeout(r, 1_500 + Math.floor(next() * 2_500)));
      victim.kill('SIGKILL');
      const exit = await victim.exited;
      assert.equal(exit.signal, 'SIGKILL');
      collector = null;
    }
    await load.stop();
    collector = start();
    const catchUp = storeCatchUp(store.url, load.run, server.logDirectory);
    await waitFor(
      catchUp.caughtUp,
      'the restarted collector to catch up',
      120_000,
      () => `${catchUp.summary()}\nfiles: ${server.logFiles().join(' ')}\n${readingLines(collector!.output())}`,
    );
    const r = await catchUp.check();
    assert.equal(r.lost.length, 0, formatCheck(r));
    assert.equal(r.duplicated.length, 0, formatCheck(r));
    assert.ok(r.expected >= load.completed().length * 0.99, `the server logged what the load completed (${r.expected} of ${load.completed().length})`);
    assert.ok(server.logFiles().length >= 5, `PostgreSQL rotated its log (${server.logFiles().length} files)`);
    const stopped = await collector.stop();
    assert.equal(stopped.code, 0);
    collector = null;
    // The statement rollup, written in each batch's transaction, holds every stored row once too.
    await withClient(store.url, async (db) => {
      const lines = async (sql: string): Promise<string[]> =>
        (
          await db.query<{ l: string }>(`SELECT concat_ws(' ', bucket, target, instance, database, fingerprint, calls, timed) AS l FROM (${sql}) x ORDER BY 1`)
        ).rows.map((x) => x.l);
      const rows =
        await lines(`SELECT date_bin('1 minute', ts, timestamptz 'epoch') AS bucket, target, instance, database, fingerprint, count(*) AS calls, count(duration_ms) AS timed
                                  FROM pglog.statements GROUP BY 1, 2, 3, 4, 5`);
      assert.ok(rows.length > 0);
      assert.deepEqual(
        await lines(`SELECT bucket, target, instance, database, fingerprint, sum(calls) AS calls, sum(timed) AS timed
                                      FROM pglog.statement_rollup GROUP BY 1, 2, 3, 4, 5`),
        rows,
      );
    });
  });
});
