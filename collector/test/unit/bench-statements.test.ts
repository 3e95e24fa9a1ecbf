// The benchmarks' generated log (test-support/src/statement-log.ts): what the ingest benchmark's log
// writer appends and the row-path benchmark parses. Its text is pinned, since benchmark figures
// of different days compare only on the same log, and it must be what the parser takes as
// statements, entry for entry.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';

import { pgbenchStatement } from '@pglog/test-support/pgbench-statements.ts';
import { formatLogTime, LOG_LINE_PREFIX, StatementLog } from '@pglog/test-support/statement-log.ts';

import type { PglogEvent, StatementEvent } from '../../src/logformat/events.ts';
import { LogParser } from '../../src/logformat/log-parser.ts';

const START = Date.parse('2026-11-26T08:00:00Z');

/** The first `calls` chunks the row-path benchmark makes (seed 42, 1500 bytes at a time). */
function rowPathLog(calls: number): { text: string; log: StatementLog } {
  const log = new StatementLog(42);
  let text = '';
  for (let k = 0; k < calls; k++) text += log.entries(formatLogTime(START + k), 1500);
  return { text, log };
}

describe('StatementLog', () => {
  it('writes the same log as before it wrote bytes (sha1 of the row-path log’s first 4000 chunks)', () => {
    const { text } = rowPathLog(4000);
    assert.equal(text.length, 6_394_855);
    assert.equal(createHash('sha1').update(text, 'latin1').digest('hex'), '2d3d0fb36df1bf9a9b8ea67819457522005feec3');
  });

  it('gives the same bytes through entries and entriesBytes, across the growth of its memory', () => {
    const a = new StatementLog(7);
    const b = new StatementLog(7);
    for (let k = 0; k < 300; k++) {
      // Sizes across the growth of its memory (64 KiB at first).
      const min = k % 50 === 0 ? 300_000 : 1 + ((k * 7919) % 9000);
      const text = a.entries(formatLogTime(START + k * 10), min);
      const bytes = b.entriesBytes(formatLogTime(START + k * 10), min);
      assert.equal(bytes.toString('latin1'), text);
      assert.ok(text.length >= min && text.endsWith('\n'));
    }
    assert.deepEqual([a.statements, a.lines], [b.statements, b.lines]);
  });

  it('writes entries the parser reads as one statement each, with their durations', () => {
    const { text, log } = rowPathLog(400);
    const events: PglogEvent[] = [];
    const parser = new LogParser({ format: 'stderr', prefix: LOG_LINE_PREFIX, encodings: { defaultEncoding: 'UTF8', databases: {} } }, (e) => events.push(e));
    parser.push(Buffer.from(text, 'latin1'));
    parser.end();
    const statements = events.filter((e): e is StatementEvent => e.kind === 'statement');
    assert.equal(statements.length, events.length);
    assert.equal(statements.length, log.statements);
    assert.equal(text.split('\n').length - 1, log.lines);
    for (const s of statements) {
      assert.ok(s.duration_ms !== null && s.duration_ms >= 0.008 && s.duration_ms < 40.2, `duration ${String(s.duration_ms)}`);
      assert.match(s.query, /^(BEGIN;|END;|UPDATE |SELECT |INSERT )/);
    }
    // Each kind of the mix is there: extended executes with parameters, IN lists, strings.
    assert.ok(statements.some((s) => s.protocol === 'extended' && s.parameters !== null && /^\$1 = '\d+'$/.test(s.parameters)));
    assert.ok(statements.some((s) => / IN \(\d+(?:, \d+)*\)/.test(s.query)));
    assert.ok(statements.some((s) => s.query.includes("'o''brien'")));
  });
});

describe('pgbenchStatement', () => {
  it('fills its template with four values drawn in order, whatever the step', () => {
    const draws = [4711, 9, 41, 5123];
    const next = () => {
      let k = 0;
      return () => draws[k++ % 4]!;
    };
    assert.equal(pgbenchStatement(0, next()), 'BEGIN;');
    assert.equal(pgbenchStatement(1, next()), 'UPDATE pgbench_accounts SET abalance = abalance + 123 WHERE aid = 4712;');
    assert.equal(pgbenchStatement(5, next()), 'INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (10, 42, 4712, 123, CURRENT_TIMESTAMP);');
    assert.equal(pgbenchStatement(13, next()), 'END;');
  });
});
