// The store URL's password, however it is written ('@', ':', '/', '?', '#', '%', spaces, a
// password= parameter, a libpq key=value string), never appears in the store's name, in a
// message withoutPassword cleaned, or in a log line of the real logger fed storeUrlPasswords.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Writable } from 'node:stream';
import { test } from 'node:test';

import { createLogger } from '@pglog/common/observability/logger.ts';
import { SecretScrubber } from '@pglog/common/observability/redact.ts';

import { describeStore, storeUrlPasswords, withoutPassword } from '../../../src/store/store-url.ts';

// node-postgres' own reading of a connection string: the password it would send.
const pgParse = (createRequire(import.meta.url)('pg-connection-string') as { parse: (s: string) => { password?: string; host?: string | null } }).parse;

/** A password written into a URL, the pieces of it that must never show, and how pg reads the URL. */
interface Case {
  url: string;
  pieces: string[];
  name: string | null;
}
const cases: Case[] = [
  // F9's reproduction: pg splits at the last '@', so the password is Zx9@Tq7vLm.
  { url: 'postgresql://pglog:Zx9@Tq7vLm@db.internal:5432/pglog', pieces: ['Zx9', 'Tq7vLm'], name: 'store pglog@db.internal:5432/pglog' },
  { url: 'postgresql://pglog:Kq8:Wz3:Hv5@db.internal/pglog', pieces: ['Kq8', 'Wz3', 'Hv5'], name: 'store pglog@db.internal:5432/pglog' },
  // A raw '/' ends pg's authority: pg refuses the URL, the typed password must still not show.
  { url: 'postgresql://pglog:Rt4/Yu6@db.internal:5432/pglog', pieces: ['Rt4', 'Yu6'], name: null },
  { url: 'postgresql://pglog:Mn2?Bv1@db.internal/pglog', pieces: ['Mn2', 'Bv1'], name: null },
  { url: 'postgresql://pglog:Qa7#Ws2@db.internal/pglog', pieces: ['Qa7', 'Ws2'], name: null },
  // Stray '%' and a space: pg encodes the whole URL first and reads them literally.
  { url: 'postgresql://pglog:Ed3%Rf4@db.internal/pglog', pieces: ['Ed3', 'Rf4'], name: 'store pglog@db.internal:5432/pglog' },
  { url: 'postgresql://pglog:Tg5 Yh6@db.internal/pglog', pieces: ['Tg5', 'Yh6'], name: 'store pglog@db.internal:5432/pglog' },
  // Percent-encoded '@', '/', '%' and space: neither spelling may show.
  {
    url: 'postgresql://pglog:Uj7%40Ik8%2FOl9%25Pz0%20Xc1@db.internal/pglog',
    pieces: ['Uj7', 'Ik8', 'Ol9', 'Pz0', 'Xc1', '%40', '%2F'],
    name: 'store pglog@db.internal:5432/pglog',
  },
  // A password parameter, percent-encoded and with '+' for a space, and the Unix-socket form.
  {
    url: 'postgresql://pglog@db.internal/pglog?sslmode=disable&password=Vb2%26Nm3+Lk4',
    pieces: ['Vb2', 'Nm3', 'Lk4'],
    name: 'store pglog@db.internal:5432/pglog',
  },
  { url: 'postgresql://pglog:Jh5@Gf6@/pglog?host=/run/postgresql', pieces: ['Jh5', 'Gf6'], name: 'store pglog@/run/postgresql:5432/pglog' },
  // libpq keyword/value: not a URL pg reads, never named; its password is still a secret.
  { url: "host=db.internal password='Dc7 \\'Sx8' dbname=pglog", pieces: ['Dc7', 'Sx8'], name: null },
];

test('storeUrlPasswords finds what node-postgres would send, whatever the spelling', () => {
  for (const c of cases) {
    let sent: string | undefined;
    try {
      sent = pgParse(c.url).password;
    } catch {
      sent = undefined; // pg refuses the URL: nothing is sent, the typed text is still secret
    }
    const forms = storeUrlPasswords(c.url);
    if (sent !== undefined && sent !== '' && c.name !== null)
      assert.ok(forms.includes(sent), `${c.url}: pg sends ${JSON.stringify(sent)}, registered ${JSON.stringify(forms)}`);
    for (const piece of c.pieces)
      assert.ok(
        forms.some((f) => f.includes(piece)),
        `${c.url}: ${piece} is in no registered form ${JSON.stringify(forms)}`,
      );
  }
  assert.deepEqual(storeUrlPasswords('postgresql://pglog@db/logs'), []);
  assert.deepEqual(storeUrlPasswords('postgresql://db/logs?application_name=a:b@c'), []);
});

test('describeStore names the store as pg reaches it, or not at all, never with a piece of the password', () => {
  for (const c of cases) {
    const name = describeStore(c.url);
    for (const piece of c.pieces) assert.ok(!name.includes(piece), `${c.url}: ${name}`);
    if (c.name !== null) assert.equal(name, c.name, c.url);
    else assert.match(name, /^the store \(its URL is not shown/, c.url);
  }
  // The host pg would use, on the F9 reproduction.
  assert.equal(pgParse(cases[0]!.url).host, 'db.internal');
});

test('withoutPassword blanks every spelling of the password in a message', () => {
  for (const c of cases) {
    const decoded = storeUrlPasswords(c.url);
    const message = `connection to ${c.url} failed; password ${decoded.join(' or ')}; ${JSON.stringify(decoded)}`;
    const out = withoutPassword(message, c.url);
    for (const piece of c.pieces) assert.ok(!out.includes(piece), `${c.url}: ${out}`);
  }
});

test('the real logger fed storeUrlPasswords leaks no piece of the password, in any field, message or error', () => {
  for (const c of cases) {
    const secrets = new SecretScrubber();
    for (const p of storeUrlPasswords(c.url)) secrets.register(p);
    const chunks: string[] = [];
    const log = createLogger({
      level: 'trace',
      secrets,
      destination: new Writable({
        write(chunk: Buffer, _e, done): void {
          chunks.push(chunk.toString('utf8'));
          done();
        },
      }),
    });
    for (const form of storeUrlPasswords(c.url)) {
      log.error(
        {
          err: new Error(`connect failed for ${c.url} (password "${form}")`),
          detail: `libpq: host=db password=${form} dbname=pglog`,
          nested: { a: { b: { c: { d: { e: form } } } } },
        },
        `store ${c.url}`,
      );
      log.warn({ where: describeStore(c.url), json: JSON.stringify({ form, url: c.url }) }, withoutPassword(`the password was ${form}`, c.url));
    }
    const out = chunks.join('');
    for (const piece of c.pieces) assert.ok(!out.includes(piece), `${c.url}: ${piece} in ${out}`);
  }
});
