/**
 * Runs the report's three queries against the store, in one read-only REPEATABLE READ
 * transaction, so the sections describe the same snapshot even while collectors write.
 */
import type pg from 'pg';
import { errorFromRow, errorsQuery, groupsOf, lockWaitFromRow, lockWaitsQuery, statementFromRow, statementsQuery } from './query.ts';
import type { Report, ReportFilter } from './types.ts';

export async function fetchReport(client: pg.ClientBase, filter: ReportFilter): Promise<Report> {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    const statements = await client.query(statementsQuery(filter));
    const errors = await client.query(errorsQuery(filter));
    const lockWaits = await client.query(lockWaitsQuery(filter));
    await client.query('COMMIT');
    return {
      filter,
      statements: { rows: statements.rows.map(statementFromRow), groups: groupsOf(statements.rows) },
      errors: { rows: errors.rows.map(errorFromRow), groups: groupsOf(errors.rows) },
      lockWaits: { rows: lockWaits.rows.map(lockWaitFromRow), groups: groupsOf(lockWaits.rows) },
    };
  } catch (e) {
    await client.query('ROLLBACK').catch(() => { /* the connection may be gone; the query's error is the one to report */ });
    throw e;
  }
}
