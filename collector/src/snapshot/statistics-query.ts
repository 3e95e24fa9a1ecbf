/**
 * readStatistics: one sample of the cumulative statistics on a session the caller has put
 * into a READ ONLY transaction. The SQL is statistics-sql.ts; this maps its rows. Deltas
 * between two samples are deltas.ts.
 */
import { PglogError } from '@pglog/common/errors.ts';
import { sqlStateOf } from '@pglog/common/errors.ts';
import type pg from 'pg';

import type { Row } from './pg-values.ts';
import { bigintOf, boolOf, dateOf, dateOrNull, floatOf, intOf, intOrNull, textOf, textOrNull } from './pg-values.ts';
import type { ServerInfo } from './server-info.ts';
import { boundTexts, DEFAULT_STATEMENT_TEXT_BOUNDS, type ServerText, type StatementTextBounds, type TextCounts } from './statement-texts.ts';
import { DATABASE_COUNTERS, type DatabaseCounters, STATEMENT_COUNTERS, type StatementCounters, type StatisticsSample } from './statistics-sample.ts';
import { databasesSql, statementsSql, TIMESTAMP_SQL } from './statistics-sql.ts';

export type { DatabaseCounters, StatementCounters, StatisticsSample } from './statistics-sample.ts';

export interface StatisticsOptions {
  statements: boolean;
  databases: boolean;
  /** Bounds on the pg_stat_statements texts (statement-texts.ts); default: the store's bound on a text, 16 MiB a sample. */
  textBounds?: StatementTextBounds;
}

/** Each counter with the column the statistics SQL returns it in: its name in snake_case (xactCommit: xact_commit). */
function countersWithColumns<K extends string>(counters: readonly K[]): (readonly [K, string])[] {
  return counters.map((c) => [c, c.replace(/[A-Z]/g, (upper) => `_${upper.toLowerCase()}`)] as const);
}

const STATEMENT_COLUMNS = countersWithColumns(STATEMENT_COUNTERS);
const DATABASE_COLUMNS = countersWithColumns(DATABASE_COUNTERS);

/** The bigint counters of a row. */
function countersOf<K extends string>(row: Row, columns: readonly (readonly [K, string])[]): Record<K, bigint> {
  return Object.fromEntries(columns.map(([counter, column]) => [counter, bigintOf(row, column)])) as Record<K, bigint>;
}

function statementOf(row: Row, text: ServerText): StatementCounters {
  const statement: StatementCounters = {
    userId: intOf(row, 'userid'),
    dbId: intOf(row, 'dbid'),
    queryId: bigintOf(row, 'queryid'),
    toplevel: boolOf(row, 'toplevel'),
    username: textOrNull(row, 'username'),
    database: textOrNull(row, 'database'),
    query: text.text,
    totalExecMs: floatOf(row, 'total_exec_ms'),
    ...countersOf(row, STATEMENT_COLUMNS),
  };
  if (text.cut !== null) statement.textCut = text.cut; // absent when whole, as before the bounds
  return statement;
}

/** A row's text and what the SQL says it did to it (statistics-sql.ts). */
function rowText(row: Row): ServerText {
  // An entry whose text could not be read back (text file garbage-collected) has NULL query.
  // pg_stat_statements converts each entry's text from its database's encoding to ours
  // itself (unlike pg_stat_activity: server-text.ts).
  const text = textOrNull(row, 'query') ?? '';
  const bytes = intOrNull(row, 'query_bytes');
  const dropped = row.query_dropped === true;
  const cut = bytes !== null && (dropped || row.query_cut === true) ? { bytes, dropped } : null;
  return { text: dropped ? '' : text, cut };
}

function databaseOf(row: Row): DatabaseCounters {
  return {
    database: textOf(row, 'database'),
    backends: intOf(row, 'backends'),
    ...countersOf(row, DATABASE_COLUMNS),
    statsReset: dateOrNull(row, 'stats_reset'),
  };
}

