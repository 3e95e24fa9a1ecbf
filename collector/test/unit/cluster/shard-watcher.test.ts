// Cluster mode against a small in-memory KubeClient: the target resolver reads only what it
// is pointed at (GET by name, never a list of Secrets) and reports per target; the status
// reporter answers a 409 by reading again; the shard watcher delivers its one shard and reports
// an API failure or a missing shard as its health instead of throwing.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';

import type { CollectorShard, CollectorShardStatus } from '@pglog/common/api/collector-shard.ts';
import { PglogError } from '@pglog/common/errors.ts';
import type { KubeClient, KubeObject, ListResult, ResourceType, WatchEvent } from '@pglog/common/kube/client-types.ts';
import { createLogger } from '@pglog/common/observability/logger.ts';

import { ShardWatcher } from '../../../src/cluster/shard-watcher.ts';
import { StatusReporter } from '../../../src/cluster/status-reporter.ts';
import { rateHintOf, TargetResolver } from '../../../src/cluster/target-resolver.ts';

const log = createLogger({ level: 'error', destination: new Writable({ write: (_c, _e, cb) => cb() }) });

/** Objects by `plural/name`; every call recorded; `fail` scripts an error for the next calls of a verb. */
class FakeKube implements KubeClient {
  readonly objects = new Map<string, KubeObject>();
  readonly calls: string[] = [];
  readonly fail = new Map<string, PglogError[]>();
  watchScript: Array<Array<WatchEvent<KubeObject>> | PglogError> = [];
  private version = 1;

  put(type: ResourceType, object: KubeObject): void {
    this.objects.set(`${type.plural}/${object.metadata.name}`, { ...object, metadata: { ...object.metadata, resourceVersion: String(++this.version) } });
  }
  private failure(verb: string): void {
    const e = this.fail.get(verb)?.shift();
    if (e !== undefined) throw e;
  }
  get<T extends KubeObject>(type: ResourceType, _ns: string | undefined, name: string): Promise<T | null> {
    this.calls.push(`get ${type.plural}/${name}`);
    this.failure('get');
    return Promise.resolve((this.objects.get(`${type.plural}/${name}`) as T | undefined) ?? null);
  }
  list<T extends KubeObject>(type: ResourceType, _ns: string | undefined, options?: { fieldSelector?: string }): Promise<ListResult<T>> {
    this.calls.push(`list ${type.plural} ${options?.fieldSelector ?? ''}`);
    this.failure('list');
    const items = [...this.objects.entries()].filter(([k]) => k.startsWith(`${type.plural}/`)).map(([, o]) => o as T);
    return Promise.resolve({ items, resourceVersion: String(this.version) });
  }
  async *watch<T extends KubeObject>(
    type: ResourceType,
    _ns: string | undefined,
    options: { resourceVersion: string },
    signal: AbortSignal,
  ): AsyncIterable<WatchEvent<T>> {
    this.calls.push(`watch ${type.plural} from ${options.resourceVersion}`);
    const step = this.watchScript.shift();
    if (step instanceof PglogError) throw step;
    for (const e of step ?? []) yield e as WatchEvent<T>;
    if (step === undefined) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  }
  create<T extends KubeObject>(): Promise<T> {
    throw new Error('not used');
  }
  replace<T extends KubeObject>(): Promise<T> {
    throw new Error('not used');
  }
  replaceStatus<T extends KubeObject>(type: ResourceType, object: T): Promise<T> {
    this.calls.push(`replaceStatus ${type.plural}/${object.metadata.name}@${object.metadata.resourceVersion}`);
    this.failure('replaceStatus');
    this.put(type, object);
    return Promise.resolve(object);
  }
  apply<T extends KubeObject>(): Promise<T> {
    throw new Error('not used');
  }
  mergePatch<T extends KubeObject>(): Promise<T> {
    throw new Error('not used');
  }
  delete(): Promise<boolean> {
    throw new Error('not used');
  }
}

