// summaryParser (EventParser.summarize) against LogParser: for every entry, the SummaryItem
// must be what the summary reads of the event (kind, severity, database; a statement's
// template and duration), and the counters (replacements, removed NULs, oversized) the same,
// whatever the bytes: invalid UTF-8, NULs, legacy encodings, damaged statement messages.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import type { EncodingConfig } from '../../../src/logformat/decode.ts';
import type { PglogEvent, SummaryItem } from '../../../src/logformat/events.ts';
import { LogParser, type ParseCounters, summaryParser } from '../../../src/logformat/log-parser.ts';
import type { LogFormat } from '../../../src/logformat/record.ts';
import { FORMATS, generatedLogs, logPath } from '../../helpers/generated-logs.ts';
import { HEAD, hostileStderrLine as line, MESSAGES } from '../../helpers/hostile-stderr.ts';

const encodings: EncodingConfig = { defaultEncoding: 'UTF8', databases: { legacy: 'WIN1251', koi: 'KOI8R' } };
const PREFIX = '%m [%p] %q%u@%d ';

/** What SummaryBuilder.add reads of an event. */
function read(e: SummaryItem): unknown {
  return e.kind === 'statement' ? [e.kind, e.severity, e.database, e.duration_ms, e.normalized, e.fingerprint] : [e.kind, e.severity, e.database];
}

/** Both parsers over `bytes`; the summary's is pushed the pieces `bytes` is cut into at `cuts` (sorted). */
function both(
  format: LogFormat,
  bytes: Buffer,
  prefix?: string,
  cuts: number[] = [],
): { full: unknown[]; lean: unknown[]; fullCounters: ParseCounters; leanCounters: ParseCounters } {
  const options = { format, prefix, encodings };
  const full: unknown[] = [];
  const lean: unknown[] = [];
  const a = new LogParser(options, (e: PglogEvent) => full.push(read(e)));
  a.push(bytes);
  a.end();
  // In pieces: the summary's parser stops taking the input for plain text at the first piece that is not.
  const b = summaryParser(options, (e) => lean.push(read(e)));
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (cut <= from) continue;
    b.push(bytes.subarray(from, cut));
    from = cut;
  }
  b.end();
  return { full, lean, fullCounters: a.counters, leanCounters: b.counters };
}

function assertSame(format: LogFormat, bytes: Buffer, prefix?: string, cuts: number[] = []): void {
  const r = both(format, bytes, prefix, cuts);
  assert.deepEqual(r.lean, r.full);
  assert.deepEqual({ ...r.leanCounters, slow: 0 }, { ...r.fullCounters, slow: 0 });
}

describe('summaryParser gives what the summary reads of LogParser', () => {
  test('damaged stderr entries: same items, same counters', () => {
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 12 }), fc.array(fc.nat(), { maxLength: 4 }), (lines, cuts) => {
        const bytes = Buffer.concat(lines);
        assertSame(
          'stderr',
          bytes,
          PREFIX,
          cuts.map((c) => c % bytes.length).sort((x, y) => x - y),
        );
      }),
      { numRuns: 2000 },
    );
  });

  test('the clean entries of every message shape', () => {
    const text = Buffer.from(HEAD.flatMap((h) => MESSAGES.map((m) => `${h}LOG:  ${m}\n`)).join(''), 'latin1');
    const r = both('stderr', text, PREFIX);
    assert.equal(r.full.length, HEAD.length * MESSAGES.length);
    assert.ok(r.fullCounters.replacements > 0 && r.fullCounters.nulRemoved > 0);
    assertSame('stderr', text, PREFIX);
  });

  test('jsonlog escapes that make NULs and non-ASCII text of plain input', () => {
    const head = '{"timestamp":"2026-11-27 03:54:57.410 UTC","user":"u","dbname":"d","pid":3690,"error_severity":"LOG","message":';
    const lines = [
      '"duration: 1.0 ms  statement: SELECT 1"',
      '"duration: 1.0 ms  statement: SELECT \\u0000"',
      '"other \\u00e9 \\u0000"',
      '"duration: 1.0 ms  bind S_1: SELECT \\u0000"',
    ];
    const bytes = Buffer.from(lines.map((m) => `${head}${m}}\n`).join(''));
    const r = both('jsonlog', bytes);
    assert.ok(r.fullCounters.nulRemoved > 0);
    assertSame('jsonlog', bytes);
  });

  test('the generated logs in every format', () => {
    const logs = generatedLogs();
    for (const run of Object.values(logs.runs)) {
      for (const format of FORMATS) {
        assertSame(format, readFileSync(logPath(logs, run, format)), format === 'stderr' ? run.log_line_prefix : undefined);
      }
    }
  });
});
