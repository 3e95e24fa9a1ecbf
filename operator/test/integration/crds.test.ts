// The generated CRDs (crds/) on a real kube-apiserver: they are accepted and established,
// kubectl explain shows the types' doc comments, the API server applies the defaults and
// rejects invalid objects with the schema's or the CEL rule's message, the scale subresource
// and the printer columns work, and every example in docs/resources.md is accepted.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { EXAMPLES } from '../../src/crd/examples.ts';
import { installCrds } from '../helpers/crds.ts';
import { POOL_SPEC_DEFAULTS } from '../helpers/pool-fixtures.ts';
import { type SharedControlPlane, useSharedControlPlane } from '../helpers/shared-control-plane.ts';

/** This file's namespace on the shared control plane (shared-control-plane.ts). */
const NS = 'crds';

const target = (name: string, spec: Record<string, unknown> = {}): Record<string, unknown> => ({
  apiVersion: 'pglog.io/v1alpha1',
  kind: 'PostgresTarget',
  metadata: { name },
  spec: {
    host: 'db.example.com',
    user: 'postgres',
    ssh: { secretRef: { name: 'db-ssh' } },
    instances: [{ name: 'main', dataDirectory: '/var/lib/postgresql/15/main' }],
    ...spec,
  },
});

const pool = (name: string, spec: Record<string, unknown> = {}): Record<string, unknown> => ({
  apiVersion: 'pglog.io/v1alpha1',
  kind: 'CollectorPool',
  metadata: { name },
  spec: { store: { secretRef: { name: 'store', key: 'url' } }, ...spec },
});

const shard = (name: string, spec: Record<string, unknown>): Record<string, unknown> => ({
  apiVersion: 'pglog.io/v1alpha1',
  kind: 'CollectorShard',
  metadata: { name },
  spec,
});

