// Cluster mode on the real thing: a kube-apiserver with pglog's CRDs, Secrets and
// PostgresTargets, CollectorShards written as the operator would; the real
// `pglog collect --shard` launcher and its collector child; a real store, sshd and two
// PostgreSQL servers logging every statement; the checker compares logs and store.
//   - rows arrive; the shard status shows both targets with rates, offsets, connected;
//   - a target with SQL snapshots only reports a refused role as snapshotError; as the
//     superuser postgres it is refused too (SQL_ROLE_SUPERUSER, ADR 0032) until its spec sets
//     sql.allowSuperuser, then recovers, reported as sqlRoleWarning SQL_ROLE_SUPERUSER;
//   - a target removed from the spec stops (no new rows) and leaves the status;
//   - handed to a second collector (another shard) with epoch + 1: 0 lost, 0 duplicated;
//   - a new spec.tuning restarts the collector child (new pid, status.tuning) losing nothing;
//   - a transport set to proxy in the spec moves the target to the sidecar;
//   - a Secret that does not exist, or exists without the label pglog.io/ssh-credentials:
//     "true": that target reports KUBE_NOT_FOUND (the same answer), the other collects;
//   - a rotated Secret restarts its target with the new credentials;
//   - the private key never appears in the output; a crashed child ends the launcher with
//     its status, SIGTERM reaches the child and both exit 0.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import type { CollectorShard, ShardTarget, ShardTuning } from '@pglog/common/api/collector-shard.ts';
import { checkStore, formatCheck } from '@pglog/test-support/checker.ts';
import { isErrorRecord, waitFor } from '@pglog/test-support/collector-process.ts';
import { type ControlPlane, startControlPlane } from '@pglog/test-support/control-plane.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { killTree } from '@pglog/test-support/process-tree.ts';
import { type SeqLoad, startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { launchShardCollector, logServerTarget, type ShardCollector } from '@pglog/test-support/shard-collector.ts';
import { createSshSecret } from '@pglog/test-support/ssh-secret.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

const NS = 'pglog-test';
const CRDS = join(import.meta.dirname, '../../../crds');
const TUNING: ShardTuning = { uvThreadpoolSize: 4, maxOldSpaceSizeMiB: 256, maxSemiSpaceSizeMiB: 16 };

describe('pglog collect --shard: cluster mode against a real API server', { timeout: 600_000 }, () => {
  let work: string;
  let cp: ControlPlane;
  let store: TestPostgres;
  let ssh: TestSshServer;
  let servers: LogServer[];
  const loads = new Map<string, SeqLoad>();
  const collectors: ShardCollector[] = [];

  const kubectl = (args: string[], stdin?: string): Promise<string> => cp.kubectl(['-n', NS, ...args], stdin);
  const apply = (object: unknown): Promise<string> => kubectl(['apply', '-f', '-'], JSON.stringify(object));
  const shard = async (name: string): Promise<CollectorShard> => JSON.parse(await kubectl(['get', 'collectorshard', name, '-o', 'json'])) as CollectorShard;
  const setShardSpec = (name: string, targets: ShardTarget[], tuning: ShardTuning = TUNING): Promise<string> =>
    kubectl(['patch', 'collectorshard', name, '--type', 'merge', '-p', JSON.stringify({ spec: { targets, tuning } })]);
  const targetStatus = async (shardName: string, target: string): Promise<Record<string, unknown> | undefined> =>
    (await shard(shardName)).status?.targets?.find((t) => t.name === target) as Record<string, unknown> | undefined;
  /** Rows of the target's run in the store; 0 until the collector has created the schema. */
  const stored = async (target: string): Promise<number> => {
    try {
      return (await checkStore(store.url, loads.get(target)!.run, { numbers: [] })).stored;
    } catch (e) {
      if ((e as { code?: string }).code === '42P01') return 0;
      throw e;
    }
  };
  const checkTarget = (target: string, k: number): ReturnType<typeof checkStore> =>
    checkStore(store.url, loads.get(target)!.run, { logDirectory: servers[k]!.logDirectory });

  function launch(shardName: string, extra: string[] = []): ShardCollector {
    const c = launchShardCollector({ shard: shardName, kubeconfig: cp.kubeconfig, namespace: NS, storeUrl: store.url, dir: work, extraArgs: extra });
    collectors.push(c);
    return c;
  }
  const childPids = (c: ShardCollector): number[] => c.childPids();
  const tail = (c: ShardCollector): string => c.tail();

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'pglog-cluster-'));
    [cp, store, ssh, servers] = await Promise.all([
      startControlPlane(),
      startPostgres(),
      startSshServer({ allowLocalForwarding: true }),
      Promise.all([startLogServer(), startLogServer()]),
    ]);
    await cp.kubectl([
      'apply',
      ...readdirSync(CRDS)
        .filter((f) => f.endsWith('.yaml'))
        .flatMap((f) => ['-f', join(CRDS, f)]),
    ]);
    await cp.kubectl(['wait', '--for', 'condition=Established', '--timeout=60s', 'crd/collectorshards.pglog.io', 'crd/postgrestargets.pglog.io']);
    await cp.kubectl(['create', 'namespace', NS]);
    for (const [k, name] of ['db1', 'db2'].entries()) {
      // db2's key serves db4 too (its SQL-only target on the same server): the Secret names both.
      await createSshSecret(kubectl, name, ssh, { targets: name === 'db2' ? ['db2', 'db4'] : [name] });
      await apply(postgresTarget(name, `${name}-ssh`, servers[k]!));
    }
    await apply(postgresTarget('db3', 'missing-ssh', servers[0]!));
    // A working key in a Secret that did not opt in: another team's, borrowed by a target.
    await createSshSecret(kubectl, 'team-x', ssh, { optIn: false });
    await apply(postgresTarget('borrower', 'team-x-ssh', servers[1]!));
    for (const [index, name] of ['s-0', 's-1'].entries()) {
      await apply({ apiVersion: 'pglog.io/v1alpha1', kind: 'CollectorShard', metadata: { name }, spec: { pool: 'p', index, targets: [], tuning: TUNING } });
    }
    await setShardSpec('s-0', [
      { name: 'db1', transport: 'inproc', epoch: 1 },
      { name: 'db2', transport: 'inproc', epoch: 1 },
    ]);
    loads.set('db1', startSeqLoad(servers[0]!.url, { ratePerSecond: 100, payloadBytes: 40 }));
    loads.set('db2', startSeqLoad(servers[1]!.url, { ratePerSecond: 100, payloadBytes: 40 }));
  });

  const postgresTarget = (name: string, secret: string, server: LogServer): unknown => logServerTarget(name, secret, ssh, server);

  after(async () => {
    await Promise.allSettled([...loads.values()].map((l) => l.stop()));
    // The launcher and its collector child (and its sidecar): a child left behind would hold the store open.
    for (const c of collectors) killTree(c.pid);
    await Promise.allSettled([cp?.stop(), ssh?.dispose(), store?.stop(), ...(servers ?? []).map((s) => s.dispose())]);
    rmSync(work, { recursive: true, force: true });
  });

  test('rows arrive; the shard status shows both targets with rates, offsets and connected within 15 s', async () => {
    const c = launch('s-0');
    await waitFor(
      async () => (await stored('db1')) > 0 && (await stored('db2')) > 0,
      'rows of both targets in the store',
      60_000,
      () => tail(c),
    );
    const seenAt = Date.now();
    await waitFor(
      async () => {
        const s = (await shard('s-0')).status;
        return s?.targets?.length === 2 && s.targets.every((t) => t.connected && t.bytesPerSecond > 0 && (t.offsets?.length ?? 0) > 0);
      },
      'status with both targets connected, rates and offsets',
      15_000,
      async () => `${JSON.stringify((await shard('s-0')).status, null, 1)}\n${tail(c)}`,
    );
    console.log(`# status complete ${Date.now() - seenAt} ms after the first rows`);
    const s = await shard('s-0');
    assert.equal(s.status!.pod, 'pod-s-0');
    assert.deepEqual(s.status!.tuning, TUNING);
    assert.equal(s.status!.observedGeneration, s.metadata.generation);
    const ready = s.status!.conditions!.find((x) => x.type === 'Ready')!;
    assert.equal(ready.status, 'True', JSON.stringify(ready));
    assert.equal(childPids(c).length, 1);
  });

  test('a target with SQL snapshots only: a refused role is its snapshotError (SQL_AUTH_FAILED), a superuser SQL_ROLE_SUPERUSER until allowed, then cleared', async () => {
    const server = servers[1]!;
    const sqlTarget = (user?: string, allowSuperuser?: boolean): unknown => {
      // Without sql.user the role is the SSH user's, which this PostgreSQL does not have.
      return logServerTarget(
        'db4',
        'db2-ssh',
        ssh,
        server,
        { collect: { logs: false, activity: true, locks: true, intervalSeconds: 1 } },
        {
          sql: {
            socketDirectory: server.socketDir,
            port: server.port,
            ...(user === undefined ? {} : { user }),
            ...(allowSuperuser === undefined ? {} : { allowSuperuser }),
          },
        },
      );
    };
    await apply(sqlTarget());
    const c = collectors[0]!;
    const before = (await shard('s-0')).spec.targets;
    await setShardSpec('s-0', [...before, { name: 'db4', transport: 'inproc', epoch: 1 }]);
    await waitFor(
      async () => (await targetStatus('s-0', 'db4'))?.['snapshotError'] === 'SQL_AUTH_FAILED',
      'db4 reported with SQL_AUTH_FAILED',
      30_000,
      async () => `${JSON.stringify(await targetStatus('s-0', 'db4'))}\n${tail(c)}`,
    );
    // The superuser postgres: refused before any snapshot query, and said why (ADR 0032).
    await apply(sqlTarget('postgres'));
    await waitFor(
      async () => {
        const t = await targetStatus('s-0', 'db4');
        return t?.['snapshotError'] === 'SQL_ROLE_SUPERUSER' && t['sqlRoleWarning'] === 'SQL_ROLE_SUPERUSER';
      },
      'db4 reported with snapshotError and sqlRoleWarning SQL_ROLE_SUPERUSER',
      30_000,
      async () => `${JSON.stringify(await targetStatus('s-0', 'db4'))}\n${tail(c)}`,
    );
    // The target opts out in its spec: the field reaches the collector through the CRD.
    await apply(sqlTarget('postgres', true));
    const db = new pg.Client({ connectionString: store.url });
    await db.connect();
    try {
      const runs = async (): Promise<{ ok: number; failed: number; refused: number }> => {
        const r = await db.query<{ ok: string; failed: string; refused: string }>(
          "SELECT count(*) FILTER (WHERE error_code IS NULL) AS ok, count(*) FILTER (WHERE error_code = 'SQL_AUTH_FAILED') AS failed, count(*) FILTER (WHERE error_code = 'SQL_ROLE_SUPERUSER') AS refused FROM pglog.snapshot_runs WHERE target = 'db4'",
        );
        return { ok: Number(r.rows[0]!.ok), failed: Number(r.rows[0]!.failed), refused: Number(r.rows[0]!.refused) };
      };
      await waitFor(
        async () => (await runs()).ok > 0,
        'a successful db4 snapshot in the store',
        30_000,
        async () => `${JSON.stringify(await runs())}\n${tail(c)}`,
      );
      assert.ok((await runs()).failed > 0);
      assert.ok((await runs()).refused > 0, 'the refused runs are in the store with their code');
      await waitFor(
        async () => {
          const t = await targetStatus('s-0', 'db4');
          return t !== undefined && t['snapshotError'] === undefined && t['connected'] === true;
        },
        'db4 reported without snapshotError',
        30_000,
        async () => `${JSON.stringify(await targetStatus('s-0', 'db4'))}\n${tail(c)}`,
      );
      // The role allowed is the superuser postgres: still reported as such (issue 13, review F2).
      await waitFor(
        async () => (await targetStatus('s-0', 'db4'))?.['sqlRoleWarning'] === 'SQL_ROLE_SUPERUSER',
        'db4 reported with sqlRoleWarning SQL_ROLE_SUPERUSER',
        30_000,
        async () => `${JSON.stringify(await targetStatus('s-0', 'db4'))}\n${tail(c)}`,
      );
      assert.equal((await db.query("SELECT 1 FROM pglog.statements WHERE target = 'db4' LIMIT 1")).rowCount, 0, 'logs: false reads no log');
    } finally {
      await db.end();
    }
    await setShardSpec('s-0', before);
    await waitFor(async () => (await targetStatus('s-0', 'db4')) === undefined, 'db4 gone from the status', 30_000);
  });

  test('a target removed from the spec stops (no new rows) and leaves the status; handed to another shard with epoch + 1: 0 lost, 0 duplicated', async () => {
    const c = collectors[0]!;
    await setShardSpec('s-0', [{ name: 'db1', transport: 'inproc', epoch: 1 }]);
    await waitFor(
      async () => (await shard('s-0')).status?.targets?.map((t) => t.name).join() === 'db1',
      'db2 to leave the status',
      20_000,
      () => tail(c),
    );
    const before = await stored('db2');
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(await stored('db2'), before, 'no new db2 rows while nobody owns it (its load goes on)');
    await setShardSpec('s-1', [{ name: 'db2', transport: 'inproc', epoch: 2 }]);
    const other = launch('s-1');
    await waitFor(
      async () => (await targetStatus('s-1', 'db2'))?.['connected'] === true,
      'db2 collected by s-1',
      30_000,
      () => tail(other),
    );
    assert.equal((await targetStatus('s-1', 'db2'))!['epoch'], 2);
  });

  test('a new spec.tuning restarts the collector child (new pid, status.tuning), nothing lost', async () => {
    const c = collectors[0]!;
    const first = childPids(c)[0]!;
    const tuning = { ...TUNING, maxOldSpaceSizeMiB: 320, heapGrowingPercent: 100 };
    await setShardSpec('s-0', [{ name: 'db1', transport: 'inproc', epoch: 1 }], tuning);
    await waitFor(
      () => childPids(c).length >= 2,
      'a second collector child',
      60_000,
      () => tail(c),
    );
    assert.notEqual(childPids(c)[1], first);
    await waitFor(
      async () => (await shard('s-0')).status?.tuning?.maxOldSpaceSizeMiB === 320,
      'status.tuning of the new child',
      30_000,
      () => tail(c),
    );
    assert.deepEqual((await shard('s-0')).status?.tuning, tuning, 'the status names the growing factor the child runs with');
    const argv = readFileSync(`/proc/${childPids(c)[1]!}/cmdline`, 'utf8').split('\0');
    assert.ok(argv.includes('--max-old-space-size=320'), argv.join(' '));
    assert.equal(argv.filter((a) => /^--heap[-_]growing[-_]percent/.test(a)).join(' '), '--heap-growing-percent=100', argv.join(' '));
    assert.equal(
      readFileSync(`/proc/${childPids(c)[1]!}/environ`, 'utf8')
        .split('\0')
        .includes('UV_THREADPOOL_SIZE=4'),
      true,
    );
    assert.ok(c.records().some((r) => r['msg'] === 'the collector stopped for a new tuning; starting it again'));
  });

  test('the transport set to proxy in the spec moves the target to the sidecar', async () => {
    const c = collectors[0]!;
    await setShardSpec('s-0', [{ name: 'db1', transport: 'proxy', epoch: 1 }], { ...TUNING, maxOldSpaceSizeMiB: 320 });
    await waitFor(
      () => c.records().some((r) => typeof r['switchMs'] === 'number' && r['to'] === 'proxy'),
      'db1 reading through the sidecar',
      30_000,
      () => tail(c),
    );
    await waitFor(async () => (await targetStatus('s-0', 'db1'))?.['transport'] === 'proxy', 'status transport proxy', 20_000);
  });

  test('a Secret that does not exist, or that did not opt in: that target reports KUBE_NOT_FOUND, the other keeps collecting', async () => {
    const c = collectors[0]!;
    await setShardSpec(
      's-0',
      [
        { name: 'db1', transport: 'proxy', epoch: 1 },
        { name: 'db3', transport: 'inproc', epoch: 1 },
        { name: 'borrower', transport: 'inproc', epoch: 1 },
      ],
      { ...TUNING, maxOldSpaceSizeMiB: 320 },
    );
    await waitFor(
      async () => (await targetStatus('s-0', 'db3'))?.['error'] === 'KUBE_NOT_FOUND',
      'db3 failing with KUBE_NOT_FOUND',
      20_000,
      () => tail(c),
    );
    // The unlabelled Secret holds a key that works: it is refused all the same, and reported
    // exactly like the missing one, so a target's author learns nothing of it.
    await waitFor(
      async () => (await targetStatus('s-0', 'borrower'))?.['error'] === 'KUBE_NOT_FOUND',
      'borrower failing with KUBE_NOT_FOUND',
      20_000,
      () =>
        c
          .tail(100_000)
          .split('\n')
          .filter((l) => l.includes('borrower'))
          .join('\n'),
    );
    assert.match(
      c.tail(100_000),
      /Secret \S+\/team-x-ssh \(spec\.ssh\.secretRef of PostgresTarget borrower\) does not exist or does not opt in with the label pglog\.io\/ssh-credentials: \\"true\\"/,
      'the log (JSON) says why',
    );
    assert.equal((await targetStatus('s-0', 'borrower'))!['connected'], false, 'the borrowed key was never used');
    const ready = (await shard('s-0')).status!.conditions!.find((x) => x.type === 'Ready')!;
    assert.deepEqual([ready.status, ready.reason], ['False', 'KUBE_NOT_FOUND']);
    const before = await stored('db1');
    await waitFor(async () => (await stored('db1')) > before, 'db1 still collecting', 15_000);
    assert.equal((await targetStatus('s-0', 'db1'))!['connected'], true);
  });

  test('handed over while the old owner still reads (both shards name it a moment): the old one is fenced, nothing twice', async () => {
    const c = collectors[0]!;
    const tuning = { ...TUNING, maxOldSpaceSizeMiB: 320 };
    // The new owner first, as a slow operator or a partition might leave it: s-0 still reads db1.
    await setShardSpec('s-1', [
      { name: 'db1', transport: 'inproc', epoch: 2 },
      { name: 'db2', transport: 'inproc', epoch: 2 },
    ]);
    await waitFor(
      async () => (await targetStatus('s-1', 'db1'))?.['connected'] === true,
      'db1 collected by s-1',
      30_000,
      () => tail(collectors[1]!),
    );
    await new Promise((r) => setTimeout(r, 1000));
    await setShardSpec('s-0', [{ name: 'db3', transport: 'inproc', epoch: 1 }], tuning);
    await waitFor(
      async () => (await shard('s-0')).status?.targets?.map((t) => t.name).join() === 'db3',
      'db1 to leave s-0',
      20_000,
      () => tail(c),
    );
  });

  test('a rotated Secret reaches the collector at the next resolve: the target restarts with it and goes on', async () => {
    const owner = collectors[1]!;
    const restartsBefore = owner.records().filter((r) => r['msg'] === 'assignment: stopping db1').length;
    const knownHosts = `# rotated\n${readFileSync(ssh.knownHostsFile, 'utf8')}`;
    await kubectl([
      'patch',
      'secret',
      'db1-ssh',
      '--type',
      'merge',
      '-p',
      JSON.stringify({ data: { known_hosts: Buffer.from(knownHosts).toString('base64') } }),
    ]);
    await waitFor(
      () => owner.records().filter((r) => r['msg'] === 'assignment: stopping db1').length > restartsBefore,
      'db1 restarted with the new Secret',
      20_000,
      () => tail(owner),
    );
    const before = await stored('db1');
    await waitFor(
      async () => (await stored('db1')) > before,
      'db1 collecting again',
      20_000,
      () => tail(owner),
    );
  });

  test("every statement of both servers stored exactly once; a crash ends the launcher with the child's status; SIGTERM exits 0; the key never in the output", async () => {
    for (const l of loads.values()) await l.stop();
    for (const [k, name] of ['db1', 'db2'].entries()) {
      let last = '';
      await waitFor(
        async () => {
          const r = await checkTarget(name, k);
          last = formatCheck(r);
          return r.lost.length === 0 && r.expected > 0;
        },
        `every ${name} statement stored`,
        60_000,
        () => last,
      );
      const r = await checkTarget(name, k);
      assert.equal(r.lost.length, 0, `${name}: ${formatCheck(r)}`);
      assert.equal(r.duplicated.length, 0, `${name}: ${formatCheck(r)}`);
      console.log(`# ${name}: ${formatCheck(r)}`);
    }
    // A crash of the collector child ends the launcher with its status (Kubernetes restarts the container).
    const [, crashing] = collectors;
    const child = childPids(crashing!).at(-1)!;
    process.kill(child, 'SIGKILL');
    assert.equal(await crashing!.exited, 137, tail(crashing!));
    // SIGTERM to the launcher reaches the child: it flushes and both exit 0.
    assert.equal(await collectors[0]!.stop(), 0, tail(collectors[0]!));
    const keyBody = readFileSync(ssh.privateKeyFile, 'utf8')
      .split('\n')
      .filter((l) => l.length > 20 && !l.startsWith('-----'));
    for (const c of collectors) for (const line of keyBody) assert.ok(!c.output().includes(line), 'a line of the private key appears in the output');
    const fenced = collectors[0]!.records().filter((r) => r['code'] === 'STORE_FENCED' && r['target'] === 'db1');
    assert.ok(fenced.length > 0, 's-0 was fenced on db1 once s-1 claimed it with epoch 2');
    // Expected: db4's snapshots with the role that does not exist and as a superuser not allowed (until fixed above), and the crash caused here.
    const expected = (r: Record<string, unknown>): boolean =>
      (r['target'] === 'db4' && (/role "[^"]+" does not exist/.test(String(r['msg'])) || r['code'] === 'SQL_ROLE_SUPERUSER')) ||
      r['msg'] === 'the collector ended (exit status 137)';
    const errors = collectors.flatMap((c) => c.records()).filter((r) => isErrorRecord(r) && r['code'] !== 'STORE_FENCED' && !expected(r));
    assert.deepEqual(
      errors.map((r) => r['msg']),
      [],
      'no other errors logged',
    );
  });
});
