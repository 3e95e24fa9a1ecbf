/**
 * Versioned schema migrations for the store, applied at start-up (docs/store.md "Migrations").
 *
 * Migrations are the files `NNNN_name.sql` in `migrations/` (NNNN = version 1, 2, 3 ... with no
 * gaps). `migrate()` runs in ONE transaction under `pg_advisory_xact_lock(MIGRATION_LOCK_KEY)`,
 * so collectors starting together apply each migration exactly once and the others wait, then
 * find nothing to do. Applied versions are recorded in `pglog.schema_migrations` with a SHA-256
 * checksum of the file. It refuses to run (PglogError STORE_MIGRATION, nothing changed) when an
 * applied migration's file was edited, when the files are not numbered 1..N, or when the database is at a version newer
 * than the files (a newer pglog has migrated it). A migration whose SQL fails rolls back the
 * whole run; the error names the file, the line and the server's message. A store older than
 * PostgreSQL 14 is refused first (STORE_VERSION_UNSUPPORTED, store-version.ts).
 *
 * Reading the files (`readMigrations`) is kept apart from deciding what to do (`planMigrations`,
 * pure) and from talking to the server (`migrate`).
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { PglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

import { assertStoreVersion } from './store-version.ts';

/** `pg_advisory_xact_lock` key: the ASCII bytes of "pglogmig" as a big-endian int64 (0x70676c6f676d6967). */
export const MIGRATION_LOCK_KEY = 8099561680581519719n;

export const DEFAULT_MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));

const NAME_RE = /^(\d{4})_([a-z0-9][a-z0-9_]*)\.sql$/;

export interface MigrationFile {
  version: number;
  /** The part after `NNNN_`, without `.sql`. */
  name: string;
  /** The file name, e.g. `0001_initial.sql`. */
  file: string;
  sql: string;
  /** SHA-256 of the file's bytes, hex. */
  checksum: string;
}

/** A row of pglog.schema_migrations. */
export interface AppliedMigration {
  version: number;
  name: string;
  checksum: string;
}

export interface MigrationPlan {
  /** Migrations to apply, in order. */
  toApply: MigrationFile[];
  /** The version the database will be at once they are applied. */
  current: number;
}

export interface MigrateResult {
  /** File names applied by this call, in order (empty when the database was up to date). */
  applied: string[];
  current: number;
}

export function checksumOf(sql: string | Uint8Array): string {
  return createHash('sha256').update(sql).digest('hex');
}

/** Parses a migration file name; null for a name that is not `NNNN_name.sql`. */
export function parseMigrationName(file: string): { version: number; name: string } | null {
  const m = NAME_RE.exec(file);
  if (m === null) return null;
  const version = Number(m[1]);
  return version >= 1 ? { version, name: m[2] ?? '' } : null;
}

/**
 * Reads the migrations of a directory, sorted by version. Every `.sql` file must be named
 * `NNNN_name.sql` (other files, e.g. a README, are ignored).
 */
export async function readMigrations(dir: string): Promise<MigrationFile[]> {
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch (e) {
    throw new PglogError('STORE_MIGRATION', `cannot read the migrations directory ${dir}: ${(e as Error).message}`, { cause: e });
  }
  const out: MigrationFile[] = [];
  for (const file of entries.filter((f) => f.endsWith('.sql')).sort()) {
    const parsed = parseMigrationName(file);
    if (parsed === null) {
      throw new PglogError('STORE_MIGRATION', `migration file ${join(dir, file)}: the name must be NNNN_name.sql (NNNN from 0001, name of a-z, 0-9 and _)`);
    }
    const bytes = await readFile(join(dir, file));
    out.push({ ...parsed, file, sql: bytes.toString('utf8'), checksum: checksumOf(bytes) });
  }
  return out.sort((a, b) => a.version - b.version);
}

/**
 * Decides which migrations to apply, given the files (any order) and what the database has
 * recorded. Pure. Throws PglogError STORE_MIGRATION, naming the file, when the files are
 * not numbered 1..N without duplicates, when an applied migration's file differs from what was
 * applied, or when the database has a version newer than the newest file.
 */
