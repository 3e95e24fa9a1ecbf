// known_hosts parsing and host-key checking, against vectors OpenSSH 9 made (`ssh-keygen -lf`
// fingerprint, `ssh-keygen -H` hashed entry) and generated keys: entry syntax, host patterns
// (ports, wildcards, negation, hashed names), and failing closed (unknown, changed, @revoked,
// @cert-authority never trusted), with fast-check properties for wildcards and unlisted keys.
import { strict as assert } from 'node:assert';
import { createHmac, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import {
  entryMatchesHost,
  knownHostsFor,
  knownHostsName,
  knownKeyTypes,
  matchWildcard,
  parseKnownHosts,
  sha256Fingerprint,
  sshKeyType,
  verifyHostKey,
  withoutCertAuthorities,
} from '../../../src/transport/known-hosts.ts';

// A real OpenSSH key and what OpenSSH 9 made of it: `ssh-keygen -lf` printed the fingerprint,
// `ssh-keygen -H` hashed the `[db1.example.com]:2222` entry.
const VECTOR_KEY = 'AAAAC3NzaC1lZDI1NTE5AAAAIGL6E6zZ+ff9eejyEarrjXSa5/G00iuxhbXIaeX7cj7t';
const VECTOR_FINGERPRINT = 'SHA256:OF1FNr+BWYcZIGIPA0MyTbgnehRLLVPWLClQ1fpsHQk';
const VECTOR_HASHED = '|1|QK8M77cnpTMOFcTlSXIaumGFago=|XOcDpQzJ6hkxzdY/u5TdS1Mrap8=';

function sshString(b: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(b.length);
  return Buffer.concat([len, b]);
}

/** An ed25519-shaped public key blob (type name + 32 random bytes); enough for matching. */
function fakeKey(type = 'ssh-ed25519'): { blob: Buffer; b64: string } {
  const blob = Buffer.concat([sshString(Buffer.from(type)), sshString(randomBytes(32))]);
  return { blob, b64: blob.toString('base64') };
}

function hashedName(name: string): string {
  const salt = randomBytes(20);
  return `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`;
}

describe('known_hosts parsing', () => {
  test('skips comments and blank lines, records malformed lines, ignores @cert-authority', () => {
    const k = fakeKey();
    const kh = parseKnownHosts(
      [
        '# a comment',
        '',
        '   ',
        `db1 ssh-ed25519 ${k.b64}`,
        'db2 ssh-ed25519 not*base64',
        `db3 ssh-rsa ${k.b64}`, // type name disagrees with the blob
        '@cert-authority *.example.com ssh-ed25519 ' + k.b64,
        '@weird db4 ssh-ed25519 ' + k.b64,
        'db5',
      ].join('\n'),
      'kh',
    );
    assert.equal(kh.entries.length, 1);
    assert.equal(kh.entries[0]?.line, 4);
    assert.deepEqual(kh.invalidLines, [5, 6, 8, 9]);
  });

  test('sshKeyType reads the type name from the blob and rejects garbage', () => {
    assert.equal(sshKeyType(Buffer.from(VECTOR_KEY, 'base64')), 'ssh-ed25519');
    assert.equal(sshKeyType(Buffer.alloc(3)), null);
    assert.equal(sshKeyType(Buffer.from([0, 0, 1, 0, 65])), null);
  });

  test('fingerprints are OpenSSH SHA256 form without padding', () => {
    assert.equal(sha256Fingerprint(Buffer.from(VECTOR_KEY, 'base64')), VECTOR_FINGERPRINT);
  });
});

describe('host matching', () => {
  test('knownHostsName brackets non-22 ports and lower-cases', () => {
    assert.equal(knownHostsName('DB1.Example.com', 22), 'db1.example.com');
    assert.equal(knownHostsName('10.0.0.5', 2222), '[10.0.0.5]:2222');
  });

  test('a hashed entry made by ssh-keygen -H matches its host and port only', () => {
    const kh = parseKnownHosts(`${VECTOR_HASHED} ssh-ed25519 ${VECTOR_KEY}\n`, 'kh');
    const entry = kh.entries[0];
    assert.ok(entry !== undefined);
    assert.equal(entryMatchesHost(entry, '[db1.example.com]:2222'), true);
    assert.equal(entryMatchesHost(entry, 'db1.example.com'), false);
    assert.equal(entryMatchesHost(entry, '[db1.example.com]:2223'), false);
    assert.deepEqual(verifyHostKey(kh, 'DB1.example.com', 2222, 'ssh-ed25519', Buffer.from(VECTOR_KEY, 'base64')), { ok: true, line: 1 });
  });

  test('plain, comma lists, [host]:port, wildcards and negation', () => {
    const k = fakeKey();
    const kh = parseKnownHosts(
      [
        `db1,10.0.0.1 ssh-ed25519 ${k.b64}`,
        `[db2]:2222 ssh-ed25519 ${k.b64}`,
        `db-*.prod,!db-secret.prod ssh-ed25519 ${k.b64}`,
        `[10.1.0.?]:* ssh-ed25519 ${k.b64}`,
      ].join('\n'),
      'kh',
    );
    const ok = (host: string, port: number): boolean => verifyHostKey(kh, host, port, 'ssh-ed25519', k.blob).ok;
    assert.equal(ok('db1', 22), true);
    assert.equal(ok('10.0.0.1', 22), true);
    assert.equal(ok('db1', 2222), false, 'a port-22 entry does not name another port');
    assert.equal(ok('db2', 2222), true);
    assert.equal(ok('db2', 22), false);
    assert.equal(ok('db-a.prod', 22), true);
    assert.equal(ok('DB-A.PROD', 22), true);
    assert.equal(ok('db-secret.prod', 22), false, 'negation excludes the line');
    assert.equal(ok('10.1.0.7', 2200), true);
    assert.equal(ok('10.1.0.17', 2200), false);
  });

  test('matchWildcard agrees with an anchored regular expression', () => {
    const alphabet = fc.constantFrom('a', 'b', '.', '*', '?');
    fc.assert(
      fc.property(fc.string({ unit: alphabet, maxLength: 8 }), fc.string({ unit: fc.constantFrom('a', 'b', '.'), maxLength: 10 }), (pattern, text) => {
        const re = new RegExp('^' + pattern.replace(/\./g, '\\.').replace(/\*/g, '.*').replace(/\?/g, '.') + '$', 's');
        assert.equal(matchWildcard(text, pattern), re.test(text));
      }),
      { numRuns: 2000 },
    );
  });

  test('knownKeyTypes lists the non-revoked types for the host in file order', () => {
    const e = fakeKey();
    const r = fakeKey('ssh-rsa');
    const kh = parseKnownHosts(
      [
        `db1 ssh-rsa ${r.b64}`,
        `other ecdsa-sha2-nistp256 ${fakeKey('ecdsa-sha2-nistp256').b64}`,
        `db1 ssh-ed25519 ${e.b64}`,
        `@revoked * ecdsa-sha2-nistp384 ${fakeKey('ecdsa-sha2-nistp384').b64}`,
      ].join('\n'),
      'kh',
    );
    assert.deepEqual(knownKeyTypes(kh, 'db1', 22), ['ssh-rsa', 'ssh-ed25519']);
  });
});

describe('verifyHostKey fails closed', () => {
  test('an unlisted host is UNKNOWN, naming host:port, type and fingerprint', () => {
    const k = fakeKey();
    const kh = parseKnownHosts(`db1 ssh-ed25519 ${fakeKey().b64}\n`, '/etc/pglog/known_hosts');
    const v = verifyHostKey(kh, 'db9', 2222, 'ssh-ed25519', k.blob);
    assert.equal(v.ok, false);
    if (v.ok) return;
    assert.equal(v.code, 'SSH_HOST_KEY_UNKNOWN');
    assert.match(v.message, /db9:2222/);
    assert.ok(v.message.includes(sha256Fingerprint(k.blob)));
    assert.ok(v.message.includes('/etc/pglog/known_hosts'));
  });

  test('an empty known_hosts trusts nothing', () => {
    const v = verifyHostKey(parseKnownHosts('', 'kh'), 'db1', 22, 'ssh-ed25519', fakeKey().blob);
    assert.equal(v.ok, false);
    assert.equal(!v.ok && v.code, 'SSH_HOST_KEY_UNKNOWN');
  });

  test('a listed host with another key is CHANGED, naming the expected entry', () => {
    const known = fakeKey();
    const offered = fakeKey();
    const kh = parseKnownHosts(`# header\n${hashedName('[db1]:2222')} ssh-ed25519 ${known.b64}\n`, 'secret db1-ssh');
    const v = verifyHostKey(kh, 'db1', 2222, 'ssh-ed25519', offered.blob);
    assert.equal(v.ok, false);
    if (v.ok) return;
    assert.equal(v.code, 'SSH_HOST_KEY_CHANGED');
    assert.match(v.message, /db1:2222/);
    assert.ok(v.message.includes(`ssh-ed25519 key ${sha256Fingerprint(offered.blob)}`));
    assert.ok(v.message.includes(`secret db1-ssh line 2 expects ssh-ed25519 key ${sha256Fingerprint(known.blob)}`));
  });

  test('a listed host whose known key has another type is CHANGED too', () => {
    const kh = parseKnownHosts(`db1 ssh-rsa ${fakeKey('ssh-rsa').b64}\n`, 'kh');
    const v = verifyHostKey(kh, 'db1', 22, 'ssh-ed25519', fakeKey().blob);
    assert.equal(!v.ok && v.code, 'SSH_HOST_KEY_CHANGED');
  });

  test('any one of several keys for a host is accepted', () => {
    const a = fakeKey();
    const b = fakeKey('ecdsa-sha2-nistp256');
    const kh = parseKnownHosts(`db1 ssh-ed25519 ${a.b64}\ndb1 ecdsa-sha2-nistp256 ${b.b64}\n`, 'kh');
    assert.deepEqual(verifyHostKey(kh, 'db1', 22, 'ecdsa-sha2-nistp256', b.blob), { ok: true, line: 2 });
  });

  test('@revoked refuses the key even when another line lists it', () => {
    const k = fakeKey();
    const kh = parseKnownHosts(`db1 ssh-ed25519 ${k.b64}\n@revoked * ssh-ed25519 ${k.b64}\n`, 'kh');
    const v = verifyHostKey(kh, 'db1', 22, 'ssh-ed25519', k.blob);
    assert.equal(v.ok, false);
    if (v.ok) return;
    assert.equal(v.code, 'SSH_HOST_KEY_CHANGED');
    assert.match(v.message, /@revoked in kh line 2/);
  });

  test('@cert-authority lines never vouch for a key', () => {
    const k = fakeKey();
    const kh = parseKnownHosts(`@cert-authority * ssh-ed25519 ${k.b64}\n`, 'kh');
    assert.equal(verifyHostKey(kh, 'db1', 22, 'ssh-ed25519', k.blob).ok, false);
  });

  test("the sidecar's copy leaves @cert-authority lines out and keeps every other line where it was", () => {
    const k = fakeKey();
    const text = `# ours\r\n@cert-authority *.example.com ssh-ed25519 ${k.b64}\r\n  \t@cert-authority [db1]:2222 ssh-ed25519 ${k.b64}\n@revoked * ssh-ed25519 ${k.b64}\ndb1 ssh-ed25519 ${k.b64}\n@cert-authorityx db2 ssh-ed25519 ${k.b64}\n`;
    const copy = withoutCertAuthorities(text).split('\n');
    const lines = text.split('\n');
    assert.equal(copy.length, lines.length);
    assert.ok(!copy.some((l) => /^\s*@cert-authority\s/.test(l)), copy.join('\n'));
    assert.match(copy[1] ?? '', /^# @cert-authority line left out/);
    assert.match(copy[2] ?? '', /^# @cert-authority line left out/);
    for (const i of [0, 3, 4, 5, 6]) assert.equal(copy[i], lines[i]);
    // The in-process reading of both texts is the same.
    assert.deepEqual(parseKnownHosts(copy.join('\n'), 'kh').entries, parseKnownHosts(text, 'kh').entries);
  });

  test('property: a key not in the file is never accepted', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('db1', 'db2', '*', 'db?', '[db1]:2222', '!db2', 'db*'), { minLength: 1, maxLength: 4 }),
        fc.constantFrom('db1', 'db2', 'db3'),
        fc.constantFrom(22, 2222),
        (patterns, host, port) => {
          const listed = fakeKey();
          const kh = parseKnownHosts(`${patterns.join(',')} ssh-ed25519 ${listed.b64}\n`, 'kh');
          assert.equal(verifyHostKey(kh, host, port, 'ssh-ed25519', fakeKey().blob).ok, false);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('a fleet known_hosts, one connection each', () => {
  // A fleet's one known_hosts lists every server; a connection keeps only its server's lines.
  const keys = Array.from({ length: 50 }, () => fakeKey());
  const text = [
    ...keys.map((k, i) => `[10.0.0.${i + 1}]:2222 ssh-ed25519 ${k.b64}`),
    `*.example.com ssh-ed25519 ${keys[0]!.b64}`,
    `@revoked [10.0.0.7]:2222 ssh-ed25519 ${keys[8]!.b64}`,
  ].join('\n');
  const fleet = parseKnownHosts(text, 'fleet known_hosts');

  test('knownHostsFor keeps exactly the lines that name the server, revoked ones included, in file order', () => {
    const own = knownHostsFor(fleet, '10.0.0.7', 2222);
    assert.deepEqual(
      own.entries.map((e) => e.line),
      [7, 52],
    );
    assert.equal(own.source, 'fleet known_hosts');
    assert.deepEqual(
      knownHostsFor(fleet, 'db.example.com', 22).entries.map((e) => e.line),
      [51],
    );
    assert.deepEqual(knownHostsFor(fleet, '10.0.0.99', 2222).entries, []);
  });

  test('every verdict on the narrowed entries is the verdict on the whole file', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 0, max: 49 }), (server, offered) => {
        const host = `10.0.0.${server}`;
        const key = keys[offered]!.blob;
        const whole = verifyHostKey(fleet, host, 2222, 'ssh-ed25519', key);
        const narrowed = verifyHostKey(knownHostsFor(fleet, host, 2222), host, 2222, 'ssh-ed25519', key);
        assert.deepEqual(narrowed, whole);
        assert.deepEqual(knownKeyTypes(knownHostsFor(fleet, host, 2222), host, 2222), knownKeyTypes(fleet, host, 2222));
      }),
    );
  });
});
