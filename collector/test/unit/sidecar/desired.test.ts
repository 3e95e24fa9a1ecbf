// desired.json entry by entry (F7 of the 2026-11 review): one target's wrong server, stream or
// forward is refused alone, with why, and every other entry applies. And the SSH user rule is
// one rule: the targets loader, the CRD's pattern and the sidecar accept the same names
// (alice@corp.example.com included) and refuse the same ones.
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { type DesiredServer, parseDesiredState, SSH_USER_PATTERN, sshUserProblem } from '@pglog/common/sidecar/contract.ts';
import fc from 'fast-check';
import { parse as parseYaml } from 'yaml';

import { parseTargetsFile } from '../../../src/config/targets.ts';

const ROOT = join(import.meta.dirname, '../../../..');

const server = (name: string, user: string): DesiredServer => ({
  name,
  host: `${name}.example.com`,
  port: 22,
  user,
  identityFile: `${name}.key`,
  knownHostsFile: `${name}.known_hosts`,
  maxSessions: 10,
  serverAliveIntervalS: 5,
  connectTimeoutS: 5,
});
const desired = (servers: unknown[], streams: unknown[], forwards: unknown[] = []): string =>
  JSON.stringify({ version: 1, generation: 7, servers, streams, forwards });

describe('desired.json: a wrong entry is refused alone', () => {
  test('a server whose user would be an ssh option is refused with its streams and forwards; the rest applies', () => {
    const d = parseDesiredState(
      desired(
        [server('busy-db', 'postgres'), server('bad-db', '-oProxyCommand=touch /tmp/x'), server('ad-db', 'alice@corp.example.com')],
        [
          { id: 's1', server: 'busy-db', command: 'echo healthy' },
          { id: 's2', server: 'bad-db', command: 'echo no' },
          { id: 's3', server: 'ad-db', command: 'echo ad' },
        ],
        [
          { id: 'f1', server: 'bad-db', remoteSocket: '/run/postgresql/.s.PGSQL.5432', port: 5432 },
          { id: 'f2', server: 'busy-db', remoteSocket: '/run/postgresql/.s.PGSQL.5432', port: 5432 },
        ],
      ),
    );
    assert.deepEqual(
      d.servers.map((s) => s.name),
      ['busy-db', 'ad-db'],
    );
    assert.equal(d.servers[1]?.user, 'alice@corp.example.com');
    assert.deepEqual(
      d.streams.map((s) => s.id),
      ['s1', 's3'],
    );
    assert.deepEqual(
      d.forwards.map((f) => f.id),
      ['f2'],
    );
    assert.deepEqual(Object.keys(d.refused.servers), ['bad-db']);
    assert.equal(d.refused.servers['bad-db']?.code, 'CONFIG_INVALID');
    assert.match(
      d.refused.servers['bad-db']?.message ?? '',
      /servers\[1\]\.user: "-oProxyCommand=touch \/tmp\/x" is not an SSH user name: it must not start with "-"/,
    );
    assert.equal(d.refused.streams['s2']?.server, 'bad-db');
    assert.match(d.refused.streams['s2']?.error.message ?? '', /streams\[1\]\.server: server bad-db is refused: .*must not start with "-"/);
    assert.match(d.refused.forwards['f1']?.error.message ?? '', /forwards\[0\]\.server: server bad-db is refused/);
    assert.deepEqual(d.refused.unnamed, []);
  });

  test('streams: an unknown server, an empty command, a bad or repeated id fail only themselves', () => {
    const d = parseDesiredState(
      desired(
        [server('db', 'postgres')],
        [
          { id: 'ok', server: 'db', command: 'true' },
          { id: 'nosrv', server: 'other', command: 'true' },
          { id: 'empty', server: 'db', command: '' },
          { id: '../x', server: 'db', command: 'true' },
          { id: 'ok', server: 'db', command: 'again' },
          'not an object',
          { id: 'nocmd', server: 'db' },
        ],
      ),
    );
    assert.deepEqual(d.streams, [{ id: 'ok', server: 'db', command: 'true' }]);
    assert.deepEqual(Object.keys(d.refused.streams).sort(), ['empty', 'nocmd', 'nosrv']);
    assert.match(d.refused.streams['nosrv']?.error.message ?? '', /no server named other/);
    assert.match(d.refused.streams['nocmd']?.error.message ?? '', /streams\[6\]\.command must be a string/);
    assert.equal(d.refused.unnamed.length, 3);
    assert.match(d.refused.unnamed.join('\n'), /streams\[3\]\.id: "\.\.\/x" is not/);
    assert.match(d.refused.unnamed.join('\n'), /streams\[4\]\.id: ok is listed twice/);
    assert.match(d.refused.unnamed.join('\n'), /streams\[5\] must be an object/);
  });

  test('servers: a repeated or unnamable server is refused, the first of a name applies', () => {
    const d = parseDesiredState(
      desired([server('db', 'postgres'), server('db', 'other'), { ...server('x', 'u'), name: 'a b' }, { ...server('y', 'u'), port: 0 }], []),
    );
    assert.deepEqual(
      d.servers.map((s) => [s.name, s.user]),
      [['db', 'postgres']],
    );
    assert.match(d.refused.unnamed.join('\n'), /servers\[1\]: server db is listed twice/);
    assert.match(d.refused.unnamed.join('\n'), /servers\[2\]\.name: "a b" is not/);
    assert.match(d.refused.servers['y']?.message ?? '', /servers\[3\]\.port must be an integer in 1\.\.65535/);
  });

  test('a file that is not a desired state at all still throws (the sidecar keeps its previous state)', () => {
    assert.throws(() => parseDesiredState('{'), /not JSON/);
    assert.throws(() => parseDesiredState(JSON.stringify({ version: 2, generation: 1, servers: [], streams: [] })), /version must be 1/);
    assert.throws(() => parseDesiredState(JSON.stringify({ version: 1, generation: 1, servers: {}, streams: [] })), /servers must be a list/);
  });
});

