// StatementRollup (collector/src/store/rollup.ts), the per-batch rollup the store writer COPYs
// into pglog.statement_rollup_parts: calls, timed, totals and max per minute and key are exact;
// merging equals adding every row to one; a percentile read from the histogram is within
// MAX_PERCENTILE_ERROR (9.1 %) of the exact nearest-rank one; bins are the SQL function's.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { CopyBinaryEncoder } from '../../../src/store/copy-binary.ts';
import { TABLES } from '../../../src/store/event-tables.ts';
import {
  BIN_BASE_MS,
  durationBin,
  durationOfBin,
  histogramPercentile,
  MAX_BIN,
  MAX_KEPT_KEY_CHARS,
  MAX_PERCENTILE_ERROR,
  RollupIdentities,
  StatementRollup,
} from '../../../src/store/rollup.ts';

/** A statement_events row with the columns the rollup reads (the others null). */
function row(tsMs: number, target: string, database: string | null, fingerprint: string | null, ms: number | null): unknown[] {
  return [tsMs * 1000, target, 'main', database, null, null, null, ms, fingerprint, 'q', null, null, 'f', 0, ''];
}

function exactQuantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1]!;
}

test('rows are summed per minute and key; untimed statements count as calls only', () => {
  const r = new StatementRollup();
  const t0 = Date.UTC(2026, 0, 1, 10, 0, 0);
  r.add([
    row(t0 + 1000, 'db1', 'app', 'fa', 2),
    row(t0 + 59_999, 'db1', 'app', 'fa', 6),
    row(t0 + 60_000, 'db1', 'app', 'fa', 1),
    row(t0 + 5, 'db1', null, 'fa', null),
    row(t0 + 5, 'db1', 'app', null, 3),
    row(t0 + 5, 'db2', 'app', 'fa', 4),
  ]);
  const rows = r
    .rows()
    .map((v) => ({ bucket: v[0], target: v[1], database: v[3], fingerprint: v[4], calls: v[5], timed: v[6], total: v[7], max: v[8], counts: v[10] }));
  assert.equal(rows.length, 5);
  assert.deepEqual(rows[0], { bucket: t0 * 1000, target: 'db1', database: 'app', fingerprint: 'fa', calls: 2, timed: 2, total: 8, max: 6, counts: [1, 1] });
  assert.deepEqual(rows[1], {
    bucket: (t0 + 60_000) * 1000,
    target: 'db1',
    database: 'app',
    fingerprint: 'fa',
    calls: 1,
    timed: 1,
    total: 1,
    max: 1,
    counts: [1],
  });
  assert.deepEqual(rows[2], { bucket: t0 * 1000, target: 'db1', database: null, fingerprint: 'fa', calls: 1, timed: 0, total: 0, max: null, counts: [] });
  assert.equal(rows[3]?.fingerprint, null);
  assert.equal(rows[4]?.target, 'db2');
});

test('bigint microseconds fall in the same minute as numbers, before 1970 too', () => {
  const a = new StatementRollup();
  a.add([
    [-1n, 't', 'i', null, null, null, null, 1, null],
    [59_999_999n, 't', 'i', null, null, null, null, 1, null],
  ]);
  assert.deepEqual(
    a.rows().map((v) => v[0]),
    [-60_000_000n, 0n],
  );
});

test('bins: edges, the smallest and largest, and the value a bin stands for', () => {
  assert.equal(durationBin(0), 0);
  assert.equal(durationBin(-5), 0);
  assert.equal(durationBin(BIN_BASE_MS), 0);
  assert.equal(durationBin(BIN_BASE_MS * 2), 4);
  assert.equal(durationBin(BIN_BASE_MS * 2.0001), 5);
  assert.equal(durationBin(Infinity), MAX_BIN);
  assert.equal(durationBin(1e300), MAX_BIN);
  assert.ok(Math.abs(MAX_PERCENTILE_ERROR - 0.0905) < 0.001);
  for (const ms of [0.01, 0.5, 1, 7.3, 250, 12_345, 3_600_000]) {
    const v = durationOfBin(durationBin(ms));
    assert.ok(Math.abs(v - ms) / ms <= MAX_PERCENTILE_ERROR + 1e-12, `${ms} → ${v}`);
  }
});

test('merging parts equals adding every row to one rollup', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 300_000 }), fc.constantFrom('a', 'b'), fc.option(fc.double({ min: 0, max: 1e6, noNaN: true }))), {
        maxLength: 200,
      }),
      fc.nat({ max: 200 }),
      (items, cut) => {
        const rows = items.map(([t, k, ms]) => row(t, 'db', 'app', k, ms));
        const one = new StatementRollup();
        one.add(rows);
        const a = new StatementRollup(),
          b = new StatementRollup();
        a.add(rows.slice(0, cut));
        b.add(rows.slice(cut));
        a.merge(b);
        const norm = (r: StatementRollup): unknown[][] =>
          r
            .rows()
            .map((v) => [...v.slice(0, 7), Math.round((v[7] as number) * 1e3), ...v.slice(8)])
            .sort((x, y) => String(x).localeCompare(String(y)));
        assert.deepEqual(norm(a), norm(one));
      },
    ),
  );
});

