// `pglog parse` end to end through the real launcher: inputs, compression, output modes and
// the bad inputs that must give counted, reported outcomes instead of a crash.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';

import type { ParseSummary } from '@pglog/collector/parse/summary.ts';
import { runPglog } from '@pglog/test-support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'pglog-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const PREFIX = '%m [%p] %q%u@%d ';
const LOG = Buffer.from(
  [
    '2026-11-21 10:00:00.001 UTC [100] app@shop LOG:  duration: 1.500 ms  statement: SELECT * FROM items WHERE id = 1',
    '2026-11-21 10:00:00.002 UTC [100] app@shop LOG:  duration: 2.500 ms  statement: SELECT * FROM items WHERE id = 2',
    '2026-11-21 10:00:00.003 UTC [101] app@shop ERROR:  relation "nope" does not exist at character 15',
    '2026-11-21 10:00:00.003 UTC [101] app@shop STATEMENT:  SELECT * FROM nope',
    '2026-11-21 10:00:00.004 UTC [102] LOG:  checkpoint starting: time',
    '2026-11-21 10:00:00.005 UTC [100] app@shop LOG:  duration: 0.250 ms  statement: UPDATE items',
    '\tSET n = 3',
    '\tWHERE id = 7',
    '',
  ].join('\n'),
);

function summaryOf(stdout: string): ParseSummary {
  const lines = stdout.trim().split('\n');
  assert.equal(lines.length, 1, 'the summary is one JSON object on one line');
  return JSON.parse(lines[0]!) as ParseSummary;
}