const TARGETS = { group: 'pglog.io', version: 'v1alpha1', plural: 'postgrestargets', kind: 'PostgresTarget', namespaced: true };
const SECRETS = { group: '', version: 'v1', plural: 'secrets', kind: 'Secret', namespaced: true };
const SHARDS = { group: 'pglog.io', version: 'v1alpha1', plural: 'collectorshards', kind: 'CollectorShard', namespaced: true };
const b64 = (s: string): string => Buffer.from(s).toString('base64');

function targetObject(name: string, secret: string): KubeObject {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name, namespace: 'ns', uid: 'u' },
    spec: { host: 'h', user: 'u', ssh: { secretRef: { name: secret } }, instances: [{ name: 'main', dataDirectory: '/d' }] },
  } as KubeObject;
}
function secretObject(
  name: string,
  key = 'one',
  labels: Record<string, string> = { 'pglog.io/ssh-credentials': 'true' },
  annotations: Record<string, string> = { 'pglog.io/allowed-targets': '*' },
): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, labels, annotations },
    data: { id_ed25519: b64(`-----BEGIN OPENSSH PRIVATE KEY-----\n${key}\n-----END OPENSSH PRIVATE KEY-----\n`), known_hosts: b64('h ssh-ed25519 AAAA\n') },
  } as KubeObject;
}

