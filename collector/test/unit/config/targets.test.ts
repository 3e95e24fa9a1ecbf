// The targets file (PostgresTarget YAML): the docs/targets.md example and the multi-document
// fixture parsed with defaults and resolved paths; reporting (several errors, syntax errors,
// caps); a fast-check round trip through yaml stringify. Each validation rule's failing case:
// targets-rules.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import type { PostgresInstance, PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { LOG_FORMATS, TRANSPORTS } from '@pglog/common/api/postgres-target.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import fc from 'fast-check';
import { stringify } from 'yaml';

import { loadTargetsFile, parseTargetsFile } from '../../../src/config/targets.ts';
import { SUPPORTED_ENCODINGS } from '../../../src/logformat/decode.ts';
import { brokenField, configError, FILE, fixture, FIXTURES, validDoc, withField } from '../../helpers/targets-file.ts';

void describe('parseTargetsFile: valid files', () => {
  void test('the example of docs/targets.md: defaults applied, paths resolved', () => {
    const file = fixture('targets-example.yaml');
    const targets = parseTargetsFile(readFileSync(file, 'utf8'), file);
    const expected: PostgresTarget = {
      apiVersion: 'pglog.io/v1alpha1',
      kind: 'PostgresTarget',
      metadata: { name: 'db1' },
      spec: {
        host: '127.0.0.2',
        port: 22,
        user: 'postgres',
        ssh: { privateKeyFile: path.join(FIXTURES, 'keys/id_ed25519'), knownHostsFile: path.join(FIXTURES, 'keys/known_hosts') },
        transport: 'auto',
        instances: [
          {
            name: 'main',
            dataDirectory: '/var/lib/postgresql/15/main',
            logDirectory: '/var/lib/postgresql/15/main/log',
            logFormat: 'stderr',
            logLinePrefix: '%m [%p] %q%u@%d ',
            encodings: { default: 'UTF8', databases: { legacy: 'WIN1251' } },
            sql: { socketDirectory: '/var/run/postgresql', port: 5432, database: 'postgres', user: 'postgres', timeoutSeconds: 5, allowSuperuser: false },
          },
        ],
        collect: { logs: true, activity: false, locks: false, statements: false, databases: false, intervalSeconds: 15, statisticsIntervalSeconds: 15 },
      },
    };
    assert.deepEqual(targets, [expected]);
  });

  void test('a multi-document stream; empty and comment-only documents skipped; values normalized', async () => {
    const file = fixture('targets-two-servers.yaml');
    const targets = await loadTargetsFile(file);
    assert.deepEqual(
      targets.map((t) => t.metadata.name),
      ['db1', 'db2'],
    );
    const [db1, db2] = targets as [PostgresTarget, PostgresTarget];
    assert.deepEqual(db1.spec.ssh, { privateKeyFile: '/etc/pglog/keys/id_ed25519', knownHostsFile: path.resolve(FIXTURES, '..', 'known_hosts') });
    assert.equal(db1.spec.port, 22);
    assert.equal(db1.spec.transport, 'auto');
    assert.equal(db1.spec.pool, undefined);
    assert.ok(!('pool' in db1.spec) && !('namespace' in db1.metadata), 'absent optional fields are left out, not undefined');
    assert.deepEqual(db1.spec.instances[0], {
      name: 'main',
      dataDirectory: '/var/lib/postgresql/15/main',
      logDirectory: '/var/lib/postgresql/15/main/log',
      logFormat: 'stderr',
      logLinePrefix: '%m [%p] ',
      encodings: { default: 'UTF8', databases: {} },
      sql: { socketDirectory: '/var/run/postgresql', port: 5432, database: 'postgres', user: 'postgres', timeoutSeconds: 5, allowSuperuser: false },
    });

    assert.deepEqual(db2.metadata, { name: 'db2', namespace: 'billing', labels: { env: 'prod', 'app.kubernetes.io/part-of': 'billing' } });
    assert.equal(db2.spec.host, '2001:db8::10');
    assert.equal(db2.spec.port, 2222);
    assert.equal(db2.spec.pool, 'big');
    assert.equal(db2.spec.transport, 'proxy');
    assert.deepEqual(db2.spec.ssh, { privateKeyFile: path.join(FIXTURES, 'keys/db2'), knownHostsFile: path.join(FIXTURES, 'keys/known_hosts') });
    assert.deepEqual(db2.spec.collect, {
      logs: true,
      activity: true,
      locks: true,
      statements: false,
      databases: false,
      intervalSeconds: 15,
      statisticsIntervalSeconds: 15,
    });
    const [m15, m16] = db2.spec.instances as [PostgresInstance, PostgresInstance];
    assert.equal(m15.dataDirectory, '/srv/pg/15/main');
    assert.equal(m15.logDirectory, '/var/log/postgresql');
    assert.equal(m15.logFormat, 'csvlog');
    assert.deepEqual(m15.encodings, { default: 'WIN1251', databases: { reports: 'UTF8', 'old db': 'KOI8R' } });
    assert.deepEqual(m15.sql, { socketDirectory: '/tmp', port: 5433, database: 'postgres', user: 'pgmon', timeoutSeconds: 5, allowSuperuser: false });
    assert.equal(m16.logDirectory, '/srv/pg/16/main/logs');
    assert.equal(m16.logFormat, 'jsonlog');
  });

  void test('same name in different namespaces is allowed', () => {
    const a = withField(validDoc(), 'metadata.namespace', 'a');
    const b = withField(validDoc(), 'metadata.namespace', 'b');
    assert.equal(parseTargetsFile(`${stringify(a)}---\n${stringify(b)}`, FILE).length, 2);
  });

  void test('cluster mode: a Secret reference', () => {
    const doc = withField(validDoc(), 'spec.ssh', { secretRef: { name: 'db1-ssh' } });
    const [t] = parseTargetsFile(stringify(doc), FILE, { mode: 'cluster' });
    assert.deepEqual(t?.spec.ssh, { secretRef: { name: 'db1-ssh' } });
  });

  void test("startAt: absent unless given (the collector's --start-at then), per target and per instance", () => {
    const [plain] = parseTargetsFile(stringify(validDoc()), FILE);
    assert.equal(plain?.spec.startAt, undefined);
    assert.equal(plain?.spec.instances[0]?.startAt, undefined);
    const doc = withField(withField(validDoc(), 'spec.startAt', 'oldest'), 'spec.instances', [{ name: 'main', dataDirectory: '/d', startAt: 'now' }]);
    const [t] = parseTargetsFile(stringify(doc), FILE);
    assert.equal(t?.spec.startAt, 'oldest');
    assert.equal(t?.spec.instances[0]?.startAt, 'now');
  });

  void test('a database named __proto__ is kept as data', () => {
    const doc = withField(validDoc(), 'spec.instances', [{ name: 'main', dataDirectory: '/d', encodings: { databases: { ['__proto__']: 'win1251' } } }]);
    const [t] = parseTargetsFile(stringify(doc), FILE);
    const dbs = t?.spec.instances[0]?.encodings.databases ?? {};
    assert.deepEqual(Object.entries(dbs), [['__proto__', 'WIN1251']]);
    assert.equal(Object.getPrototypeOf(dbs), Object.prototype);
  });
});

