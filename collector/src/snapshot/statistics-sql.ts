/**
 * The SQL text of a statistics sample, built from ServerInfo (pure, unit-tested per version).
 * Each statement returns at least one row: statement_timestamp() LEFT JOINed to the rows.
 *
 * pg_stat_statements' columns follow the version of the extension installed in the database
 * (its SQL objects), not the server's: a database upgraded without ALTER EXTENSION ... UPDATE
 * keeps the old view. So: `total_exec_time` from 1.8 (PostgreSQL 13; `total_time` before),
 * `toplevel` and `pg_stat_statements_info` from 1.9 (PostgreSQL 14). The view is read
 * schema-qualified in the schema the extension was created in (it need not be on the
 * search_path). Entries without a queryid (other roles' entries when the role lacks
 * pg_read_all_stats) cannot be keyed and are left out.
 *
 * The texts are bounded on the server (statement-texts.ts, security review R2): each cut to
 * its first textChars() characters, and past the sample's bound (a running total over the
 * texts, shortest first) NULL, so a flood of long texts never crosses the wire. Each row says
 * whether its text was cut (`query_cut`) or dropped (`query_dropped`) and how long it was
 * (`query_bytes`).
 */
import { PglogError } from '@pglog/common/errors.ts';

import type { ServerInfo } from './server-info.ts';
import { assertSupported, quoteIdent } from './server-info.ts';
import { checkTextBounds, DEFAULT_STATEMENT_TEXT_BOUNDS, type StatementTextBounds, textChars } from './statement-texts.ts';

/** The extension version as [major, minor] ('1.10' → [1, 10]); [0, 0] when unparsable. */
export function extensionVersion(text: string): [number, number] {
  const m = /^(\d+)\.(\d+)/.exec(text);
  return m === null ? [0, 0] : [Number(m[1]), Number(m[2])];
}

function atLeast(version: [number, number], major: number, minor: number): boolean {
  return version[0] > major || (version[0] === major && version[1] >= minor);
}

/** Why the statements cannot be read, and how to fix it. */
export function statementsMissingError(info: ServerInfo): PglogError {
  return new PglogError(
    'SQL_QUERY_FAILED',
    `pg_stat_statements is not installed in database "${info.database}": run CREATE EXTENSION pg_stat_statements; ` +
      `in database "${info.database}" as a superuser (the server also needs shared_preload_libraries = 'pg_stat_statements' ` +
      'in postgresql.conf and a restart), or turn off collect.statements',
  );
}

/**
 * The pg_stat_statements statement for `info`, its texts within `bounds`; throws
 * SQL_QUERY_FAILED when the extension is not installed (RangeError for bounds out of range).
 */
export function statementsSql(info: ServerInfo, bounds: StatementTextBounds = DEFAULT_STATEMENT_TEXT_BOUNDS): string {
  assertSupported(info.versionNum);
  if (info.statStatementsVersion === null || info.statStatementsSchema === null) throw statementsMissingError(info);
  checkTextBounds(bounds); // safe integers: they are written into the text
  const version = extensionVersion(info.statStatementsVersion);
  const schema = quoteIdent(info.statStatementsSchema);
  const totalTime = atLeast(version, 1, 8) ? 'p.total_exec_time' : 'p.total_time';
  const toplevel = atLeast(version, 1, 9) ? 'p.toplevel' : 'true';
  const reset = atLeast(version, 1, 9) ? `(SELECT i.stats_reset FROM ${schema}.pg_stat_statements_info i)` : 'NULL::timestamptz';
  const chars = textChars(bounds);
  const cap = `${bounds.maxSampleTextBytes}::int8`; // compared with sum(), an int8
  // c: the entries, texts cut; s: the running total of their texts, shortest first (ties in key
  // order, so a row's total is the same for every run over the same entries).
  return `SELECT t.ts, ${reset} AS statements_reset, p.*
FROM (SELECT pg_catalog.statement_timestamp() AS ts) t
LEFT JOIN (
  SELECT s.userid, s.dbid, s.queryid, s.toplevel, s.calls, s.total_exec_ms, s.rows,
         s.shared_blks_hit, s.shared_blks_read, s.temp_blks_written, s.username, s.database,
         CASE WHEN s.text_total <= ${cap} THEN s.query END AS query,
         s.query_cut, s.query IS NOT NULL AND s.text_total > ${cap} AS query_dropped, s.query_bytes
  FROM (
    SELECT c.*, pg_catalog.sum(pg_catalog.octet_length(c.query))
             OVER (ORDER BY pg_catalog.octet_length(c.query), c.userid, c.dbid, c.queryid, c.toplevel ROWS UNBOUNDED PRECEDING) AS text_total
    FROM (
      SELECT p.userid, p.dbid, p.queryid, ${toplevel} AS toplevel,
             p.calls, ${totalTime} AS total_exec_ms, p.rows, p.shared_blks_hit, p.shared_blks_read, p.temp_blks_written,
             pg_catalog.left(p.query, ${chars}) AS query, pg_catalog.length(p.query) > ${chars} AS query_cut,
             pg_catalog.octet_length(p.query) AS query_bytes,
             r.rolname::text AS username, d.datname::text AS database
      FROM ${schema}.pg_stat_statements p
      LEFT JOIN pg_catalog.pg_roles r ON r.oid = p.userid
      LEFT JOIN pg_catalog.pg_database d ON d.oid = p.dbid
      WHERE p.queryid IS NOT NULL
    ) c
  ) s
) p ON true`;
}

/** The time alone, when a statistics sample reads neither statements nor databases. */
export const TIMESTAMP_SQL = 'SELECT pg_catalog.statement_timestamp() AS ts';

/** The pg_stat_database statement (the same on every supported version; the shared-objects row, datname NULL, is left out). */
export function databasesSql(versionNum: number): string {
  assertSupported(versionNum);
  return `SELECT t.ts, d.*
FROM (SELECT pg_catalog.statement_timestamp() AS ts) t
LEFT JOIN (
  SELECT s.datname::text AS database, s.numbackends AS backends,
         s.xact_commit, s.xact_rollback, s.blks_read, s.blks_hit,
         s.tup_returned, s.tup_fetched, s.tup_inserted, s.tup_updated, s.tup_deleted,
         s.conflicts, s.temp_files, s.temp_bytes, s.deadlocks, s.stats_reset
  FROM pg_catalog.pg_stat_database s
  WHERE s.datname IS NOT NULL
) d ON true
ORDER BY d.database`;
}
