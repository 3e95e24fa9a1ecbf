// Every SQL text the collector runs on a monitored server, for the tests that check them all
// (the static audit in snapshot-sql-audit.test.ts, the hostile-schema test on a real server):
// the server-info query, the activity statement of each option set, the statistics
// statements, and the transaction control of SqlSession.
import { activitySql } from '../../src/snapshot/activity-sql.ts';
import type { ServerInfo } from '../../src/snapshot/server-info.ts';
import { SERVER_INFO_SQL } from '../../src/snapshot/server-info.ts';
import { databasesSql, statementsSql, TIMESTAMP_SQL } from '../../src/snapshot/statistics-sql.ts';

export interface NamedSql {
  name: string;
  sql: string;
}

/** Each option set of the activity statement (collect.activity / collect.locks). */
export const ACTIVITY_OPTION_SETS = [
  { sessions: true, locks: true },
  { sessions: false, locks: true },
  { sessions: true, locks: false },
] as const;

/** The statements of `info`'s server; pg_stat_statements' only when it is installed. */
export function everyMonitoringSql(info: ServerInfo): NamedSql[] {
  const texts: NamedSql[] = [{ name: 'server info', sql: SERVER_INFO_SQL }];
  for (const options of ACTIVITY_OPTION_SETS) {
    texts.push({ name: `activity ${JSON.stringify(options)} (${info.versionNum})`, sql: activitySql(info.versionNum, options) });
  }
  if (info.statStatementsVersion !== null) texts.push({ name: `statements ${info.statStatementsVersion}`, sql: statementsSql(info) });
  texts.push({ name: 'databases', sql: databasesSql(info.versionNum) });
  texts.push({ name: 'timestamp', sql: TIMESTAMP_SQL });
  return texts;
}

/** A ServerInfo for building the texts without a server. */
export function infoFor(versionNum: number, statStatementsVersion: string | null, statStatementsSchema = 'public'): ServerInfo {
  return {
    versionNum,
    database: 'postgres',
    username: 'pglog_monitor',
    statStatementsVersion,
    statStatementsSchema: statStatementsVersion === null ? null : statStatementsSchema,
    superuser: false,
    canWrite: false,
    readAllStats: true,
  };
}
