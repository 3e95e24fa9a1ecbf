// Redaction of secrets in text: URL passwords, password= parameters, registered literal secrets.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { describePostgresUrl, REDACTED, redactUrl, scrubText, SecretScrubber } from '@pglog/common/observability/redact.ts';
import fc from 'fast-check';

test('redactUrl removes the password of scheme://user:password@host and keeps the rest', () => {
  assert.equal(redactUrl('postgres://pglog:s3cret@db.example:5432/store'), `postgres://pglog:${REDACTED}@db.example:5432/store`);
  assert.equal(redactUrl('postgresql://:onlypw@h/db'), `postgresql://:${REDACTED}@h/db`);
  // '@' inside an unencoded password: everything up to the last '@' before the host goes.
  assert.equal(redactUrl('connect to postgres://u:p@ss@w0rd@h/db failed'), `connect to postgres://u:${REDACTED}@h/db failed`);
  assert.equal(redactUrl('postgres://u:p%40ss@h/db'), `postgres://u:${REDACTED}@h/db`);
  // No password: unchanged (a port is not a password).
  for (const s of ['postgres://u@h/db', 'postgres://h:5432/db', 'postgres:///db?host=/tmp', 'no url here']) assert.equal(redactUrl(s), s);
});

test('redactUrl removes password= parameters, quoted or not', () => {
  assert.equal(redactUrl('postgres://u@h/db?sslmode=require&password=pw1&x=1'), `postgres://u@h/db?sslmode=require&password=${REDACTED}&x=1`);
  assert.equal(redactUrl("host=h password='a b\\'c' dbname=x"), `host=h password=${REDACTED} dbname=x`);
  assert.equal(redactUrl('PASSWORD=pw2;next'), `PASSWORD=${REDACTED};next`);
});

test('redactUrl on a JSON line keeps the JSON valid', () => {
  const line = JSON.stringify({ a: 'postgres://u:pw@h/db', b: 'x@y', c: 'password=abc', d: 'host:5432/x' });
  const out = JSON.parse(redactUrl(line)) as Record<string, string>;
  assert.deepEqual(out, { a: `postgres://u:${REDACTED}@h/db`, b: 'x@y', c: `password=${REDACTED}`, d: 'host:5432/x' });
});

test('property: a password in a postgres URL never survives redactUrl', () => {
  const canary = fc.string({ minLength: 1, maxLength: 20, unit: fc.constantFrom(...'abcXYZ019!$%^*()_+-~@:'.split('')) }).map((s) => `CANARY${s}`);
  fc.assert(
    fc.property(canary, fc.constantFrom('postgres', 'postgresql'), (pw, scheme) => {
      const url = `${scheme}://user:${pw}@db.example:5432/store?sslmode=require`;
      const out = redactUrl(`error connecting to ${url}: timeout`);
      assert.ok(!out.includes('CANARY'), out);
      assert.ok(out.includes('db.example:5432/store'), out);
    }),
  );
});

test('SecretScrubber replaces registered secrets, their JSON form and long lines of multi-line secrets', () => {
  const s = new SecretScrubber();
  assert.equal(s.scrub('nothing registered'), 'nothing registered');
  s.register('');
  assert.equal(s.size, 0);
  const key =
    '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9u\nZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQyNTUx\n-----END OPENSSH PRIVATE KEY-----';
  s.register(key);
  s.register('pw.with*regex(chars)');
  assert.equal(s.scrub(`key: ${key}!`), `key: ${REDACTED}!`);
  assert.equal(s.scrub(JSON.stringify({ k: key })), JSON.stringify({ k: REDACTED }));
  assert.equal(s.scrub('one line: ZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQyNTUx'), `one line: ${REDACTED}`);
  assert.equal(s.scrub('-----BEGIN OPENSSH PRIVATE KEY----- is not secret'), '-----BEGIN OPENSSH PRIVATE KEY----- is not secret');
  assert.equal(s.scrub('a pw.with*regex(chars) b pwXwith'), `a ${REDACTED} b pwXwith`);
});

test('scrubText combines URL redaction and registered secrets', () => {
  const s = new SecretScrubber();
  s.register('hunter22');
  assert.equal(scrubText('postgres://u:pw@h/db and hunter22', s), `postgres://u:${REDACTED}@h/db and ${REDACTED}`);
});

test('describePostgresUrl names host, port, database and user, never the password', () => {
  assert.equal(describePostgresUrl('postgres://pglog:secret@db.example:6432/store'), 'host db.example, port 6432, database store, user pglog');
  assert.equal(
    describePostgresUrl('postgresql://postgres@/postgres?host=%2Ftmp%2Fsock&port=5433'),
    'host /tmp/sock, port 5433, database postgres, user postgres',
  );
  assert.equal(describePostgresUrl('postgres://h'), 'host h, port 5432');
  assert.equal(describePostgresUrl('postgres:///store'), 'host the default Unix socket, port 5432, database store');
  assert.equal(describePostgresUrl('not a url password=x'), 'an unparsable store URL');
});

test('redactUrl takes time linear in the text on runs of scheme characters (a.a.a.…, no ://)', () => {
  // A ratio in one run, not a fixed time: 16 times the text may take at most about 16 times as
  // long (4x slack for noise); the quadratic pattern took 256 times as long.
  const timeOf = (text: string): number => {
    let best = Infinity;
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      redactUrl(text);
      best = Math.min(best, performance.now() - t0);
    }
    return best;
  };
  const small = 'a.'.repeat(2_000);
  const large = 'a.'.repeat(32_000);
  timeOf(small);
  const ratio = timeOf(large) / Math.max(timeOf(small), 0.05);
  assert.ok(ratio < 64, `16x the text took ${ratio.toFixed(1)}x the time`);
});
