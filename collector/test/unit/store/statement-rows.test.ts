// Statements taken as rows from their entry's bytes (a LogParser with the RowEncoder as its
// StatementSink, as the collector's streams parse) against statements made events and mapped
// (the events path): every handover must hold the same COPY bytes, row for row, the same
// templates, refused rows, repairs, read-time rows and newest log time, reach the same
// position, and the parser count the same; whatever the bytes (invalid UTF-8, NULs, legacy
// encodings, timestamps of unknown zones, statements longer than the text limit) and
// wherever the input is cut.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import type { EncodingConfig } from '../../../src/logformat/decode.ts';
import type { PglogEvent } from '../../../src/logformat/events.ts';
import { LogParser, type ParseCounters } from '../../../src/logformat/log-parser.ts';
import { TemplateCache } from '../../../src/logformat/normalize/normalize.ts';
import type { LogFormat } from '../../../src/logformat/record.ts';
import { type EncodedRows, handoverTemplates, RowEncoder } from '../../../src/store/encoded-rows.ts';
import { EVENT_TABLES } from '../../../src/store/event-tables.ts';
import { FORMATS, generatedLogs, logPath } from '../../helpers/generated-logs.ts';
import { hostileStderrLine } from '../../helpers/hostile-stderr.ts';
import { ROW_READ_AT, ROW_SOURCE } from '../../helpers/row-fixture.ts';

const PREFIX = '%m [%p] %q%u@%d ';
const HOSTILE_ENCODINGS: EncodingConfig = { defaultEncoding: 'UTF8', databases: { legacy: 'WIN1251', koi: 'KOI8R' } };

interface Setup {
  format: LogFormat;
  prefix?: string | undefined;
  encodings: EncodingConfig;
  maxTextBytes: number;
}

/** What a handover holds, comparable with deepEqual. */
function comparable(e: EncodedRows): unknown {
  const tables: Record<string, unknown> = {};
  for (const t of EVENT_TABLES) {
    const block = e.tables[t];
    if (block !== undefined) tables[t] = { data: Buffer.from(block.data), ends: [...block.ends] };
  }
  return {
    tables,
    templates: handoverTemplates(e).sorted(),
    refused: e.refused,
    repairs: e.repairs,
    readTimeUsed: e.readTimeUsed,
    newestMs: e.newestMs,
    cost: e.cost,
  };
}

/**
 * The handovers of `bytes` pushed in the pieces `cuts` makes (one per push, and one for the
 * end), as the collector's streams make them: with the sink, the encoder is opened before
 * each push and the position is the end of the last entry, event or row.
 */
function handovers(setup: Setup, bytes: Buffer, cuts: readonly number[], sink: boolean): { list: unknown[]; counters: ParseCounters; taken: number } {
  const encoder = new RowEncoder(setup.maxTextBytes);
  let pending: PglogEvent[] = [];
  const parser = new LogParser(
    { format: setup.format, prefix: setup.prefix, encodings: setup.encodings, templates: new TemplateCache(), ...(sink ? { statements: encoder } : {}) },
    { events: (batch) => pending.push(...batch) },
  );
  const list: unknown[] = [];
  let taken = 0;
  const step = (parse: () => void): void => {
    if (sink) encoder.open(ROW_SOURCE, ROW_READ_AT);
    parse();
    const events = pending;
    pending = [];
    const rows = sink ? encoder.taken : 0;
    taken += rows;
    if (events.length + rows === 0) return;
    const position = Math.max(events.at(-1)?.end ?? 0, rows > 0 ? encoder.lastEnd : 0);
    list.push({ position, rows: events.length + rows, encoded: comparable(encoder.encode(ROW_SOURCE, events, ROW_READ_AT)) });
  };
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (cut <= from) continue;
    step(() => parser.push(bytes.subarray(from, cut)));
    from = cut;
  }
  step(() => parser.end());
  return { list, counters: { ...parser.counters, slow: 0 }, taken };
}

/** Asserts both paths agree on `bytes`; returns how many statements the sink took. */
function assertSame(setup: Setup, bytes: Buffer, cuts: readonly number[] = []): number {
  const rows = handovers(setup, bytes, cuts, true);
  const events = handovers(setup, bytes, cuts, false);
  assert.deepEqual(rows.list, events.list);
  assert.deepEqual(rows.counters, events.counters);
  return rows.taken;
}

const sortedCuts = (cuts: number[], length: number): number[] => [...new Set(cuts.map((c) => c % length))].sort((a, b) => a - b);

describe('statements taken as rows from their bytes are the rows of their events', () => {
  test('hostile stderr entries, cut anywhere, with a 4 KiB text limit', () => {
    let taken = 0;
    fc.assert(
      fc.property(fc.array(hostileStderrLine, { minLength: 1, maxLength: 16 }), fc.array(fc.nat(), { maxLength: 5 }), (lines, cuts) => {
        const bytes = Buffer.concat(lines);
        taken += assertSame({ format: 'stderr', prefix: PREFIX, encodings: HOSTILE_ENCODINGS, maxTextBytes: 4096 }, bytes, sortedCuts(cuts, bytes.length));
      }),
      { numRuns: 1500 },
    );
    assert.ok(taken > 1000, `the sink took ${taken} statements`);
  });

  test('the pipeline fixtures in every format, cut at random points', () => {
    const files: Array<[LogFormat, string]> = [
      ['stderr', 'pipeline-stderr.log'],
      ['csvlog', 'pipeline-csvlog.csv'],
      ['jsonlog', 'pipeline-jsonlog.json'],
    ];
    for (const [format, file] of files) {
      const bytes = readFileSync(new URL(`../../fixtures/${file}`, import.meta.url));
      const setup = { format, prefix: PREFIX, encodings: HOSTILE_ENCODINGS, maxTextBytes: 1024 * 1024 };
      assert.ok(assertSame(setup, bytes) > 0, `${file}: the sink took statements`);
      fc.assert(
        fc.property(fc.array(fc.nat(), { maxLength: 20 }), (cuts) => {
          assertSame(setup, bytes, sortedCuts(cuts, bytes.length));
        }),
        { numRuns: 100 },
      );
    }
  });

  test('the generated logs in every format (Cyrillic in UTF8, WIN1251 and KOI8R databases), in 64 KiB pushes', () => {
    const logs = generatedLogs();
    for (const run of Object.values(logs.runs)) {
      for (const format of FORMATS) {
        const bytes = readFileSync(logPath(logs, run, format));
        const cuts = Array.from({ length: Math.floor(bytes.length / 65536) }, (_, i) => (i + 1) * 65536);
        const setup = { format, prefix: run.log_line_prefix, encodings: { defaultEncoding: 'UTF8', databases: run.databases }, maxTextBytes: 1024 * 1024 };
        const taken = assertSame(setup, bytes, cuts);
        // Nearly every statement of these logs has ASCII SQL: taken from its bytes.
        assert.ok(taken > run.statements.total * 0.9, `${run.dir} ${format}: the sink took ${taken} of ${run.statements.total} statements`);
      }
    }
  });
});