describe('TargetResolver', () => {
  test('GETs each target and its Secret by name; a missing one is KUBE_NOT_FOUND, an invalid one CONFIG_INVALID, the others resolve', async () => {
    const kube = new FakeKube();
    kube.put(TARGETS, targetObject('db1', 'db1-ssh'));
    kube.put(SECRETS, secretObject('db1-ssh'));
    kube.put(TARGETS, targetObject('db2', 'gone'));
    kube.put(TARGETS, { ...targetObject('db4', 'db1-ssh'), spec: { host: 'h' } } as KubeObject);
    const r = await new TargetResolver(kube, 'ns').resolve([
      { name: 'db1', transport: 'proxy', epoch: 3 },
      { name: 'db2', transport: 'inproc', epoch: 1 },
      { name: 'db3', transport: 'inproc', epoch: 1 },
      { name: 'db4', transport: 'inproc', epoch: 1 },
    ]);
    const ok = r[0]!;
    assert.ok(ok.ok);
    assert.equal(ok.assignment.epoch, 3);
    assert.equal(ok.assignment.transport, 'proxy');
    assert.equal(ok.assignment.target.metadata.name, 'db1');
    assert.match(ok.assignment.credentials.privateKey.toString(), /BEGIN OPENSSH/);
    assert.deepEqual(
      r.slice(1).map((x) => (x.ok ? 'ok' : x.code)),
      ['KUBE_NOT_FOUND', 'KUBE_NOT_FOUND', 'CONFIG_INVALID'],
    );
    assert.ok(!r[1]!.ok && /Secret ns\/gone \(spec\.ssh\.secretRef of PostgresTarget db2\) does not exist/.test(r[1]!.message));
    assert.ok(
      kube.calls.every((c) => c.startsWith('get ')),
      `only GETs: ${kube.calls.join(', ')}`,
    );
  });

  test("a fleet's targets that name one Secret: one GET of it a round, one parse of each version, shared by all of them", async () => {
    const kube = new FakeKube();
    const names = Array.from({ length: 40 }, (_, i) => `db${i}`);
    for (const name of names) kube.put(TARGETS, targetObject(name, 'fleet-ssh'));
    kube.put(SECRETS, secretObject('fleet-ssh'));
    const resolver = new TargetResolver(kube, 'ns');
    const assigned = names.map((name) => ({ name, transport: 'inproc' as const, epoch: 1 }));
    const first = await resolver.resolve(assigned);
    assert.ok(first.every((r) => r.ok));
    const credentials = new Set(first.map((r) => (r.ok ? r.assignment.credentials : null)));
    assert.equal(credentials.size, 1, 'one credentials object for every target of the Secret');
    assert.equal(kube.calls.filter((c) => c === 'get secrets/fleet-ssh').length, 1);
    // A rotated Secret: one GET again, one new parse, shared again.
    kube.put(SECRETS, secretObject('fleet-ssh', 'two'));
    const second = await resolver.resolve(assigned);
    assert.equal(kube.calls.filter((c) => c === 'get secrets/fleet-ssh').length, 2);
    const rotated = new Set(second.map((r) => (r.ok ? r.assignment.credentials : null)));
    assert.equal(rotated.size, 1);
    assert.ok(!rotated.has([...credentials][0]!));
    assert.equal([...rotated][0]!.privateKeySource, 'Secret fleet-ssh key id_ed25519');
  });

  test('a Secret serves only with the label pglog.io/ssh-credentials: "true"; without it, the same answer as no Secret', async () => {
    const kube = new FakeKube();
    kube.put(TARGETS, targetObject('borrower', 'team-x-ssh'));
    kube.put(TARGETS, targetObject('wrong-value', 'half-ssh'));
    kube.put(TARGETS, targetObject('absent', 'no-such-ssh'));
    kube.put(SECRETS, secretObject('team-x-ssh', 'one', {}));
    kube.put(SECRETS, secretObject('half-ssh', 'one', { 'pglog.io/ssh-credentials': 'yes' }));
    const r = await new TargetResolver(kube, 'ns').resolve(
      ['borrower', 'wrong-value', 'absent'].map((name) => ({ name, transport: 'inproc' as const, epoch: 1 })),
    );
    const failures = r.map((x) => (x.ok ? undefined : x));
    assert.deepEqual(
      failures.map((f) => f?.code),
      ['KUBE_NOT_FOUND', 'KUBE_NOT_FOUND', 'KUBE_NOT_FOUND'],
    );
    // The messages differ only in the names: an unlabelled Secret looks exactly like a missing one.
    const shape = (f: (typeof failures)[number], secret: string, target: string): string => f!.message.replace(secret, 'S').replace(target, 'T');
    assert.equal(shape(failures[0], 'team-x-ssh', 'borrower'), shape(failures[2], 'no-such-ssh', 'absent'));
    assert.match(failures[0]!.message, /does not exist or does not opt in with the label pglog\.io\/ssh-credentials: "true"/);
    // Once the Secret's owner labels it, it serves.
    kube.put(SECRETS, secretObject('team-x-ssh'));
    const after = (await new TargetResolver(kube, 'ns').resolve([{ name: 'borrower', transport: 'inproc', epoch: 1 }]))[0]!;
    assert.ok(after.ok);
  });

  test('a labelled Secret serves only the targets its annotation pglog.io/allowed-targets lists; to another, the same answer as no Secret', async () => {
    const kube = new FakeKube();
    const labelled = { 'pglog.io/ssh-credentials': 'true' };
    kube.put(SECRETS, secretObject('team-a-ssh', 'one', labelled, { 'pglog.io/allowed-targets': 'a, a2' }));
    kube.put(SECRETS, secretObject('unlisted-ssh', 'one', labelled, {}));
    kube.put(SECRETS, secretObject('everyone-ssh', 'one', labelled, { 'pglog.io/allowed-targets': '*' }));
    kube.put(SECRETS, secretObject('prefix-ssh', 'one', labelled, { 'pglog.io/allowed-targets': 'b*' }));
    kube.put(SECRETS, secretObject('unlabelled-ssh', 'one', {}, { 'pglog.io/allowed-targets': 'b5' }));
    const uses = [
      ['a', 'team-a-ssh', 'ok'],
      ['a2', 'team-a-ssh', 'ok'],
      // Team b's target names team a's key with a host, user and log directory of its own.
      ['b', 'team-a-ssh', 'KUBE_NOT_FOUND'],
      // Labelled but naming no target: serves none (an install from before the annotation).
      ['b2', 'unlisted-ssh', 'KUBE_NOT_FOUND'],
      ['b3', 'everyone-ssh', 'ok'],
      // `*` alone is the only pattern.
      ['b4', 'prefix-ssh', 'KUBE_NOT_FOUND'],
      ['b5', 'unlabelled-ssh', 'KUBE_NOT_FOUND'],
      ['c', 'absent-ssh', 'KUBE_NOT_FOUND'],
    ] as const;
    for (const [target, secret] of uses) kube.put(TARGETS, targetObject(target, secret));
    const r = await new TargetResolver(kube, 'ns').resolve(uses.map(([name]) => ({ name, transport: 'inproc' as const, epoch: 1 })));
    assert.deepEqual(
      r.map((x) => (x.ok ? 'ok' : x.code)),
      uses.map(([, , outcome]) => outcome),
    );
    // Target b naming team a's Secret reads exactly as a Secret that does not exist.
    const message = (i: number): string => (r[i]!.ok ? '' : r[i]!.message);
    const shape = (i: number): string => message(i).replace(uses[i]![1], 'S').replace(`PostgresTarget ${uses[i]![0]}`, 'T');
    assert.equal(shape(2), shape(7));
    assert.match(
      message(2),
      /does not exist or does not opt in with the label pglog\.io\/ssh-credentials: "true" and the annotation pglog\.io\/allowed-targets listing the target/,
    );
  });

  test('unchanged objects are not parsed again; a rotated Secret is; an API outage keeps the last good resolution', async () => {
    const kube = new FakeKube();
    kube.put(TARGETS, targetObject('db1', 's'));
    kube.put(SECRETS, secretObject('s', 'one'));
    const resolver = new TargetResolver(kube, 'ns');
    const assigned = [{ name: 'db1', transport: 'inproc' as const, epoch: 1 }];
    const first = (await resolver.resolve(assigned))[0]!;
    const again = (await resolver.resolve(assigned))[0]!;
    assert.ok(first.ok && again.ok);
    assert.equal(again.assignment.credentials, first.assignment.credentials, 'the same object: nothing re-parsed');
    assert.equal(again.assignment.target, first.assignment.target);
    kube.put(SECRETS, secretObject('s', 'two'));
    const rotated = (await resolver.resolve(assigned))[0]!;
    assert.ok(rotated.ok && /two/.test(rotated.assignment.credentials.privateKey.toString()));
    kube.fail.set('get', [new PglogError('KUBE_UNAVAILABLE', 'timeout')]);
    const during = (await resolver.resolve(assigned))[0]!;
    assert.ok(during.ok && during.assignment.credentials === rotated.assignment.credentials);
    kube.fail.set('get', [new PglogError('KUBE_FORBIDDEN', 'denied')]);
    const denied = (await resolver.resolve(assigned))[0]!;
    assert.ok(!denied.ok && denied.code === 'KUBE_FORBIDDEN');
  });

  test("the rates in the target's status become the rate hint of a target that moves here; malformed ones are ignored", async () => {
    const kube = new FakeKube();
    kube.put(TARGETS, { ...targetObject('db1', 's'), status: { shard: 2, rates: { bytesPerSecond: 12_500, linesPerSecond: 40 } } } as KubeObject);
    kube.put(SECRETS, secretObject('s'));
    const r = (await new TargetResolver(kube, 'ns').resolve([{ name: 'db1', transport: 'inproc', epoch: 5 }]))[0]!;
    assert.ok(r.ok);
    assert.deepEqual(r.assignment.rateHint, { bytesPerSecond: 12_500, linesPerSecond: 40 });
    const bare = targetObject('x', 's');
    assert.equal(rateHintOf(bare), undefined);
    assert.equal(rateHintOf({ ...bare, status: { rates: { bytesPerSecond: 'fast' } } }), undefined);
    assert.deepEqual(rateHintOf({ ...bare, status: { rates: { bytesPerSecond: 8 } } }), { bytesPerSecond: 8, linesPerSecond: 0 });
  });
});

