// `report locks` text and JSON: the ASCII tree, waits and held modes, a failed newest run,
// the episodes table, and the JSON document's field names.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { buildBlockingForest, type EdgeInput } from '../../../src/report/blocking-tree.ts';
import { formatLocksJson, formatLocksText, MAX_CHILDREN_SHOWN, nodeLine, QUIET_SERVERS_LISTED } from '../../../src/report/locks-format.ts';
import type { BlockingEpisode, LocksReport, ServerLocks, SnapshotFilter } from '../../../src/report/snapshot-types.ts';
import { SERVER_RUN_KEYS, serverRuns } from '../../helpers/report-fixtures.ts';

const FILTER: SnapshotFilter = {
  since: new Date('2026-11-23T17:40:00Z'),
  until: new Date('2026-11-23T18:40:30Z'),
  target: null,
  database: null,
  limit: 20,
  minDurationMs: 0,
};

function edge(pid: number, blockingPid: number, waitMode: string, heldMode: string | null, waitMs: number): EdgeInput {
  return { pid, blockingPid, database: 'shop', lockType: 'relation', waitMode, heldMode, relation: 'public.orders', waitMs };
}

const CHAIN = buildBlockingForest(
  [
    edge(4215, 4211, 'ShareLock', 'RowExclusiveLock', 12_300),
    edge(4217, 4215, 'RowExclusiveLock', null, 3000),
    edge(4216, 4211, 'ShareLock', 'RowExclusiveLock', 800),
  ],
  [
    {
      pid: 4211,
      database: 'shop',
      user: 'app',
      application: 'web',
      state: 'idle in transaction',
      xactMs: 45_000,
      query: 'UPDATE orders\n   SET state = 2 WHERE id = 7',
      fingerprint: 'f1',
    },
    { pid: 4215, database: 'shop', user: 'app', application: '', state: 'active', xactMs: 12_400, query: 'CREATE INDEX ON orders (state)', fingerprint: 'f2' },
    { pid: 4217, database: 'shop', user: 'batch', application: null, state: 'active', xactMs: 3100, query: 'UPDATE orders SET x = 1', fingerprint: 'f3' },
  ],
);

function server(over: Partial<ServerLocks>): ServerLocks {
  return { ...serverRuns({ sessions: 25, blocked: 3, lastRunMs: 35, runs: 360 }), forest: CHAIN, ...over };
}

const EPISODE: BlockingEpisode = {
  target: 'db1',
  instance: 'main',
  rootPid: 4211,
  xactStart: new Date('2026-11-23T18:39:27Z'),
  firstSeen: new Date('2026-11-23T18:39:40Z'),
  lastSeen: new Date('2026-11-23T18:40:12Z'),
  snapshots: 4,
  peakWaiters: 3,
  maxWaitMs: 12_300,
  database: 'shop',
  user: 'app',
  application: 'web',
  fingerprint: 'f1',
  query: 'UPDATE orders\n   SET state = 2 WHERE id = 7',
};

const REPORT: LocksReport = {
  filter: FILTER,
  servers: [
    server({}),
    server({
      target: 'db2',
      snapshotAt: null,
      sessions: null,
      blocked: null,
      lastRunAt: new Date('2026-11-23T18:40:01Z'),
      lastRunMs: 10_000,
      lastErrorCode: 'SQL_TIMEOUT',
      lastError: 'the snapshot took longer\nthan 10 s',
      failedRuns: 360,
      forest: buildBlockingForest([], []),
    }),
    server({
      target: 'db3',
      lastRunAt: new Date('2026-11-23T18:40:20Z'),
      lastErrorCode: 'SQL_CONNECT_FAILED',
      lastError: 'no socket',
      failedRuns: 1,
      forest: buildBlockingForest([], []),
    }),
  ],
  episodes: [EPISODE],
  episodesTotal: 1,
};

test('text: a tree per server with holds, waits, queueing, xact age and the query; failures are visible', () => {
  const lines = formatLocksText(REPORT, 200).split('\n');
  assert.equal(lines[0], 'pglog report locks  2026-11-23 17:40:00 .. 2026-11-23 18:40:30 UTC');
  assert.deepEqual(lines.slice(2, 10), [
    'db1/main  snapshot 2026-11-23 18:40:12Z  3 sessions blocked, longest wait 12.30 s',
    '└─ 4211 app@shop  idle in transaction  holds RowExclusiveLock on public.orders  xact 45.00 s  [web]  "UPDATE orders SET state = 2 WHERE id = 7"',
    '   ├─ 4215 app@shop  active  waits ShareLock on public.orders 12.30 s  xact 12.40 s  "CREATE INDEX ON orders (state)"',
    '   │  └─ 4217 batch@shop  active  waits RowExclusiveLock on public.orders 3.00 s (queued behind 4215\'s ShareLock)  xact 3.10 s  "UPDATE orders SET x = 1"',
    '   └─ 4216 -@shop  waits ShareLock on public.orders 800.0 ms',
    'db2/main  no snapshot in the window: newest snapshot run failed at 2026-11-23 18:40:01Z after 10.00 s: SQL_TIMEOUT: the snapshot took longer than 10 s',
    'db3/main  snapshot 2026-11-23 18:40:12Z  no blocked sessions',
    '!  newest snapshot run failed at 2026-11-23 18:40:20Z after 35.0 ms: SQL_CONNECT_FAILED: no socket',
  ]);
  assert.ok(lines.includes('Blocking episodes, newest first (1 of 1)'));
  assert.match(
    lines.find((l) => l.startsWith('db1 ')) ?? '',
    /^db1 +main +4211 +2026-11-23 18:39:40 +2026-11-23 18:40:12 +4 +3 +12\.30 s +app@shop +UPDATE orders SET state = 2 WHERE id = 7$/,
  );
});