void describe('parseTargetsFile: reporting', () => {
  void test('several errors in one file are all reported, in file order', () => {
    const file = fixture('targets-invalid.yaml');
    const err = configError(() => parseTargetsFile(readFileSync(file, 'utf8'), file));
    assert.deepEqual(err.split('\n'), [
      `${file}: document 1 (PostgresTarget/db1): spec.port: expected an integer from 1 to 65535, got 70000 (line 7)`,
      `${file}: document 1 (PostgresTarget/db1): spec.instances[0].logdirectory: unknown field; did you mean logDirectory? (line 13)`,
      `${file}: document 1 (PostgresTarget/db1): spec.instances[0].logFormat: expected one of stderr, csvlog, jsonlog, got "csv" (line 14)`,
      `${file}: document 2 (PostgresTarget/DB_2): apiVersion: expected "pglog.io/v1alpha1", got "pglog.io/v1" (line 16)`,
      `${file}: document 2 (PostgresTarget/DB_2): metadata.name: expected a DNS-1123 label (lower-case letters, digits and "-", starting and ending with a letter or digit), at most 63 characters, got "DB_2" (line 18)`,
      `${file}: document 2 (PostgresTarget/DB_2): spec.ssh.knownHostsFile: required field is missing (line 22)`,
      `${file}: document 2 (PostgresTarget/DB_2): spec.instances: at least one instance is required (line 23)`,
    ]);
  });

  void test('a YAML syntax error gives file, line and column; other documents are still checked', () => {
    const text = `${stringify(withField(validDoc(), 'spec.port', 0))}---\nkind: [PostgresTarget\nmetadata: {name: x}\n`;
    const err = configError(() => parseTargetsFile(text, FILE)).split('\n');
    assert.equal(err.length, 2);
    assert.match(err[0] ?? '', /document 1 \(PostgresTarget\/db1\): spec\.port: /);
    const docLine = text.split('\n').indexOf('kind: [PostgresTarget') + 1;
    assert.match(err[1] ?? '', new RegExp(`^${FILE}:${docLine + 1}:1: document 2: YAML syntax error: `));
  });

  void test('duplicate keys and tabs are YAML errors with positions', () => {
    assert.match(
      configError(() => parseTargetsFile('a: 1\nb: 2\na: 3\n', FILE)),
      new RegExp(`^${FILE}:3:1: document 1: YAML syntax error: Map keys must be unique$`),
    );
    assert.match(
      configError(() => parseTargetsFile('a:\n\t- 1\n', FILE)),
      new RegExp(`^${FILE}:2:\\d+: document 1: YAML syntax error: `),
    );
  });

  void test('messages never echo whole documents or long values', () => {
    const key = `-----BEGIN OPENSSH PRIVATE KEY-----\n${'b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW'.repeat(5)}\n-----END OPENSSH PRIVATE KEY-----\n`;
    const docs = [
      withField(validDoc(), 'spec.ssh', { privateKey: key, knownHostsFile: 'h' }),
      withField(validDoc(), 'spec.ssh.privateKeyFile', key),
      withField(validDoc(), 'spec.host', key),
    ];
    for (const doc of docs) {
      const err = configError(() => parseTargetsFile(stringify(doc), FILE));
      assert.doesNotMatch(err, /b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW/);
      assert.doesNotMatch(err, /END OPENSSH/);
      assert.doesNotMatch(err, /dataDirectory|\/var\/lib/);
    }
  });

  void test('many problems are capped with a count of the rest', () => {
    const instances = Array.from({ length: 150 }, (_, i) => ({ name: `i${i}`, dataDirectory: 'relative' }));
    const err = configError(() => parseTargetsFile(brokenField('spec.instances', instances), FILE)).split('\n');
    assert.equal(err.length, 101);
    assert.equal(err[100], `${FILE}: ... and 50 more problems`);
  });

  void test('loadTargetsFile: an unreadable file is INPUT_UNREADABLE', async () => {
    await assert.rejects(loadTargetsFile(fixture('targets-missing.yaml')), (e: unknown) => {
      assert.ok(isPglogError(e));
      assert.equal(e.code, 'INPUT_UNREADABLE');
      assert.match(e.message, /targets-missing\.yaml: cannot read the targets file \(ENOENT\)/);
      return true;
    });
  });
});

