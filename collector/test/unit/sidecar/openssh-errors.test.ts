/**
 * OpenSSH's own stderr texts, as OpenSSH 9.2 printed them against the test sshd (captured with
 * the sidecar's master options; the same cases run live in test/integration/sshproxy.test.ts).
 */
import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import { classifyOpenSshError, MAX_MESSAGE_CHARS, meaningfulLines } from '../../../src/sidecar/openssh-errors.ts';

const target = { host: '127.0.0.59', port: 34391, user: 'pglog-loggen' };
const failed = { code: 255, signal: null };

const CHANGED = `@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
SHA256:NyNnf82QbMUXosrn3Lh7q7wXFsRFCKTFygoKYDEWICQ.
Please contact your system administrator.
Add correct host key in /tmp/sx/kh_old to get rid of this message.
Offending ED25519 key in /tmp/sx/kh_old:1
  remove with:
  ssh-keygen -f "/tmp/sx/kh_old" -R "[127.0.0.59]:34391"
Host key for [127.0.0.59]:34391 has changed and you have requested strict checking.
Host key verification failed.
`;

const UNPROTECTED = `@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
Permissions 0644 for '/tmp/sx/permkey' are too open.
It is required that your private key files are NOT accessible by others.
This private key will be ignored.
Load key "/tmp/sx/permkey": bad permissions
pglog-loggen@127.0.0.59: Permission denied (publickey).
`;

const cases: [string, string, string, RegExp][] = [
  ['a changed host key', CHANGED, 'SSH_HOST_KEY_CHANGED', /Host key for \[127\.0\.0\.59\]:34391 has changed/],
  [
    'an unknown host key',
    'No ED25519 host key is known for [127.0.0.59]:34391 and you have requested strict checking.\r\nHost key verification failed.\r\n',
    'SSH_HOST_KEY_UNKNOWN',
    /No ED25519 host key is known/,
  ],
  ['a refused key', 'pglog-loggen@127.0.0.59: Permission denied (publickey).\r\n', 'SSH_AUTH_FAILED', /Permission denied \(publickey\)/],
  [
    'a key file of the wrong format',
    'Load key "/tmp/sx/badkey": error in libcrypto\r\npglog-loggen@127.0.0.59: Permission denied (publickey).\r\n',
    'SSH_KEY_INVALID',
    /Load key "\/tmp\/sx\/badkey": error in libcrypto/,
  ],
  [
    'a key file of the wrong format (older OpenSSH)',
    'Load key "/k": invalid format\npglog-loggen@127.0.0.59: Permission denied (publickey).\n',
    'SSH_KEY_INVALID',
    /invalid format/,
  ],
  ['a key file others can read', UNPROTECTED, 'SSH_KEY_INVALID', /0644/],
  ['a refused TCP connection', 'ssh: connect to host 127.0.0.59 port 1: Connection refused\r\n', 'SSH_CONNECT_FAILED', /Connection refused/],
  [
    'a name that does not resolve',
    'ssh: Could not resolve hostname nonexistent.invalid: Name or service not known\r\n',
    'SSH_CONNECT_FAILED',
    /Could not resolve hostname/,
  ],
  ['a TCP connect timeout', 'ssh: connect to host 10.1.2.3 port 22: Connection timed out\r\n', 'SSH_CONNECT_FAILED', /Connection timed out/],
  ['no route', 'ssh: connect to host 10.1.2.3 port 22: No route to host\r\n', 'SSH_CONNECT_FAILED', /No route to host/],
  ['a server that stopped answering keepalives', 'Timeout, server 127.0.0.59 not responding.\r\n', 'SSH_TIMEOUT', /not responding/],
  [
    'a server frozen before its banner',
    'Connection timed out during banner exchange\r\nConnection to 127.0.0.59 port 34391 timed out\r\n',
    'SSH_TIMEOUT',
    /banner exchange/,
  ],
  ['a server that went away', 'Connection to 127.0.0.59 closed by remote host.\r\n', 'SSH_CONNECT_FAILED', /closed by remote host/],
];

describe('classifyOpenSshError', () => {
  for (const [what, stderr, code, quoted] of cases) {
    test(`${what} is ${code}`, () => {
      const e = classifyOpenSshError(stderr, target, failed);
      assert.equal(e.code, code, e.message);
      assert.ok(e.message.startsWith('pglog-loggen@127.0.0.59:34391: '), e.message);
      assert.match(e.message, quoted);
      assert.ok(!e.message.includes('@@@'), 'no banner in the message');
      assert.ok(!e.message.includes('\n'), 'one line');
    });
  }

  test('nothing on stderr: says how ssh ended', () => {
    assert.equal(classifyOpenSshError('', target, { code: null, signal: 'SIGKILL' }).message, 'pglog-loggen@127.0.0.59:34391: ssh was killed by SIGKILL');
    const e = classifyOpenSshError('something new\nand more\nand more', target, { code: 255, signal: null });
    assert.equal(e.code, 'SSH_CONNECT_FAILED');
    assert.equal(e.message, 'pglog-loggen@127.0.0.59:34391: ssh exited with code 255: something new / and more');
  });

  test('messages are bounded', () => {
    const e = classifyOpenSshError(`Permission denied ${'x'.repeat(5000)}`, target, failed);
    assert.ok(e.message.length <= MAX_MESSAGE_CHARS);
    assert.ok(e.message.endsWith('...'));
  });

  test('banners and blank lines are not meaningful', () => {
    assert.deepEqual(meaningfulLines('@@@@\n@  WARNING: X  @\n\r\n  a  \r\nb'), ['a', 'b']);
  });
});
