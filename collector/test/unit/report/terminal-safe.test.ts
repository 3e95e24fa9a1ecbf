// Text reports a terminal can trust (security review R6): names, queries and messages from
// monitored servers carrying terminal control sequences (OSC title and clipboard writes, CSI
// screen erases, 8-bit CSI, bidi overrides) go through the real formatters of `pglog report`,
// `report activity` and `report locks`. The output has no control character but the
// formatter's own newlines, shows each hostile character as a visible escape, keeps its
// lines and its columns; the JSON keeps the exact text, its C0 controls escaped by JSON itself.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { formatActivityText } from '../../../src/report/activity-format.ts';
import { buildBlockingForest } from '../../../src/report/blocking-tree.ts';
import { formatReportJson, formatReportText } from '../../../src/report/format.ts';
import { formatLocksText, nodeLine } from '../../../src/report/locks-format.ts';
import type { ActivityReport, LocksReport, SnapshotFilter } from '../../../src/report/snapshot-types.ts';
import { escapeControls, escapeLines } from '../../../src/report/terminal-safe.ts';
import { renderTable } from '../../../src/report/text-table.ts';
import type { Report } from '../../../src/report/types.ts';
import { serverRuns } from '../../helpers/report-fixtures.ts';

/** A window title, a clipboard write, a screen erase, cursor moves, 8-bit CSI, bidi, C0 and C1. */
const HOSTILE = '\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[1A\x1b[2K\u009b31m\u202eevil\u2066x\u2069\x7f\x00\b\t\r\n\u0085';

/** Any character a terminal would act on or reorder by: C0 but the newline, DEL, C1, bidi overrides and isolates. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNSAFE_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u;

/** `v` with HOSTILE in front of every string in it, at any depth (Dates and numbers as they are). */
function poison<T>(v: T): T {
  if (typeof v === 'string') return `${HOSTILE}${v}` as T;
  if (Array.isArray(v)) return v.map((x: unknown) => poison(x)) as T;
  if (v === null || typeof v !== 'object' || v instanceof Date) return v;
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, poison(x)])) as T;
}

/** Safe, visibly escaped, and with as many lines as the same report of plain text. */
function assertSafe(text: string, plain: string): void {
  assert.doesNotMatch(text, UNSAFE_BUT_NEWLINE);
  for (const shown of ['\\x1b]0;pwned\\x07', '\\x1b[2J', '\\x9b31m', '\\u202eevil\\u2066x\\u2069']) {
    assert.ok(text.includes(shown), `${shown} is shown`);
  }
  assert.equal(text.split('\n').length, plain.split('\n').length, 'no line added or taken by a field');
}

const WINDOW = { since: new Date('2026-11-23T17:40:00Z'), until: new Date('2026-11-23T18:40:30Z'), target: 'db1', database: 'shop', limit: 20 };
const STORES = { names: ['pglog@a:5432/pglog', 'pglog@b:5432/pglog'], failed: [{ store: 'pglog@c:5432/pglog', error: 'cannot connect' }] };
const AT = new Date('2026-11-23T18:40:12Z');
const DURATIONS = { total_ms: 10, mean_ms: 1, stddev_ms: 0, min_ms: 1, max_ms: 2, p95_ms: 2 };

function report(): Report {
  const statement = { target: 'db1', database: 'shop', fingerprint: 'f1', query: 'SELECT 1', calls: 10, ...DURATIONS };
  const error = {
    target: 'db1',
    database: 'shop',
    severity: 'FATAL',
    sqlstate: '3D000',
    message: 'database does not exist',
    count: 1,
    first_seen: AT,
    last_seen: AT,
  };
  const lockWait = { target: 'db1', database: 'shop', lock_type: 'relation', count: 2, acquired: 1, total_wait_ms: 5, max_wait_ms: 5 };
  return {
    filter: WINDOW,
    statements: { rows: [statement, { ...statement, store: 'pglog@b:5432/pglog' }], groups: 2 },
    errors: { rows: [error], groups: 1 },
    lockWaits: { rows: [lockWait], groups: 1 },
    stores: STORES,
  };
}

const SNAPSHOT_FILTER: SnapshotFilter = { ...WINDOW, minDurationMs: 1000 };
const FAILED = { lastErrorCode: 'SQL_TIMEOUT', lastError: 'the snapshot took too long', failedRuns: 1 };

function activity(): ActivityReport {
  const server = { ...serverRuns({ sessions: 2, blocked: 0, lastRunMs: 5, runs: 3 }), byState: { active: 1, idle: 1 }, lockWaiting: 0 };
  const session = {
    target: 'db1',
    instance: 'main',
    snapshotAt: AT,
    pid: 77,
    database: 'shop',
    user: 'app',
    application: 'psql',
    state: 'idle in transaction',
    waitEventType: 'Client',
    waitEvent: 'ClientRead',
    xactMs: 5000,
    queryMs: 5000,
    durationMs: 5000,
    fingerprint: 'f1',
    query: 'SELECT 1',
  };
  return {
    filter: SNAPSHOT_FILTER,
    servers: [server, { ...server, ...FAILED, store: 'pglog@b:5432/pglog' }],
    longRunning: [session],
    longRunningTotal: 1,
    stores: STORES,
  };
}

