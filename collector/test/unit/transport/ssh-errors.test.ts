// ssh2's errors (told apart by their level, reason and message) mapped to pglog codes with
// messages naming the target, user, host and key file; which codes are lasting failures; and the
// host key algorithms offered, the types known_hosts lists for the host first.
import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import { PglogError } from '@pglog/common/errors.ts';
import { isLastingSshFailure } from '@pglog/common/errors.ts';

import { clientAlgorithms, hostKeyAlgorithms } from '../../../src/transport/ssh-algorithms.ts';
import { toSshError } from '../../../src/transport/ssh-errors.ts';
import { type ErrorCase, errorMappingTests } from '../../helpers/error-mapping.ts';

const where = { target: 'db1', host: '10.0.0.5', port: 2222, username: 'postgres' };

function ssh2Error(message: string, extra: Record<string, unknown>): Error {
  return Object.assign(new Error(message), extra);
}

describe('ssh2 errors to pglog codes', () => {
  const cases: ErrorCase[] = [
    ['socket', ssh2Error('connect ECONNREFUSED 10.0.0.5:2222', { level: 'client-socket', code: 'ECONNREFUSED' }), 'SSH_CONNECT_FAILED', /ECONNREFUSED/],
    ['keepalive', ssh2Error('Keepalive timeout', { level: 'client-timeout' }), 'SSH_TIMEOUT', /keepalives/],
    ['ready timeout', ssh2Error('Timed out while waiting for handshake', { level: 'client-timeout' }), 'SSH_TIMEOUT', /ready timeout/],
    [
      'auth',
      ssh2Error('All configured authentication methods failed', { level: 'client-authentication' }),
      'SSH_AUTH_FAILED',
      /refused the private key \(keys\/id_ed25519\) for user postgres/,
    ],
    ['kex', ssh2Error('Handshake failed: no matching cipher', { level: 'handshake' }), 'SSH_CONNECT_FAILED', /key exchange failed/],
    ['protocol', ssh2Error('Connection lost before handshake', { level: 'protocol' }), 'SSH_CONNECT_FAILED', /protocol/],
    ['dns', ssh2Error('getaddrinfo ENOTFOUND nohost', { level: 'client-dns' }), 'SSH_CONNECT_FAILED', /cannot be resolved/],
    ['channel refused', ssh2Error('(SSH) Channel open failure: open failed', { reason: 1 }), 'SSH_CHANNEL_FAILED', /administratively prohibited/],
    ['exec refused', new Error('Unable to exec'), 'SSH_CHANNEL_FAILED', /run a command/],
    [
      'bad key',
      new Error('Cannot parse privateKey: Unsupported key format'),
      'SSH_KEY_INVALID',
      /private key \(keys\/id_ed25519\) cannot be used: Unsupported key format/,
    ],
    ['unknown', new Error('something else'), 'SSH_CONNECT_FAILED', /something else/],
  ];
  errorMappingTests(cases, (error) => toSshError(error, where, 'keys/id_ed25519'), 'target db1 (postgres@10.0.0.5:2222): ');

  test('a PglogError passes through unchanged', () => {
    const e = new PglogError('SSH_HOST_KEY_CHANGED', 'x');
    assert.equal(toSshError(e, where, 'k'), e);
  });

  test('host key, auth and key failures are lasting; network failures are not', () => {
    assert.equal(isLastingSshFailure('SSH_AUTH_FAILED'), true);
    assert.equal(isLastingSshFailure('SSH_HOST_KEY_UNKNOWN'), true);
    assert.equal(isLastingSshFailure('SSH_TIMEOUT'), false);
    assert.equal(isLastingSshFailure('SSH_CONNECT_FAILED'), false);
  });
});

describe('host key algorithm order', () => {
  test('the known key types come first, the rest stay offered', () => {
    const algos = hostKeyAlgorithms(['ssh-rsa']);
    assert.deepEqual(algos.slice(0, 3), ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa']);
    assert.ok(algos.includes('ssh-ed25519'));
    assert.equal(new Set(algos).size, algos.length);
    assert.equal(hostKeyAlgorithms([])[0], 'ssh-ed25519');
  });
});

describe('compression', () => {
  test('only none is offered, so a server insisting on zlib is refused at key exchange', () => {
    // ssh2's default list offers zlib too; a hostile server's one zlib packet inflates before any window check.
    assert.deepEqual(clientAlgorithms([]).compress, ['none']);
  });
});
