// A throwaway PostgreSQL cluster (Debian's 15, or any major 10 to 18: pg-binaries.ts) in a
// temporary directory, listening only on a Unix socket there (no TCP port, so parallel test
// files never collide). PostgreSQL refuses to run as
// root, so as root (here and in CI) it runs as the unprivileged server user (server-user.ts).
// postgres.ts (a plain server for store tests) and log-server.ts (a monitored server that logs
// like production) are both built on this.
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import pg from 'pg';

import { onProcessExit } from './exit-cleanup.ts';
import { pgBinaries, type PgMajor } from './pg-binaries.ts';
import { isRoot, serverUser } from './server-user.ts';
import { freePort } from './wait.ts';

export { PG_BIN, PG_MAJORS, type PgMajor } from './pg-binaries.ts';

export interface ClusterSpec {
  /** Name prefix of the temporary directory. */
  dirPrefix: string;
  /** Who runs the server; default: the server user as root, else the current user (null). */
  owner?: { uid: number; gid: number } | null;
  /** Lines appended to postgresql.conf. */
  settings?: string[];
  /** The server's major, 10 to 18, from `make pg-matrix`; default: Debian's PostgreSQL 15. */
  major?: PgMajor;
  /**
   * Also listen on TCP at this address (a free port of it) for clients of `clientRange` (a
   * CIDR), who log in as `postgres` with a password (scram-sha-256): the store that a real
   * node's pods reach. Default: the Unix socket only.
   */
  tcp?: { address: string; clientRange: string };
}

export interface Cluster {
  /** The cluster's private directory (data, socket, startup log). */
  readonly dir: string;
  readonly dataDir: string;
  readonly socketDir: string;
  readonly port: number;
  /** The server's major and the directory of its initdb, pg_ctl and postgres. */
  readonly major: PgMajor;
  readonly bin: string;
  /** A libpq connection URL for the superuser `postgres`, database `postgres`. */
  readonly url: string;
  urlFor(database: string): string;
  /** With `tcp`: the URL over TCP, password included (database `postgres`). */
  readonly tcpUrl: string | undefined;
  /** Starts the (stopped) server: same data, socket and URL. */
  start(): Promise<void>;
  /** Stops the server if it runs; `immediate` is like a crash. */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  /** Runs pg_ctl as the server's owner with these arguments (after -D). */
  pgCtl(args: string[]): Promise<void>;
  /** Stops the server (immediate) and removes the directory; safe to call twice. */
  dispose(): Promise<void>;
}

interface Owner {
  uid: number;
  gid: number;
}

function run(argv: readonly string[], cwd: string, owner: Owner | null, timeoutMs = 60_000): Promise<void> {
  const [file, ...args] = argv as [string, ...string[]];
  const ids = owner === null ? {} : { uid: owner.uid, gid: owner.gid };
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, timeout: timeoutMs, encoding: 'utf8', ...ids }, (err, stdout, stderr) => {
      if (err !== null) {
        reject(new Error(`${argv.join(' ')} failed: ${err.message}\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`));
      } else {
        resolve();
      }
    });
  });
}

