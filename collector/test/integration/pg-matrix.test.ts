// The version matrix (issue 47): a real server of every major 10 to 18 (`make pg-matrix`), each
// writing stderr (one common prefix), csvlog and, 15+, jsonlog at once while it runs the fixed
// workload of test-support's pg-workload.ts (statements of both protocols, an auto_explain
// plan, an error, a lock wait, a deadlock, a temporary file, a checkpoint, an autovacuum). Each
// log file is parsed with the pure parse API and its events are counted by kind against what
// the workload did. The same server then answers the snapshot queries as a pg_monitor role:
// pg_stat_statements at that major's extension version, pg_stat_database, and pg_stat_activity
// with a blocking pair.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { type LogFormat, type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { PG_MAJORS, PG_STAT_STATEMENTS_VERSION as PGSS_VERSION } from '@pglog/test-support/pg-binaries.ts';
import { countEvents, expectedEvents, runWorkload, WORKLOAD_TABLE, type WorkloadCounts, workloadSettings } from '@pglog/test-support/pg-workload.ts';
import pg from 'pg';

import type { PglogEvent } from '../../src/logformat/events.ts';
import { readActivity } from '../../src/snapshot/activity-query.ts';
import { readServerInfo, type ServerInfo } from '../../src/snapshot/server-info.ts';
import { readStatistics, type StatisticsSample } from '../../src/snapshot/statistics-query.ts';
import type { ActivitySession } from '../../src/snapshot/types.ts';
import { parseChunks } from '../helpers/parse.ts';

const PREFIX = '%m [%p] %q%u@%d ';
const TIMEOUT = { timeout: 120_000 };
const EXTENSION: Record<LogFormat, string> = { stderr: '.log', csvlog: '.csv', jsonlog: '.json' };

interface Snapshots {
  info: ServerInfo;
  statistics: StatisticsSample;
  holder: ActivitySession | undefined;
  waiter: ActivitySession | undefined;
  pids: { holder: number; waiter: number };
  /** Sessions opened for the snapshots (their connections are logged too). */
  sessions: number;
}

const connect = async (server: LogServer, user: string, application: string): Promise<pg.Client> => {
  const c = new pg.Client({ host: server.socketDir, port: server.port, user, database: 'postgres', application_name: application });
  await c.connect();
  return c;
};

/**
 * A pg_monitor role reads the snapshots while one session waits for another's lock. None of
 * these sessions logs its statements or its wait, so the workload's counts stay as they were.
 */