/**
 * The rows of statementsSql: the time, the reset time and the entries, their texts within
 * `bounds` and counted (the SQL bounds them already; this holds for any rows). Pure.
 */
export function statementsFromRows(
  rows: readonly Row[],
  bounds: StatementTextBounds = DEFAULT_STATEMENT_TEXT_BOUNDS,
): { ts: Date; reset: Date | null; statements: StatementCounters[]; texts: TextCounts } {
  const first = rows[0];
  if (first === undefined) throw new Error('statements sample: the statement returned no row (it always returns one)');
  const entries = rows.filter((r) => r.queryid !== null && r.queryid !== undefined);
  const texts = entries.map(rowText);
  const counts = boundTexts(texts, bounds);
  const statements = entries.map((r, i) => statementOf(r, texts[i]!));
  return { ts: dateOf(first, 'ts'), reset: dateOrNull(first, 'statements_reset'), statements, texts: counts };
}

/** The rows of databasesSql: the time and the databases. Pure. */
export function databasesFromRows(rows: readonly Row[]): { ts: Date; databases: DatabaseCounters[] } {
  const first = rows[0];
  if (first === undefined) throw new Error('databases sample: the statement returned no row (it always returns one)');
  return { ts: dateOf(first, 'ts'), databases: rows.filter((r) => r.database !== null && r.database !== undefined).map(databaseOf) };
}

async function readStatements(client: pg.ClientBase, info: ServerInfo, bounds: StatementTextBounds): Promise<ReturnType<typeof statementsFromRows>> {
  const sql = statementsSql(info, bounds); // throws the "not installed" error before any round trip
  try {
    return statementsFromRows((await client.query<Row>(sql)).rows, bounds);
  } catch (e) {
    // The extension created but its library not preloaded: the view raises 55000
    // ("pg_stat_statements must be loaded via shared_preload_libraries"). Say how to fix it.
    if (sqlStateOf(e) === '55000' && e instanceof Error && /shared_preload_libraries/.test(e.message)) {
      throw new PglogError(
        'SQL_QUERY_FAILED',
        `pg_stat_statements is installed in database "${info.database}" but its library is not loaded: ` +
          "add 'pg_stat_statements' to shared_preload_libraries in postgresql.conf and restart the server, or turn off collect.statements",
        { cause: e },
      );
    }
    throw e;
  }
}

/**
 * Reads pg_stat_statements (with `statements`, texts within `textBounds` and counted in
 * `statementTexts`) and pg_stat_database (with `databases`), one statement each. Throws
 * SQL_QUERY_FAILED when statements are asked for and the extension is not installed in the
 * session's database or not preloaded; other errors are pg's, for the caller's session to
 * classify (sql/sql-errors.ts).
 */
export async function readStatistics(client: pg.ClientBase, info: ServerInfo, options: StatisticsOptions): Promise<StatisticsSample> {
  let ts: Date | null = null;
  let statements: StatementCounters[] | null = null;
  let statementsReset: Date | null = null;
  let databases: DatabaseCounters[] | null = null;
  let statementTexts: TextCounts | null = null;
  if (options.statements) {
    const read = await readStatements(client, info, options.textBounds ?? DEFAULT_STATEMENT_TEXT_BOUNDS);
    ts = read.ts;
    statements = read.statements;
    statementsReset = read.reset;
    statementTexts = read.texts;
  }
  if (options.databases) {
    const read = databasesFromRows((await client.query<Row>(databasesSql(info.versionNum))).rows);
    ts ??= read.ts;
    databases = read.databases;
  }
  if (ts === null) {
    const result = await client.query<Row>(TIMESTAMP_SQL);
    const row = result.rows[0];
    if (row === undefined) throw new Error('statistics sample: SELECT statement_timestamp() returned no row');
    ts = dateOf(row, 'ts');
  }
  return statementTexts === null ? { ts, statements, statementsReset, databases } : { ts, statements, statementsReset, databases, statementTexts };
}