test('percentiles from the histogram are within MAX_PERCENTILE_ERROR of the exact nearest-rank ones', () => {
  fc.assert(
    fc.property(
      fc.array(fc.double({ min: 0.002, max: 1e7, noNaN: true }), { minLength: 1, maxLength: 500 }),
      fc.constantFrom(0.5, 0.95, 0.99, 1),
      (values, q) => {
        const r = new StatementRollup();
        r.add(values.map((ms) => row(0, 'db', 'app', 'f', ms)));
        const [v] = r.rows();
        const p = histogramPercentile(v?.[9] as number[], v?.[10] as number[], q) as number;
        const exact = exactQuantile(values, q);
        assert.ok(Math.abs(p - exact) / exact <= MAX_PERCENTILE_ERROR + 1e-9, `q ${q}: ${p} vs ${exact}`);
      },
    ),
  );
  assert.equal(histogramPercentile([], [], 0.5), null);
});

/** The rows of a rollup as sorted JSON texts, to compare two rollups whatever their order. */
function sortedRows(r: StatementRollup): string[] {
  return r
    .rows()
    .map((v) => JSON.stringify(v))
    .sort();
}

/** Rows as a handover holds them: COPY BINARY back to back, and where each ends. */
function encoded(encoder: CopyBinaryEncoder, rows: unknown[][]): { data: Buffer; ends: Uint32Array } {
  let data = Buffer.alloc(0);
  const ends: number[] = [];
  for (const r of rows) {
    data = Buffer.concat([data, encoder.encodeRows([r])]);
    ends.push(data.length);
  }
  return { data, ends: Uint32Array.from(ends) };
}

// Few distinct values, so that keys repeat, alternate and differ in one field only.
const NAME = fc.constantFrom(null, 'app', 'apq', 'bd', 'база', 'a\u0001');
const HANDOVER = fc.record({
  target: fc.constantFrom('db1', 'db2', 'дб'),
  rows: fc.array(
    fc.tuple(fc.integer({ min: -90_000, max: 200_000 }), NAME, fc.constantFrom(null, 'fa', 'fb', 'f'), fc.option(fc.double({ min: 0, max: 1e6, noNaN: true }))),
    { minLength: 1, maxLength: 40 },
  ),
  cuts: fc.array(fc.nat(40), { maxLength: 4 }),
});

test('property: rows read from their COPY BINARY bytes, in any split, give the rollup of their values', () => {
  const encoder = new CopyBinaryEncoder(TABLES.statement_events.types);
  const t0 = Date.UTC(2026, 0, 1, 10, 0, 0);
  fc.assert(
    fc.property(fc.array(HANDOVER, { minLength: 1, maxLength: 4 }), (handovers) => {
      const fromValues = new StatementRollup();
      const fromBytes = new StatementRollup();
      for (const h of handovers) {
        const rows = h.rows.map(([ms, database, fingerprint, duration]) => row(t0 + ms, h.target, database, fingerprint, duration));
        fromValues.add(rows);
        const { data, ends } = encoded(encoder, rows);
        const bounds = [...new Set([0, ...h.cuts.filter((c) => c < rows.length), rows.length])].sort((a, b) => a - b);
        for (let k = 1; k < bounds.length; k++) fromBytes.addEncoded(data, ends, bounds[k - 1]!, bounds[k]!);
      }
      assert.deepEqual(sortedRows(fromBytes), sortedRows(fromValues));
      // Both paths key a part alike (non-ASCII names too): merged, each key is one part.
      const merged = new StatementRollup();
      merged.merge(fromValues);
      merged.merge(fromBytes);
      assert.equal(merged.size, fromValues.size);
    }),
    { numRuns: 300 },
  );
});

test('property: rollups sharing identities (one per commit) each give the rollup of their own rows, however few identities are kept', () => {
  const encoder = new CopyBinaryEncoder(TABLES.statement_events.types);
  const t0 = Date.UTC(2026, 0, 1, 10, 0, 0);
  fc.assert(
    fc.property(
      fc.array(fc.array(HANDOVER, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 5 }),
      fc.integer({ min: 1, max: 12 }),
      (commits, max) => {
        const identities = new RollupIdentities(max);
        for (const handovers of commits) {
          const fromValues = new StatementRollup();
          const fromBytes = new StatementRollup(identities);
          for (const h of handovers) {
            const rows = h.rows.map(([ms, database, fingerprint, duration]) => row(t0 + ms, h.target, database, fingerprint, duration));
            fromValues.add(rows);
            const { data, ends } = encoded(encoder, rows);
            fromBytes.addEncoded(data, ends, 0, rows.length);
          }
          assert.deepEqual(sortedRows(fromBytes), sortedRows(fromValues));
          assert.ok(identities.size <= max, `${identities.size} identities kept, at most ${max}`);
        }
      },
    ),
    { numRuns: 200 },
  );
});

test('identities with long names are not kept between commits, and their rows are still summed right', () => {
  const encoder = new CopyBinaryEncoder(TABLES.statement_events.types);
  const t0 = Date.UTC(2026, 0, 1, 10, 0, 0);
  const identities = new RollupIdentities();
  const long = 'd'.repeat(MAX_KEPT_KEY_CHARS);
  for (let commit = 0; commit < 3; commit++) {
    const rows = [row(t0, 'db1', long, 'fa', 1), row(t0 + 1, 'db1', long, 'fa', 2), row(t0, 'db1', 'app', 'fa', 3)];
    const fromValues = new StatementRollup();
    fromValues.add(rows);
    const fromBytes = new StatementRollup(identities);
    const { data, ends } = encoded(encoder, rows);
    fromBytes.addEncoded(data, ends, 0, rows.length);
    assert.deepEqual(sortedRows(fromBytes), sortedRows(fromValues));
    // The source and the short part are kept; the part named by the long database is not.
    assert.equal(identities.size, 2);
  }
});
