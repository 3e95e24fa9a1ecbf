// Cluster mode, pure parts: which targets an assignment change starts, stops, restarts and
// re-pins; a target's fingerprint; the Secret → credentials parsing and the API object →
// target validation, with errors that name the object and never the key.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';

import { credentialsFromSecret, secretNameOf, targetFromObject } from '../../../src/cluster/target-credentials.ts';
import { planAssignment, type PlannedTarget, targetFingerprint } from '../../../src/collect/assignment-plan.ts';

const p = (name: string, fingerprint = 'f', epoch: number | null = 1, transport: PlannedTarget['transport'] = 'inproc'): PlannedTarget => ({
  name,
  fingerprint,
  epoch,
  transport,
});

describe('planAssignment', () => {
  test('start new, stop removed, restart changed spec or epoch, re-pin a new transport only', () => {
    const running = [p('a'), p('b'), p('c'), p('d'), p('e')];
    const wanted = [p('f'), p('e', 'f', 1, 'proxy'), p('d', 'f', 2), p('c', 'g'), p('a')];
    assert.deepEqual(planAssignment(running, wanted), {
      start: ['f'],
      stop: ['b'],
      restart: ['c', 'd'],
      repin: [{ name: 'e', transport: 'proxy' }],
    });
  });

  test('a changed spec and transport together is a restart, not also a re-pin', () => {
    assert.deepEqual(planAssignment([p('a')], [p('a', 'g', 1, 'proxy')]), { start: [], stop: [], restart: ['a'], repin: [] });
  });

  test('the same assignment does nothing; an empty one stops everything, in name order', () => {
    const all = [p('z'), p('m'), p('a')];
    assert.deepEqual(planAssignment(all, [...all].reverse()), { start: [], stop: [], restart: [], repin: [] });
    assert.deepEqual(planAssignment(all, []).stop, ['a', 'm', 'z']);
    assert.deepEqual(planAssignment([], all).start, ['a', 'm', 'z']);
  });
});

const target = (over: Partial<PostgresTarget['spec']> = {}): PostgresTarget => ({
  apiVersion: 'pglog.io/v1alpha1',
  kind: 'PostgresTarget',
  metadata: { name: 'db1' },
  spec: {
    host: '10.0.0.1',
    port: 22,
    user: 'postgres',
    ssh: { secretRef: { name: 'db1-ssh' } },
    transport: 'inproc',
    instances: [
      {
        name: 'main',
        dataDirectory: '/d',
        logDirectory: '/d/log',
        logFormat: 'stderr',
        logLinePrefix: '%m ',
        encodings: { default: 'UTF8', databases: {} },
        sql: { socketDirectory: '/run', port: 5432, database: 'postgres', user: 'postgres', timeoutSeconds: 5, allowSuperuser: false },
      },
    ],
    collect: { logs: true, activity: false, locks: false, statements: false, databases: false, intervalSeconds: 15, statisticsIntervalSeconds: 15 },
    ...over,
  },
});
const creds = (key = 'K', hosts = 'H'): { privateKey: Buffer; knownHosts: { text: string } } => ({ privateKey: Buffer.from(key), knownHosts: { text: hosts } });

describe('targetFingerprint', () => {
  test('changes with the spec and the credentials, not with the transport', () => {
    const base = targetFingerprint(target(), creds());
    assert.equal(targetFingerprint(target({ transport: 'proxy' }), creds()), base);
    assert.notEqual(targetFingerprint(target({ port: 2222 }), creds()), base);
    assert.notEqual(targetFingerprint(target(), creds('K2')), base);
    assert.notEqual(targetFingerprint(target(), creds('K', 'H2')), base);
    assert.ok(!base.includes('K'), 'a digest, not the key');
  });
});

const KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\ncanary-secret-material\n-----END OPENSSH PRIVATE KEY-----\n';
const b64 = (s: string): string => Buffer.from(s).toString('base64');
const secret = (data: Record<string, string>): { metadata: { name: string; namespace: string }; data: Record<string, string> } => ({
  metadata: { name: 'db1-ssh', namespace: 'ns' },
  data,
});
const invalid =
  (fragment: RegExp) =>
  (e: unknown): boolean =>
    e instanceof PglogError && e.code === 'CONFIG_INVALID' && fragment.test(e.message) && !e.message.includes('canary');

