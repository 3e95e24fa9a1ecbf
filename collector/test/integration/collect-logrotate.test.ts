// Nothing lost, nothing twice when the REAL logrotate rotates a fixed-name PostgreSQL log
// (log_filename = 'postgresql.log') several times under load, while `pglog collect` follows it
// over SSH:
// - rename mode: `create` renames the file and creates an empty one; `postrotate` runs
//   `pg_ctl logrotate` (as the server user) so PostgreSQL's logging collector reopens the fixed
//   name, as production setups do. Until then PostgreSQL keeps writing into the renamed file,
//   which the collector must read to its end before it switches.
// - copytruncate mode: PostgreSQL keeps writing to its descriptor (O_APPEND); the collector
//   reads the rest of the old content from the copy, then the truncated file from 0. Bytes
//   logrotate itself loses between its copy and its truncate never reach a file and are not
//   expected (the checker reads what is on disk and de-duplicates the copy and the live file).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';

import { formatCheck, storeCatchUp } from '@pglog/test-support/checker.ts';
import { type CollectorProcess, sshTarget, startCollector, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { PG_BIN } from '@pglog/test-support/pg-cluster.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { isRoot, SERVER_USER } from '@pglog/test-support/server-user.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

const ROTATIONS = 4;
const ROTATION_SPACING_MS = 3_000;
const RATE_PER_SECOND = 300;
const LOG_NAME = 'postgresql.log';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function run(file: string, args: string[], timeoutMs = 60_000): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`${file} ${args.join(' ')} failed: ${err.message}\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

/** Rows of `target` in pglog.statements. */
async function storedRows(storeUrl: string, target: string): Promise<number> {
  const client = new pg.Client({ connectionString: storeUrl });
  await client.connect();
  try {
    const r = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM pglog.statements WHERE target = $1', [target]);
    return r.rows[0]!.n;
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === '42P01' || code === '3F000') return 0; // the collector has not created the schema yet
    throw e;
  } finally {
    await client.end();
  }
}

/** The log directory's files that logrotate and PostgreSQL made of the fixed name. */
function rotatedFiles(logDirectory: string): string[] {
  return readdirSync(logDirectory)
    .filter((name) => name.startsWith(LOG_NAME))
    .sort();
}

/** `pg_ctl logrotate` for the instance, as the user PostgreSQL runs as (pg_ctl refuses root). */
function pgCtlLogrotateCommand(dataDirectory: string): string {
  const pgCtl = `${PG_BIN}/pg_ctl -D '${dataDirectory}' logrotate`;
  return isRoot() ? `runuser -u ${SERVER_USER} -- ${pgCtl}` : pgCtl;
}

type Mode = 'create' | 'copytruncate';

function logrotateConfig(mode: Mode, server: LogServer): string {
  const live = join(server.logDirectory, LOG_NAME);
  const body =
    mode === 'create'
      ? [
          '  create',
          '  postrotate',
          // A second's delay before the reopen: PostgreSQL keeps writing into the renamed file
          // while the new, empty one already exists, as on a busy server whose logging collector
          // is slow to react. The collector must read the renamed file to its end first.
          '    sleep 1',
          `    ${pgCtlLogrotateCommand(server.dataDirectory)} >/dev/null`,
          '  endscript',
        ]
      : ['  copytruncate'];
  return [`"${live}" {`, '  rotate 50', '  missingok', '  nocompress', '  notifempty', ...body, '}', ''].join('\n');
}

describe('pglog collect across logrotate rotation of a fixed-name PostgreSQL log', { timeout: 300_000 }, () => {
  let work: string;
  let store: TestPostgres;
  let ssh: TestSshServer;
  const servers: LogServer[] = [];
  const loads: SeqLoad[] = [];
  const collectors: CollectorProcess[] = [];

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-logrotate-'));
    [store, ssh] = await Promise.all([startPostgres(), startSshServer()]);
  });

  after(async () => {
    await Promise.allSettled(loads.map((l) => l.stop()));
    for (const c of collectors) {
      c.kill('SIGKILL');
      await c.exited;
    }
    await Promise.allSettled([ssh?.dispose(), store?.stop(), ...servers.map((s) => s.dispose())]);
    rmSync(work, { recursive: true, force: true });
  });

  async function scenario(t: TestContext, mode: Mode): Promise<void> {
    const target = `lr-${mode}`;
    const dir = join(work, mode);
    mkdirSync(dir);
    const server = await startLogServer({ logFilename: LOG_NAME });
    servers.push(server);
    const conf = join(dir, 'logrotate.conf');
    const state = join(dir, 'logrotate.state');
    writeFileSync(conf, logrotateConfig(mode, server));
    const targetsFile = writeTargetsFile(dir, [sshTarget(target, ssh, server)]);
    const collector = startCollector({ targetsFile, storeUrl: store.url, args: ['--batch-ms', '200'], outputFile: join(dir, 'collector.log') });
    collectors.push(collector);
    const load = startSeqLoad(server.url, { ratePerSecond: RATE_PER_SECOND, payloadBytes: 100 });
    loads.push(load);
    let exit: string | null = null;
    void collector.exited.then((e) => {
      exit = `the collector exited (code ${e.code}, signal ${e.signal})`;
    });
    const tail = (): string => collector.output().slice(-4000);
    /** waitFor that gives up at once when the collector is gone. */
    const waitAlive = (check: () => Promise<boolean>, what: string, timeoutMs: number, detail: () => string): Promise<void> =>
      waitFor(
        async () => {
          if (exit !== null) throw new Error(`${exit} while waiting for ${what}:\n${tail()}`);
          return check();
        },
        what,
        timeoutMs,
        detail,
      );

    // The collector is following the live file before the first rotation.
    await waitAlive(async () => (await storedRows(store.url, target)) > 0, `the first rows of ${target}`, 60_000, tail);
    const rotations: string[] = [];
    for (let i = 1; i <= ROTATIONS; i++) {
      await sleep(ROTATION_SPACING_MS);
      const r = await run('logrotate', ['-f', '-s', state, conf]);
      rotations.push(`rotation ${i}: ${r.stderr.trim()}`);
    }
    await sleep(ROTATION_SPACING_MS);
    await load.stop();

    const files = rotatedFiles(server.logDirectory);
    assert.ok(files.length >= ROTATIONS + 1, `logrotate rotated the log ${ROTATIONS} times: ${files.join(', ')}\n${rotations.join('\n')}`);

    const catchUp = storeCatchUp(store.url, load.run, server.logDirectory);
    await waitAlive(
      catchUp.caughtUp,
      `${target} to catch up`,
      90_000,
      () => `${catchUp.summary()}\nfiles: ${rotatedFiles(server.logDirectory).join(', ')}\n${tail()}`,
    );
    // A moment more for anything read twice to be committed too.
    await sleep(1_500);
    const r = await catchUp.check();
    assert.equal(r.lost.length, 0, `${target}: ${formatCheck(r)}`);
    assert.equal(r.duplicated.length, 0, `${target}: ${formatCheck(r)}`);
    if (mode === 'create') {
      // Nothing is lost on disk by a rename: everything stored was logged in some file.
      assert.equal(r.unexpected.length, 0, `${target}: ${formatCheck(r)}`);
      assert.ok(
        r.expected >= load.completed().length * 0.99,
        `${target}: the server logged what the load completed (${r.expected} of ${load.completed().length})`,
      );
    } else {
      // copytruncate loses the lines written between its copy and its truncate before anyone
      // can read them from a file; the collector may have read some of them live (stored, but
      // on disk nowhere). Those must be statements the load really ran.
      const issued = new Set(load.completed());
      const foreign = r.unexpected.filter((n) => !issued.has(n));
      assert.deepEqual(foreign, [], `${target}: stored statements the load never ran: ${formatCheck(r)}`);
    }
    // The collector followed every rotation: it announced a new file (or the truncated one
    // from byte 0) each time.
    const switches = collector.logRecords().filter((rec) => rec.target === target && /: reading .* from byte \d+$/.test(String(rec.msg)));
    assert.ok(switches.length >= ROTATIONS + 1, `${target}: the collector switched files at every rotation:\n${switches.map((x) => String(x.msg)).join('\n')}`);
    t.diagnostic(
      `${target}: ${formatCheck(r)} files: ${files.map((f) => `${f} ${statSync(join(server.logDirectory, f)).size} B`).join(', ')}; ${switches.length} file switches`,
    );
    const positionLost = collector.logRecords().filter((rec) => rec.code === 'LOG_POSITION_LOST');
    assert.deepEqual(positionLost, [], `${target}: the collector skipped log bytes`);
    const stopped = await collector.stop();
    assert.equal(stopped.code, 0, tail());
  }

  test('rename rotation (create, postrotate pg_ctl logrotate) under load: 0 lost, 0 duplicated', async (t) => {
    await scenario(t, 'create');
  });

  test('copytruncate rotation under load: 0 lost, 0 duplicated', async (t) => {
    await scenario(t, 'copytruncate');
  });
});
