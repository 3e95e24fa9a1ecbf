// Bad input gets counted, lands in the store repaired or cut, and costs nothing else.
//
// A PostgreSQL logs numbered statements (seq-load) while the real `pglog collect` reads its
// log over SSH. Between load runs (the load is stopped around each write into the file, so
// PostgreSQL's own lines stay whole) the log receives:
//   (a) entries appended as root with NUL bytes and invalid UTF-8 in a statement;
//   (b) a real 50 MB `SELECT '<literal>'` sent to the server, logged by PostgreSQL itself,
//       read with --max-entry-bytes 64MiB (parsed whole, stored cut to the store's text limit);
//   (c) after a restart with the default --max-entry-bytes (10 MiB), 200 MB appended as root
//       without a newline, the newline only seconds later: truncated and counted.
// Every statement of every load run (before, between and after the bad parts) must be in the
// store exactly once; the repairs and the truncation show in pglog_parse_problems_total; the
// collector's peak RSS (VmHWM) stays under a stated bound.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readdirSync, readFileSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { checkStore, formatCheck, loggedStatementTags } from '@pglog/test-support/checker.ts';
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
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import pg from 'pg';

import { currentLogFile } from '../helpers/current-log-file.ts';

/** Stated bound on the collector's peak resident memory through a 50 MB entry and a 200 MB line. */
const PEAK_RSS_BOUND = 600 * MiB;
const BIG_STATEMENT_BYTES = 50 * MiB;
const HUGE_LINE_BYTES = 200 * MiB;
/** The store's default text limit (store/text-clean.ts DEFAULT_MAX_TEXT_BYTES). */
const STORE_MAX_TEXT_BYTES = 1 * MiB;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** `%m` of log_line_prefix with log_timezone UTC: `2026-11-23 08:00:00.123 UTC`. */
function logTime(d = new Date()): string {
  return `${d.toISOString().replace('T', ' ').replace('Z', '')} UTC`;
}

/** A statement entry as the server logs it with prefix '%m [%p] %q%u@%d '. */
function statementLine(pid: number, statement: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`${logTime()} [${pid}] postgres@postgres LOG:  duration: 0.123 ms  statement: `), statement, Buffer.from('\n')]);
}

/** Appends `bytes` to `file` in one write (O_APPEND: at the end, whatever else writes there). */
function appendOnce(file: string, bytes: Buffer): void {
  const fd = openSync(file, 'a');
  try {
    let done = 0;
    while (done < bytes.length) done += writeSync(fd, bytes, done);
  } finally {
    closeSync(fd);
  }
}

/** Waits until the log file stops growing (PostgreSQL's logging collector has written what it got). */
async function logQuiet(file: string, quietMs = 700, timeoutMs = 20_000): Promise<void> {
  let size = statSync(file).size;
  let since = Date.now();
  const deadline = Date.now() + timeoutMs;
  while (Date.now() - since < quietMs) {
    if (Date.now() > deadline) throw new Error(`${file} kept growing for ${timeoutMs} ms`);
    await sleep(100);
    const now = statSync(file).size;
    if (now !== size) {
      size = now;
      since = Date.now();
    }
  }
}

/** Runs a seq load for `ms`, stops it and waits until the server has logged all of it. */
async function loadFor(url: string, ms: number, logFile: string): Promise<SeqLoad> {
  const load = startSeqLoad(url, { ratePerSecond: 200, payloadBytes: 200 });
  await sleep(ms);
  await load.stop();
  await logQuiet(logFile);
  return load;
}