describe('pglog parse', () => {
  test('summary of a stderr log with the format and prefix detected', async () => {
    const file = join(dir, 'plain.log');
    writeFileSync(file, LOG);
    const r = await runPglog(['parse', file]);
    assert.equal(r.code, 0, r.stderr);
    const s = summaryOf(r.stdout);
    assert.equal(s.bytes, LOG.length);
    assert.equal(s.lines, 8);
    assert.equal(s.entries, 5);
    assert.equal(s.events.statement, 3);
    assert.equal(s.events.error, 1);
    assert.equal(s.events.checkpoint, 1);
    assert.deepEqual(s.severities, { ERROR: 1, LOG: 4 });
    assert.deepEqual(s.databases, { shop: 4 });
    assert.equal(s.templates.length, 2);
    const [top] = s.templates;
    assert.equal(top!.calls, 2);
    assert.equal(top!.total_ms, 4);
    assert.equal(top!.min_ms, 1.5);
    assert.equal(top!.max_ms, 2.5);
    assert.equal(top!.mean_ms, 2);
    assert.equal(top!.stddev_ms, 0.5);
    assert.match(top!.fingerprint, /^[0-9a-f]{16}$/);
  });

  test('gzip and bzip2 input read transparently, also from standard input', async () => {
    const gz = join(dir, 'log.gz');
    writeFileSync(gz, gzipSync(LOG));
    const bz = join(dir, 'plain-for-bz2.log');
    writeFileSync(bz, LOG);
    execFileSync('bzip2', ['-kf', bz]);
    const plain = summaryOf((await runPglog(['parse', '--prefix', PREFIX, join(dir, 'plain.log')])).stdout);
    for (const args of [[gz], [`${bz}.bz2`]]) {
      const r = await runPglog(['parse', '--prefix', PREFIX, ...args]);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(summaryOf(r.stdout), plain);
    }
    const piped = await runPglog(['parse', '--prefix', PREFIX, '-'], gzipSync(LOG));
    assert.equal(piped.code, 0, piped.stderr);
    assert.deepEqual(summaryOf(piped.stdout), plain);
  });

  test('a FIFO named as the file, written a line at a time, reads as the file does', async () => {
    // Each small write is a short read of its own: the reader copies those out of its buffer.
    const fifo = join(dir, 'log.fifo');
    execFileSync('mkfifo', [fifo]);
    const file = join(dir, 'plain-for-fifo.log');
    writeFileSync(file, LOG);
    const plain = summaryOf((await runPglog(['parse', '--prefix', PREFIX, file])).stdout);
    const run = runPglog(['parse', '--prefix', PREFIX, fifo]);
    const writer = await open(fifo, 'w');
    for (const line of LOG.toString('latin1').split(/(?<=\n)/)) {
      await writer.write(Buffer.from(line, 'latin1'));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await writer.close();
    const r = await run;
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(summaryOf(r.stdout), plain);
  });

  test('--events prints one typed JSON event per line, in log order', async () => {
    const r = await runPglog(['parse', '--events', '--format', 'stderr', '--prefix', PREFIX, '-'], LOG);
    assert.equal(r.code, 0, r.stderr);
    const events = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      events.map((e) => e.kind),
      ['statement', 'statement', 'error', 'checkpoint', 'statement'],
    );
    assert.equal(events[2]!.statement, 'SELECT * FROM nope');
    assert.equal(events[4]!.query, 'UPDATE items\nSET n = 3\nWHERE id = 7');
    assert.deepEqual(
      events.map((e) => e.offset),
      [...events.map((e) => e.offset)].sort((a, b) => (a as number) - (b as number)),
    );
  });

  test('an unreadable file exits non-zero naming the file; other files are still read', async () => {
    const good = join(dir, 'plain.log');
    const r = await runPglog(['parse', '--prefix', PREFIX, join(dir, 'missing.log'), good]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /missing\.log.*ENOENT|missing\.log.*no such file/i);
    assert.equal(summaryOf(r.stdout).events.statement, 3);
  });

  test('a corrupt gzip member names the file and the line reached', async () => {
    const big = Buffer.concat(Array.from({ length: 2000 }, () => LOG));
    const gz = gzipSync(big);
    const corrupt = Buffer.from(gz);
    corrupt.fill(0x55, Math.floor(gz.length / 2), Math.floor(gz.length / 2) + 64);
    const file = join(dir, 'corrupt.log.gz');
    writeFileSync(file, corrupt);
    const r = await runPglog(['parse', '--prefix', PREFIX, file]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /corrupt\.log\.gz \(gzip\): .* \(at line \d+\)/);
  });

  test('an unknown prefix escape is refused before reading, with its position', async () => {
    const r = await runPglog(['parse', '--prefix', '%m [%p] %z ', join(dir, 'plain.log')]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /%z/);
    assert.match(r.stderr, /position|column|offset|at /i);
  });

  test('bad usage exits 2 with the usage text', async () => {
    for (const args of [['parse'], ['parse', '--format', 'xml', 'f'], ['parse', '--encoding', 'nope', 'f'], ['frobnicate']]) {
      const r = await runPglog(args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /usage|expected/);
    }
    const enc = await runPglog(['parse', '--encoding', 'db=KLINGON', 'f']);
    assert.equal(enc.code, 1);
    assert.match(enc.stderr, /KLINGON/);
  });

  test('a 200 MB line without newline is truncated and counted; the process stays small', async () => {
    const head = Buffer.from('2026-11-21 10:00:00.001 UTC [100] app@shop LOG:  duration: 1.000 ms  statement: SELECT ');
    const filler = Buffer.alloc(1024 * 1024, 0x61);
    const tail = Buffer.from(`\n${LOG.toString('latin1')}`, 'latin1');
    const r = await runPglog(['parse', '--prefix', PREFIX, '-'], function* () {
      yield head;
      for (let i = 0; i < 200; i++) yield filler;
      yield tail;
    });
    assert.equal(r.code, 0, r.stderr);
    const s = summaryOf(r.stdout);
    assert.equal(s.truncated, 1);
    assert.equal(s.events.statement, 4, 'the giant statement is kept (truncated) and the rest is read');
    assert.equal(s.bytes, head.length + 200 * filler.length + tail.length);
  });

  test('binary garbage, invalid bytes and NUL bytes are counted, never a crash', async () => {
    const garbage = Buffer.alloc(64 * 1024);
    for (let i = 0; i < garbage.length; i++) garbage[i] = (i * 2654435761) >>> 24;
    const input = Buffer.concat([
      LOG,
      Buffer.from("2026-11-21 10:00:01.000 UTC [103] app@shop LOG:  duration: 1.000 ms  statement: SELECT 'caf\xe9' AS bad\n", 'latin1'),
      Buffer.from("2026-11-21 10:00:01.000 UTC [103] app@shop LOG:  duration: 1.000 ms  statement: SELECT 'a\x00b'\n", 'latin1'),
      garbage,
      Buffer.from('\n'),
      LOG,
    ]);
    const r = await runPglog(['parse', '--format', 'stderr', '--prefix', PREFIX, '-'], input);
    assert.equal(r.code, 0, r.stderr);
    const s = summaryOf(r.stdout);
    assert.ok(s.replacements >= 1, 'the invalid UTF-8 byte is replaced and counted');
    assert.ok(s.nul_removed >= 1, 'the NUL byte is removed and counted');
    assert.ok(s.malformed >= 1, 'garbage lines are counted as malformed');
    assert.equal(s.events.statement, 8, 'every real statement around the garbage is parsed');
  });

  test('a csv log ending inside a quoted field gives its entries and a flagged last one', async () => {
    const csv = Buffer.from(
      [
        '2026-11-21 10:00:00.001 UTC,"app","shop",100,"127.0.0.1:5000",655f0000.64,1,"SELECT",2026-11-21 09:00:00 UTC,3/4,0,LOG,00000,"duration: 1.000 ms  statement: SELECT 1",,,,,,,,,"psql","client backend",,0',
        '2026-11-21 10:00:00.002 UTC,"app","shop",100,"127.0.0.1:5000",655f0000.64,2,"SELECT",2026-11-21 09:00:00 UTC,3/4,0,LOG,00000,"duration: 1.000 ms  statement: SELECT \'never',
        'closed',
      ].join('\n'),
    );
    const r = await runPglog(['parse', '--format', 'csvlog', '-'], csv);
    assert.equal(r.code, 0, r.stderr);
    const s = summaryOf(r.stdout);
    assert.equal(s.entries, 2);
    assert.equal(s.events.statement + s.events.other, 2);
    assert.ok(s.malformed + s.truncated >= 1, 'the unterminated record is flagged');
  });
});
