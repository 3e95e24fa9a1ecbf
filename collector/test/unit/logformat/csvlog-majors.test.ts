// csvlog as real servers of each column layout wrote it (fixtures/csvlog-majors, made by its
// generate.ts from `make pg-matrix` servers running test-support's fixed workload): PostgreSQL
// 10 and 12 (23 columns, up to application_name), 13 (24: backend_type), 14 and 18 (26:
// leader_pid, query_id). Every row reads, and the events by kind are what the workload did,
// as it counted them itself; damage in a row of an old layout loses only that row.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import type { PgMajor } from '@pglog/test-support/pg-binaries.ts';
import { countEvents, expectedEvents, type WorkloadCounts } from '@pglog/test-support/pg-workload.ts';
import fc from 'fast-check';

import { parseChunks, type ParseSetup } from '../../helpers/parse.ts';

const SETUP: ParseSetup = { format: 'csvlog' };
const COLUMNS: Record<number, number> = { 10: 23, 12: 23, 13: 24, 14: 26, 18: 26 };

function fixture(major: number): { bytes: Buffer; counts: WorkloadCounts } {
  const base = new URL(`../../fixtures/csvlog-majors/pg${major}`, import.meta.url);
  const written = JSON.parse(readFileSync(`${base.pathname}.json`, 'utf8')) as { major: number; counts: WorkloadCounts };
  assert.equal(written.major, major);
  return { bytes: readFileSync(`${base.pathname}.csv`), counts: written.counts };
}

/** Where the rows (entries) start: lines that start with the log time (no quoted line here does). */
function rowStarts(bytes: Buffer): number[] {
  return [...bytes.toString('latin1').matchAll(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [A-Z]+,/gm)].map((m) => m.index);
}

for (const major of [10, 12, 13, 14, 18] as PgMajor[]) {
  describe(`csvlog of PostgreSQL ${major} (${COLUMNS[major]} columns)`, () => {
    const { bytes, counts } = fixture(major);
    const whole = parseChunks(SETUP, bytes);

    test('the fixture has the columns of its major', () => {
      const first = bytes.toString('latin1').split('\n')[0]!;
      // The first row (`ending log output to stderr`) has no quote or comma inside its fields but one.
      assert.equal(first.replace(/"[^"]*"/g, 'q').split(',').length, COLUMNS[major]);
    });

    test('every row is an entry and nothing is malformed', () => {
      assert.equal(whole.counters.malformed, 0);
      assert.equal(whole.counters.entries, rowStarts(bytes).length);
      assert.deepEqual(
        whole.events.map((e) => e.offset),
        rowStarts(bytes),
      );
    });

    test('the events by kind are what the workload did', () => {
      const got = countEvents(whole.events);
      const want = expectedEvents(counts, major);
      for (const [kind, n] of Object.entries(want.exact)) assert.equal(got[kind] ?? 0, n, `${kind}: ${JSON.stringify(got)}`);
      for (const [kind, n] of Object.entries(want.atLeast)) assert.ok((got[kind] ?? 0) >= n, `${kind} at least ${n}: ${JSON.stringify(got)}`);
      const errors = whole.events.filter((e) => e.kind === 'error');
      assert.deepEqual(
        errors.map((e) => e.sqlstate),
        counts.errorCodes,
      );
    });

    test('statements carry the columns of the major: application_name always, backend_type 13+, query_id 14+', () => {
      const statements = whole.events.filter((e) => e.kind === 'statement');
      assert.ok(statements.length > 0);
      for (const s of statements) {
        assert.equal(s.application, 'pglog-workload');
        assert.equal(s.user, 'postgres');
        assert.equal(s.backend_type, major >= 13 ? 'client backend' : null);
        if (major < 14) assert.equal(s.query_id, null);
      }
      // pg_stat_statements is loaded, so 14+ computes query ids: the statements against the table have one.
      if (major >= 14) assert.ok(statements.some((s) => s.query_id !== null && s.query_id !== '0'));
      const multiLine = statements.find((s) => s.query.includes('"quoted"'));
      assert.ok(multiLine !== undefined, 'the statement with quotes and newlines');
      assert.match(multiLine.query, /^SELECT 'it''s "quoted"' AS q,\n {7}count\(\*\) AS n\n {2}FROM pglog_matrix$/);
    });

    test('split at random points: identical events', () => {
      fc.assert(
        fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 30 }), (cuts) => {
          assert.deepEqual(
            parseChunks(
              SETUP,
              bytes,
              cuts.sort((a, b) => a - b),
            ).events,
            whole.events,
          );
        }),
        { numRuns: 100 },
      );
    });

    test('a row cut inside its quoted statement: counted malformed, the rows after it read again', () => {
      const inside = bytes.indexOf('count(*) AS n\n');
      const starts = rowStarts(bytes);
      const rowStart = starts.filter((at) => at < inside).pop()!;
      const nextRow = starts.find((at) => at > inside)!;
      assert.ok(inside > 0 && rowStart > 0 && nextRow > inside);
      // The write of that row stopped inside its message; the next row follows.
      const damaged = Buffer.concat([bytes.subarray(0, inside), bytes.subarray(nextRow)]);
      const run = parseChunks(SETUP, damaged);
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
      const starts = rowStarts(bytes);
      const k = whole.events.findIndex((e) => e.kind === 'statement');
      const row = starts[k]!,
        next = starts[k + 1]!;
      for (let columns = 1; columns <= 3; columns++) {
        let cut = row;
        for (let c = 0; c < columns; c++) cut = bytes.indexOf(',', cut) + 1;
        const damaged = Buffer.concat([bytes.subarray(0, cut), bytes.subarray(next)]);
        const run = parseChunks(SETUP, damaged);
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
  });
}
