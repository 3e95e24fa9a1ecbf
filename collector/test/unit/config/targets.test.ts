// The targets file (PostgresTarget YAML): the docs/targets.md example and the multi-document
// fixture parsed with defaults and resolved paths; every validation rule has a failing case
// whose CONFIG_INVALID line names file, document, object, field and YAML line; reporting
// (several errors, syntax errors, caps); a fast-check round trip through yaml stringify.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import type { PostgresInstance, PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { LOG_FORMATS, TRANSPORTS } from '@pglog/common/api/postgres-target.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import fc from 'fast-check';
import { stringify } from 'yaml';

import { loadTargetsFile, parseTargetsFile } from '../../../src/config/targets.ts';
import { SUPPORTED_ENCODINGS } from '../../../src/logformat/decode.ts';

const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'fixtures');
const fixture = (name: string): string => path.join(FIXTURES, name);
const FILE = '/etc/pglog/targets.yaml';

/** The error of a call that must fail validation. */
function configError(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    assert.ok(isPglogError(e), `not a PglogError: ${String(e)}`);
    assert.equal(e.code, 'CONFIG_INVALID');
    return e.message;
  }
  assert.fail('expected CONFIG_INVALID');
}

/** A valid document as a plain object, for tests to break one field of. */
function validDoc(name = 'db1'): Record<string, unknown> {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name },
    spec: {
      host: 'db1.example.com',
      user: 'postgres',
      ssh: { privateKeyFile: 'keys/id_ed25519', knownHostsFile: 'keys/known_hosts' },
      instances: [{ name: 'main', dataDirectory: '/var/lib/postgresql/15/main' }],
    },
  };
}

/** Sets (or with `undefined` deletes) the field at a dotted path; numbers index lists. */
function withField(doc: Record<string, unknown>, dotted: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(doc);
  const keys = dotted.split('.');
  let o = copy;
  for (const k of keys.slice(0, -1)) o = o[k] as Record<string, unknown>;
  const last = keys.at(-1) as string;
  if (value === undefined) delete o[last];
  else o[last] = value;
  return copy;
}

/** Asserts the single-document text fails with a line naming file, document, object and field. */
function assertProblem(text: string, field: string, message: RegExp, options?: { object?: string; mode?: 'standalone' | 'cluster' }): void {
  const err = configError(() => parseTargetsFile(text, FILE, options?.mode === undefined ? undefined : { mode: options.mode }));
  const head = `${FILE}: document 1 (PostgresTarget/${options?.object ?? 'db1'}): ${field}: `;
  const line = err.split('\n').find((l) => l.startsWith(head));
  assert.ok(line !== undefined, `no problem for ${field} in:\n${err}`);
  assert.match(line, message);
  assert.match(line, /\(line \d+\)$/);
}

const brokenField = (dotted: string, value: unknown): string => stringify(withField(validDoc(), dotted, value));

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
            sql: { socketDirectory: '/var/run/postgresql', port: 5432, database: 'postgres', user: 'postgres', timeoutSeconds: 5 },
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
      sql: { socketDirectory: '/var/run/postgresql', port: 5432, database: 'postgres', user: 'postgres', timeoutSeconds: 5 },
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
    assert.deepEqual(m15.sql, { socketDirectory: '/tmp', port: 5433, database: 'postgres', user: 'pgmon', timeoutSeconds: 5 });
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

