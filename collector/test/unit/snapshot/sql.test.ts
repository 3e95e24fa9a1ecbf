// The snapshot SQL builders by server and extension version (activity-sql.ts,
// statistics-sql.ts), and the mapping of their rows (activity-query.ts, statistics-query.ts).
// That each text runs on a real server is snapshot-queries.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';

import { activityFromRows } from '../../../src/snapshot/activity-query.ts';
import { activitySql } from '../../../src/snapshot/activity-sql.ts';
import type { ServerInfo } from '../../../src/snapshot/server-info.ts';
import { quoteIdent } from '../../../src/snapshot/server-info.ts';
import { decodeServerText } from '../../../src/snapshot/server-text.ts';
import { databasesFromRows, statementsFromRows } from '../../../src/snapshot/statistics-query.ts';
import { databasesSql, extensionVersion, statementsSql } from '../../../src/snapshot/statistics-sql.ts';

const ALL = { sessions: true, locks: true };

void describe('activitySql', () => {
  test('PostgreSQL 10 and 11: no leader_pid, no waitstart, CTEs without MATERIALIZED', () => {
    for (const v of [100000, 110022]) {
      const sql = activitySql(v, ALL);
      assert.match(sql, /NULL::int AS leader_pid/);
      assert.doesNotMatch(sql, /\ba\.leader_pid|\bg\.leader_pid/);
      assert.match(sql, /NULL::timestamptz AS waitstart/);
      assert.doesNotMatch(sql, /\bl\.waitstart/);
      assert.doesNotMatch(sql, /MATERIALIZED/);
      assert.match(sql, /COALESCE\(l\.pid, 0\) AS group_pid/);
    }
  });

  test('PostgreSQL 12: MATERIALIZED', () => {
    const sql = activitySql(120017, ALL);
    assert.match(sql, /a AS MATERIALIZED \(/);
    assert.match(sql, /l AS MATERIALIZED \(/);
    assert.doesNotMatch(sql, /a\.leader_pid/);
  });

  test("PostgreSQL 13: leader_pid, and a blocker's parallel workers' locks count as its own", () => {
    const sql = activitySql(130000, ALL);
    assert.match(sql, /a\.leader_pid AS leader_pid/);
    assert.match(sql, /COALESCE\(g\.leader_pid, l\.pid, 0\) AS group_pid/);
    assert.match(sql, /LEFT JOIN a g ON g\.pid = l\.pid/);
    assert.doesNotMatch(sql, /\bl\.waitstart/);
  });

  test("PostgreSQL 14 and later: pg_locks.waitstart, the waiter's state_change when it is not set", () => {
    for (const v of [140000, 150004, 170002]) {
      const sql = activitySql(v, ALL);
      assert.match(sql, /l\.waitstart AS waitstart/);
      assert.match(sql, /COALESCE\(wl\.waitstart, w\.state_change\) AS wait_start/);
      assert.match(sql, /a\.leader_pid/);
    }
  });

  test('every version: the own backend left out, pg_blocking_pids only for lock waiters, one statement', () => {
    for (const v of [100000, 130000, 150000]) {
      const sql = activitySql(v, ALL);
      assert.match(sql, /a\.pid <> pg_catalog\.pg_backend_pid\(\)/);
      assert.match(sql, /CASE WHEN a\.wait_event_type = 'Lock' THEN pg_catalog\.pg_blocking_pids\(a\.pid\) ELSE '\{\}'::int\[\] END/);
      assert.equal(sql.match(/pg_blocking_pids/g)?.length, 1);
      assert.equal(sql.match(/pg_catalog\.pg_locks/g)?.length, 1, 'pg_locks is read once');
      assert.match(sql, /pg_catalog\.statement_timestamp\(\) AS ts/);
      assert.doesNotMatch(sql, /;/);
    }
  });

  test('the same lockable object: every identifying column of pg_locks', () => {
    const sql = activitySql(150000, ALL);
    for (const c of ['database', 'relation', 'page', 'tuple', 'virtualxid', 'transactionid', 'classid', 'objid', 'objsubid']) {
      assert.match(sql, new RegExp(`h\\.${c} IS NOT DISTINCT FROM wl\\.${c}`));
    }
    assert.match(sql, /h\.locktype = wl\.locktype/);
  });

  test('sessions without locks reads no pg_locks; locks without sessions keeps only the chains', () => {
    const sessionsOnly = activitySql(150000, { sessions: true, locks: false });
    assert.doesNotMatch(sessionsOnly, /pg_locks/);
    assert.match(sessionsOnly, /pg_blocking_pids/, 'blockedBy is part of a session');
    const locksOnly = activitySql(150000, { sessions: false, locks: true });
    assert.match(locksOnly, /WHERE pg_catalog\.cardinality\(a\.blocked_by\) > 0 OR a\.pid IN \(SELECT pg_catalog\.unnest\(w\.blocked_by\) FROM a w\)/);
    assert.match(activitySql(150000, { sessions: false, locks: false }), /WHERE false/);
  });

  test('a server older than 10 is refused', () => {
    assert.throws(
      () => activitySql(90624, ALL),
      (e: unknown) => isPglogError(e) && e.code === 'SQL_QUERY_FAILED' && /older than 10/.test(e.message),
    );
  });
});

function info(over: Partial<ServerInfo>): ServerInfo {
  return {
    versionNum: 150004,
    database: 'app',
    username: 'monitor',
    statStatementsVersion: '1.10',
    statStatementsSchema: 'public',
    superuser: false,
    canWrite: false,
    readAllStats: true,
    ...over,
  };
}

void describe('statementsSql', () => {
  test('extension 1.7 and older (PostgreSQL 12 and older): total_time, no toplevel, no pg_stat_statements_info', () => {
    for (const v of ['1.5', '1.7']) {
      const sql = statementsSql(info({ versionNum: 120000, statStatementsVersion: v }));
      assert.match(sql, /p\.total_time AS total_exec_ms/);
      assert.match(sql, /true AS toplevel/);
      assert.match(sql, /NULL::timestamptz AS statements_reset/);
      assert.doesNotMatch(sql, /total_exec_time|pg_stat_statements_info|p\.toplevel/);
    }
  });

  test('extension 1.8 (PostgreSQL 13): total_exec_time, still no toplevel', () => {
    const sql = statementsSql(info({ versionNum: 130000, statStatementsVersion: '1.8' }));
    assert.match(sql, /p\.total_exec_time AS total_exec_ms/);
    assert.match(sql, /true AS toplevel/);
    assert.doesNotMatch(sql, /pg_stat_statements_info/);
  });

  test('extension 1.9 and later (PostgreSQL 14+): toplevel and the reset time of pg_stat_statements_info', () => {
    for (const v of ['1.9', '1.10', '1.11']) {
      const sql = statementsSql(info({ statStatementsVersion: v }));
      assert.match(sql, /p\.toplevel AS toplevel/);
      assert.match(sql, /p\.total_exec_time AS total_exec_ms/);
      assert.match(sql, /\(SELECT i\.stats_reset FROM "public"\.pg_stat_statements_info i\) AS statements_reset/);
    }
  });

  test("the version of the extension decides, not the server's: PostgreSQL 15 with the 1.7 view", () => {
    assert.match(statementsSql(info({ versionNum: 150000, statStatementsVersion: '1.7' })), /p\.total_time/);
  });

  test("the view is read in the extension's schema, quoted", () => {
    const sql = statementsSql(info({ statStatementsSchema: 'mon "x"' }));
    assert.match(sql, /FROM "mon ""x"""\.pg_stat_statements p/);
    assert.match(sql, /WHERE p\.queryid IS NOT NULL/);
  });

  test('not installed: SQL_QUERY_FAILED that names the database and the fix', () => {
    assert.throws(
      () => statementsSql(info({ statStatementsVersion: null, statStatementsSchema: null })),
      (e: unknown) => {
        assert.ok(isPglogError(e));
        assert.equal(e.code, 'SQL_QUERY_FAILED');
        assert.match(e.message, /pg_stat_statements is not installed in database "app"/);
        assert.match(e.message, /CREATE EXTENSION pg_stat_statements/);
        assert.match(e.message, /shared_preload_libraries = 'pg_stat_statements'/);
        return true;
      },
    );
  });

  test('extensionVersion', () => {
    assert.deepEqual(extensionVersion('1.10'), [1, 10]);
    assert.deepEqual(extensionVersion('1.9'), [1, 9]);
    assert.deepEqual(extensionVersion('2.0beta'), [2, 0]);
    assert.deepEqual(extensionVersion('x'), [0, 0]);
  });

  test('quoteIdent', () => {
    assert.equal(quoteIdent('public'), '"public"');
    assert.equal(quoteIdent('a"b'), '"a""b"');
  });
});

void describe('databasesSql', () => {
  test('the DatabaseDelta columns and stats_reset, without the shared-objects row', () => {
    const sql = databasesSql(150000);
    for (const c of [
      'numbackends',
      'xact_commit',
      'xact_rollback',
      'blks_read',
      'blks_hit',
      'tup_returned',
      'tup_fetched',
      'tup_inserted',
      'tup_updated',
      'tup_deleted',
      'conflicts',
      'temp_files',
      'temp_bytes',
      'deadlocks',
      'stats_reset',
    ]) {
      assert.match(sql, new RegExp(`s\\.${c}\\b`));
    }
    assert.match(sql, /WHERE s\.datname IS NOT NULL/);
  });
});

const TS = new Date('2026-11-23T12:00:10.000Z');

function sessionRow(pid: number, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ts: TS,
    pid,
    leader_pid: null,
    database: 'app',
    username: 'u',
    application: 'psql',
    client: 'local',
    backend_type: 'client backend',
    state: 'active',
    wait_event_type: null,
    wait_event: null,
    backend_start: new Date('2026-11-23T11:00:00Z'),
    xact_start: null,
    query_start: null,
    state_change: new Date('2026-11-23T12:00:00Z'),
    query_bytes: Buffer.from('SELECT 1'),
    query_encoding: 'UTF8',
    blocked_by: [],
    blocking_pid: null,
    locktype: null,
    wait_mode: null,
    held_mode: null,
    blocker_wait_mode: null,
    relation: null,
    wait_start: null,
    ...over,
  };
}

void describe('activityFromRows', () => {
  test('only the time row: no sessions, the time', () => {
    const r = activityFromRows([{ ts: TS, pid: null }]);
    assert.deepEqual(r, { ts: TS, sessions: [], blocking: [] });
  });

  test('one row per blocker becomes one session with several edges; waitMs from ts', () => {
    const edge = {
      wait_event_type: 'Lock',
      wait_event: 'transactionid',
      blocked_by: [20, 30],
      locktype: 'transactionid',
      wait_mode: 'ShareLock',
      wait_start: new Date('2026-11-23T12:00:07.500Z'),
    };
    const r = activityFromRows([
      sessionRow(10, { ...edge, blocking_pid: 20, held_mode: 'ExclusiveLock' }),
      sessionRow(10, { ...edge, blocking_pid: 30, blocker_wait_mode: 'ShareLock' }),
      sessionRow(20, { query_bytes: null, state: 'idle in transaction' }),
    ]);
    assert.equal(r.sessions.length, 2);
    assert.deepEqual(r.sessions[0]?.blockedBy, [20, 30]);
    assert.match(r.sessions[0]?.fingerprint ?? '', /^[0-9a-f]{16}$/);
    assert.equal(r.sessions[1]?.fingerprint, '', 'no query, no fingerprint');
    assert.deepEqual(
      r.blocking.map((e) => [e.pid, e.blockingPid, e.heldMode, e.blockerWaitMode, e.waitMs, e.database]),
      [
        [10, 20, 'ExclusiveLock', null, 2500, 'app'],
        [10, 30, null, 'ShareLock', 2500, 'app'],
      ],
    );
  });

  test('a query hidden from a role without pg_read_all_stats has no fingerprint', () => {
    assert.equal(activityFromRows([sessionRow(10, { query_bytes: Buffer.from('<insufficient privilege>') })]).sessions[0]?.fingerprint, '');
  });

  test('a wait start after the snapshot time (same instant, rounding) is 0 ms, never negative', () => {
    const r = activityFromRows([
      sessionRow(10, { blocked_by: [20], blocking_pid: 20, locktype: 'relation', wait_mode: 'ShareLock', wait_start: new Date(TS.getTime() + 1) }),
    ]);
    assert.equal(r.blocking[0]?.waitMs, 0);
  });

  test('a changed column type is an error, not NaN', () => {
    assert.throws(() => activityFromRows([sessionRow(10, { blocked_by: 'x' })]), /blocked_by is not an integer array/);
  });

  test("query text is decoded in the encoding of its own database (a WIN1251 database's Cyrillic), invalid bytes replaced", () => {
    const win1251 = Buffer.from([0xef, 0xf0, 0xe8, 0xe2, 0xe5, 0xf2]); // привет in WIN1251
    const r = activityFromRows([
      sessionRow(10, { query_bytes: Buffer.concat([Buffer.from('SELECT 1 /* '), win1251, Buffer.from(' */')]), query_encoding: 'WIN1251' }),
    ]);
    assert.equal(r.sessions[0]?.query, 'SELECT 1 /* привет */');
    assert.equal(decodeServerText(Buffer.from([0x41, 0xff, 0x42]), 'UTF8'), 'A\ufffdB');
    assert.equal(decodeServerText(Buffer.from('plain'), 'MULE_INTERNAL'), 'plain', 'an encoding the log decoder lacks decodes as UTF-8');
    assert.equal(decodeServerText(null, 'UTF8'), null);
  });
});

void describe('statementsFromRows / databasesFromRows', () => {
  test('int8 strings become bigints, beyond 2^53 too', () => {
    const { ts, reset, statements } = statementsFromRows([
      {
        ts: TS,
        statements_reset: null,
        userid: 10,
        dbid: 5,
        queryid: '-9223372036854775808',
        toplevel: true,
        calls: '9007199254740993',
        total_exec_ms: 1.5,
        rows: '3',
        shared_blks_hit: '4',
        shared_blks_read: '0',
        temp_blks_written: '0',
        query: 'SELECT $1',
        username: 'u',
        database: 'd',
      },
    ]);
    assert.equal(ts, TS);
    assert.equal(reset, null);
    assert.equal(statements[0]?.queryId, -9223372036854775808n);
    assert.equal(statements[0]?.calls, 9007199254740993n);
  });

  test('no entries: the time row only', () => {
    assert.deepEqual(statementsFromRows([{ ts: TS, statements_reset: null, queryid: null }]).statements, []);
    assert.deepEqual(databasesFromRows([{ ts: TS, database: null }]).databases, []);
  });
});
