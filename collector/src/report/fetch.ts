/**
 * Runs the report's three queries against the store, in one read-only REPEATABLE READ
 * transaction, so the sections describe the same snapshot even while collectors write.
 */
import type pg from 'pg';

import { errorFromRow, errorsQuery, groupsOf, lockWaitFromRow, lockWaitsQuery, statementFromRow, statementsQuery } from './query.ts';
import type { Report, ReportFilter } from './types.ts';

/** Runs `work` in one read-only REPEATABLE READ transaction: every query sees the same data. */
export async function inReadOnlySnapshot<T>(client: pg.ClientBase, work: () => Promise<T>): Promise<T> {
  await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {
      /* the connection may be gone; the query's error is the one to report */
    });
    throw e;
  }
}

export async function fetchReport(client: pg.ClientBase, filter: ReportFilter): Promise<Report> {
  return inReadOnlySnapshot(client, async () => {
    const statements = await client.query(statementsQuery(filter));
    const errors = await client.query(errorsQuery(filter));
    const lockWaits = await client.query(lockWaitsQuery(filter));
    return {
      filter,
      statements: { rows: statements.rows.map(statementFromRow), groups: groupsOf(statements.rows) },
      errors: { rows: errors.rows.map(errorFromRow), groups: groupsOf(errors.rows) },
      lockWaits: { rows: lockWaits.rows.map(lockWaitFromRow), groups: groupsOf(lockWaits.rows) },
    };
  });
}
