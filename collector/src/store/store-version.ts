/**
 * Which PostgreSQL majors pglog's store runs on (docs/decisions/0033-supported-postgresql-majors.md):
 * 14 and newer. The migrations and the report use date_bin() (14+: migration 0006's statement
 * rollup, the report's rollup queries), and a released migration is never edited (migrate.ts
 * refuses one whose checksum changed), so an older store cannot be made to work; it is refused
 * before any migration runs, by its server_version_num, with a message naming its version and
 * the minimum, as a lasting failure that retrying cannot fix (collect/store-lifecycle.ts).
 */
import { PglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

/** The oldest store major (server_version_num 140000: PostgreSQL 14.0). */
export const MIN_STORE_VERSION_NUM = 140000;
/** The newest major the store is tested on (the version matrix, docs/postgresql-versions.md). */
export const NEWEST_TESTED_STORE_MAJOR = 18;

/** `server_version_num` as the major (10 onwards: the first two digits of six). */
export function majorOf(versionNum: number): number {
  return Math.floor(versionNum / 10000);
}

/** Throws STORE_VERSION_UNSUPPORTED for a store older than MIN_STORE_VERSION_NUM (pure). */
export function checkStoreVersion(versionNum: number, versionText: string): void {
  if (!Number.isSafeInteger(versionNum) || versionNum <= 0) {
    throw new PglogError(
      'STORE_VERSION_UNSUPPORTED',
      `the store did not report its version (server_version_num ${JSON.stringify(versionText)}): it is not a PostgreSQL pglog can use`,
    );
  }
  if (versionNum < MIN_STORE_VERSION_NUM) {
    throw new PglogError(
      'STORE_VERSION_UNSUPPORTED',
      `the store runs PostgreSQL ${versionText} (server_version_num ${versionNum}); pglog's store needs PostgreSQL ${majorOf(MIN_STORE_VERSION_NUM)} or newer ` +
        `(tested up to ${NEWEST_TESTED_STORE_MAJOR}): use a store server of PostgreSQL ${majorOf(MIN_STORE_VERSION_NUM)} to ${NEWEST_TESTED_STORE_MAJOR}. ` +
        'Monitored servers may be older (10 and newer): only the store has this minimum',
    );
  }
}

/** Reads the store's version and refuses one pglog cannot use; returns server_version_num. */
export async function assertStoreVersion(client: pg.ClientBase): Promise<number> {
  const res = await client.query<{ num: string; text: string }>(
    "SELECT pg_catalog.current_setting('server_version_num') AS num, pg_catalog.current_setting('server_version') AS text",
  );
  const row = res.rows[0];
  const num = Number(row?.num);
  checkStoreVersion(num, row?.text ?? String(row?.num));
  return num;
}