test('text: long queries are cut to the width; repeats, cycles and empty windows are spelled out', () => {
  const root = CHAIN.roots[0];
  assert.ok(root !== undefined);
  const line = nodeLine({ ...root, query: 'SELECT '.repeat(40) }, null, 140);
  assert.equal(Array.from(line).length, 140);
  assert.match(line, /…"$/);
  const cyc = buildBlockingForest([edge(1, 2, 'ShareLock', 'ExclusiveLock', 5), edge(2, 1, 'ShareLock', 'ExclusiveLock', 7)], []);
  const text = formatLocksText({ ...REPORT, servers: [server({ forest: cyc })], episodes: [], episodesTotal: 0 }, 160);
  assert.ok(text.includes('!  lock cycle: 1 → 2 → 1 (each waits for the next; a deadlock not broken yet)'), text);
  assert.ok(text.includes('└─ 1 -@shop  in a lock cycle, waits for 2'), text);
  assert.ok(text.includes('      └─ 1 -@shop  waits ShareLock on public.orders 5.0 ms  [cycle: back to 1 above]'), text);
  assert.match(text, /Blocking episodes: none in this window/);
  const two = buildBlockingForest([edge(3, 1, 'ShareLock', 'ExclusiveLock', 5), edge(3, 2, 'ShareLock', 'ExclusiveLock', 5)], []);
  assert.ok(
    formatLocksText({ ...REPORT, servers: [server({ forest: two })] }, 160).includes(
      '└─ 3 -@shop  waits ShareLock on public.orders 5.0 ms  also waits for 1  [repeat: see above]',
    ),
  );
  assert.match(formatLocksText({ ...REPORT, servers: [] }, 160), /No snapshot runs in this window/);
});

test('JSON: one document with camelCase fields, ISO times, nested trees', () => {
  const json = JSON.parse(formatLocksJson(REPORT)) as Record<string, unknown> & { servers: Record<string, unknown>[]; episodes: Record<string, unknown>[] };
  assert.deepEqual(Object.keys(json), ['report', 'window', 'filters', 'servers', 'episodes', 'episodesTotal']);
  assert.deepEqual(json.window, { since: '2026-11-23T17:40:00.000Z', until: '2026-11-23T18:40:30.000Z' });
  const [db1, db2] = json.servers;
  assert.deepEqual(Object.keys(db1 ?? {}), [...SERVER_RUN_KEYS, 'blockedSessions', 'longestWaitMs', 'cycles', 'trees']);
  assert.deepEqual(db2?.lastRun, {
    at: '2026-11-23T18:40:01.000Z',
    durationMs: 10_000,
    ok: false,
    errorCode: 'SQL_TIMEOUT',
    error: 'the snapshot took longer\nthan 10 s',
  });
  const trees = db1?.trees as Record<string, unknown>[];
  assert.deepEqual(Object.keys(trees[0] ?? {}), [
    'pid',
    'database',
    'user',
    'application',
    'state',
    'xactMs',
    'query',
    'fingerprint',
    'lockType',
    'relation',
    'waitMode',
    'heldMode',
    'waitMs',
    'waitsFor',
    'holds',
    'repeat',
    'cycle',
    'children',
  ]);
  // Every field as given, the three times as ISO text.
  assert.deepEqual(json.episodes[0], {
    ...EPISODE,
    xactStart: '2026-11-23T18:39:27.000Z',
    firstSeen: '2026-11-23T18:39:40.000Z',
    lastSeen: '2026-11-23T18:40:12.000Z',
  });
});

test('text: a long lock queue shows its first waiters and a count; many quiet servers are one line', () => {
  const queue = buildBlockingForest(
    Array.from({ length: MAX_CHILDREN_SHOWN + 5 }, (_, i) => edge(100 + i, 1, 'ShareLock', 'ExclusiveLock', 1000 - i)),
    [],
  );
  const lines = formatLocksText({ ...REPORT, servers: [server({ forest: queue })] }, 160).split('\n');
  assert.equal(lines.filter((l) => l.startsWith('   ├─ ')).length, MAX_CHILDREN_SHOWN);
  assert.ok(lines.includes('   └─ … 5 more waiting (--json lists them all)'));
  const quiet = Array.from({ length: QUIET_SERVERS_LISTED + 1 }, (_, i) => server({ target: `q${i}`, forest: buildBlockingForest([], []) }));
  const text = formatLocksText({ ...REPORT, servers: [server({}), ...quiet] }, 160);
  assert.ok(text.includes(`${QUIET_SERVERS_LISTED + 1} more server instances: no blocked sessions in their newest snapshot`));
  assert.ok(!text.includes('q0/main'));
  assert.ok(
    formatLocksText({ ...REPORT, servers: quiet.slice(0, QUIET_SERVERS_LISTED) }, 160).includes('q0/main  snapshot 2026-11-23 18:40:12Z  no blocked sessions'),
  );
});
