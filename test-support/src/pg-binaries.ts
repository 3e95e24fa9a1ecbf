// Where a test PostgreSQL's programs are: Debian's PostgreSQL 15 (`make system-deps`) by default,
// or a server of any major 10 to 18 from the version matrix `make pg-matrix` installs under
// ~/.cache/pglog/pg/<major> (scripts/install-pg-matrix.sh). As root the server runs as the
// unprivileged server user, who cannot enter root's home: the matrix is then run from a
// hard-linked view of it in the temporary directory (no copy on the same file system).
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

/** Debian's PostgreSQL 15: initdb, pg_ctl, postgres, psql, pgbench. */
export const PG_BIN = '/usr/lib/postgresql/15/bin';

/** The majors `make pg-matrix` installs, oldest first. */
export const PG_MAJORS = [10, 11, 12, 13, 14, 15, 16, 17, 18] as const;
export type PgMajor = (typeof PG_MAJORS)[number];

/** pg_stat_statements' version as CREATE EXTENSION makes it on each major (its default_version). */
export const PG_STAT_STATEMENTS_VERSION: Record<PgMajor, string> = {
  10: '1.6',
  11: '1.6',
  12: '1.7',
  13: '1.8',
  14: '1.9',
  15: '1.10',
  16: '1.10',
  17: '1.11',
  18: '1.12',
};

export interface PgBinaries {
  /** The directory holding initdb, pg_ctl and postgres (psql and pgbench only in Debian's). */
  bin: string;
  /** Its major version. */
  major: PgMajor;
  /** Whether psql is there (Debian's only): callers use the pg client otherwise. */
  hasPsql: boolean;
}

interface Owner {
  uid: number;
  gid: number;
}

/** The root of the matrix: PGLOG_PG_MATRIX (the Makefile's TEST_ENV), else ~/.cache/pglog/pg. */
export function pgMatrixRoot(): string {
  return process.env['PGLOG_PG_MATRIX'] ?? join(process.env['PGLOG_CACHE'] ?? join(homedir(), '.cache/pglog'), 'pg');
}

/** Whether `make pg-matrix` has installed this major (for a test that reports what it skipped). */
export function hasPgMajor(major: PgMajor): boolean {
  return existsSync(join(pgMatrixRoot(), String(major), 'bin', 'postgres'));
}

function canExecute(file: string, owner: Owner): boolean {
  try {
    execFileSync('test', ['-x', file], { stdio: 'ignore', uid: owner.uid, gid: owner.gid });
    return true;
  } catch {
    return false;
  }
}

/** A hard-linked (else copied) view of `installed` that every user can enter, shared by all test processes. */
function sharedView(installed: string, version: string): string {
  const view = join(tmpdir(), `pglog-pgbin-${version}`);
  const stamp = (dir: string): string => {
    try {
      return readFileSync(join(dir, '.version'), 'utf8').trim();
    } catch {
      return '';
    }
  };
  if (stamp(view) === version) return view;
  const staging = mkdtempSync(`${view}.staging-`);
  try {
    try {
      execFileSync('cp', ['-al', `${installed}/.`, staging], { stdio: 'ignore' });
    } catch {
      // Another file system (a tmpfs /tmp): a real copy, about 60 MB.
      execFileSync('find', [staging, '-mindepth', '1', '-delete'], { stdio: 'ignore' });
      execFileSync('cp', ['-a', `${installed}/.`, staging], { stdio: 'ignore' });
    }
    chmodSync(staging, 0o755);
    if (stamp(view) === version) {
      // Another test process made it meanwhile (and may be using it): keep that one.
      rmSync(staging, { recursive: true, force: true });
      return view;
    }
    rmSync(view, { recursive: true, force: true }); // a stale one (another version's files)
    renameSync(staging, view);
  } catch (e) {
    rmSync(staging, { recursive: true, force: true });
    // Another test process made the same view at the same moment.
    if (stamp(view) === version) return view;
    throw new Error(`cannot make ${installed} reachable for the test server user in ${view}: ${(e as Error).message}`, { cause: e });
  }
  return view;
}

/**
 * The programs of PostgreSQL `major` (default: Debian's 15), runnable by `owner` (the user the
 * server runs as; null: this process's user). Throws, naming `make pg-matrix`, when that major
 * is not installed.
 */
export function pgBinaries(major: PgMajor | undefined, owner: Owner | null): PgBinaries {
  if (major === undefined) return { bin: PG_BIN, major: 15, hasPsql: true };
  const installed = join(pgMatrixRoot(), String(major));
  let version = '';
  try {
    version = readFileSync(join(installed, '.version'), 'utf8').trim();
  } catch {
    /* reported below */
  }
  if (version === '' || !existsSync(join(installed, 'bin', 'postgres'))) {
    throw new Error(`PostgreSQL ${major} is not installed in ${installed}: run \`make pg-matrix\` (it installs every major 10 to 18 once)`);
  }
  const dir = owner === null || canExecute(join(installed, 'bin', 'postgres'), owner) ? installed : sharedView(installed, version);
  return { bin: join(dir, 'bin'), major, hasPsql: false };
}
