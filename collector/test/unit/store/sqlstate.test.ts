// Which server errors are about the rows, where a COPY stopped, and naming the store without
// its password.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { sqlStateOf } from '@pglog/common/errors.ts';

import { copyLineOf, describeServerError, isDataRejection } from '../../../src/store/sqlstate.ts';
import { describeStore, storeUrlPasswords, withoutPassword } from '../../../src/store/store-url.ts';

const serverError = (code: string, extra: object = {}): object => Object.assign(new Error('boom'), { code, ...extra });

test('data exceptions, integrity violations and program limits are rejections of rows', () => {
  for (const code of ['22008', '22P02', '22021', '23514', '23505', '54000']) assert.ok(isDataRejection(serverError(code)), code);
});

test('connection, shutdown, timeout, deadlock, schema and plain errors are not', () => {
  for (const code of ['08006', '57P01', '57014', '40P01', '42P01', '53300', 'XX000']) assert.ok(!isDataRejection(serverError(code)), code);
  assert.ok(!isDataRejection(new Error('Connection terminated unexpectedly')));
  assert.ok(!isDataRejection(Object.assign(new Error('x'), { code: 'ECONNREFUSED' })));
  assert.equal(sqlStateOf(Object.assign(new Error('x'), { code: 'ENOENT' })), null);
  assert.equal(sqlStateOf(null), null);
});

test('the COPY line of an error becomes a 0-based row index', () => {
  assert.equal(copyLineOf(serverError('23514', { where: 'COPY statement_events, line 57' })), 56);
  assert.equal(copyLineOf(serverError('22021', { where: 'COPY t, line 3, column query' })), 2);
  assert.equal(copyLineOf(serverError('23514', { where: 'PL/pgSQL function f() line 3' })), null);
  assert.equal(copyLineOf(serverError('23514')), null);
});

test('a server error is described with its SQLSTATE and a short detail', () => {
  assert.equal(describeServerError(serverError('23514', { detail: 'Failing row contains (1).' })), 'SQLSTATE 23514: boom (Failing row contains (1).)');
  const long = describeServerError(serverError('23514', { detail: 'x'.repeat(10_000) }));
  assert.ok(long.length < 600);
  assert.equal(describeServerError(new Error('plain')), 'plain');
});

test('the store is named without its password', () => {
  assert.equal(describeStore('postgresql://pglog:s3cret@db.example:6432/logs'), 'store pglog@db.example:6432/logs');
  assert.equal(describeStore('postgres://db/logs'), 'store db:5432/logs');
  assert.equal(describeStore('postgresql://postgres@/postgres?host=%2Ftmp%2Fsock&port=5433'), 'store postgres@/tmp/sock:5433/postgres');
  assert.ok(!describeStore('not a url s3cret').includes('s3cret'));
  assert.ok(!describeStore('mysql://u:s3cret@h/d').includes('s3cret'));
});

test('withoutPassword blanks the password, plain and percent-encoded', () => {
  const url = 'postgresql://pglog:p%40ss@db/logs';
  assert.equal(withoutPassword('failed for p@ss and p%40ss', url), 'failed for *** and ***');
  assert.equal(withoutPassword('nothing to hide', 'postgresql://pglog@db/logs'), 'nothing to hide');
});

test('storeUrlPasswords finds the user-info password and a password= parameter (as written and decoded), the Unix-socket form included', () => {
  assert.deepEqual(storeUrlPasswords('postgresql://pglog:s%40cret@db/logs'), ['s%40cret', 's@cret']);
  assert.deepEqual(storeUrlPasswords('postgresql://postgres:pw@/postgres?host=%2Ftmp%2Fsock&port=5432'), ['pw']);
  assert.deepEqual(storeUrlPasswords('postgres://db/logs?password=p%26q'), ['p%26q', 'p&q']);
  assert.deepEqual(storeUrlPasswords('postgres://db/logs'), []);
  assert.deepEqual(storeUrlPasswords('not a url'), []);
});