/** Creates a fresh cluster (initdb, UTF8, locale C, trust) and starts it. */
export async function startCluster(spec: ClusterSpec): Promise<Cluster> {
  const owner: Owner | null = spec.owner !== undefined ? spec.owner : isRoot() ? serverUser() : null;
  const { bin, major } = pgBinaries(spec.major, owner);
  const dir = mkdtempSync(join(tmpdir(), spec.dirPrefix));
  const dataDir = join(dir, 'data');
  const socketDir = join(dir, 'socket');
  const startupLog = join(dir, 'server.log');
  // The Unix socket's name carries the port; over TCP it must be free on the address.
  const port = spec.tcp === undefined ? 5432 : await freePort(spec.tcp.address);
  const password = randomBytes(18).toString('base64url');
  mkdirSync(socketDir);
  chmodSync(dir, 0o700);
  chmodSync(socketDir, 0o700);
  if (owner !== null) {
    chownSync(dir, owner.uid, owner.gid);
    chownSync(socketDir, owner.uid, owner.gid);
  }

  let initialized = false; // from then on a failed start may still have left a postmaster running
  let running = false;
  let disposed = false;
  const pgCtlArgv = (args: string[]): string[] => [`${bin}/pg_ctl`, '-D', dataDir, ...args];
  const pgCtl = (args: string[]): Promise<void> => run(pgCtlArgv(args), dir, owner);

  // Should the test process exit without running `after` hooks, do not leave a server behind.
  const onExit = (): void => {
    if (initialized && running) {
      const [file, ...args] = pgCtlArgv(['-m', 'immediate', 'stop']) as [string, ...string[]];
      try {
        execFileSync(file, args, { cwd: dir, stdio: 'ignore', ...(owner ?? {}) });
      } catch {
        /* already gone */
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const unregisterExit = onProcessExit(onExit);

  const start = async (): Promise<void> => {
    if (disposed) throw new Error(`the PostgreSQL in ${dir} was disposed`);
    running = true;
    try {
      await run(pgCtlArgv(['-l', startupLog, '-w', '-t', '60', 'start']), dir, owner, 90_000);
    } catch (e) {
      let log = '';
      try {
        log = readFileSync(startupLog, 'utf8');
      } catch {
        /* no log written */
      }
      throw new Error(`${(e as Error).message}\n--- server log ${startupLog} ---\n${log}`, { cause: e });
    }
  };
  const stop = async (mode: 'immediate' | 'fast' = 'immediate'): Promise<void> => {
    if (!running || disposed) return;
    await pgCtl(['-m', mode, '-w', 'stop']);
    running = false;
  };
  const dispose = async (): Promise<void> => {
    if (disposed) return;
    unregisterExit();
    try {
      if (initialized && running) await pgCtl(['-m', 'immediate', '-w', 'stop']);
    } finally {
      disposed = true;
      rmSync(dir, { recursive: true, force: true });
    }
  };

  try {
    // --no-instructions is 14+; before it initdb only prints more.
    const quiet = major >= 14 ? ['--no-instructions'] : [];
    await run([`${bin}/initdb`, '-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync', ...quiet], dir, owner);
    if (spec.tcp !== undefined) {
      appendFileSync(join(dataDir, 'pg_hba.conf'), `host all postgres ${spec.tcp.clientRange} scram-sha-256\n`);
    }
    appendFileSync(
      join(dataDir, 'postgresql.conf'),
      [
        '',
        '# pglog test harness',
        `listen_addresses = '${spec.tcp?.address ?? ''}'`,
        `unix_socket_directories = '${socketDir}'`,
        `port = ${port}`,
        'fsync = off',
        'synchronous_commit = off',
        'full_page_writes = off',
        'max_connections = 20',
        'shared_buffers = 16MB',
        // The default before 14 is md5, which a scram-sha-256 pg_hba line refuses.
        ...(spec.tcp !== undefined ? ["password_encryption = 'scram-sha-256'"] : []),
        ...(spec.settings ?? []),
        '',
      ].join('\n'),
    );
    initialized = true;
    await start();
    if (spec.tcp !== undefined) {
      // Through the socket with the pg client: the matrix's servers come without psql.
      const client = new pg.Client({ host: socketDir, port, user: 'postgres', database: 'postgres' });
      await client.connect();
      try {
        await client.query(`ALTER ROLE postgres PASSWORD '${password}'`);
      } finally {
        await client.end();
      }
    }
  } catch (e) {
    await dispose().catch(() => {
      /* the start error is the one to report */
    });
    throw new Error(`could not start a test PostgreSQL in ${dir}: ${(e as Error).message}`, { cause: e });
  }

  const urlFor = (database: string): string => `postgresql://postgres@/${encodeURIComponent(database)}?host=${encodeURIComponent(socketDir)}&port=${port}`;
  const tcpUrl = spec.tcp === undefined ? undefined : `postgresql://postgres:${password}@${spec.tcp.address}:${port}/postgres`;
  return { dir, dataDir, socketDir, port, major, bin, url: urlFor('postgres'), urlFor, tcpUrl, start, stop, pgCtl, dispose };
}
