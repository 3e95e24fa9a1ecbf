// One short real log per major and format (fixtures/log-majors, made by its generate.ts from
// `make pg-matrix` servers running test-support's fixed workload, every format of a major at
// once): stderr with a prefix of its own per major, csvlog of each column layout (10 to 12: 23
// columns, up to application_name; 13: 24, backend_type; 14 to 18: 26, leader_pid and query_id)
// and jsonlog from 15. Every entry reads, the events by kind are what the workload did, as it
// counted them itself, the formats of a major agree event by event, and damage in a csvlog row
// of any layout loses only that row.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import { PG_MAJORS } from '@pglog/test-support/pg-binaries.ts';
import { countEvents, expectedEvents, type WorkloadCounts } from '@pglog/test-support/pg-workload.ts';
import fc from 'fast-check';

import type { PglogEvent } from '../../../src/logformat/events.ts';
import { parseChunks, type ParseSetup } from '../../helpers/parse.ts';

type Format = 'stderr' | 'csvlog' | 'jsonlog';
const EXTENSION: Record<Format, string> = { stderr: '.log', csvlog: '.csv', jsonlog: '.json' };
/**
 * Where an entry starts: its log time (csvlog: and severity), a JSON object; a continued line
 * does not, nor (stderr) a prefixed line of an entry's DETAIL, HINT, STATEMENT etc.
 */
const ENTRY_START: Record<Format, RegExp> = {
  csvlog: /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [A-Z]+,/gm,
  stderr: /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?![^\n]* (?:DETAIL|HINT|QUERY|CONTEXT|LOCATION|STATEMENT): {2})/gm,
  jsonlog: /^\{/gm,
};
const columnsOf = (major: number): number => (major <= 12 ? 23 : major === 13 ? 24 : 26);

interface Written {
  major: number;
  prefix: string;
  formats: Format[];
  counts: WorkloadCounts;
}

const base = (major: number): string => new URL(`../../fixtures/log-majors/pg${major}`, import.meta.url).pathname;

function workload(major: number): Written {
  const written = JSON.parse(readFileSync(`${base(major)}.workload.json`, 'utf8')) as Written;
  assert.equal(written.major, major);
  return written;
}

const setupOf = (format: Format, prefix: string): ParseSetup => (format === 'stderr' ? { format, prefix } : { format });

function entryStarts(format: Format, bytes: Buffer): number[] {
  return [...bytes.toString('latin1').matchAll(ENTRY_START[format])].map((m) => m.index);
}

/** Whether a statement event of this format and prefix carries `field` (stderr: only with its escape). */
function carries(format: Format, prefix: string, escape: string): boolean {
  return format !== 'stderr' || prefix.includes(escape);
}

function checkStatements(major: number, format: Format, prefix: string, events: readonly PglogEvent[]): void {
  const statements = events.filter((e) => e.kind === 'statement');
  assert.ok(statements.length > 0);
  for (const s of statements) {
    assert.equal(s.user, 'postgres');
    assert.equal(s.database, 'postgres');
    if (carries(format, prefix, '%a')) assert.equal(s.application, 'pglog-workload');
    if (carries(format, prefix, '%b')) assert.equal(s.backend_type, major >= 13 ? 'client backend' : null);
    if (major < 14) assert.equal(s.query_id, null);
  }
  // pg_stat_statements is loaded, so 14+ computes query ids: the statements against the table have one.
  if (major >= 14 && carries(format, prefix, '%Q')) assert.ok(statements.some((s) => s.query_id !== null && s.query_id !== '0'));
  const multiLine = statements.find((s) => s.query.includes('"quoted"'));
  assert.ok(multiLine !== undefined, 'the statement with quotes and newlines');
  assert.match(multiLine.query, /^SELECT 'it''s "quoted"' AS q,\n {7}count\(\*\) AS n\n {2}FROM pglog_matrix$/);
}

