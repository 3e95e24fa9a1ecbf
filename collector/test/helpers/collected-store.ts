// The set-up both store scenarios share (report-scenario.ts for the HTML report,
// store-workload.ts for the store dashboard): a store, a real sshd and a real PostgreSQL 15
// logging what the scenario asks for, a pg_monitor role for SQL snapshots over SSH, and a real
// `pglog collect` of it, returned once its first snapshots are stored; and the wait until every
// stable view holds the scenario's rows.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import {
  type CollectorProcess,
  mainInstance,
  sshTarget,
  startCollector,
  type TargetInstanceSpec,
  type TargetSpec,
  waitFor,
  writeTargetsFile,
} from '@pglog/test-support/collector-process.ts';
import { type LogServer, type LogServerOptions, startLogServer } from '@pglog/test-support/log-server.ts';
import { withClient } from '@pglog/test-support/pg-client.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { currentUser } from '@pglog/test-support/server-user.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { MONITOR_ROLE, setUpMonitoringRole } from './monitoring-role.ts';

export interface CollectedStoreOptions {
  /** Directory name prefix of the scenario's files. */
  name: string;
  target: string;
  logLinePrefix: string;
  databases?: LogServerOptions['databases'];
  /** postgresql.conf lines: what the server logs. */
  settings: string[];
  /** Extensions created in database postgres once the server runs. */
  extensions?: string[];
  /** More of the instance's `sql` settings (socket, port and the monitoring role are set). */
  sql?: Pick<NonNullable<TargetInstanceSpec['sql']>, 'database' | 'timeoutSeconds'>;
  collect: TargetSpec['collect'];
  batchMs: number;
  /** Returned once this many snapshots of this kind were stored without error. */
  firstSnapshots: { kind: string; count: number };
}

export interface CollectedStore {
  store: TestPostgres;
  ssh: TestSshServer;
  server: LogServer;
  collector: CollectorProcess;
  work: string;
  /** Kills the collector if it still runs, stops every server, removes the files. */
  readonly dispose: () => Promise<void>;
}

export async function startCollectedStore(o: CollectedStoreOptions): Promise<CollectedStore> {
  const work = mkdtempSync(join(tmpdir(), `pglog-${o.name}-`));
  let store: TestPostgres | undefined;
  let ssh: TestSshServer | undefined;
  let server: LogServer | undefined;
  let collector: CollectorProcess | undefined;
  const dispose = async (): Promise<void> => {
    // A collector the scenario already stopped has exited: kill() then does nothing.
    if (collector !== undefined) {
      collector.kill('SIGKILL');
      await collector.exited;
    }
    await Promise.allSettled([ssh?.dispose(), server?.dispose(), store?.stop()]);
    rmSync(work, { recursive: true, force: true });
  };
  try {
    [store, ssh, server] = await Promise.all([
      startPostgres(),
      startSshServer({ allowLocalForwarding: true }),
      startLogServer({ logLinePrefix: o.logLinePrefix, databases: o.databases, settings: o.settings }),
    ]);
    await setUpMonitoringRole(server, [...new Set([ssh.user, currentUser().name])]);
    if (o.extensions !== undefined && o.extensions.length > 0) {
      const su = new pg.Client({ connectionString: server.url });
      await su.connect();
      try {
        for (const e of o.extensions) await su.query(`CREATE EXTENSION ${e}`);
      } finally {
        await su.end();
      }
    }
    const targetsFile = writeTargetsFile(work, [
      sshTarget(o.target, ssh, server, {
        instances: [
          mainInstance(server, {
            logLinePrefix: o.logLinePrefix,
            sql: { socketDirectory: server.socketDir, port: server.port, user: MONITOR_ROLE, ...o.sql },
          }),
        ],
        collect: o.collect,
      }),
    ]);
    const started = startCollector({ targetsFile, storeUrl: store.url, outputFile: join(work, 'collector.log'), args: ['--batch-ms', String(o.batchMs)] });
    collector = started;
    const { kind, count } = o.firstSnapshots;
    await withClient(store.url, (db) =>
      waitFor(
        async () => {
          const r = await db
            .query<{ n: number }>('SELECT count(*)::int AS n FROM pglog.snapshot_runs WHERE kind = $1 AND error_code IS NULL', [kind])
            // 42P01: the collector has not migrated the store yet.
            .catch((e: unknown) => {
              if ((e as { code?: string }).code === '42P01') return { rows: [{ n: 0 }] };
              throw e;
            });
          return (r.rows[0]?.n ?? 0) >= count;
        },
        `${count} ${kind} snapshot(s)`,
        60_000,
        () => started.output().slice(-3000),
      ),
    );
    return { store, ssh, server, collector: started, work, dispose };
  } catch (e) {
    await dispose();
    throw e;
  }
}

/** Waits until each query of `expected` ([what, sql]) returns a row; the failure names the ones that do not. */
export async function waitForViews(s: CollectedStore, expected: ReadonlyArray<readonly [string, string]>, timeoutMs: number): Promise<void> {
  await withClient(s.store.url, async (db) => {
    let missing: string[] = [];
    await waitFor(
      async () => {
        missing = [];
        for (const [what, sql] of expected) {
          const r = await db.query(sql).catch(() => ({ rowCount: 0 }));
          if ((r.rowCount ?? 0) === 0) missing.push(what);
        }
        return missing.length === 0;
      },
      'every view to hold rows of the scenario',
      timeoutMs,
      async () => {
        const runs = await db.query('SELECT kind, error_code, left(error, 300) AS error, count(*)::int AS n FROM pglog.snapshot_runs GROUP BY 1, 2, 3');
        return `missing: ${missing.join(', ')}\nsnapshot runs: ${JSON.stringify(runs.rows)}\n${s.collector.output().slice(-3000)}`;
      },
    );
  });
}