// --- round trip ------------------------------------------------------------------------------

const dnsLabel = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?$/);
const segment = fc.stringMatching(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,8}$/);
const absPath = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => `/${s.join('/')}`);
const roleName = fc.stringMatching(/^[a-z_][a-z0-9_$-]{0,15}$/);
const encoding = fc.constantFrom(...SUPPORTED_ENCODINGS);
const prefixes = fc.constantFrom('%m [%p] ', '%m [%p] %q%u@%d ', '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ', '', '%n [%p] %e ', '%s %c %x ');

const instanceArb = (user: string): fc.Arbitrary<PostgresInstance> =>
  fc.record({
    name: dnsLabel,
    dataDirectory: absPath,
    logDirectory: absPath,
    logFormat: fc.constantFrom(...LOG_FORMATS),
    logLinePrefix: prefixes,
    encodings: fc.record({
      default: encoding,
      databases: fc.dictionary(fc.string({ minLength: 1, maxLength: 12 }), encoding, { maxKeys: 4 }),
    }),
    sql: fc.record({
      socketDirectory: absPath,
      port: fc.integer({ min: 1, max: 65535 }),
      database: roleName,
      user: fc.oneof(fc.constant(user), roleName),
      timeoutSeconds: fc.integer({ min: 1, max: 300 }),
      allowSuperuser: fc.boolean(),
    }),
  });