const SESSION = { database: 'shop', user: 'app', application: 'web', state: 'active', xactMs: 9000, query: 'UPDATE t SET x = 1', fingerprint: 'f1' };
const FOREST = buildBlockingForest(
  [
    { pid: 2, blockingPid: 1, database: 'shop', lockType: 'relation', waitMode: 'ShareLock', heldMode: 'RowExclusiveLock', relation: 'public.t', waitMs: 900 },
    { pid: 3, blockingPid: 2, database: 'shop', lockType: 'relation', waitMode: 'ShareLock', heldMode: null, relation: 'public.t', waitMs: 400 },
  ],
  [1, 2, 3].map((pid) => ({ pid, ...SESSION })),
);

function locks(): LocksReport {
  const server = { ...serverRuns({ sessions: 3, blocked: 2, lastRunMs: 5, runs: 3 }), forest: FOREST };
  const episode = {
    target: 'db1',
    instance: 'main',
    rootPid: 1,
    xactStart: AT,
    firstSeen: AT,
    lastSeen: AT,
    snapshots: 2,
    peakWaiters: 2,
    maxWaitMs: 900,
    ...SESSION,
  };
  return { filter: SNAPSHOT_FILTER, servers: [{ ...server, ...FAILED }], episodes: [episode], episodesTotal: 1, stores: STORES };
}

test('escapeControls: every unsafe character as a visible escape, printable text as it is, idempotent', () => {
  assert.equal(escapeControls('\x1b[2J'), '\\x1b[2J');
  assert.equal(escapeControls('a\x00\x07\t\n\x7f\u0080\u009b\u009fz'), 'a\\x00\\x07\\x09\\x0a\\x7f\\x80\\x9b\\x9fz');
  assert.equal(escapeControls('\u202a\u202e\u2066\u2069'), '\\u202a\\u202e\\u2066\\u2069');
  const printable = "SELECT 'ä€😀' -- \\x1b ─ … \u00a0\u200e";
  assert.equal(escapeControls(printable), printable);
  assert.equal(escapeControls(escapeControls(HOSTILE)), escapeControls(HOSTILE));
  assert.doesNotMatch(escapeControls(HOSTILE), /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u); // eslint-disable-line no-control-regex -- the point
  assert.equal(escapeLines('a\x1b\nb\tc\n'), 'a\\x1b\nb\\x09c\n');
});

test('pglog report: every string field hostile, the text is safe and each field is shown escaped', () => {
  assertSafe(formatReportText(poison(report()), 160), formatReportText(report(), 160));
});

test('pglog report activity: every string field hostile, the text is safe and each field is shown escaped', () => {
  assertSafe(formatActivityText(poison(activity()), 160), formatActivityText(activity(), 160));
});

test('pglog report locks: every string field hostile (tree lines too), the text is safe and each field is shown escaped', () => {
  const text = formatLocksText(poison(locks()), 160);
  assertSafe(text, formatLocksText(locks(), 160));
  // The names in a tree line (not a table cell): `user@database`, the relation, the state.
  assert.ok(text.includes(`└─ 2 ${escapeControls(HOSTILE)}app@${escapeControls(HOSTILE)}shop  ${escapeControls(HOSTILE)}active  waits`), text);
});

test('nodeLine: a newline in a name stays on the line, and the query is cut to fit the escaped line', () => {
  const [root] = buildBlockingForest(
    [{ pid: 2, blockingPid: 1, database: 'shop', lockType: 'relation', waitMode: 'ShareLock', heldMode: 'ExclusiveLock', relation: 't\n└─ 9 x', waitMs: 1 }],
    [{ pid: 1, ...SESSION, user: 'evil\n└─ 8 forged', query: 'x'.repeat(200) }],
  ).roots;
  assert.ok(root !== undefined);
  const line = nodeLine(root, null, 160);
  assert.doesNotMatch(line, /\n/);
  assert.ok(line.startsWith('1 evil\\x0a└─ 8 forged@shop  active  holds ExclusiveLock on t\\x0a└─ 9 x'), line);
  assert.equal([...line].length, 160);
});

test('renderTable: widths are those of the escaped cells, so columns stay aligned', () => {
  const text = renderTable(
    [
      { header: 'database', align: 'left' },
      { header: 'n', align: 'right' },
      { header: 'query', align: 'left', flex: true },
    ],
    [
      ['\x1b[2J', '1', 'a\tb'],
      ['shop', '22', '\u202eevil'],
    ],
    80,
  );
  assert.deepEqual(text.split('\n'), ['database   n  query', '────────  ──  ──────────', '\\x1b[2J    1  a\\x09b', 'shop      22  \\u202eevil']);
});

test('--json keeps the exact text, every control written as an escape JSON reads back', () => {
  const json = formatReportJson(poison(report()));
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  assert.doesNotMatch(json, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u);
  assert.match(json, /\\u009b/u);
  const parsed = JSON.parse(json) as { statements: Array<{ query: string }> };
  assert.equal(parsed.statements[0]?.query, `${HOSTILE}SELECT 1`);
});