/** The `spec.user` pattern of the generated CRD, as the API server gets it. */
function crdUserPattern(): string {
  const crd = parseYaml(readFileSync(join(ROOT, 'crds/pglog.io_postgrestargets.yaml'), 'utf8')) as {
    spec: { versions: { schema: { openAPIV3Schema: { properties: { spec: { properties: { user: { pattern: string } } } } } } }[] };
  };
  return crd.spec.versions[0]!.schema.openAPIV3Schema.properties.spec.properties.user.pattern;
}

function loaderProblem(user: string): string | null {
  const doc = {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name: 't' },
    spec: { host: 'db.example.com', user, ssh: { privateKeyFile: 'k', knownHostsFile: 'kh' }, instances: [{ name: 'main', dataDirectory: '/d' }] },
  };
  try {
    parseTargetsFile(JSON.stringify(doc), '/tmp/targets.yaml', { mode: 'standalone' });
    return null;
  } catch (e) {
    assert.ok(isPglogError(e) && e.code === 'CONFIG_INVALID', String(e));
    return e.message;
  }
}

function sidecarProblem(user: string): string | null {
  const d = parseDesiredState(desired([server('t', user)], []));
  return d.refused.servers['t']?.message ?? null;
}

describe('one SSH user rule for the targets file, the CRD and the sidecar', () => {
  test('the CRD carries the same pattern', () => assert.equal(crdUserPattern(), SSH_USER_PATTERN));

  test('named cases', () => {
    for (const user of ['postgres', 'alice@corp.example.com', 'CORP\\alice', 'user.name-1', 'u$er', 'é', 'a-']) {
      assert.equal(sshUserProblem(user), null, user);
      assert.equal(loaderProblem(user), null, user);
      assert.equal(sidecarProblem(user), null, user);
    }
    for (const [user, why] of [
      ['-oProxyCommand=id', /must not start with "-"/],
      ['-', /must not start with "-"/],
      ['post gres', /whitespace/],
      ['a\tb', /whitespace/],
      ['a\nb', /whitespace/],
      ['a\u007fb', /control/],
      ['', /must not be empty/],
    ] as const) {
      assert.match(sshUserProblem(user) ?? '', why, JSON.stringify(user));
      assert.match(loaderProblem(user) ?? '', why, JSON.stringify(user));
      assert.match(sidecarProblem(user) ?? '', why, JSON.stringify(user));
    }
  });

  test('property: loader, CRD pattern and sidecar agree on every string', () => {
    const crd = new RegExp(crdUserPattern());
    const chars = fc.constantFrom('a', 'Z', '0', '-', '@', '.', '_', '\\', ' ', '\t', '\n', '\u0000', '\u001f', '\u007f', '\u00a0', 'é', '=', "'");
    fc.assert(
      fc.property(fc.string({ unit: chars, minLength: 1, maxLength: 8 }), (user) => {
        const accepted = sshUserProblem(user) === null;
        assert.equal(crd.test(user), accepted, JSON.stringify(user));
        assert.equal(loaderProblem(user) === null, accepted, JSON.stringify(user));
        assert.equal(sidecarProblem(user) === null, accepted, JSON.stringify(user));
      }),
      { numRuns: 500 },
    );
  });
});
