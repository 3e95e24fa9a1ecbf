// Errors of a SQL session (pg's server errors by SQLSTATE, its timeouts and lost streams, errno
// codes) mapped to pglog codes, with messages that say where, what failed and which setting to
// look at; a transport PglogError passes through; errno codes are not taken for SQLSTATEs.
import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import { PglogError } from '@pglog/common/errors.ts';
import { sqlStateOf } from '@pglog/common/errors.ts';

import { toSqlError } from '../../../src/sampler/sql-errors.ts';
import { type ErrorCase, errorMappingTests } from '../../helpers/error-mapping.ts';

const place = 'db1/main (/var/run/postgresql/.s.PGSQL.5432 as pglog@postgres via 10.0.0.5:22)';

/** What pg's DatabaseError looks like: a message and a five-character SQLSTATE `code`. */
function serverError(message: string, code: string): Error {
  return Object.assign(new Error(message), { code, severity: 'FATAL' });
}

describe('SQL session errors to pglog codes', () => {
  const cases: ErrorCase[] = [
    ['role refused', serverError('role "pglog" does not exist', '28000'), 'SQL_AUTH_FAILED', /role "pglog" does not exist \[SQLSTATE 28000\].*sql\.user/],
    ['password', serverError('password authentication failed for user "pglog"', '28P01'), 'SQL_AUTH_FAILED', /28P01/],
    ['no database', serverError('database "nope" does not exist', '3D000'), 'SQL_AUTH_FAILED', /database "nope"/],
    ['statement_timeout', serverError('canceling statement due to statement timeout', '57014'), 'SQL_TIMEOUT', /sql\.timeoutSeconds/],
    ['lock_timeout', serverError('canceling statement due to lock timeout', '55P03'), 'SQL_TIMEOUT', /lock timeout/],
    ['shutting down', serverError('the database system is shutting down', '57P03'), 'SQL_CONNECT_FAILED', /shutting down/],
    ['terminated by admin', serverError('terminating connection due to administrator command', '57P01'), 'SQL_CONNECT_FAILED', /administrator/],
    ['permission', serverError('permission denied for table t', '42501'), 'SQL_QUERY_FAILED', /permission denied/],
    ['connect timeout', new Error('timeout expired'), 'SQL_TIMEOUT', /timeout expired/],
    ['query timeout', new Error('Query read timeout'), 'SQL_TIMEOUT', /Query read timeout/],
    ['stream lost', new Error('Connection terminated unexpectedly'), 'SQL_CONNECT_FAILED', /terminated unexpectedly.*is PostgreSQL running/],
    ['errno', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }), 'SQL_CONNECT_FAILED', /ECONNRESET/],
    ['other', new Error('something odd'), 'SQL_QUERY_FAILED', /something odd/],
  ];
  errorMappingTests(cases, (error) => toSqlError(error, place, 'activity snapshot'), `${place}: activity snapshot failed: `);

  test('a PglogError from the transport keeps its code and message', () => {
    const e = new PglogError('SSH_CONNECT_FAILED', 'target db1: connection refused');
    assert.equal(toSqlError(e, place, 'connecting'), e);
  });

  test('sqlStateOf reads only five-character SQLSTATEs, not errno codes', () => {
    assert.equal(sqlStateOf(serverError('x', '57014')), '57014');
    assert.equal(sqlStateOf(Object.assign(new Error('x'), { code: 'ECONNRESET' })), null);
    assert.equal(sqlStateOf('57014'), null);
    assert.equal(sqlStateOf(null), null);
  });
});
