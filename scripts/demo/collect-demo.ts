// `make demo`: pglog collect on one machine, end to end, with real components only.
//
//   store PostgreSQL ◄── pglog collect ──ssh──► sshd 127.0.0.x  (db1: instances main + csv)
//                                      └─ssh──► sshd 127.0.0.y  (db2: instance main, a WIN1251 database)
//
// Starts everything in temporary directories (nothing is installed or left behind), runs
// pgbench and Cyrillic statements against the three monitored instances, runs `pglog collect`
// for --seconds with SQL snapshots on (activity, locks, pg_stat_database) and one scripted lock
// episode, prints `pglog report`, `report locks` and `report activity`, writes the HTML report of
// the run (`pglog report --html`, to --html FILE, kept) and prints its path, stops everything it started.
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';

import { PGLOG } from '@pglog/test-support/cli.ts';
import { startCollector, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { PG_BIN, startPostgres } from '@pglog/test-support/postgres.ts';
import { startSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { MONITOR_ROLE, setUpMonitoringRole } from '../../collector/test/helpers/monitoring-role.ts';

const run = promisify(execFile);
const { values } = parseArgs({ options: { seconds: { type: 'string', default: '60' }, html: { type: 'string', default: 'pglog-demo-report.html' } } });
const seconds = Number(values.seconds);
const htmlFile = resolve(values.html);
const say = (s: string): void => {
  process.stdout.write(`demo: ${s}\n`);
};

const cleanups: Array<() => Promise<void>> = [];
const cleanup = async (): Promise<void> => {
  for (const c of cleanups.reverse())
    await c().catch(() => {
      /* best effort */
    });
};

/** pgbench against one instance over its Unix socket, at a bounded rate, until killed. */
function pgbench(server: LogServer, database: string, rate: number): { stop(): void } {
  const child = spawn(
    `${PG_BIN}/pgbench`,
    ['-h', server.socketDir, '-p', String(server.port), '-U', 'postgres', '-c', '2', '-R', String(rate), '-T', String(seconds + 30), '-n', database],
    { stdio: 'ignore' },
  );
  return {
    stop: () => {
      child.kill('SIGTERM');
    },
  };
}

async function initPgbench(server: LogServer, database: string): Promise<void> {
  await run(`${PG_BIN}/pgbench`, ['-h', server.socketDir, '-p', String(server.port), '-U', 'postgres', '-i', '-s', '1', '-q', database]);
}

/** Statements with Cyrillic text into the WIN1251 database: the server logs them in WIN1251. */
async function cyrillicLoad(server: LogServer, stop: AbortSignal): Promise<void> {
  const client = new pg.Client({ connectionString: server.urlFor('legacy') });
  await client.connect();
  await client.query('CREATE TABLE IF NOT EXISTS клиенты (ид serial PRIMARY KEY, имя text NOT NULL)');
  const names = ['Иван Петров', 'Мария Сидорова', 'Пётр Иванов'];
  for (let i = 0; !stop.aborted; i++) {
    await client.query(`INSERT INTO клиенты (имя) VALUES ('${names[i % names.length]!}')`);
    if (i % 7 === 0)
      await client.query('SELECT * FROM нет_такой_таблицы').catch(() => {
        /* logged as an error: that is the point */
      });
    await new Promise((r) => setTimeout(r, 100));
  }
  await client.end();
}

const demoStarted = new Date();
let htmlWritten = false;
try {
  const work = mkdtempSync(join(tmpdir(), 'pglog-demo-'));
  cleanups.push(() => {
    rmSync(work, { recursive: true, force: true });
    return Promise.resolve();
  });

  say('starting the store (PostgreSQL 15) ...');
  const store = await startPostgres();
  cleanups.push(() => store.stop());

  say('starting two SSH servers (OpenSSH sshd on loopback addresses, generated keys) ...');
  // Forwarding to local Unix sockets on: SQL snapshots reach PostgreSQL's socket through SSH.
  const ssh1 = await startSshServer({ allowLocalForwarding: true });
  cleanups.push(() => ssh1.dispose());
  const ssh2 = await startSshServer({ allowLocalForwarding: true });
  cleanups.push(() => ssh2.dispose());

  say('starting three monitored PostgreSQL 15 instances (logging_collector on) ...');
  // SQLSTATE in the prefix (%e), so the report can group errors by it.
  const prefix = '%m [%p] %q%e %u@%d ';
  // What the HTML report has sections for: sessions, lock waits, temporary files, autovacuum, plans.
  const settings = [
    'log_connections = on',
    'log_disconnections = on',
    'log_lock_waits = on',
    'log_temp_files = 0',
    'log_autovacuum_min_duration = 0',
    "shared_preload_libraries = 'auto_explain'",
    "auto_explain.log_min_duration = '100ms'",
  ];
  const db1main = await startLogServer({ logFormat: 'stderr', logLinePrefix: prefix, settings });
  cleanups.push(() => db1main.dispose());
  const db1csv = await startLogServer({ logFormat: 'csvlog', settings });
  cleanups.push(() => db1csv.dispose());
  const db2main = await startLogServer({ logLinePrefix: prefix, databases: [{ name: 'legacy', encoding: 'WIN1251' }], settings });
  cleanups.push(() => db2main.dispose());

  for (const s of [db1main, db1csv, db2main]) await initPgbench(s, 'postgres');
  // The role SQL snapshots use: pg_monitor only, peer-authenticated as the SSH user (docs/snapshots.md).
  for (const s of [db1main, db1csv, db2main]) await setUpMonitoringRole(s, [ssh1.user, ssh2.user]);
  const sql = (s: LogServer): { socketDirectory: string; port: number; user: string } => ({ socketDirectory: s.socketDir, port: s.port, user: MONITOR_ROLE });
  const snapshots = { logs: true, activity: true, locks: true, databases: true, intervalSeconds: 5, statisticsIntervalSeconds: 10 };
  const loads = [pgbench(db1main, 'postgres', 40), pgbench(db1csv, 'postgres', 20), pgbench(db2main, 'postgres', 20)];
  cleanups.push(() => {
    for (const l of loads) l.stop();
    return Promise.resolve();
  });
  const cyrillicStop = new AbortController();
  const cyrillic = cyrillicLoad(db2main, cyrillicStop.signal);
  cleanups.push(async () => {
    cyrillicStop.abort();
    await cyrillic.catch(() => {
      /* stopping */
    });
  });

  const targetsFile = writeTargetsFile(work, [
    {
      name: 'db1',
      host: ssh1.host,
      port: ssh1.port,
      user: ssh1.user,
      privateKeyFile: ssh1.privateKeyFile,
      knownHostsFile: ssh1.knownHostsFile,
      transport: 'auto',
      instances: [
        { name: 'main', dataDirectory: db1main.dataDirectory, logDirectory: db1main.logDirectory, logLinePrefix: prefix, sql: sql(db1main) },
        { name: 'csv', dataDirectory: db1csv.dataDirectory, logDirectory: db1csv.logDirectory, logFormat: 'csvlog', sql: sql(db1csv) },
      ],
      collect: snapshots,
    },
    {
      name: 'db2',
      host: ssh2.host,
      port: ssh2.port,
      user: ssh2.user,
      privateKeyFile: ssh2.privateKeyFile,
      knownHostsFile: ssh2.knownHostsFile,
      transport: 'auto',
      instances: [
        {
          name: 'main',
          dataDirectory: db2main.dataDirectory,
          logDirectory: db2main.logDirectory,
          logLinePrefix: prefix,
          encodings: { databases: { legacy: 'WIN1251' } },
          sql: sql(db2main),
        },
      ],
      collect: snapshots,
    },
  ]);

  // Promotion thresholds scaled down to the demo's load (production default: 1.25/0.75 Mbit/s,
  // 60 s dwell), so the busier server moves to the sshproxy sidecar within the minute.
  const transportArgs = ['--promote-above', '300kbit', '--demote-below', '150kbit', '--rate-window', '5000', '--min-dwell', '10000'];
  say(`running: pglog collect --targets ${targetsFile} ${transportArgs.join(' ')} (store URL in PGLOG_STORE_URL) for ${seconds} s ...`);
  const collector = startCollector({ targetsFile, storeUrl: store.url, outputFile: join(work, 'collect.log'), args: transportArgs });
  cleanups.push(async () => {
    collector.kill('SIGKILL');
    await collector.exited;
  });
  const client = new pg.Client({ connectionString: store.url });
  await client.connect();
  cleanups.push(() => client.end());
  await waitFor(
    async () => {
      const r = await client.query<{ n: string }>("SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'pglog' AND tablename = 'statement_events'");
      return r.rows[0]?.n === '1';
    },
    'the store schema',
    60_000,
    () => collector.output().slice(-4000),
  );
  // A lock episode for the snapshots to catch: a transaction holds SHARE on pgbench_branches,
  // so pgbench's UPDATEs of it wait (a blocking tree with db1/main's pgbench sessions under it).
  const blocker = new pg.Client({ host: db1main.socketDir, port: db1main.port, user: 'postgres', database: 'postgres', application_name: 'demo-blocker' });
  await blocker.connect();
  cleanups.push(() => blocker.end());
  const holdMs = Math.min(20, Math.max(12, Math.floor(seconds / 3))) * 1000;
  const episode = (async (): Promise<void> => {
    await new Promise((r) => setTimeout(r, Math.floor(seconds / 4) * 1000));
    say(`db1/main: holding SHARE on pgbench_branches for ${holdMs / 1000} s (pgbench's updates now wait)`);
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE pgbench_branches IN SHARE MODE');
    // Two snapshot intervals later the tree is in the store: show it while it is current.
    await new Promise((r) => setTimeout(r, 11_000));
    say('$ pglog report locks --since 1m --target db1 --store $PGLOG_STORE_URL   (while the lock is held)');
    const live = await run(PGLOG, ['report', 'locks', '--since', '1m', '--target', 'db1'], { env: { ...process.env, PGLOG_STORE_URL: store.url } });
    process.stdout.write(live.stdout);
    await new Promise((r) => setTimeout(r, holdMs - 11_000));
    await blocker.query('COMMIT');
    say('db1/main: lock released');
  })();
  cleanups.push(() =>
    episode.catch(() => {
      /* stopping */
    }),
  );
  let movesShown = 0;
  for (let left = seconds; left > 0; left -= 10) {
    await new Promise((r) => setTimeout(r, Math.min(10, left) * 1000));
    const r = await client.query<{ target: string; instance: string; n: string }>(
      'SELECT target, instance, count(*) AS n FROM pglog.statements GROUP BY 1, 2 ORDER BY 1, 2',
    );
    say(`statements in the store: ${r.rows.map((x) => `${x.target}/${x.instance} ${x.n}`).join(', ') || 'none yet'}`);
    for (const m of collector
      .logRecords()
      .filter((x) => typeof x['reason'] === 'string' && typeof x['to'] === 'string')
      .slice(movesShown)) {
      movesShown++;
      say(`transport: ${String(m['msg'])}`);
    }
  }
  await episode;
  const stopped = await collector.stop();
  say(`pglog collect stopped on SIGTERM in ${stopped.ms} ms (exit ${String(stopped.code)})`);

  say('$ pglog report --store $PGLOG_STORE_URL --since 10m');
  const report = await run(PGLOG, ['report', '--since', '10m', '--limit', '10'], {
    env: { ...process.env, PGLOG_STORE_URL: store.url },
    maxBuffer: 64 * 1024 * 1024,
  });
  process.stdout.write(report.stdout);
  for (const args of [
    ['report', 'locks', '--since', '10m'],
    ['report', 'activity', '--since', '10m', '--min-duration', '1s'],
  ]) {
    say(`$ pglog ${args.join(' ')} --store $PGLOG_STORE_URL`);
    const out = await run(PGLOG, args, { env: { ...process.env, PGLOG_STORE_URL: store.url }, maxBuffer: 64 * 1024 * 1024 });
    process.stdout.write(out.stdout);
  }
  // The run's HTML report, from before the collector started until now; kept after the clean-up.
  say(`$ pglog report --since ${demoStarted.toISOString()} --html ${htmlFile} --store $PGLOG_STORE_URL`);
  mkdirSync(dirname(htmlFile), { recursive: true });
  await run(PGLOG, ['report', '--since', demoStarted.toISOString(), '--html', htmlFile], { env: { ...process.env, PGLOG_STORE_URL: store.url } });
  htmlWritten = true;
} finally {
  await cleanup();
  say('stopped everything it started');
  if (htmlWritten) say(`HTML report of this run: ${htmlFile}`);
}
