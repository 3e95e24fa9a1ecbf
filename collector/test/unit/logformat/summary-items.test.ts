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

const latin1 = (s: string): string => Buffer.from(s, 'latin1').toString('latin1');
/** Prefixes, some with names that are not valid UTF-8 or hold a NUL (as latin1 strings of their bytes). */
const HEAD = [
  '2024-05-01 10:00:00.000 UTC [42] alice@shop ',
  '2024-05-01 10:00:00.001 UTC [43] bob@legacy ',
  '2024-05-01 10:00:00.002 UTC [44] ',
  latin1('2024-05-01 10:00:00.003 UTC [45] b\xffob@legacy '),
  latin1('2024-05-01 10:00:00.004 UTC [46] al\x00ice@sh\xe9op '),
  latin1('2024-05-01 10:00:00.005 UTC [47] alice@\xd0\xb1\xd0 '),
];
const MESSAGES = [
  'duration: 0.042 ms  statement: SELECT 1',
  'duration: 1.5 ms  execute <unnamed>: SELECT * FROM t WHERE id = $1',
  'duration: 1.5 ms  execute S_1/C_2: UPDATE t SET a = a + $1',
  'execute fetch from S_1/C_2: SELECT 2',
  "statement: INSERT INTO t VALUES (1, 'x')",
  // Longer than what the template cache checks in its copy loop.
  `duration: 2.0 ms  statement: SELECT '${'x'.repeat(300)}'`,
  'duration: 0.010 ms  parse <unnamed>: SELECT $1',
  'duration: 0.010 ms  bind S_1: SELECT $1',
  'duration: 0.010 ms',
  'duration: 0.010 ms  plan:\n\tSeq Scan on t',
  'connection received: host=[local]',
  'checkpoint starting: time',
  'automatic analyze of table "shop.public.t"',
  'something else happened',
];
const EXTRA = ["DETAIL:  parameters: $1 = '5'", 'DETAIL:  other detail', 'HINT:  a hint', 'STATEMENT:  SELECT 3', 'CONTEXT:  a context'];
const BYTES = [0x00, 0x80, 0xc3, 0xa9, 0xef, 0xbf, 0xbd, 0xd0, 0xff, 0x3a, 0x20, 0x24, 0x27];

/** A log line whose text may have hostile bytes put into it. */
const line: fc.Arbitrary<Buffer> = fc
  .record({
    head: fc.constantFrom(...HEAD),
    severity: fc.constantFrom('LOG', 'LOG', 'ERROR', 'WARNING'),
    message: fc.constantFrom(...MESSAGES),
    extra: fc.option(fc.constantFrom(...EXTRA)),
    damage: fc.array(fc.tuple(fc.nat(), fc.constantFrom(...BYTES)), { maxLength: 3 }),
  })
  .map(({ head, severity, message, extra, damage }) => {
    let text = Buffer.concat([Buffer.from(`${severity}:  ${message}`), Buffer.from(extra === null ? '' : `\n${head}`, 'latin1'), Buffer.from(extra ?? '')]);
    for (const [at, byte] of damage) {
      const i = at % (text.length + 1);
      text = Buffer.concat([text.subarray(0, i), Buffer.from([byte]), text.subarray(i)]);
    }
    return Buffer.concat([Buffer.from(head, 'latin1'), text, Buffer.from('\n')]);
  });

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
