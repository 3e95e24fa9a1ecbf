// pglog collect end to end on real components: two OpenSSH servers on loopback addresses,
// three PostgreSQL 15 instances logging in stderr, csvlog and jsonlog (one with a WIN1251
// database), identifiable load on each, the real `pglog collect` CLI, a real store. Every
// statement the servers logged is in the store exactly once, Cyrillic text from the WIN1251
// database arrives as the right UTF-8, metrics and health answer, SIGTERM stops within 10 s,
// and no secret reaches the log.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { formatCheck, storeCatchUp } from '@pglog/test-support/checker.ts';
import { type CollectorProcess, mainInstance, sshLogin, startCollector, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { freePort } from '@pglog/test-support/wait.ts';
import pg from 'pg';

const CYRILLIC = 'Привет, мир: ёлка и щи';

describe('pglog collect: two servers, three instances, three formats', { timeout: 240_000 }, () => {
  let work: string;
  let store: TestPostgres;
  let ssh1: TestSshServer;
  let ssh2: TestSshServer;
  let stderrPg: LogServer;
  let csvPg: LogServer;
  let jsonPg: LogServer;
  let collector: CollectorProcess;
  let metricsPort: number;
  const loads: Array<{ name: string; server: LogServer; load: SeqLoad }> = [];
  const storeUrlWithCanary = (): string => store.url.replace('postgres@', 'postgres:CANARY-e2e-store-password@');

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-e2e-'));
    [store, ssh1, ssh2, stderrPg, csvPg, jsonPg] = await Promise.all([
      startPostgres(),
      startSshServer(),
      startSshServer(),
      startLogServer({ logFormat: 'stderr' }),
      startLogServer({ logFormat: 'csvlog' }),
      startLogServer({ logFormat: 'jsonlog', databases: [{ name: 'legacy', encoding: 'WIN1251' }] }),
    ]);
    metricsPort = await freePort();
    const targetsFile = writeTargetsFile(work, [
      {
        name: 'db1',
        ...sshLogin(ssh1),
        instances: [mainInstance(stderrPg), mainInstance(csvPg, { name: 'csv', logFormat: 'csvlog' })],
      },
      {
        name: 'db2',
        ...sshLogin(ssh2),
        instances: [mainInstance(jsonPg, { logFormat: 'jsonlog', encodings: { databases: { legacy: 'WIN1251' } } })],
      },
    ]);
    collector = startCollector({
      targetsFile,
      storeUrl: storeUrlWithCanary(),
      args: ['--listen', `127.0.0.1:${metricsPort}`, '--batch-ms', '200'],
      outputFile: join(work, 'collector.log'),
    });
    loads.push(
      { name: 'db1/main', server: stderrPg, load: startSeqLoad(stderrPg.url, { ratePerSecond: 150 }) },
      { name: 'db1/csv', server: csvPg, load: startSeqLoad(csvPg.url, { ratePerSecond: 100 }) },
      { name: 'db2/main', server: jsonPg, load: startSeqLoad(jsonPg.url, { ratePerSecond: 100 }) },
    );
    const legacy = new pg.Client({ connectionString: jsonPg.urlFor('legacy') });
    await legacy.connect();
    try {
      for (let i = 0; i < 5; i++) await legacy.query(`SELECT '${CYRILLIC} ${i}' AS greeting`);
    } finally {
      await legacy.end();
    }
    await new Promise((r) => setTimeout(r, 8_000));
    await Promise.all(loads.map((l) => l.load.stop()));
  });

  after(async () => {
    await Promise.all(loads.map((l) => l.load.stop().catch(() => undefined)));
    if (collector !== undefined) {
      collector.kill('SIGKILL');
      await collector.exited;
    }
    await Promise.allSettled([ssh1?.dispose(), ssh2?.dispose(), stderrPg?.dispose(), csvPg?.dispose(), jsonPg?.dispose(), store?.stop()]);
    rmSync(work, { recursive: true, force: true });
  });

  test('every statement each server logged is in the store exactly once', async () => {
    for (const { name, server, load } of loads) {
      const catchUp = storeCatchUp(store.url, load.run, server.logDirectory);
      await waitFor(catchUp.caughtUp, `${name} to catch up`, 90_000, () => `${catchUp.summary()}\n${collector.output().slice(-3000)}`);
      const r = await catchUp.check();
      assert.equal(r.lost.length, 0, `${name}: ${formatCheck(r)}`);
      assert.equal(r.duplicated.length, 0, `${name}: ${formatCheck(r)}`);
      assert.ok(
        r.expected >= load.completed().length * 0.99,
        `${name}: the server logged what the load completed (${r.expected} of ${load.completed().length})`,
      );
    }
  });

  test('Cyrillic statements of the WIN1251 database arrive as the exact UTF-8 text', async () => {
    const client = new pg.Client({ connectionString: store.url });
    await client.connect();
    try {
      await waitFor(
        async () => {
          const r = await client.query<{ n: number }>("SELECT count(*)::int AS n FROM pglog.statements WHERE target = 'db2' AND database = 'legacy'");
          return r.rows[0]!.n >= 5;
        },
        'the WIN1251 statements',
        60_000,
      );
      const r = await client.query<{ query: string }>("SELECT query FROM pglog.statements WHERE target = 'db2' AND database = 'legacy' ORDER BY ts");
      for (let i = 0; i < 5; i++) {
        assert.ok(
          r.rows.some((row) => row.query.includes(`'${CYRILLIC} ${i}'`)),
          `statement ${i} with its Cyrillic literal: ${JSON.stringify(r.rows.map((x) => x.query))}`,
        );
      }
    } finally {
      await client.end();
    }
  });

  test('metrics and health answer; every stream read bytes', async () => {
    const base = `http://127.0.0.1:${metricsPort}`;
    const ready = await fetch(`${base}/readyz`);
    assert.equal(ready.status, 200, await ready.text());
    const text = await (await fetch(`${base}/metrics`)).text();
    for (const [target, instance] of [
      ['db1', 'main'],
      ['db1', 'csv'],
      ['db2', 'main'],
    ] as const) {
      const m =
        new RegExp(`^pglog_read_bytes_total\\{[^}]*target="${target}"[^}]*instance="${instance}"[^}]*\\} (\\d+)`, 'm').exec(text) ??
        new RegExp(`^pglog_read_bytes_total\\{[^}]*instance="${instance}"[^}]*target="${target}"[^}]*\\} (\\d+)`, 'm').exec(text);
      assert.ok(m !== null && Number(m[1]) > 0, `read bytes of ${target}/${instance} in /metrics`);
    }
    assert.match(text, /^pglog_nodejs_eventloop_lag_p99_seconds /m);
    assert.match(text, /^pglog_batch_rows_count /m);
  });

  test('SIGTERM: flushed and exited with status 0 within 10 s; no secret in the log', async () => {
    const stopped = await collector.stop();
    assert.equal(stopped.code, 0, collector.output().slice(-2000));
    assert.ok(stopped.ms < 10_000, `stopped in ${stopped.ms} ms`);
    const output = collector.output();
    assert.ok(output.length > 0);
    assert.ok(!output.includes('CANARY-e2e-store-password'), 'the store password is not in the log');
    for (const keyFile of [ssh1.privateKeyFile, ssh2.privateKeyFile]) {
      const body = readFileSync(keyFile, 'utf8')
        .split('\n')
        .filter((l) => l.length > 20 && !l.startsWith('-----'));
      for (const line of body) assert.ok(!output.includes(line), 'no line of a private key is in the log');
    }
  });
});