const shard = (): CollectorShard => ({
  apiVersion: 'pglog.io/v1alpha1',
  kind: 'CollectorShard',
  metadata: { name: 's-0', namespace: 'ns', generation: 1 },
  spec: { pool: 'p', index: 0, targets: [], tuning: { uvThreadpoolSize: 4, maxOldSpaceSizeMiB: 256, maxSemiSpaceSizeMiB: 16 } },
});
const status = (n: number): CollectorShardStatus => ({ observedGeneration: n, updatedAt: 'now', targets: [], conditions: [] });

describe('StatusReporter', () => {
  test('writes the status subresource; on 409 reads the shard again and writes once more; unchanged status is not written', async () => {
    const kube = new FakeKube();
    kube.put(SHARDS, shard());
    const stale = { ...(kube.objects.get('collectorshards/s-0') as CollectorShard), metadata: { ...shard().metadata, resourceVersion: 'stale' } };
    let next = status(1);
    const reporter = new StatusReporter({ kube, namespace: 'ns', name: 's-0', shard: () => stale, build: () => next, intervalMs: 1000, log });
    kube.fail.set('replaceStatus', [new PglogError('KUBE_CONFLICT', 'the object has been modified')]);
    await reporter.round();
    assert.deepEqual(kube.calls, ['replaceStatus collectorshards/s-0@stale', 'get collectorshards/s-0', 'replaceStatus collectorshards/s-0@2']);
    assert.deepEqual((kube.objects.get('collectorshards/s-0') as CollectorShard).status, status(1));
    kube.calls.length = 0;
    await reporter.round();
    assert.deepEqual(kube.calls, [], 'nothing changed: no write');
    next = status(2);
    kube.fail.set('replaceStatus', [new PglogError('KUBE_FORBIDDEN', 'denied')]);
    await reporter.round();
    assert.equal(reporter.last?.observedGeneration, 1, 'a failed write is not taken as written');
    await reporter.round();
    assert.equal(reporter.last?.observedGeneration, 2);
  });
});