describe('the generated CRDs on a real kube-apiserver', { timeout: 180_000 }, () => {
  let cp: SharedControlPlane;
  const create = (object: Record<string, unknown>): Promise<string> => cp.kubectl(['create', '-f', '-'], JSON.stringify(object));
  const getJson = async (what: string): Promise<Record<string, unknown>> =>
    JSON.parse(await cp.kubectl(['get', what, '-o', 'json'])) as Record<string, unknown>;

  before(async () => {
    cp = await useSharedControlPlane(NS);
    await installCrds(cp);
  });
  after(async () => {
    await cp?.stop();
  });

  test('kubectl explain shows the doc comments of the types', async () => {
    // The OpenAPI document is published shortly after Established: retry for a while.
    const explain = async (path: string): Promise<string> => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        try {
          return await cp.kubectl(['explain', path]);
        } catch (e) {
          if (Date.now() > deadline) throw e;
          await new Promise((r) => setTimeout(r, 500));
        }
      }
    };
    const logFormat = await explain('postgrestarget.spec.instances.logFormat');
    assert.match(logFormat, /Format of the log files: `stderr`, `csvlog` or `jsonlog`\. Default: `stderr`\./);
    assert.match(logFormat, /ENUM:[\s\S]*csvlog/);
    const transport = await explain('collectorpool.spec.transport');
    assert.match(transport, /When `auto` targets move to and from the sshproxy sidecar\./);
    assert.match(transport, /promoteAboveBitsPerSecond/);
  });

  test('fields left out come back with their defaults, nested ones included', async () => {
    await create(target('defaults'));
    const spec = (await getJson('postgrestarget/defaults'))['spec'] as Record<string, unknown>;
    assert.equal(spec['port'], 22);
    assert.equal(spec['transport'], 'auto');
    assert.deepEqual(spec['collect'], {
      logs: true,
      activity: false,
      locks: false,
      statements: false,
      databases: false,
      intervalSeconds: 15,
      statisticsIntervalSeconds: 15,
    });
    assert.deepEqual(spec['instances'], [
      {
        name: 'main',
        dataDirectory: '/var/lib/postgresql/15/main',
        logDirectory: 'log',
        logFormat: 'stderr',
        logLinePrefix: '%m [%p] ',
        encodings: { default: 'UTF8', databases: {} },
        sql: { socketDirectory: '/var/run/postgresql', port: 5432, database: 'postgres', timeoutSeconds: 5, allowSuperuser: false },
      },
    ]);

    await create(pool('defaults'));
    const poolSpec = (await getJson('collectorpool/defaults'))['spec'];
    assert.deepEqual(poolSpec, { ...POOL_SPEC_DEFAULTS, store: { secretRef: { name: 'store', key: 'url' } } });
  });

  test('invalid objects are rejected with the schema error or the CEL rule message', async () => {
    const rejects = async (object: Record<string, unknown>, message: RegExp): Promise<void> => {
      await assert.rejects(create(object), message);
    };
    await rejects(
      pool('hysteresis', { transport: { promoteAboveBitsPerSecond: 1000, demoteBelowBitsPerSecond: 1000 } }),
      /demoteBelowBitsPerSecond must be below promoteAboveBitsPerSecond/,
    );
    await rejects(
      pool('explicit', { nodeTuning: { mode: 'explicit', uvThreadpoolSize: 8 } }),
      /mode explicit needs uvThreadpoolSize, maxOldSpaceSizeMiB and maxSemiSpaceSizeMiB/,
    );
    await rejects(
      pool('growing', { nodeTuning: { mode: 'explicit', uvThreadpoolSize: 8, maxOldSpaceSizeMiB: 512, maxSemiSpaceSizeMiB: 8, heapGrowingPercent: 401 } }),
      /spec\.nodeTuning\.heapGrowingPercent: Invalid value: 401: spec\.nodeTuning\.heapGrowingPercent in body should be less than or equal to 400/,
    );
    await rejects(pool('pull', { collector: { imagePullPolicy: 'Sometimes' } }), /spec\.collector\.imagePullPolicy: Unsupported value: "Sometimes"/);
    await rejects(
      target('enum', { instances: [{ name: 'main', dataDirectory: '/d', logFormat: 'syslog' }] }),
      /spec\.instances\[0\]\.logFormat: Unsupported value: "syslog"/,
    );
    // The key-file form is standalone-only: strict field validation (kubectl's default) names
    // the unknown fields, and without it (fields pruned) the Secret form is missing.
    const keyFiles = target('keyfiles', { ssh: { privateKeyFile: 'id_ed25519', knownHostsFile: 'known_hosts' } });
    await rejects(keyFiles, /unknown field "spec\.ssh\.knownHostsFile", unknown field "spec\.ssh\.privateKeyFile"/);
    await assert.rejects(cp.kubectl(['create', '--validate=false', '-f', '-'], JSON.stringify(keyFiles)), /spec\.ssh\.secretRef: Required value/);
    await rejects(
      target('duplicates', {
        instances: [
          { name: 'main', dataDirectory: '/a' },
          { name: 'main', dataDirectory: '/b' },
        ],
      }),
      /spec\.instances\[1\]: Duplicate value/,
    );
    await rejects(target('blank', { host: '   ' }), /host must not be blank/);
    await rejects(target('noinstances', { instances: [] }), /spec\.instances: Invalid value: 0: spec\.instances in body should have at least 1 items/);
    await rejects(target('BadName', {}), /metadata\.name/);
    await rejects(target('a.b', {}), /metadata\.name must be a DNS-1123 label/);
    await rejects(target('x'.repeat(64), {}), /metadata\.name must be a DNS-1123 label/);
    await rejects(pool('pool.one', {}), /metadata\.name must be a DNS-1123 label/);
    await rejects(target('badinstance', { instances: [{ name: 'Main_1', dataDirectory: '/d' }] }), /spec\.instances\[0\]\.name: Invalid value: "Main_1"/);
    // spec.user: the rule of the targets file and the sidecar (SSH_USER_PATTERN): '@' is fine,
    // a leading '-' (an ssh option) or a blank is not.
    await rejects(
      target('dashuser', { user: '-oProxyCommand=touch /tmp/x' }),
      /spec\.user: Invalid value: "-oProxyCommand=touch \/tmp\/x": spec\.user in body should match/,
    );
    await rejects(target('blankuser', { user: 'post gres' }), /spec\.user: Invalid value: "post gres"/);
    await create(target('aduser', { user: 'alice@corp.example.com' }));
  });

  test('kubectl scale drives spec.replicas of a CollectorPool', async () => {
    await create(pool('scaled'));
    await cp.kubectl(['scale', 'collectorpool/scaled', '--replicas', '3']);
    assert.equal((await cp.kubectl(['get', 'cpool/scaled', '-o', 'jsonpath={.spec.replicas}'])).trim(), '3');
  });

  test('kubectl get prints the columns, from a status written through the status subresource', async () => {
    await create(target('columns', { pool: 'main' }));
    const status = {
      status: {
        shard: 2,
        transport: 'proxy',
        rates: { bytesPerSecond: 1536.5, linesPerSecond: 12.25 },
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: '2026-01-01T00:00:00Z', reason: 'Collecting', message: 'all streams connected' }],
      },
    };
    await cp.kubectl(['patch', 'pgt/columns', '--subresource=status', '--type=merge', '-p', JSON.stringify(status)]);
    const table = (await cp.kubectl(['get', 'postgrestargets', 'columns'])).trim().split('\n');
    assert.deepEqual(table[0]?.split(/\s+/), ['NAME', 'HOST', 'POOL', 'SHARD', 'TRANSPORT', 'BYTES/S', 'READY', 'AGE']);
    assert.deepEqual(table[1]?.split(/\s+/).slice(0, 7), ['columns', 'db.example.com', 'main', '2', 'proxy', '1536.5', 'True']);
    // The spec is not writable through the status subresource, nor the status through the main resource.
    await cp.kubectl(['patch', 'pgt/columns', '--type=merge', '-p', JSON.stringify({ status: { shard: 7 } })]);
    assert.equal((await cp.kubectl(['get', 'pgt/columns', '-o', 'jsonpath={.status.shard}'])).trim(), '2');

    await create(
      shard('main-1', {
        pool: 'main',
        index: 1,
        targets: [{ name: 'columns', transport: 'proxy', epoch: 3 }],
        targetCount: 1,
        tuning: { uvThreadpoolSize: 4, maxOldSpaceSizeMiB: 512, maxSemiSpaceSizeMiB: 16 },
      }),
    );
    const shards = (await cp.kubectl(['get', 'cshard', 'main-1'])).trim().split('\n');
    assert.deepEqual(shards[0]?.split(/\s+/), ['NAME', 'POOL', 'INDEX', 'TARGETS', 'READY', 'AGE']);
    assert.deepEqual(shards[1]?.split(/\s+/).slice(0, 4), ['main-1', 'main', '1', '1']);
    const pools = (await cp.kubectl(['get', 'cpool', 'defaults'])).trim().split('\n');
    assert.deepEqual(pools[0]?.split(/\s+/), ['NAME', 'REPLICAS', 'READY', 'TARGETS', 'AGE']);
    const all = (await cp.kubectl(['get', 'pglog', '-o', 'name'])).trim().split('\n');
    for (const name of ['postgrestarget.pglog.io/columns', 'collectorpool.pglog.io/defaults', 'collectorshard.pglog.io/main-1'])
      assert.ok(all.includes(name), `kubectl get pglog lists ${name}: ${all.join(' ')}`);
  });

  test('every example in docs/resources.md is accepted', async () => {
    await cp.kubectl(['create', 'namespace', 'examples']);
    for (const example of EXAMPLES) {
      await cp.kubectl(['create', '--namespace', 'examples', '-f', '-'], JSON.stringify(example.object));
    }
    const names = await cp.kubectl(['get', 'pglog', '--namespace', 'examples', '-o', 'name']);
    assert.equal(names.trim().split('\n').length, EXAMPLES.length, names);
  });
});
