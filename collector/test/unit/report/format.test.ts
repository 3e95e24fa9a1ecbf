// The report's text tables and JSON: number formats, alignment, cutting long text, empty sections.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { formatCount, formatMs, formatReportJson, formatReportText, formatTime } from '../../../src/report/format.ts';
import { cut, oneLine, renderTable } from '../../../src/report/text-table.ts';
import type { ErrorStats, Report } from '../../../src/report/types.ts';

test('formatMs picks ms, s, minutes or hours and never prints 1000.0 ms or 60.00 s', () => {
  const cases: [number | null, string][] = [
    [null, '-'],
    [Number.NaN, '-'],
    [0, '0.000 ms'],
    [0.25, '0.250 ms'],
    [1, '1.0 ms'],
    [12.34, '12.3 ms'],
    [999.9, '999.9 ms'],
    [999.96, '1.00 s'],
    [4567, '4.57 s'],
    [59_994, '59.99 s'],
    [59_996, '1m 00s'],
    [725_000, '12m 05s'],
    [3_599_600, '1h 00m'],
    [11_220_000, '3h 07m'],
  ];
  for (const [ms, text] of cases) assert.equal(formatMs(ms), text, String(ms));
});

test('formatCount groups thousands; formatTime is UTC to the second', () => {
  assert.equal(formatCount(0), '0');
  assert.equal(formatCount(999), '999');
  assert.equal(formatCount(1000), '1,000');
  assert.equal(formatCount(1234567), '1,234,567');
  assert.equal(formatTime(new Date('2024-05-01T10:02:03.999Z')), '2024-05-01 10:02:03');
});

test('cut and oneLine', () => {
  assert.equal(cut('abcdef', 6), 'abcdef');
  assert.equal(cut('abcdef', 4), 'abc…');
  assert.equal(cut('äöüß€x', 3), 'äö…');
  assert.equal(cut('abc', 0), '');
  // Whitespace runs become one space; any other control character stays, visibly escaped.
  assert.equal(oneLine('SELECT *\n  FROM\tt\r\n WHERE\u0007 x = 1 '), 'SELECT * FROM t WHERE\\x07 x = 1');
});

test('renderTable aligns columns, fills the width with the flexible column and cuts it with …', () => {
  const text = renderTable(
    [
      { header: 'name', align: 'left' },
      { header: 'n', align: 'right' },
      { header: 'text', align: 'left', flex: true },
    ],
    [
      ['a', '1', 'short'],
      ['bbb', '12345', 'a long text that does not fit into the table at all'],
    ],
    40,
  );
  assert.equal(
    text,
    ['name      n  text', '────  ─────  ───────────────────────────', 'a         1  short', 'bbb   12345  a long text that does not …'].join('\n'),
  );
  for (const line of text.split('\n')) assert.ok([...line].length <= 40, line);
});

const ERROR_ROW: ErrorStats = {
  target: 'db1',
  database: 'app',
  severity: 'ERROR',
  sqlstate: '23505',
  message: 'duplicate key value violates unique constraint "orders_pkey"',
  count: 3,
  first_seen: new Date('2024-05-01T10:01:00Z'),
  last_seen: new Date('2024-05-01T10:59:59.5Z'),
};

function sampleReport(): Report {
  return {
    filter: { since: new Date('2024-05-01T10:00:00Z'), until: new Date('2024-05-01T11:00:00Z'), target: 'db1', database: null, limit: 2 },
    statements: {
      groups: 5,
      rows: [
        {
          target: 'db1',
          database: 'app',
          fingerprint: '0123456789abcdef',
          query: 'SELECT *\nFROM orders WHERE id = $1',
          calls: 1234,
          total_ms: 61_000,
          mean_ms: 49.43,
          stddev_ms: 3.2,
          min_ms: 0.5,
          max_ms: 1500,
          p95_ms: 120,
        },
        {
          target: 'db1',
          database: null,
          fingerprint: null,
          query: `UPDATE t SET ${'x = 1, '.repeat(40)}y = 2`,
          calls: 2,
          total_ms: 3,
          mean_ms: 1.5,
          stddev_ms: 0.5,
          min_ms: 1,
          max_ms: 2,
          p95_ms: 1.95,
        },
      ],
    },
    errors: {
      groups: 1,
      rows: [ERROR_ROW],
    },
    lockWaits: { groups: 0, rows: [] },
  };
}

test('text report: header with window and filters, section titles with counts, formatted rows, empty sections said so', () => {
  const text = formatReportText(sampleReport(), 140);
  const lines = text.split('\n');
  assert.equal(lines[0], 'pglog report  2024-05-01 10:00:00 .. 2024-05-01 11:00:00 UTC  target db1');
  assert.ok(lines.includes('Top query templates by total time (2 of 5)'));
  assert.ok(lines.includes('Errors by SQLSTATE and message (1 of 1)'));
  assert.ok(lines.includes('Lock waits by lock type: none in this window'));
  const header = lines.find((l) => l.startsWith('target  database  calls'));
  assert.ok(header !== undefined);
  const row = lines.find((l) => l.includes('0123456789abcdef'));
  assert.ok(row !== undefined);
  assert.match(row, /^db1 +app +1,234 +1m 01s +49\.4 ms +3\.2 ms +0\.500 ms +1\.50 s +120\.0 ms +0123456789abcdef +SELECT \* FROM orders WHERE id = \$1$/);
  // Right-aligned numbers end in the same column as their header.
  assert.equal(row.indexOf('1,234') + '1,234'.length, header.indexOf('calls') + 'calls'.length);
  const long = lines.find((l) => l.includes('UPDATE t SET'));
  assert.ok(long !== undefined && long.endsWith('…'));
  assert.equal([...long].length, 140);
  assert.match(lines.find((l) => l.includes('23505')) ?? '', /ERROR +23505 +3 +2024-05-01 10:01:00 +2024-05-01 10:59:59 +duplicate key value/);
  assert.ok(text.endsWith('\n'));
});

test('JSON report: window, filters, sections and group counts; dates in ISO', () => {
  const json = JSON.parse(formatReportJson(sampleReport())) as Record<string, unknown>;
  assert.deepEqual(json.window, { since: '2024-05-01T10:00:00.000Z', until: '2024-05-01T11:00:00.000Z' });
  assert.deepEqual(json.filters, { target: 'db1', database: null, limit: 2 });
  assert.deepEqual(json.groups, { statements: 5, errors: 1, lock_waits: 0 });
  const [first] = json.statements as Record<string, unknown>[];
  assert.equal(first?.calls, 1234);
  assert.equal(first?.query, 'SELECT *\nFROM orders WHERE id = $1');
  // The error group as given, its two times as ISO text.
  assert.deepEqual(json.errors, [{ ...ERROR_ROW, first_seen: '2024-05-01T10:01:00.000Z', last_seen: '2024-05-01T10:59:59.500Z' }]);
  assert.deepEqual(json.lock_waits, []);
});
