/**
 * Storing SQL snapshots: one transaction per snapshot (StoreWriter.writeSnapshot) against
 * groups in one transaction (writeSnapshots, what the collector's SnapshotSink does every half
 * second), on a real PostgreSQL 15 store. What a collector with many instances spends of its
 * one store connection, which the log batches share.
 *
 *   node bench/snapshot-store-bench.ts [--snapshots 2000] [--sessions 20] [--out FILE.md]
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import type { ActivitySession, Snapshot } from '@pglog/collector/snapshot/types.ts';
import { StoreWriter } from '@pglog/collector/store/store-writer.ts';
import { startPostgres } from '@pglog/test-support/postgres.ts';

import { createCleanup } from './lib/cleanup.ts';

const { values } = parseArgs({
  options: { snapshots: { type: 'string', default: '2000' }, sessions: { type: 'string', default: '20' }, out: { type: 'string' } },
});
const SNAPSHOTS = Number(values.snapshots);
const SESSIONS = Number(values.sessions);
const say = (line: string): void => {
  process.stderr.write(`${line}\n`);
};
const cleanup = createCleanup(say);

function snapshot(i: number): Snapshot {
  const ts = new Date(Date.UTC(2026, 10, 23, 12, 0, 0) + i * 15);
  const sessions: ActivitySession[] = Array.from({ length: SESSIONS }, (_, k) => ({
    pid: 1000 + k,
    leaderPid: null,
    database: 'shop',
    username: 'app',
    application: 'web',
    client: '10.0.0.7',
    backendType: 'client backend',
    state: k % 3 === 0 ? 'active' : 'idle',
    waitEventType: null,
    waitEvent: null,
    backendStart: ts,
    xactStart: ts,
    queryStart: ts,
    stateChange: ts,
    query: `SELECT * FROM orders WHERE customer_id = ${k} AND created_at > now() - interval '1 day'`,
    fingerprint: 'a1b2c3d4e5f60718',
    blockedBy: [],
  }));
  return {
    target: `db${i % 200}`,
    instance: 'main',
    kind: 'activity',
    ts,
    durationMs: 2.5,
    sessions,
    blocking: [],
    statements: [],
    databases: [],
    intervalSeconds: null,
  };
}

interface Result {
  label: string;
  seconds: number;
  perSecond: number;
  transactions: number;
}

async function measure(label: string, write: (list: Snapshot[]) => Promise<number>): Promise<Result> {
  const list = Array.from({ length: SNAPSHOTS }, (_, i) => snapshot(i));
  const started = performance.now();
  const transactions = await write(list);
  const seconds = (performance.now() - started) / 1000;
  return { label, seconds, perSecond: SNAPSHOTS / seconds, transactions };
}

try {
  say(`snapshot-store-bench: ${SNAPSHOTS} activity snapshots of ${SESSIONS} sessions each`);
  const store = await startPostgres();
  cleanup.push(() => store.stop());
  const writer = await StoreWriter.open({ url: store.url, applicationName: 'pglog-bench' });
  cleanup.push(() => writer.close());
  await writer.writeSnapshot(snapshot(0)); // warm: encoders, partitions, plans
  const results: Result[] = [];
  results.push(
    await measure('one transaction per snapshot (writeSnapshot)', async (list) => {
      for (const s of list) await writer.writeSnapshot(s);
      return list.length;
    }),
  );
  for (const group of [50, 500]) {
    results.push(
      await measure(`groups of ${group} (writeSnapshots, as SnapshotSink)`, async (list) => {
        let n = 0;
        for (let i = 0; i < list.length; i += group, n++) {
          const outcomes = await writer.writeSnapshots(list.slice(i, i + group));
          if (outcomes.some((o) => o !== null)) throw new Error('a snapshot was refused');
        }
        return n;
      }),
    );
  }
  const base = results[0]!;
  const lines = [
    '## Storing SQL snapshots: one transaction each against groups (bench/snapshot-store-bench.ts)',
    '',
    `${SNAPSHOTS} activity snapshots of ${SESSIONS} sessions each (${SNAPSHOTS * (SESSIONS + 1)} rows) into a PostgreSQL 15 store on the same machine, one writer connection. Measured ${new Date().toISOString().slice(0, 10)}.`,
    '',
    '| how | transactions | seconds | snapshots/s | store connection time per snapshot (ms) | vs one each |',
    '|---|---:|---:|---:|---:|---:|',
    ...results.map(
      (r) =>
        `| ${r.label} | ${r.transactions} | ${r.seconds.toFixed(2)} | ${Math.round(r.perSecond)} | ${((1000 * r.seconds) / SNAPSHOTS).toFixed(3)} | ${(r.perSecond / base.perSecond).toFixed(1)}× |`,
    ),
    '',
    `A collector with 2,000 instances snapshotting every 15 s writes 133 snapshots a second: one transaction each would hold the store connection, which the log batches share, for ${((133 * 1000 * base.seconds) / SNAPSHOTS).toFixed(0)} ms of every second; grouped every half second, for ${((133 * 1000 * results[2]!.seconds) / SNAPSHOTS).toFixed(0)} ms.`,
  ];
  const markdown = lines.join('\n');
  process.stdout.write(`${markdown}\n`);
  // make bench merges it into docs/benchmarks.md (bench/merge-section.ts).
  if (values.out !== undefined) writeFileSync(values.out, `${markdown}\n`);
} finally {
  await cleanup.run();
}