describe('ShardWatcher', () => {
  test('lists by field selector, delivers the shard on every change and null once deleted; health says why it is not current', async () => {
    const kube = new FakeKube();
    kube.put(SHARDS, shard());
    const seen: Array<number | null> = [];
    const modified = { ...shard(), metadata: { ...shard().metadata, generation: 2, resourceVersion: '50' } };
    kube.watchScript = [
      [
        { type: 'MODIFIED', object: modified },
        { type: 'DELETED', object: modified },
      ],
      new PglogError('KUBE_FORBIDDEN', 'collectorshards is forbidden'),
    ];
    kube.fail.set('list', []);
    const watcher = new ShardWatcher({
      kube,
      namespace: 'ns',
      name: 's-0',
      log,
      backoffBaseMs: 10_000,
      onShard: (s) => seen.push(s?.metadata.generation ?? null),
    });
    assert.equal(watcher.health().ok, false, 'not current before the first list');
    const stop = new AbortController();
    const running = watcher.run(stop.signal);
    const deadline = Date.now() + 5000;
    while (!/forbidden/.test(watcher.health().reason ?? '') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    assert.match(watcher.health().reason!, /collectorshards is forbidden/);
    stop.abort();
    await running;
    assert.deepEqual(seen, [1, 2, null], 'listed, modified, deleted');
    assert.equal(kube.calls[0], 'list collectorshards metadata.name=s-0');
    assert.equal(kube.calls[1], 'watch collectorshards from 2');
  });

  test('a shard that does not exist is not healthy, with the reason', async () => {
    const kube = new FakeKube();
    const watcher = new ShardWatcher({ kube, namespace: 'ns', name: 's-9', log, onShard: () => assert.fail('no shard to deliver') });
    const stop = new AbortController();
    const running = watcher.run(stop.signal);
    const deadline = Date.now() + 5000;
    while (!/does not exist/.test(watcher.health().reason ?? '') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(watcher.health(), { ok: false, reason: 'CollectorShard ns/s-9 does not exist' });
    stop.abort();
    await running;
  });
});