function csvlogDamage(bytes: Buffer, whole: { events: PglogEvent[] }): void {
  const setup: ParseSetup = { format: 'csvlog' };
  test('a row cut inside its quoted statement: counted malformed, the rows after it read again', () => {
    const inside = bytes.indexOf('count(*) AS n\n');
    const starts = entryStarts('csvlog', bytes);
    const rowStart = starts.filter((at) => at < inside).pop()!;
    const nextRow = starts.find((at) => at > inside)!;
    assert.ok(inside > 0 && rowStart > 0 && nextRow > inside);
    // The write of that row stopped inside its message; the next row follows.
    const run = parseChunks(setup, Buffer.concat([bytes.subarray(0, inside), bytes.subarray(nextRow)]));
    assert.ok(run.counters.malformed >= 1, 'the cut row is counted');
    const lost = nextRow - inside;
    const after = whole.events.filter((e) => e.offset >= nextRow).map((e) => ({ ...e, offset: e.offset - lost, end: e.end - lost }));
    const got = run.events.filter((e) => e.offset >= nextRow - lost);
    // At most the one row after the damage is lost with it; every later row is read as before.
    assert.ok(after.length - got.length <= 1, `${after.length - got.length} rows lost after the damage`);
    assert.deepEqual(got.slice(got.length - (after.length - 1)), after.slice(1));
    const before = whole.events.filter((e) => e.end <= rowStart);
    assert.deepEqual(run.events.slice(0, before.length), before);
  });

  test('a row whose write stopped after 1 to 3 columns, run together with the next row: one malformed record, nothing else lost', () => {
    // The column counts of the majors differ by 1 to 3: such a splice can have a valid count.
    const starts = entryStarts('csvlog', bytes);
    const k = whole.events.findIndex((e) => e.kind === 'statement');
    const row = starts[k]!,
      next = starts[k + 1]!;
    for (let columns = 1; columns <= 3; columns++) {
      let cut = row;
      for (let c = 0; c < columns; c++) cut = bytes.indexOf(',', cut) + 1;
      const run = parseChunks(setup, Buffer.concat([bytes.subarray(0, cut), bytes.subarray(next)]));
      assert.equal(run.counters.malformed, 1, `cut after ${columns} columns`);
      const lost = next - cut;
      const want = whole.events
        .filter((e) => e.offset !== row && e.offset !== next)
        .map((e) => (e.offset > row ? { ...e, offset: e.offset - lost, end: e.end - lost } : e));
      assert.deepEqual(
        run.events.filter((e) => e.offset !== row),
        want,
        `cut after ${columns} columns`,
      );
    }
  });
}

for (const major of PG_MAJORS) {
  const { prefix, formats, counts } = workload(major);
  for (const format of formats) {
    describe(`${format} of PostgreSQL ${major}${format === 'csvlog' ? ` (${columnsOf(major)} columns)` : format === 'stderr' ? ` (prefix '${prefix}')` : ''}`, () => {
      const bytes = readFileSync(`${base(major)}${EXTENSION[format]}`);
      const setup = setupOf(format, prefix);
      const whole = parseChunks(setup, bytes);

      test('short: a few KB', () => assert.ok(bytes.length < 16 * 1024, `${bytes.length} bytes`));

      if (format === 'csvlog') {
        test('the fixture has the columns of its major', () => {
          const first = bytes.toString('latin1').split('\n')[0]!;
          // Outside its quoted fields, the first row has no comma but the separators.
          assert.equal(first.replace(/"[^"]*"/g, 'q').split(',').length, columnsOf(major));
        });
      }

      test('every entry is read and nothing is malformed', () => {
        assert.equal(whole.counters.malformed, 0);
        assert.equal(whole.counters.entries, entryStarts(format, bytes).length);
        assert.deepEqual(
          whole.events.map((e) => e.offset),
          entryStarts(format, bytes),
        );
      });

      test('the events by kind are what the workload did', () => {
        const got = countEvents(whole.events);
        const want = expectedEvents(counts, major);
        for (const [kind, n] of Object.entries(want.exact)) assert.equal(got[kind] ?? 0, n, `${kind}: ${JSON.stringify(got)}`);
        for (const [kind, n] of Object.entries(want.atLeast)) assert.ok((got[kind] ?? 0) >= n, `${kind} at least ${n}: ${JSON.stringify(got)}`);
        if (carries(format, prefix, '%e')) {
          assert.deepEqual(
            whole.events.filter((e) => e.kind === 'error').map((e) => e.sqlstate),
            counts.errorCodes,
          );
        }
      });

      test('statements carry the fields of the major and format: application_name, backend_type 13+, query_id 14+', () =>
        checkStatements(major, format, prefix, whole.events));

      test('split at random points: identical events', () => {
        fc.assert(
          fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 30 }), (cuts) => {
            assert.deepEqual(
              parseChunks(
                setup,
                bytes,
                cuts.sort((a, b) => a - b),
              ).events,
              whole.events,
            );
          }),
          { numRuns: 50 },
        );
      });

      if (format === 'csvlog') csvlogDamage(bytes, whole);
    });
  }

  if (formats.length > 1) {
    test(`PostgreSQL ${major}: the formats agree event by event`, () => {
      // Each destination is written apart: entries of different processes may come in another order.
      const essence = (e: PglogEvent): string => `${e.kind} ${e.pid} ${e.kind === 'statement' ? e.query : ''}`;
      const [first, ...others] = formats.map((f) =>
        parseChunks(setupOf(f, prefix), readFileSync(`${base(major)}${EXTENSION[f]}`))
          .events.map(essence)
          .sort(),
      );
      for (const other of others) assert.deepEqual(other, first);
    });
  }
}
