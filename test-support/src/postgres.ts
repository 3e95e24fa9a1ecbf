// A real, throwaway PostgreSQL for tests (pg-cluster.ts: Debian's 15, or another major of the matrix): a fresh cluster in a temporary
// directory that listens only on a Unix socket there, run as the unprivileged server user
// when we are root.
import { migrate } from '@pglog/collector/store/migrate.ts';
import pg from 'pg';

import { type ClusterSpec, type PgMajor, startCluster } from './pg-cluster.ts';

export { PG_BIN, PG_MAJORS, type PgMajor } from './pg-cluster.ts';

export interface TestPostgres {
  /** The directory holding the server's socket: pass as `host` to pg. */
  socketDir: string;
  port: number;
  /** The server's major (15 unless asked for another). */
  major: PgMajor;
  /** A libpq connection URL for the superuser `postgres`, database `postgres`. */
  url: string;
  /** With `tcp`: the same over TCP, with the password (what a pod's collector is given). */
  tcpUrl: string | undefined;
  /** Stops the server (immediate mode) and removes its directory; safe to call twice. */
  stop(): Promise<void>;
  /** Stops the server (fast mode: sessions are ended, committed data kept) for `startServer`. */
  stopServer(): Promise<void>;
  /** Starts the server stopped by `stopServer` again: same data, socket and URL. */
  startServer(): Promise<void>;
}

/**
 * Starts a fresh PostgreSQL cluster (Debian's 15, or `major` from `make pg-matrix`); call `stop`
 * when done (tests: `after(() => pg.stop())`).
 */
export async function startPostgres(options: Pick<ClusterSpec, 'tcp' | 'settings' | 'major'> = {}): Promise<TestPostgres> {
  const cluster = await startCluster({ ...options, dirPrefix: 'pglog-pg-' }).catch((e: unknown) => {
    throw new Error(`startPostgres: ${(e as Error).message}`, { cause: e });
  });
  return {
    socketDir: cluster.socketDir,
    port: cluster.port,
    major: cluster.major,
    url: cluster.url,
    tcpUrl: cluster.tcpUrl,
    stop: () => cluster.dispose(),
    // Fast, not immediate: with synchronous_commit off, an immediate stop loses the last commits.
    stopServer: () => cluster.stop('fast'),
    startServer: () => cluster.start(),
  };
}

/** Creates (or upgrades) the pglog schema in the store at `url`, as the collector would at start. */
export async function migrateStore(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await migrate(client);
  } finally {
    await client.end();
  }
}