export function planMigrations(files: readonly MigrationFile[], applied: readonly AppliedMigration[]): MigrationPlan {
  const sorted = [...files].sort((a, b) => a.version - b.version);
  sorted.forEach((f, i) => {
    if (f.version !== i + 1) {
      const prev = sorted[i - 1];
      const what =
        prev !== undefined && prev.version === f.version
          ? `has the same version as ${prev.file}`
          : `should have version ${String(i + 1).padStart(4, '0')} (migrations are numbered from 0001 without gaps)`;
      throw new PglogError('STORE_MIGRATION', `migration file ${f.file} ${what}`);
    }
  });
  const byVersion = new Map(sorted.map((f) => [f.version, f]));
  const newest = sorted.at(-1)?.version ?? 0;
  const appliedSorted = [...applied].sort((a, b) => a.version - b.version);
  for (const a of appliedSorted) {
    if (a.version > newest) {
      throw new PglogError(
        'STORE_MIGRATION',
        `the store is at schema version ${appliedSorted.at(-1)?.version ?? a.version} (migration ${a.version} ${a.name} applied), ` +
          `newer than this pglog's migrations (newest ${newest}): a newer pglog has migrated it; refusing to run an older one against it`,
      );
    }
    // Files are numbered 1..newest without gaps, so every applied version up to newest has one.
    const f = byVersion.get(a.version);
    if (f !== undefined && f.checksum !== a.checksum) {
      throw new PglogError(
        'STORE_MIGRATION',
        `migration file ${f.file} was changed after it was applied (checksum ${f.checksum} in the file, ${a.checksum} when applied): ` +
          'released migrations must never be edited; put the change into a new migration',
      );
    }
  }
  const done = new Set(appliedSorted.map((a) => a.version));
  return { toApply: sorted.filter((f) => !done.has(f.version)), current: newest };
}

/** 1-based line of a 1-based character position in `text`. */
function lineAt(text: string, position: number): number {
  return text.slice(0, Math.max(0, position - 1)).split('\n').length;
}

function describeServerError(e: unknown, sql: string): string {
  const err = e as Partial<pg.DatabaseError> & Error;
  let msg = err.message;
  if (typeof err.code === 'string') msg += ` (SQLSTATE ${err.code})`;
  const pos = Number(err.position);
  if (Number.isInteger(pos) && pos > 0) msg = `line ${lineAt(sql, pos)}: ${msg}`;
  return msg;
}

/**
 * Applies the migrations not yet applied, in one transaction under the advisory lock. The
 * client must not be inside a transaction. Returns the file names applied and the version the
 * store is at.
 */
export async function migrate(client: pg.ClientBase, options?: { migrationsDir?: string }): Promise<MigrateResult> {
  const files = await readMigrations(options?.migrationsDir ?? DEFAULT_MIGRATIONS_DIR);
  // Before anything is written: an older store fails a migration halfway (date_bin, 14+).
  await assertStoreVersion(client);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1::int8)', [MIGRATION_LOCK_KEY.toString()]);
    await client.query('CREATE SCHEMA IF NOT EXISTS pglog');
    await client.query(`CREATE TABLE IF NOT EXISTS pglog.schema_migrations (
      version    int4        PRIMARY KEY,
      name       text        NOT NULL,
      checksum   text        NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const res = await client.query<AppliedMigration>('SELECT version, name, checksum FROM pglog.schema_migrations ORDER BY version');
    const plan = planMigrations(files, res.rows);
    for (const m of plan.toApply) {
      try {
        await client.query(m.sql);
      } catch (e) {
        throw new PglogError('STORE_MIGRATION', `migration file ${m.file} failed, nothing was applied: ${describeServerError(e, m.sql)}`, { cause: e });
      }
      await client.query('INSERT INTO pglog.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [m.version, m.name, m.checksum]);
    }
    await client.query('COMMIT');
    return { applied: plan.toApply.map((m) => m.file), current: plan.current };
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {
      /* the connection may be gone; the error below is the one to report */
    });
    throw e;
  }
}
