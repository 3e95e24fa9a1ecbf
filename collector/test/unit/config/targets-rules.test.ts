// The targets file (PostgresTarget YAML): every validation rule has a failing case whose
// CONFIG_INVALID line names file, document, object, field and YAML line. Valid files,
// reporting and the round trip: targets.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { stringify } from 'yaml';

import { parseTargetsFile } from '../../../src/config/targets.ts';
import { assertProblem, brokenField, configError, FILE, validDoc, withField } from '../../helpers/targets-file.ts';

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
    assertProblem(brokenField('spec.instances.0.sql', { allowSuperuser: 'yes' }), 'spec.instances[0].sql.allowSuperuser', /expected true or false/);
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
