// The version matrix as a fleet (issue 47): one real server of every major 10 to 18
// (`make pg-matrix`), one real sshd, one store (Debian's 15) and ONE real `pglog collect` with a
// target per major, as a fleet of mixed versions is collected. Each server logs in its own
// format (stderr with several prefixes, csvlog, jsonlog 15+), has pg_stat_statements at the
// version its major creates, and the pg_monitor role of test-support's monitoring-role.ts
// (peer-mapped from the SSH user) that the snapshots run as.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { type CollectorProcess, mainInstance, sshTarget, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogFormat, type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { PG_MAJORS, type PgMajor } from '@pglog/test-support/pg-binaries.ts';
import { withClient } from '@pglog/test-support/pg-client.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { currentUser } from '@pglog/test-support/server-user.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';

import { MONITOR_ROLE, setUpMonitoringRole } from './monitoring-role.ts';
import { startSqlCollector } from './sql-collector.ts';

/** The table each server's blocking chain locks. */
export const CHAIN_TABLE = 'pglog_matrix_chain';

/**
 * How each major logs: every format where it exists, stderr with prefixes of several shapes
 * (timestamps with and without milliseconds, `%l` line numbers, key=value fields, `%e`, and
 * `%b`/`%Q`, which only 13+ and 14+ print).
 */
export const MATRIX_LOGGING: Record<PgMajor, { format: LogFormat; prefix?: string }> = {
  10: { format: 'stderr', prefix: '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ' },
  11: { format: 'csvlog' },
  12: { format: 'stderr', prefix: '%m [%p] %e %q%u@%d/%a ' },
  13: { format: 'csvlog' },
  14: { format: 'stderr', prefix: '%m [%p] %q[%b] %u@%d %Q ' },
  15: { format: 'jsonlog' },
  16: { format: 'stderr', prefix: '%m [%p] %q%u@%d ' },
  17: { format: 'csvlog' },
  18: { format: 'jsonlog' },
};

export interface MatrixServer {
  major: PgMajor;
  /** Its target's name: pg<major>. */
  target: string;
  server: LogServer;
  /** pg_stat_statements' extversion as CREATE EXTENSION made it. */
  statStatementsVersion: string;
}

export interface MatrixFleet {
  store: TestPostgres;
  ssh: TestSshServer;
  servers: MatrixServer[];
  collector: CollectorProcess;
  metricsPort: number;
  dispose(): Promise<void>;
}

/** `run` over `items` with at most `limit` at once (9 initdb's at once would starve a small machine). */
export async function mapLimit<T, R>(items: readonly T[], limit: number, run: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await run(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

async function startMatrixServer(major: PgMajor, started: LogServer[]): Promise<LogServer> {
  const { format, prefix } = MATRIX_LOGGING[major];
  const server = await startLogServer({
    major,
    logFormat: format,
    ...(prefix === undefined ? {} : { logLinePrefix: prefix }),
    settings: ["shared_preload_libraries = 'pg_stat_statements'"],
  });
  started.push(server);
  return server;
}

/** The monitoring role, pg_stat_statements and the chain's table; returns the extension's version. */
async function prepare(server: LogServer, osUsers: readonly string[]): Promise<string> {
  await setUpMonitoringRole(server, osUsers);
  return withClient(server.url, async (su) => {
    await su.query('CREATE EXTENSION pg_stat_statements');
    await su.query(`CREATE TABLE public.${CHAIN_TABLE} (id int)`);
    // The snapshots' own statements stay out of the log: what is in it is what the test did.
    await su.query(`ALTER ROLE ${MONITOR_ROLE} SET log_min_duration_statement = -1`);
    const r = await su.query<{ v: string }>("SELECT extversion AS v FROM pg_extension WHERE extname = 'pg_stat_statements'");
    return r.rows[0]!.v;
  });
}

/** Starts everything; snapshots every second (activity with locks, pg_stat_statements, pg_stat_database). */
export async function startMatrixFleet(majors: readonly PgMajor[] = PG_MAJORS, parallel = 3): Promise<MatrixFleet> {
  const work = mkdtempSync(join(tmpdir(), 'pglog-matrix-collect-'));
  const started: LogServer[] = [];
  let store: TestPostgres | undefined;
  let ssh: TestSshServer | undefined;
  let collector: CollectorProcess | undefined;
  const dispose = async (): Promise<void> => {
    if (collector !== undefined) {
      collector.kill('SIGKILL');
      await collector.exited;
    }
    await Promise.allSettled([ssh?.dispose(), store?.stop(), ...started.map((s) => s.dispose())]);
    rmSync(work, { recursive: true, force: true });
  };
  try {
    const startingStore = startPostgres().then((s) => (store = s));
    const startingSsh = startSshServer({ allowLocalForwarding: true }).then((s) => (ssh = s));
    // Awaited below, after the servers: a failure meanwhile is not an unhandled rejection.
    startingStore.catch(() => undefined);
    startingSsh.catch(() => undefined);
    const logServers = await mapLimit(majors, parallel, (major) => startMatrixServer(major, started));
    await Promise.all([startingStore, startingSsh]);
    const osUsers = [...new Set([ssh!.user, currentUser().name])];
    const versions = await mapLimit(logServers, parallel, (server) => prepare(server, osUsers));
    const servers = majors.map((major, i) => ({ major, target: `pg${major}`, server: logServers[i]!, statStatementsVersion: versions[i]! }));
    const targetsFile = writeTargetsFile(
      work,
      servers.map(({ major, target, server }) =>
        sshTarget(target, ssh!, server, {
          instances: [
            mainInstance(server, {
              logFormat: MATRIX_LOGGING[major].format,
              ...(MATRIX_LOGGING[major].prefix === undefined ? {} : { logLinePrefix: MATRIX_LOGGING[major].prefix }),
              sql: { socketDirectory: server.socketDir, port: server.port, user: MONITOR_ROLE, database: 'postgres', timeoutSeconds: 10 },
            }),
          ],
          collect: { logs: true, activity: true, locks: true, statements: true, databases: true, intervalSeconds: 1, statisticsIntervalSeconds: 1 },
        }),
      ),
    );
    const run = await startSqlCollector(work, targetsFile, store!.url);
    collector = run.collector;
    return { store: store!, ssh: ssh!, servers, collector, metricsPort: run.metricsPort, dispose };
  } catch (e) {
    await dispose();
    throw e;
  }
}
