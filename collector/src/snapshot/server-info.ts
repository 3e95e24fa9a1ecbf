/**
 * What the snapshot queries need to know about the server before they are built: its version
 * (the SQL differs by version), whether pg_stat_statements is installed in the session's
 * database, and what the monitoring role may do. One round trip, once per session.
 */
import { PglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

import { boolOf, intOf, textOf, textOrNull } from './pg-values.ts';

export interface ServerInfo {
  /** `server_version_num`, e.g. 150004. */
  versionNum: number;
  /** The session's database (`current_database()`): where pg_stat_statements must be installed. */
  database: string;
  /** The session's role (`current_user`). */
  username: string;
  /** `extversion` of pg_stat_statements in this database (e.g. '1.10'), null when not installed. */
  statStatementsVersion: string | null;
  /** Schema pg_stat_statements was created in (its view is read schema-qualified), null when not installed. */
  statStatementsSchema: string | null;
  /** The role is a superuser: the caller warns loudly (rolePrivilegeOf; pg_monitor is enough). */
  superuser: boolean;
  /**
   * The role can write data: a superuser or a member of pg_write_all_data (PostgreSQL 14+).
   * Snapshots run in READ ONLY transactions anyway; this is for a warning that the credential
   * is more powerful than it needs to be.
   */
  canWrite: boolean;
  /**
   * The role sees other roles' query texts (member of pg_read_all_stats, e.g. through
   * pg_monitor, or a superuser). Without it, other sessions' queries read `<insufficient
   * privilege>` and other roles' pg_stat_statements entries have no queryid (skipped).
   */
  readAllStats: boolean;
}

/**
 * Why the SQL role is more powerful than monitoring needs, as a stable code (the `reason`
 * label of pglog_sql_role_privileged, the reason of a PostgresTarget's SqlRole condition):
 * a superuser runs whatever a role of the monitored server gets it to run with every right,
 * up to the server's OS account (COPY ... TO PROGRAM is allowed in a read-only transaction);
 * a role that can write can be made to write. pg_monitor is all the snapshots need.
 */
export const SQL_ROLE_PRIVILEGES = ['SQL_ROLE_SUPERUSER', 'SQL_ROLE_CAN_WRITE'] as const;
export type SqlRolePrivilege = (typeof SQL_ROLE_PRIVILEGES)[number];

/** The strongest privilege of the role that monitoring does not need, or null (pg_monitor and the like). */
export function rolePrivilegeOf(info: Pick<ServerInfo, 'superuser' | 'canWrite'>): SqlRolePrivilege | null {
  if (info.superuser) return 'SQL_ROLE_SUPERUSER';
  return info.canWrite ? 'SQL_ROLE_CAN_WRITE' : null;
}

/** Oldest server the snapshot SQL supports: `backend_type` in pg_stat_activity and pg_read_all_stats are PostgreSQL 10. */
export const MIN_VERSION_NUM = 100000;

// Roles are looked up by name in pg_roles rather than with pg_has_role(..., 'name', ...), which
// raises an error on a server where the role does not exist (pg_write_all_data before 14).
export const SERVER_INFO_SQL = `
SELECT pg_catalog.current_setting('server_version_num')::int AS version_num,
       pg_catalog.current_database() AS database,
       r.rolname AS username,
       r.rolsuper AS superuser,
       r.rolsuper OR EXISTS (
         SELECT 1 FROM pg_catalog.pg_roles w
         WHERE w.rolname = 'pg_write_all_data' AND pg_catalog.pg_has_role(r.oid, w.oid, 'USAGE')
       ) AS can_write,
       r.rolsuper OR EXISTS (
         SELECT 1 FROM pg_catalog.pg_roles s
         WHERE s.rolname = 'pg_read_all_stats' AND pg_catalog.pg_has_role(r.oid, s.oid, 'USAGE')
       ) AS read_all_stats,
       e.extversion AS pgss_version,
       n.nspname AS pgss_schema
FROM pg_catalog.pg_roles r
LEFT JOIN (pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace)
  ON e.extname = 'pg_stat_statements'
WHERE r.rolname = current_user`;

/** Reads ServerInfo; throws SQL_QUERY_FAILED for a server older than PostgreSQL 10. */
export async function readServerInfo(client: pg.ClientBase): Promise<ServerInfo> {
  const result = await client.query<Record<string, unknown>>(SERVER_INFO_SQL);
  const row = result.rows[0];
  if (row === undefined) throw new PglogError('SQL_QUERY_FAILED', 'server info: the session role is not in pg_roles');
  const info: ServerInfo = {
    versionNum: intOf(row, 'version_num'),
    database: textOf(row, 'database'),
    username: textOf(row, 'username'),
    statStatementsVersion: textOrNull(row, 'pgss_version'),
    statStatementsSchema: textOrNull(row, 'pgss_schema'),
    superuser: boolOf(row, 'superuser'),
    canWrite: boolOf(row, 'can_write'),
    readAllStats: boolOf(row, 'read_all_stats'),
  };
  assertSupported(info.versionNum);
  return info;
}

export function assertSupported(versionNum: number): void {
  if (versionNum < MIN_VERSION_NUM) {
    throw new PglogError('SQL_QUERY_FAILED', `PostgreSQL ${versionNum} is older than 10, the oldest version pglog snapshots support`);
  }
}

/** A quoted SQL identifier (a schema name from the catalog, put into SQL text). */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