describe('credentialsFromSecret', () => {
  test('id_ed25519 preferred over id_rsa; known_hosts decoded; sources name the Secret and key', () => {
    const c = credentialsFromSecret(
      secret({ id_rsa: b64(KEY.replace('canary', 'rsa')), id_ed25519: b64(KEY), known_hosts: b64('host ssh-ed25519 AAAA\n') }),
      'db1',
    );
    assert.equal(c.privateKey.toString(), KEY);
    assert.equal(c.knownHosts.text, 'host ssh-ed25519 AAAA\n');
    assert.equal(c.privateKeySource, 'Secret ns/db1-ssh key id_ed25519');
    assert.equal(credentialsFromSecret(secret({ id_rsa: b64(KEY), known_hosts: b64('h k\n') }), 'db1').privateKeySource.endsWith('key id_rsa'), true);
  });

  test('missing, empty, not base64, not a key: CONFIG_INVALID naming the Secret and the keys it has, never the key text', () => {
    assert.throws(
      () => credentialsFromSecret(secret({ known_hosts: b64('h k') }), 'db1'),
      invalid(/Secret ns\/db1-ssh .*no private key: expected the key id_ed25519 or id_rsa; it has keys known_hosts/),
    );
    assert.throws(() => credentialsFromSecret(secret({ id_ed25519: b64(KEY) }), 'db1'), invalid(/no known_hosts.*it has keys id_ed25519/));
    assert.throws(() => credentialsFromSecret(secret({ id_ed25519: b64(KEY), known_hosts: b64('  \n') }), 'db1'), invalid(/known_hosts is empty/));
    assert.throws(() => credentialsFromSecret(secret({ id_ed25519: 'not base64!', known_hosts: b64('h k') }), 'db1'), invalid(/id_ed25519 is not base64/));
    assert.throws(
      () => credentialsFromSecret(secret({ id_ed25519: b64('canary plain text'), known_hosts: b64('h k') }), 'db1'),
      invalid(/id_ed25519 is not a private key/),
    );
    assert.throws(() => credentialsFromSecret({ metadata: { name: 'x' } }, 'db1'), invalid(/Secret x .*it has no keys/));
  });
});

describe('targetFromObject', () => {
  const served = (spec: Record<string, unknown>): Record<string, unknown> => ({
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name: 'db1', namespace: 'ns', uid: 'u-1', resourceVersion: '42', generation: 3, creationTimestamp: '2026-01-01T00:00:00Z', managedFields: [] },
    spec,
    status: { shard: 0 },
  });

  test('server fields (uid, resourceVersion, status) are ignored; the spec is validated and normalized in cluster mode', () => {
    const t = targetFromObject(
      served({ host: 'h', user: 'postgres', ssh: { secretRef: { name: 'db1-ssh' } }, instances: [{ name: 'main', dataDirectory: '/var/lib/pg' }] }),
      'PostgresTarget ns/db1',
    );
    assert.equal(t.metadata.name, 'db1');
    assert.equal(t.spec.port, 22);
    assert.equal(t.spec.instances[0]!.logDirectory, '/var/lib/pg/log');
    assert.equal(secretNameOf(t), 'db1-ssh');
  });

  test('key files are refused in the cluster; problems name the object and the field', () => {
    assert.throws(
      () =>
        targetFromObject(
          served({ host: 'h', user: 'u', ssh: { privateKeyFile: 'k', knownHostsFile: 'h' }, instances: [{ name: 'main', dataDirectory: '/d' }] }),
          'PostgresTarget ns/db1',
        ),
      (e: unknown) => e instanceof PglogError && e.code === 'CONFIG_INVALID' && /^PostgresTarget ns\/db1: spec\.ssh/.test(e.message),
    );
    assert.throws(
      () =>
        targetFromObject(
          served({ host: 'h', user: 'u', ssh: { secretRef: { name: 's' } }, instances: [{ name: 'main', dataDirectory: '/d', logFormat: 'csv' }] }),
          'PostgresTarget ns/db1',
        ),
      (e: unknown) => e instanceof PglogError && /spec\.instances\[0\]\.logFormat/.test(e.message),
    );
  });
});