describe('pglog collect: NUL bytes, invalid UTF-8, a 50 MB statement and a 200 MB line between seq statements', { timeout: 300_000 }, () => {
  let s: CollectScenario;
  let c: CollectorProcess;
  let logFile: string;
  let metricsPort: number;
  const loads: Array<{ phase: string; load: SeqLoad }> = [];
  const id = randomBytes(4).toString('hex');
  const canary = `CANARY-${randomBytes(6).toString('hex')}`;
  const peaks: Array<{ run: string; peakRss: number }> = [];
  const tail = (): string => c.output().slice(-4000);
  const problems = async (problem: string): Promise<number> => metricSum(await scrapeMetrics(metricsPort), 'pglog_parse_problems_total', { problem });
  const startCollector = async (args: string[]): Promise<void> => {
    metricsPort = await freePort();
    c = s.startCollector(['--listen', `127.0.0.1:${metricsPort}`, '--batch-ms', '100', ...args], withPassword(s.store.url, canary));
    await waitFor(
      async () => {
        try {
          await scrapeMetrics(metricsPort);
          return true;
        } catch {
          return false;
        }
      },
      "the collector's /metrics",
      30_000,
      tail,
    );
  };
  const queryStore = async <T extends object>(sql: string, params: unknown[] = []): Promise<T[]> => {
    const client = new pg.Client({ connectionString: s.store.url, application_name: 'pglog-test' });
    await client.connect();
    try {
      return (await client.query(sql, params)).rows as T[];
    } finally {
      await client.end();
    }
  };
  /** The store's committed offset in the live log file has reached its end. */
  const caughtUp = (what: string, timeoutMs = 120_000): Promise<void> =>
    waitFor(
      async () => {
        const r = await queryStore<{ offset: string }>(
          "SELECT \"offset\"::text AS offset FROM pglog.read_positions WHERE target = 'db1' AND instance = 'main' AND file = $1",
          [logFile],
        );
        return r.length === 1 && Number(r[0]!.offset) === statSync(logFile).size;
      },
      what,
      timeoutMs,
      tail,
    );
  /** Records the running collector's VmHWM (one entry per process, the latest reading). */
  const notePeak = (): void => {
    const mem = processMemory(c.pid);
    assert.ok(mem !== null, `the collector runs\n${tail()}`);
    const run = `collector pid ${c.pid}`;
    const known = peaks.find((p) => p.run === run);
    if (known === undefined) peaks.push({ run, peakRss: mem.peakRssBytes });
    else known.peakRss = mem.peakRssBytes;
  };

  before(async () => {
    s = await startCollectScenario({ name: 'bad-input' });
    logFile = currentLogFile(s.server.dataDirectory);
  });

  after(async () => {
    await Promise.allSettled(loads.map((l) => l.load.stop()));
    await s?.dispose();
  });

  test('(a) NUL bytes and invalid UTF-8: stored repaired, counted as nul_removed and replacement', async (t) => {
    await startCollector(['--max-entry-bytes', '64MiB']);
    loads.push({ phase: 'before (a)', load: await loadFor(s.server.url, 3_000, logFile) });

    const nul = Buffer.from(`SELECT 'pglog-bad-${id}-nul:a\0b\0c'`, 'latin1');
    const utf8 = Buffer.concat([Buffer.from(`SELECT 'pglog-bad-${id}-utf8:caf`), Buffer.from([0xe9, 0x20, 0xff, 0xfe, 0xc3]), Buffer.from(` end'`)]);
    const both = Buffer.concat([Buffer.from(`SELECT 'pglog-bad-${id}-both:x`), Buffer.from([0x00, 0xff, 0x00]), Buffer.from(`y'`)]);
    appendOnce(logFile, Buffer.concat([statementLine(424242, nul), statementLine(424242, utf8), statementLine(424243, both)]));

    loads.push({ phase: 'between (a) and (b)', load: startSeqLoad(s.server.url, { ratePerSecond: 200, payloadBytes: 200 }) });
    await waitFor(
      async () => (await queryStore(`SELECT 1 FROM pglog.statements WHERE query LIKE 'SELECT ''pglog-bad-${id}-%'`)).length === 3,
      'the three repaired statements in the store',
      60_000,
      tail,
    );
    const rows = await queryStore<{ query: string }>(`SELECT query FROM pglog.statements WHERE query LIKE 'SELECT ''pglog-bad-${id}-%' ORDER BY query`);
    t.diagnostic(`stored: ${JSON.stringify(rows.map((r) => r.query))}`);
    const byKind = new Map(rows.map((r) => [/pglog-bad-[0-9a-f]+-(\w+):/.exec(r.query)![1]!, r.query]));
    assert.equal(byKind.get('nul'), `SELECT 'pglog-bad-${id}-nul:abc'`, 'NUL bytes removed, nothing else changed');
    const stored = byKind.get('utf8') ?? '';
    // Each invalid sequence (e9 before a space, ff, fe, c3 before a space) is one U+FFFD; the text around is intact.
    assert.equal(stored, `SELECT 'pglog-bad-${id}-utf8:caf\uFFFD \uFFFD\uFFFD\uFFFD end'`, 'invalid UTF-8 became U+FFFD, the valid text around it intact');
    assert.equal(byKind.get('both'), `SELECT 'pglog-bad-${id}-both:x\uFFFDy'`, 'NULs removed and the invalid byte replaced');

    const nulRemoved = await problems('nul_removed');
    const replaced = await problems('replacement');
    t.diagnostic(`pglog_parse_problems_total: nul_removed=${nulRemoved} replacement=${replaced}`);
    // The load's own statements are clean: these are exactly the injected ones.
    assert.equal(nulRemoved, 4, 'pglog_parse_problems_total{problem="nul_removed"} counts the 4 NUL bytes');
    const fffd = rows.reduce((n, r) => n + [...r.query.matchAll(/\uFFFD/g)].length, 0);
    assert.equal(replaced, fffd, `pglog_parse_problems_total{problem="replacement"} counts each invalid sequence replaced (${fffd} U+FFFD stored)`);
  });

  test('(b) a real 50 MB statement: parsed whole with --max-entry-bytes 64MiB, stored cut with its beginning intact', async (t) => {
    const literal = `pglog-big-${id}:${'z'.repeat(BIG_STATEMENT_BYTES)}`;
    const statement = `SELECT '${literal}'`;
    const client = new pg.Client({ connectionString: s.server.url, application_name: 'pglog-test-big' });
    await client.connect();
    try {
      const r = await client.query({ text: statement, rowMode: 'array' });
      assert.equal((r.rows[0] as unknown[] | undefined)?.[0], literal, 'the server answered the 50 MB statement');
    } finally {
      await client.end();
    }
    // The load of this phase goes on around it (PostgreSQL writes each entry whole).
    await sleep(2_000);
    const between = loads[loads.length - 1]!.load;
    await between.stop();
    await logQuiet(logFile);
    loads.push({ phase: 'after (b)', load: await loadFor(s.server.url, 2_000, logFile) });
    await caughtUp('the collector to commit everything up to the end of the log, the 50 MB entry included');

    const rows = await queryStore<{ head: string; tail: string; bytes: number }>(
      `SELECT left(query, 2000) AS head, right(query, 200) AS tail, octet_length(query) AS bytes FROM pglog.statements WHERE query LIKE 'SELECT ''pglog-big-${id}:%'`,
    );
    assert.equal(rows.length, 1, 'the 50 MB statement is in the store once');
    const row = rows[0]!;
    t.diagnostic(`stored ${row.bytes} bytes, ending ${JSON.stringify(row.tail.slice(-80))}`);
    assert.equal(row.head, statement.slice(0, 2000), 'its beginning is intact');
    assert.ok(row.bytes <= STORE_MAX_TEXT_BYTES, `cut to the store's text limit: ${row.bytes} bytes`);
    assert.ok(row.bytes >= 1000, 'never below its first 1000 characters');
    assert.match(row.tail, new RegExp(`\\[\\.\\.\\. cut by pglog: ${Buffer.byteLength(statement)} bytes in all\\]$`), 'marked as cut, with its full length');
    const truncated = await problems('truncated');
    assert.equal(truncated, 0, 'with --max-entry-bytes 64MiB the 50 MB entry was not truncated by the parser');
    notePeak();
    t.diagnostic(`peak RSS so far: ${mib(peaks[peaks.length - 1]!.peakRss)}`);
    const stopped = await c.stop();
    assert.equal(stopped.code, 0, `exit status after SIGTERM\n${tail()}`);
  });

  test('(c) a 200 MB line without a newline, default --max-entry-bytes: truncated and counted, later entries separate', async (t) => {
    await startCollector([]);
    loads.push({ phase: 'before (c)', load: await loadFor(s.server.url, 2_000, logFile) });

    const head = Buffer.from(`${logTime()} [424244] postgres@postgres LOG:  duration: 1.000 ms  statement: SELECT 'pglog-huge-${id}:`);
    const chunk = Buffer.alloc(4 * MiB, 'y');
    const fd = openSync(logFile, 'a');
    try {
      writeSync(fd, head);
      for (let written = 0; written < HUGE_LINE_BYTES; written += chunk.length) writeSync(fd, chunk);
    } finally {
      closeSync(fd);
    }
    // The collector reads the unterminated line for a while before its end arrives.
    await waitFor(
      async () => metricSum(await scrapeMetrics(metricsPort), 'pglog_read_bytes_total') >= HUGE_LINE_BYTES,
      'the collector to read the 200 MB',
      120_000,
      tail,
    );
    await sleep(1_000);
    appendOnce(logFile, Buffer.from('\n'));

    loads.push({ phase: 'after (c)', load: await loadFor(s.server.url, 3_000, logFile) });
    await caughtUp('the collector to commit everything up to the end of the log, past the 200 MB line');
    const truncated = await problems('truncated');
    t.diagnostic(`pglog_parse_problems_total{problem="truncated"} = ${truncated}`);
    assert.equal(truncated, 1, 'the 200 MB line is counted as truncated, once');
    const rows = await queryStore<{ head: string; bytes: number }>(
      `SELECT left(query, 200) AS head, octet_length(query) AS bytes FROM pglog.statements WHERE query LIKE 'SELECT ''pglog-huge-${id}:%'`,
    );
    t.diagnostic(`stored from the 200 MB line: ${JSON.stringify(rows.map((r) => ({ head: r.head.slice(0, 60), bytes: r.bytes })))}`);
    assert.ok(rows.length <= 1, 'the 200 MB line is at most one statement');
    for (const r of rows) assert.ok(r.bytes <= STORE_MAX_TEXT_BYTES && r.head.startsWith(`SELECT 'pglog-huge-${id}:yyyy`), 'stored cut, its beginning intact');
    notePeak();
  });

  test('every seq statement before, between and after the bad parts is stored exactly once', async (t) => {
    // The log files read once (a 250 MB file); the numbers of each run checked against the store.
    const text = readdirSync(s.server.logDirectory)
      .map((f) => readFileSync(join(s.server.logDirectory, f)).toString('latin1'))
      .join('\n');
    for (const { phase, load } of loads) {
      const logged = [...new Set(loggedStatementTags(text, load.run))];
      const r = await checkStore(s.store.url, load.run, { numbers: logged });
      t.diagnostic(`${phase} (${load.run}): ${formatCheck(r)}`);
      assert.equal(r.expected, load.completed().length, `${phase}: the server logged every completed statement: ${formatCheck(r)}`);
      assert.ok(r.expected > 100, `${phase}: the load ran`);
      assert.equal(r.lost.length, 0, `${phase}: ${formatCheck(r)}`);
      assert.equal(r.duplicated.length, 0, `${phase}: ${formatCheck(r)}`);
      assert.equal(r.unexpected.length, 0, `${phase}: ${formatCheck(r)}`);
    }
  });

  test(`the collector's peak RSS (VmHWM) stays under ${mib(PEAK_RSS_BOUND)}; it exits cleanly; no secret in its output`, async (t) => {
    notePeak();
    t.diagnostic(peaks.map((p) => `${p.run}: peak RSS ${mib(p.peakRss)}`).join('; '));
    for (const p of peaks) assert.ok(p.peakRss < PEAK_RSS_BOUND, `${p.run}: peak RSS ${mib(p.peakRss)} < ${mib(PEAK_RSS_BOUND)}`);
    const stopped = await c.stop();
    assert.equal(stopped.code, 0, `exit status after SIGTERM\n${tail()}`);
    const output = readFileSync(s.outputFile, 'utf8');
    const warnings = c
      .logRecords()
      .filter((r) => r.level === 'warn' || r.level === 'error')
      .map((r) => `${String(r.level)}: ${String(r.msg).slice(0, 200)}`);
    t.diagnostic(`warnings and errors the last collector logged: ${warnings.length === 0 ? 'none' : `\n${warnings.slice(0, 10).join('\n')}`}`);
    assert.deepEqual(leakedSecrets(output, { passwords: [canary], privateKeyFiles: [s.ssh.privateKeyFile] }), [], 'the collector output holds no secret');
  });
});
