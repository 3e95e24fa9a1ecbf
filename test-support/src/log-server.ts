// A PostgreSQL (Debian's 15, or any major 10 to 18 of `make pg-matrix`) that logs like a
// monitored production server: the logging collector writes every statement
// (log_min_duration_statement = 0) into files under <data>/log, rotated by PostgreSQL itself by
// size, age or `pg_ctl logrotate`. As root it runs as the same user the
// test sshd logs in as (sshd.ts), so a remote command reads its logs like a monitoring account.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import pg from 'pg';

import { type PgMajor, startCluster } from './pg-cluster.ts';

export interface LogServerOptions {
  /** The server's major, 10 to 18 (pg-binaries.ts); default: Debian's PostgreSQL 15. */
  major?: PgMajor;
  /** log_destination; default stderr (jsonlog: 15+). */
  logFormat?: LogFormat;
  /** Several destinations at once instead (one file each, same events): the version matrix. */
  logFormats?: LogFormat[];
  /** Default '%m [%p] %q%u@%d '. */
  logLinePrefix?: string;
  /** Default 'postgresql-%Y-%m-%d_%H%M%S.log'; a fixed name such as 'postgresql.log' for logrotate tests. */
  logFilename?: string;
  /** log_rotation_size in kB; default 0 (off). */
  logRotationSizeKb?: number;
  /** log_rotation_age in minutes; default 0 (off). */
  logRotationAgeMin?: number;
  /** Who runs it; default: the test server user when root, else the current user. */
  owner?: { uid: number; gid: number } | null;
  /** Extra databases, created from template0 with LC_COLLATE/LC_CTYPE C. */
  databases?: Array<{ name: string; encoding: string }>;
  /** More postgresql.conf lines (e.g. shared_preload_libraries). */
  settings?: string[];
}

export type LogFormat = 'stderr' | 'csvlog' | 'jsonlog';

export interface LogServer {
  /** The server's major. */
  readonly major: PgMajor;
  /** Absolute. */
  readonly dataDirectory: string;
  /** Absolute: log_directory 'log' inside the data directory. */
  readonly logDirectory: string;
  readonly socketDir: string;
  readonly port: number;
  /** Superuser URL over the Unix socket, database postgres. */
  readonly url: string;
  urlFor(database: string): string;
  /** All regular files currently in logDirectory (absolute paths, sorted; not its subdirectories). */
  logFiles(): string[];
  /** pg_ctl logrotate; with time escapes in log_filename it waits until PostgreSQL writes a new file. */
  rotate(): Promise<void>;
  /** Stops it (fast: sessions end, everything logged so far is in the files). */
  stop(): Promise<void>;
  /** Starts it again: same data, logs, socket and URL. */
  start(): Promise<void>;
  /** Stops (immediate) and removes the directory; idempotent; also runs on process 'exit'. */
  dispose(): Promise<void>;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A single-quoted postgresql.conf string. */
function confString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

export async function startLogServer(options: LogServerOptions = {}): Promise<LogServer> {
  const logFilename = options.logFilename ?? 'postgresql-%Y-%m-%d_%H%M%S.log';
  const formats = options.logFormats ?? [options.logFormat ?? 'stderr'];
  if (formats.includes('jsonlog') && (options.major ?? 15) < 15) {
    throw new Error(`startLogServer: jsonlog is PostgreSQL 15+, asked of PostgreSQL ${options.major}`);
  }
  const cluster = await startCluster({
    dirPrefix: 'pglog-logpg-',
    ...(options.major !== undefined ? { major: options.major } : {}),
    ...(options.owner !== undefined ? { owner: options.owner } : {}),
    settings: [
      'logging_collector = on',
      `log_destination = ${confString(formats.join(','))}`,
      "log_directory = 'log'",
      `log_filename = ${confString(logFilename)}`,
      // Group-readable like a packaged server's logs (the monitoring account may be in the group).
      'log_file_mode = 0640',
      `log_rotation_size = ${options.logRotationSizeKb ?? 0}`,
      `log_rotation_age = ${options.logRotationAgeMin ?? 0}`,
      'log_truncate_on_rotation = off',
      'log_min_duration_statement = 0',
      `log_line_prefix = ${confString(options.logLinePrefix ?? '%m [%p] %q%u@%d ')}`,
      "lc_messages = 'C'",
      "log_timezone = 'UTC'",
      ...(options.settings ?? []),
    ],
  }).catch((e: unknown) => {
    throw new Error(`startLogServer: ${(e as Error).message}`, { cause: e });
  });
  const dataDirectory = cluster.dataDir;
  const logDirectory = join(dataDirectory, 'log');

  try {
    if ((options.databases ?? []).length > 0) {
      const client = new pg.Client({ connectionString: cluster.url });
      await client.connect();
      try {
        for (const db of options.databases ?? []) {
          await client.query(`CREATE DATABASE ${quoteIdent(db.name)} TEMPLATE template0 ENCODING ${confString(db.encoding)} LC_COLLATE 'C' LC_CTYPE 'C'`);
        }
      } finally {
        await client.end();
      }
    }
  } catch (e) {
    await cluster.dispose().catch(() => {
      /* the first error is the one to report */
    });
    throw new Error(`startLogServer: creating databases in ${cluster.dir}: ${(e as Error).message}`, { cause: e });
  }

  const logFiles = (): string[] => {
    try {
      return readdirSync(logDirectory, { withFileTypes: true })
        .filter((entry) => entry.isFile())
        .map((entry) => join(logDirectory, entry.name))
        .sort();
    } catch {
      return [];
    }
  };
  /** current_logfiles: which file each destination writes now (PostgreSQL keeps it up to date). */
  const currentLogfiles = (): string => {
    try {
      return readFileSync(join(dataDirectory, 'current_logfiles'), 'utf8');
    } catch {
      return '';
    }
  };

  // pg_ctl logrotate is 12+; before it the superuser asks with pg_rotate_logfile().
  const signalRotate = async (): Promise<void> => {
    if (cluster.major >= 12) return cluster.pgCtl(['logrotate']);
    const client = new pg.Client({ connectionString: cluster.url });
    await client.connect();
    try {
      await client.query('SELECT pg_rotate_logfile()');
    } finally {
      await client.end();
    }
  };
  const rotate = async (): Promise<void> => {
    const timeNamed = logFilename.includes('%');
    const before = currentLogfiles();
    // A name with second resolution repeats within a second (PostgreSQL then appends to the
    // same file): signal again until the name changes, bounded.
    for (let attempt = 0; attempt < 10; attempt++) {
      await signalRotate();
      for (let waited = 0; waited < 1500; waited += 50) {
        const now = currentLogfiles();
        const reopened =
          now.length > 0 &&
          now
            .split('\n')
            .filter((l) => l.length > 0)
            .every((line) => existsSync(join(dataDirectory, line.slice(line.indexOf(' ') + 1))));
        if (timeNamed ? now !== before && now !== '' : reopened) return;
        await sleep(50);
      }
      if (!timeNamed) break;
    }
    throw new Error(`log server ${dataDirectory}: pg_ctl logrotate did not produce a new log file (current_logfiles: ${JSON.stringify(currentLogfiles())})`);
  };

  return {
    major: cluster.major,
    dataDirectory,
    logDirectory,
    socketDir: cluster.socketDir,
    port: cluster.port,
    url: cluster.url,
    urlFor: (database: string) => cluster.urlFor(database),
    logFiles,
    rotate,
    stop: () => cluster.stop('fast'),
    start: () => cluster.start(),
    dispose: () => cluster.dispose(),
  };
}
