// A real, throwaway PostgreSQL 15 for tests: a fresh cluster in a temporary directory that
// listens only on a Unix socket there (no TCP port, so parallel test files never collide).
// PostgreSQL refuses to run as root, so as root (here and in CI) the server runs as the
// unprivileged system user that scripts/loggen also uses.
import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isRoot, SERVER_USER, serverUser } from './server-user.ts';

export const PG_BIN = '/usr/lib/postgresql/15/bin';

export interface TestPostgres {
  /** The directory holding the server's socket: pass as `host` to pg. */
  socketDir: string;
  port: number;
  /** A libpq connection URL for the superuser `postgres`, database `postgres`. */
  url: string;
  /** Stops the server (immediate mode) and removes its directory; safe to call twice. */
  stop(): Promise<void>;
  /** Stops the server (fast mode: sessions are ended, committed data kept) for `startServer`. */
  stopServer(): Promise<void>;
  /** Starts the server stopped by `stopServer` again: same data, socket and URL. */
  startServer(): Promise<void>;
}

interface RunResult { stdout: string; stderr: string }

function run(argv: readonly string[], cwd: string, timeoutMs = 60_000): Promise<RunResult> {
  const [file, ...args] = argv as [string, ...string[]];
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) => {
      if (err !== null) {
        reject(new Error(`${argv.join(' ')} failed: ${err.message}\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`));
      } else {
        resolve({ stdout, stderr });
      }
    });
  });
}

/** Starts a fresh PostgreSQL 15 cluster; call `stop` when done (tests: `after(() => pg.stop())`). */
export async function startPostgres(): Promise<TestPostgres> {
  const root = isRoot();
  const asUser = root ? ['runuser', '-u', SERVER_USER, '--'] : [];
  const owner = root ? serverUser() : null;
  const dir = mkdtempSync(join(tmpdir(), 'pglog-pg-'));
  const dataDir = join(dir, 'data');
  const socketDir = join(dir, 'socket');
  const logFile = join(dir, 'server.log');
  const port = 5432;
  mkdirSync(socketDir);
  chmodSync(dir, 0o700);
  chmodSync(socketDir, 0o700);
  if (owner !== null) {
    chownSync(dir, owner.uid, owner.gid);
    chownSync(socketDir, owner.uid, owner.gid);
  }

  let started = false;
  let stopped = false;
  let running = false; // false between stopServer() and startServer()
  const pgCtl = (...args: string[]): string[] => [...asUser, `${PG_BIN}/pg_ctl`, '-D', dataDir, ...args];
  const stopSync = (): void => {
    if (!started || stopped || !running) return;
    const [file, ...args] = pgCtl('-m', 'immediate', 'stop') as [string, ...string[]];
    try {
      execFileSync(file, args, { cwd: dir, stdio: 'ignore' });
    } catch { /* already gone */ }
  };
  // Should the test process exit without running `after` hooks, do not leave a server behind.
  const onExit = (): void => { stopSync(); rmSync(dir, { recursive: true, force: true }); };
  process.once('exit', onExit);

  async function startServer(): Promise<void> {
    running = true;
    try {
      await run(pgCtl('-l', logFile, '-w', '-t', '60', 'start'), dir, 90_000);
    } catch (e) {
      let log = '';
      try { log = readFileSync(logFile, 'utf8'); } catch { /* no log written */ }
      throw new Error(`${(e as Error).message}\n--- server log ${logFile} ---\n${log}`, { cause: e });
    }
  }
  const stopServer = async (): Promise<void> => {
    if (!running || stopped) return;
    // Fast, not immediate: with synchronous_commit off, an immediate stop loses the last commits.
    await run(pgCtl('-m', 'fast', '-w', 'stop'), dir);
    running = false;
  };

  const stop = async (): Promise<void> => {
    if (stopped) return;
    process.removeListener('exit', onExit);
    try {
      if (started && running) await run(pgCtl('-m', 'immediate', '-w', 'stop'), dir);
    } finally {
      stopped = true;
      rmSync(dir, { recursive: true, force: true });
    }
  };

  try {
    await run([...asUser, `${PG_BIN}/initdb`, '-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'], dir);
    appendFileSync(join(dataDir, 'postgresql.conf'), [
      '',
      '# pglog test harness',
      "listen_addresses = ''",
      `unix_socket_directories = '${socketDir}'`,
      `port = ${port}`,
      'fsync = off',
      'synchronous_commit = off',
      'full_page_writes = off',
      'max_connections = 20',
      'shared_buffers = 16MB',
      '',
    ].join('\n'));
    started = true; // from here on a failed start may still have left a postmaster running
    await startServer();
  } catch (e) {
    await stop().catch(() => { /* the start error is the one to report */ });
    throw new Error(`startPostgres: could not start a test PostgreSQL in ${dir}: ${(e as Error).message}`, { cause: e });
  }

  const url = `postgresql://postgres@/postgres?host=${encodeURIComponent(socketDir)}&port=${port}`;
  return { socketDir, port, url, stop, stopServer, startServer };
}