const targetArb: fc.Arbitrary<PostgresTarget> = fc
  .record({
    name: dnsLabel,
    namespace: fc.option(dnsLabel, { nil: undefined }),
    labels: fc.option(
      fc.dictionary(
        fc.stringMatching(/^([a-z0-9]{1,8}\.[a-z]{2,4}\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?$/),
        fc.stringMatching(/^([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?$/),
        { maxKeys: 3 },
      ),
      { nil: undefined },
    ),
    host: fc.oneof(fc.domain(), fc.ipV4(), fc.ipV6()),
    port: fc.integer({ min: 1, max: 65535 }),
    user: roleName,
    ssh: fc.record({ privateKeyFile: absPath, knownHostsFile: absPath }),
    pool: fc.option(dnsLabel, { nil: undefined }),
    transport: fc.constantFrom(...TRANSPORTS),
    collect: fc
      .record({
        logs: fc.boolean(),
        activity: fc.boolean(),
        locks: fc.boolean(),
        statements: fc.boolean(),
        databases: fc.boolean(),
        intervalSeconds: fc.integer({ min: 1, max: 3600 }),
        statisticsIntervalSeconds: fc.integer({ min: 1, max: 3600 }),
      })
      .filter((c) => c.logs || c.activity || c.locks || c.statements || c.databases),
  })
  .chain((t) =>
    fc.uniqueArray(instanceArb(t.user), { minLength: 1, maxLength: 3, selector: (i) => i.name }).map((instances): PostgresTarget => {
      const target: PostgresTarget = {
        apiVersion: 'pglog.io/v1alpha1',
        kind: 'PostgresTarget',
        metadata: { name: t.name },
        spec: { host: t.host, port: t.port, user: t.user, ssh: t.ssh, transport: t.transport, instances, collect: t.collect },
      };
      if (t.namespace !== undefined) target.metadata.namespace = t.namespace;
      if (t.labels !== undefined) target.metadata.labels = t.labels;
      if (t.pool !== undefined) target.spec.pool = t.pool;
      return target;
    }),
  );

void describe('parseTargetsFile: round trip', () => {
  void test('valid generated targets survive yaml stringify → parse unchanged', () => {
    fc.assert(
      fc.property(fc.uniqueArray(targetArb, { minLength: 1, maxLength: 4, selector: (t) => t.metadata.name }), (targets) => {
        const text = targets.map((t) => stringify(t)).join('---\n');
        // structuredClone: fast-check builds records without a prototype; the parser builds plain objects.
        assert.deepEqual(parseTargetsFile(text, FILE), structuredClone(targets));
      }),
      { numRuns: 300 },
    );
  });
});