void describe('parseTargetsFile: every rule has a failing case naming file, document, object and field', () => {
  void test('apiVersion and kind', () => {
    assertProblem(brokenField('apiVersion', 'pglog.io/v1'), 'apiVersion', /expected "pglog\.io\/v1alpha1", got "pglog\.io\/v1"/);
    assertProblem(brokenField('apiVersion', undefined), 'apiVersion', /required field is missing/);
    assertProblem(brokenField('kind', 'CollectorPool'), 'kind', /expected "PostgresTarget", got "CollectorPool"/);
  });

  void test('metadata.name: a DNS-1123 label, required', () => {
    const cases: [string, string][] = [
      ['DB1', 'DB1'],
      ['db_1', 'db_1'],
      ['-db', '-db'],
      ['db-', 'db-'],
      ['a b', '"a b"'],
      ['a'.repeat(64), `"${'a'.repeat(60)}..."`],
    ];
    for (const [bad, object] of cases) {
      assertProblem(brokenField('metadata.name', bad), 'metadata.name', /expected a DNS-1123 label .*, at most 63 characters, got "/, { object });
    }
    assertProblem(brokenField('metadata.name', ''), 'metadata.name', /must not be empty/, { object: '?' });
    assertProblem(brokenField('metadata.name', 12), 'metadata.name', /expected a string, got 12/, { object: '?' });
    assertProblem(brokenField('metadata', {}), 'metadata.name', /required field is missing/, { object: '?' });
    assertProblem(brokenField('metadata.namespace', 'Team A'), 'metadata.namespace', /DNS-1123 label/);
  });

  void test('metadata labels and annotations', () => {
    assertProblem(brokenField('metadata.labels', { env: 1 }), 'metadata.labels.env', /expected a string, got 1 \(quote it\)/);
    assertProblem(brokenField('metadata.labels', { env: 'a b' }), 'metadata.labels.env', /expected a label value/);
    assertProblem(brokenField('metadata.labels', { 'bad key!': 'x' }), 'metadata.labels["bad key!"]', /expected a key of the form/);
    assertProblem(brokenField('metadata.annotations', { note: ['x'] }), 'metadata.annotations.note', /expected a string, got a list/);
  });

  void test('names are unique per namespace', () => {
    const err = configError(() => parseTargetsFile(`${stringify(validDoc())}---\n${stringify(validDoc())}`, FILE));
    assert.match(
      err,
      new RegExp(`^${FILE}: document 2 \\(PostgresTarget/db1\\): metadata\\.name: duplicate name "db1": document 1 has it too \\(line \\d+\\)$`, 'm'),
    );
    const ns = withField(validDoc(), 'metadata.namespace', 'x');
    assert.match(
      configError(() => parseTargetsFile(`${stringify(ns)}---\n${stringify(ns)}`, FILE)),
      /document 2 \(PostgresTarget\/db1\): metadata\.name: duplicate name "db1" in namespace x/,
    );
  });

  void test('host: a host name or an IP address', () => {
    for (const bad of ['', 'db 1', 'db_1.example.com', '-db.example.com', '999.1.1.1', '1.2.3', 'host:22', '[::1]']) {
      assertProblem(brokenField('spec.host', bad), 'spec.host', bad === '' ? /must not be empty/ : /expected a host name or an IP address/);
    }
    assertProblem(brokenField('spec.host', undefined), 'spec.host', /required field is missing/);
    for (const good of ['db1', 'db1.example.com.', '10.0.0.1', '::1', 'fe80::1']) {
      assert.equal(parseTargetsFile(brokenField('spec.host', good), FILE)[0]?.spec.host, good);
    }
  });

  void test('port: an integer from 1 to 65535', () => {
    for (const bad of [0, 65536, 22.5, -1, '22', true]) {
      assertProblem(brokenField('spec.port', bad), 'spec.port', /expected an integer from 1 to 65535, got /);
    }
    assertProblem(`${stringify(validDoc())}`.replace('spec:\n', 'spec:\n  port:\n'), 'spec.port', /got null/);
  });

  void test('user: non-empty, required', () => {
    assertProblem(brokenField('spec.user', ''), 'spec.user', /must not be empty/);
    assertProblem(brokenField('spec.user', 'post gres'), 'spec.user', /whitespace/);
    assertProblem(brokenField('spec.user', undefined), 'spec.user', /required field is missing/);
  });

  void test('ssh: exactly one form, the one of the mode', () => {
    assertProblem(brokenField('spec.ssh', undefined), 'spec.ssh', /required field is missing/);
    assertProblem(
      brokenField('spec.ssh', { secretRef: { name: 's' } }),
      'spec.ssh.secretRef',
      /only be used in the cluster; in a targets file give privateKeyFile and knownHostsFile/,
    );
    assertProblem(
      brokenField('spec.ssh', { privateKeyFile: 'k', knownHostsFile: 'h', secretRef: { name: 's' } }),
      'spec.ssh',
      /either privateKeyFile and knownHostsFile, or secretRef, not both/,
    );
    assertProblem(brokenField('spec.ssh', { privateKeyFile: 'k' }), 'spec.ssh.knownHostsFile', /required field is missing/);
    assertProblem(brokenField('spec.ssh', {}), 'spec.ssh.privateKeyFile', /required field is missing/);
    assertProblem(brokenField('spec.ssh.privateKeyFile', '~/.ssh/id_ed25519'), 'spec.ssh.privateKeyFile', /"~" is not expanded/);
    assertProblem(brokenField('spec.ssh', 'keys/id_ed25519'), 'spec.ssh', /expected a mapping, got "keys\/id_ed25519"/);
    assertProblem(
      brokenField('spec.ssh', { privateKeyFile: 'k', knownHostsFile: 'h' }),
      'spec.ssh',
      /key files cannot be used in the cluster; give secretRef/,
      { mode: 'cluster' },
    );
    assertProblem(brokenField('spec.ssh', {}), 'spec.ssh.secretRef', /required field is missing/, { mode: 'cluster' });
    assertProblem(brokenField('spec.ssh', { secretRef: { name: 'Bad_Name' } }), 'spec.ssh.secretRef.name', /DNS-1123 subdomain/, { mode: 'cluster' });
  });

  void test('pool and transport', () => {
    assertProblem(brokenField('spec.pool', 'Big Pool'), 'spec.pool', /DNS-1123 label/);
    assertProblem(brokenField('spec.transport', 'ssh'), 'spec.transport', /expected one of auto, inproc, proxy, got "ssh"/);
    assertProblem(brokenField('spec.startAt', 'beginning'), 'spec.startAt', /expected one of newest, oldest, now, got "beginning"/);
    assertProblem(brokenField('spec.instances.0.startAt', 'end'), 'spec.instances[0].startAt', /expected one of newest, oldest, now, got "end"/);
  });

  void test('instances: a non-empty list with unique names', () => {
    assertProblem(brokenField('spec.instances', []), 'spec.instances', /at least one instance is required/);
    assertProblem(brokenField('spec.instances', { name: 'main' }), 'spec.instances', /expected a list of instances, got a mapping/);
    assertProblem(brokenField('spec.instances', undefined), 'spec.instances', /required field is missing/);
    assertProblem(brokenField('spec.instances', ['main']), 'spec.instances[0]', /expected a mapping, got "main"/);
    const two = [
      { name: 'main', dataDirectory: '/a' },
      { name: 'main', dataDirectory: '/b' },
    ];
    assertProblem(brokenField('spec.instances', two), 'spec.instances[1].name', /duplicate instance name "main": instances\[0\] has it too/);
    assertProblem(brokenField('spec.instances.0.name', 'Main'), 'spec.instances[0].name', /DNS-1123 label/);
  });

  void test('dataDirectory absolute; logDirectory relative to it or absolute', () => {
    assertProblem(
      brokenField('spec.instances.0.dataDirectory', 'var/lib/pg'),
      'spec.instances[0].dataDirectory',
      /expected an absolute path on the server, got "var\/lib\/pg"/,
    );
    assertProblem(brokenField('spec.instances.0.dataDirectory', undefined), 'spec.instances[0].dataDirectory', /required field is missing/);
    assertProblem(brokenField('spec.instances.0.logDirectory', 'log\nx'), 'spec.instances[0].logDirectory', /control characters/);
    assertProblem(brokenField('spec.instances.0.logDirectory', ''), 'spec.instances[0].logDirectory', /must not be empty/);
  });

  void test('logFormat in the set', () => {
    assertProblem(
      brokenField('spec.instances.0.logFormat', 'csv'),
      'spec.instances[0].logFormat',
      /^.*: expected one of stderr, csvlog, jsonlog, got "csv" \(line \d+\)$/,
    );
    assertProblem(brokenField('spec.instances.0.logFormat', null), 'spec.instances[0].logFormat', /got null/);
  });

  void test('logLinePrefix compiled: a bad escape fails with its position', () => {
    assertProblem(brokenField('spec.instances.0.logLinePrefix', '%m [%p] %Z '), 'spec.instances[0].logLinePrefix', /unknown escape %Z at position 8/);
    assertProblem(brokenField('spec.instances.0.logLinePrefix', '%m [%p] %u%d'), 'spec.instances[0].logLinePrefix', /cannot be told apart/);
    assertProblem(brokenField('spec.instances.0.logLinePrefix', 5), 'spec.instances[0].logLinePrefix', /expected a string, got 5/);
  });

  void test('encodings checked and made canonical', () => {
    assertProblem(
      brokenField('spec.instances.0.encodings', { default: 'UTF9' }),
      'spec.instances[0].encodings.default',
      /unknown encoding "UTF9"; supported: UTF8/,
    );
    assertProblem(
      brokenField('spec.instances.0.encodings', { databases: { legacy: 'EUC_TW' } }),
      'spec.instances[0].encodings.databases.legacy',
      /EUC_TW has no decoder/,
    );
    assertProblem(
      brokenField('spec.instances.0.encodings', { databases: { 'my db': 'nope' } }),
      'spec.instances[0].encodings.databases["my db"]',
      /unknown encoding "nope"/,
    );
    assertProblem(
      brokenField('spec.instances.0.encodings', { databases: ['a'] }),
      'spec.instances[0].encodings.databases',
      /expected a mapping of database name to encoding, got a list/,
    );
    assertProblem(brokenField('spec.instances.0.encodings', 'UTF8'), 'spec.instances[0].encodings', /expected a mapping, got "UTF8"/);
  });

  void test('sql', () => {
    assertProblem(brokenField('spec.instances.0.sql', { port: 0 }), 'spec.instances[0].sql.port', /expected an integer from 1 to 65535/);
    assertProblem(brokenField('spec.instances.0.sql', { socketDirectory: 'run' }), 'spec.instances[0].sql.socketDirectory', /absolute path/);
    assertProblem(brokenField('spec.instances.0.sql', { database: '' }), 'spec.instances[0].sql.database', /must not be empty/);
    assertProblem(brokenField('spec.instances.0.sql', { user: 'a b' }), 'spec.instances[0].sql.user', /whitespace/);
  });

  void test('collect: booleans, something to collect', () => {
    assertProblem(brokenField('spec.collect', { logs: 'yes' }), 'spec.collect.logs', /expected true or false, got "yes"/);
    assertProblem(brokenField('spec.collect', { logs: false }), 'spec.collect', /nothing to collect/);
  });

  void test('unknown fields rejected, with "did you mean" when close', () => {
    assertProblem(brokenField('spec.instances.0.logdirectory', 'log'), 'spec.instances[0].logdirectory', /unknown field; did you mean logDirectory\?/);
    assertProblem(brokenField('spec.hots', 'x'), 'spec.hots', /did you mean host\?/);
    assertProblem(brokenField('spec.instances.0.logFromat', 'csvlog'), 'spec.instances[0].logFromat', /did you mean logFormat\?/);
    assertProblem(brokenField('metadata.uid', 'abc'), 'metadata.uid', /: unknown field; expected one of name, namespace, labels, annotations \(line/);
    assertProblem(brokenField('spec.collect', { activty: true }), 'spec.collect.activty', /did you mean activity\?/);
    assertProblem(brokenField('spec.ssh.knownHosts', 'x'), 'spec.ssh.knownHosts', /did you mean knownHostsFile\?/);
    assertProblem(brokenField('spec.instances.0.prefix', 'x'), 'spec.instances[0].prefix', /did you mean logLinePrefix\?/);
    assertProblem(brokenField('spec.instances.0.LogFormat', 'csvlog'), 'spec.instances[0].LogFormat', /did you mean logFormat\?/);
    assertProblem(brokenField('spec.ssh.file', 'x'), 'spec.ssh.file', /unknown field; expected one of privateKeyFile, knownHostsFile, secretRef \(line/);
    assertProblem(brokenField('status', { shard: 1 }), 'status', /status is written by pglog/);
  });

  void test('a document that is not a mapping', () => {
    const err = configError(() => parseTargetsFile('- a\n- b\n', FILE));
    assert.match(
      err,
      new RegExp(`^${FILE}: document 1 \\(PostgresTarget/\\?\\): \\(document\\): expected a mapping \\(a PostgresTarget object\\), got a list \\(line 1\\)$`),
    );
  });

  void test('a file without targets', () => {
    for (const text of ['', '# nothing\n', '---\n---\n']) {
      assert.equal(
        configError(() => parseTargetsFile(text, FILE)),
        `${FILE}: no PostgresTarget objects in the file`,
      );
    }
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