async function takeSnapshots(server: LogServer): Promise<Snapshots> {
  const quiet = 'SET log_min_duration_statement = -1';
  const admin = await connect(server, 'postgres', 'matrix-admin');
  const holder = await connect(server, 'postgres', 'matrix-holder');
  const waiter = await connect(server, 'postgres', 'matrix-waiter');
  let monitor: pg.Client | undefined;
  let waited: Promise<unknown> | undefined;
  let holding = true;
  try {
    await admin.query(quiet);
    await admin.query('CREATE EXTENSION pg_stat_statements');
    await admin.query('CREATE ROLE monitor LOGIN');
    await admin.query('GRANT pg_monitor TO monitor');
    await admin.query('ALTER ROLE monitor SET log_min_duration_statement = -1');
    monitor = await connect(server, 'monitor', 'pglog');
    await holder.query(quiet);
    await waiter.query(`${quiet}; SET deadlock_timeout = '1h'`);
    const pids = {
      holder: (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid,
      waiter: (await waiter.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid,
    };
    await holder.query(`BEGIN; LOCK TABLE ${WORKLOAD_TABLE} IN ACCESS EXCLUSIVE MODE`);
    waited = waiter.query(`SELECT count(*) FROM ${WORKLOAD_TABLE}`);
    for (let i = 0; i < 200; i++) {
      const r = await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", [pids.waiter]);
      if (r.rowCount === 1) break;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const m = monitor;
    await m.query("BEGIN READ ONLY; SET LOCAL statement_timeout = '10s'");
    const info = await readServerInfo(m);
    const statistics = await readStatistics(m, info, { statements: true, databases: true });
    const activity = await readActivity(m, info, { sessions: true, locks: true });
    await m.query('ROLLBACK');
    await holder.query('ROLLBACK');
    holding = false;
    await waited;
    const find = (pid: number): ActivitySession | undefined => activity.sessions.find((s) => s.pid === pid);
    return { info, statistics, holder: find(pids.holder), waiter: find(pids.waiter), pids, sessions: 4 };
  } finally {
    if (holding) await holder.query('ROLLBACK').catch(() => undefined);
    await waited?.catch(() => undefined);
    await Promise.allSettled([admin.end(), holder.end(), waiter.end(), monitor?.end()]);
  }
}

/** The events of every file the server wrote in `format`, in order. */
function parseFormat(server: LogServer, format: LogFormat): { events: PglogEvent[]; malformed: number; files: number } {
  const files = server.logFiles().filter((f) => f.endsWith(EXTENSION[format]));
  const bytes = Buffer.concat(files.map((f) => readFileSync(f)));
  const run = parseChunks({ format, prefix: format === 'stderr' ? PREFIX : undefined }, bytes);
  return { events: run.events, malformed: run.counters.malformed, files: files.length };
}

for (const major of PG_MAJORS) {
  void describe(`PostgreSQL ${major}`, () => {
    const formats: LogFormat[] = major >= 15 ? ['stderr', 'csvlog', 'jsonlog'] : ['stderr', 'csvlog'];
    let server: LogServer;
    let counts: WorkloadCounts;
    let snapshots: Snapshots;

    before(async () => {
      server = await startLogServer({ major, logFormats: formats, logLinePrefix: PREFIX, settings: workloadSettings() });
      counts = await runWorkload(server.url, major, { locks: true, autovacuum: true });
      snapshots = await takeSnapshots(server);
      // Stopped: every line is written (the shutdown checkpoint too) before the files are read.
      await server.stop();
    }, TIMEOUT);

    after(() => server?.dispose());

    for (const format of formats) {
      test(`${format}: every entry read, the events by kind as the workload did them`, () => {
        const { events, malformed, files } = parseFormat(server, format);
        assert.equal(files, 1);
        assert.equal(malformed, 0);
        const got = countEvents(events);
        const want = expectedEvents({ ...counts, sessions: counts.sessions + snapshots.sessions }, major);
        for (const [kind, n] of Object.entries(want.exact)) assert.equal(got[kind] ?? 0, n, `${kind}: ${JSON.stringify(got)}`);
        for (const [kind, n] of Object.entries(want.atLeast)) assert.ok((got[kind] ?? 0) >= n, `${kind} at least ${n}: ${JSON.stringify(got)}`);
        assert.ok(counts.autovacuumed, 'autovacuum vacuumed the table within 20 s');
        assert.ok(
          events.some((e) => e.kind === 'autovacuum' && e.table === `postgres.public.${WORKLOAD_TABLE}`),
          'the autovacuum of the table',
        );
        const errors = events.filter((e) => e.kind === 'error' || e.kind === 'deadlock').map((e) => e.sqlstate);
        if (format !== 'stderr') assert.deepEqual(errors, counts.errorCodes); // the prefix has no %e
        const statements = events.filter((e) => e.kind === 'statement');
        assert.ok(statements.every((s) => s.user === 'postgres' && s.database === 'postgres'));
        if (format !== 'stderr') {
          assert.ok(statements.every((s) => s.application === 'pglog-workload'));
          assert.ok(statements.every((s) => s.backend_type === (major >= 13 ? 'client backend' : null)));
          assert.equal(
            statements.some((s) => s.query_id !== null && s.query_id !== '0'),
            major >= 14,
            'query_id (14+, computed with pg_stat_statements loaded)',
          );
        }
      });
    }

    if (formats.length > 1) {
      test('the formats agree event by event', () => {
        // Each destination is written apart: entries of different processes may come in another order.
        const essence = (e: PglogEvent): string => `${e.kind} ${e.pid} ${e.kind === 'statement' ? e.query : ''}`;
        const [first, ...others] = formats.map((f) => parseFormat(server, f).events.map(essence).sort());
        for (const other of others) assert.deepEqual(other, first);
      });
    }

    test(`snapshots: pg_stat_statements ${PGSS_VERSION[major]}, pg_stat_database, pg_stat_activity with a blocking pair`, () => {
      const { info, statistics, holder, waiter, pids } = snapshots;
      assert.equal(Math.floor(info.versionNum / 10000), major);
      assert.equal(info.statStatementsVersion, PGSS_VERSION[major]);
      assert.equal(info.readAllStats, true);
      const mine = statistics.statements?.find((s) => s.query.startsWith(`SELECT count(*) FROM ${WORKLOAD_TABLE} WHERE id <`));
      assert.ok(mine !== undefined, 'the workload statement in pg_stat_statements');
      assert.equal(mine.calls, 1n);
      assert.equal(mine.database, 'postgres');
      assert.ok(mine.totalExecMs > 0);
      assert.equal(mine.toplevel, true);
      assert.equal(statistics.statementsReset !== null, major >= 14, 'pg_stat_statements_info (1.9+)');
      const db = statistics.databases?.find((d) => d.database === 'postgres');
      assert.ok(
        db !== undefined && db.deadlocks >= 1n && db.tempFiles >= 1n,
        JSON.stringify(db, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
      );
      assert.ok(holder !== undefined && waiter !== undefined, 'both sessions in pg_stat_activity');
      assert.equal(holder.state, 'idle in transaction');
      assert.deepEqual(waiter.blockedBy, [pids.holder]);
      assert.equal(waiter.waitEventType, 'Lock');
      assert.equal(waiter.backendType, 'client backend');
      assert.equal(waiter.leaderPid, null);
    });
  });
}
