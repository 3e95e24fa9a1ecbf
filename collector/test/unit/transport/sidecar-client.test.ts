// The collector's side of the sidecar directory: a server enters desired.json (with its key
// files) only once a stream of it is asked for, servers with the same credentials share one copy
// of each file, a server that leaves the collector is taken out of desired.json with its
// streams and the copies only it used are deleted; a desired.json the sidecar refused whole
// fails what it holds at once.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { ProxyShell } from '../../../src/transport/proxy-shell.ts';
import { SidecarClient, type SidecarServer } from '../../../src/transport/sidecar-client.ts';
import { sidecarServer } from '../../helpers/sidecar-server.ts';

interface DesiredFile {
  servers: Array<{ name: string; identityFile: string; knownHostsFile: string }>;
  streams: Array<{ id: string; server: string }>;
}
const readDesired = (dir: string): DesiredFile => JSON.parse(readFileSync(join(dir, 'desired.json'), 'utf8')) as DesiredFile;
const keyFiles = (dir: string): string[] => readdirSync(join(dir, 'keys')).sort();

test('removeServer withdraws its streams, leaves the others, and deletes its key copies', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sc-'));
  const client = await SidecarClient.open({ dir });
  try {
    await client.setServer(sidecarServer('a'));
    await client.setServer(sidecarServer('b'));
    client.addStream('a', 'tail a');
    const kept = client.addStream('b', 'tail b');
    await client.flushed();
    const a = readDesired(dir).servers.find((s) => s.name === 'a')!;
    const b = readDesired(dir).servers.find((s) => s.name === 'b')!;
    assert.equal(readFileSync(join(dir, 'keys', a.identityFile), 'utf8'), 'key of a');
    assert.equal(readFileSync(join(dir, 'keys', a.knownHostsFile), 'utf8'), '127.0.0.2 ssh-ed25519 AAAAa\n');
    await client.removeServer('a');
    const desired = readDesired(dir);
    assert.deepEqual(
      desired.servers.map((s) => s.name),
      ['b'],
    );
    assert.deepEqual(
      desired.streams.map((s) => s.id),
      [kept],
    );
    assert.deepEqual(keyFiles(dir), [b.identityFile, b.knownHostsFile].sort());
    assert.throws(() => client.addStream('a', 'tail a'), /no server a/);
    await client.removeServer('a');
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a server enters desired.json with its files only once a stream of it is asked for', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sc-'));
  const client = await SidecarClient.open({ dir });
  try {
    for (const name of ['a', 'b', 'c']) await client.setServer(sidecarServer(name));
    await client.flushed();
    assert.deepEqual(readDesired(dir).servers, []);
    assert.deepEqual(keyFiles(dir), []);
    client.addStream('b', 'tail b');
    await client.flushed();
    assert.deepEqual(
      readDesired(dir).servers.map((s) => s.name),
      ['b'],
    );
    assert.equal(keyFiles(dir).length, 2);
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('servers with the same key and known_hosts share one copy of each, deleted with the last of them', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sc-'));
  const client = await SidecarClient.open({ dir });
  const shared = (name: string): SidecarServer => ({
    ...sidecarServer(name),
    privateKey: Buffer.from('one key'),
    knownHosts: '127.0.0.2 ssh-ed25519 AAAAall\n',
  });
  try {
    for (const name of ['a', 'b', 'c']) {
      await client.setServer(shared(name));
      client.addStream(name, `tail ${name}`);
    }
    await client.flushed();
    const servers = readDesired(dir).servers;
    assert.equal(servers.length, 3);
    assert.equal(new Set(servers.map((s) => s.identityFile)).size, 1);
    assert.equal(new Set(servers.map((s) => s.knownHostsFile)).size, 1);
    assert.equal(keyFiles(dir).length, 2);
    await client.removeServer('a');
    await client.removeServer('b');
    assert.equal(keyFiles(dir).length, 2, 'c still uses them');
    // A new key for c: its new file is written, the old one deleted.
    await client.setServer({ ...shared('c'), privateKey: Buffer.from('another key') });
    const c = readDesired(dir).servers.find((s) => s.name === 'c')!;
    assert.equal(readFileSync(join(dir, 'keys', c.identityFile), 'utf8'), 'another key');
    assert.deepEqual(keyFiles(dir), [c.identityFile, c.knownHostsFile].sort());
    await client.removeServer('c');
    assert.deepEqual(keyFiles(dir), []);
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a desired.json the sidecar refused whole fails the spawns and forwards it holds at once with CONFIG_INVALID', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sc-'));
  const client = await SidecarClient.open({ dir, pollMs: 20, forwardTimeoutMs: 60_000 });
  try {
    await client.setServer(sidecarServer('a'));
    await client.flushed();
    const desired = JSON.parse(readFileSync(join(dir, 'desired.json'), 'utf8')) as { generation: number };
    // A sidecar of another protocol version refusing every file from this generation on.
    const status = (refusedGeneration: number): string =>
      JSON.stringify({
        version: 1,
        instance: 'i1',
        pid: 1,
        startedAt: new Date().toISOString(),
        updatedAt: new Date().toISOString(),
        appliedGeneration: -1,
        desiredError: 'desired.json: version must be 1, got 2; keeping the previous state',
        desiredErrorGeneration: refusedGeneration,
        masters: [],
        streams: {},
        forwards: {},
      });
    writeFileSync(join(dir, 'status.json'), status(desired.generation + 1000));
    const shell = new ProxyShell({ client, server: 'a', endpoint: '127.0.0.2:22', startTimeoutMs: 60_000 });
    const spawned = shell.spawn('tail a').then(
      () => assert.fail('spawned'),
      (e: unknown) => e as Error & { code?: string },
    );
    const forwarded = client.forward('a', '/run/postgresql/.s.PGSQL.5432', 5432).then(
      () => assert.fail('forwarded'),
      (e: unknown) => e as Error & { code?: string },
    );
    const [s, f] = await Promise.all([spawned, forwarded]);
    assert.equal(s.code, 'CONFIG_INVALID');
    assert.match(s.message, /a via sshproxy: desired\.json: version must be 1/);
    assert.equal(f.code, 'CONFIG_INVALID');
    // A refusal of an older file than the one holding the stream says nothing about it.
    writeFileSync(join(dir, 'status.json'), status(desired.generation));
    const id = client.addStream('a', 'tail b');
    await client.flushed();
    assert.equal(client.desiredRefusal('stream', id), null);
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('staleness is judged as of the newest read: a collector held past the stale age does not call a fresh sidecar gone before reading again', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sc-'));
  const T0 = Date.parse('2026-12-07T23:00:00.000Z');
  let now = T0;
  const heartbeat = (ms: number): void => {
    const at = new Date(ms).toISOString();
    const status = { version: 1, instance: 'i1', pid: 1, startedAt: at, updatedAt: at, appliedGeneration: 0, masters: [], streams: {}, forwards: {} };
    writeFileSync(join(dir, 'status.json.tmp'), JSON.stringify(status));
    renameSync(join(dir, 'status.json.tmp'), join(dir, 'status.json'));
  };
  /** Resolves after the client's next read of status.json (a change notice or the poll). */
  const nextRead = (client: SidecarClient): Promise<void> =>
    new Promise((resolve) => {
      const off = client.onChange(() => {
        off();
        resolve();
      });
    });
  heartbeat(T0);
  const client = await SidecarClient.open({ dir, pollMs: 20, staleMs: 5000, now: () => now });
  try {
    await nextRead(client);
    assert.equal(client.available(), true);
    // The collector's event loop was held 8 s (a starved pod); meanwhile the sidecar wrote a
    // heartbeat the collector has not read yet: not gone.
    heartbeat(T0 + 7000);
    now = T0 + 8000;
    assert.equal(client.available(), true, 'not read since: judged as of the last read');
    await nextRead(client);
    assert.equal(client.available(), true, 'the newer heartbeat read');
    // A sidecar that stopped writing: stale once a read 5 s after its last heartbeat shows no newer one.
    now = T0 + 12_001;
    await nextRead(client);
    assert.equal(client.available(), false);
    assert.match(client.unavailableReason(), /older than 5000 ms \(last 2026-12-07T23:00:07\.000Z\)/);
    // Reads that never end cannot keep a sidecar alive: past 4 × staleMs by the clock it is gone.
    heartbeat(T0 + 12_500);
    await nextRead(client);
    assert.equal(client.available(), true);
    now = T0 + 12_500 + 20_001;
    assert.equal(client.available(), false, 'no read needed past 4 × staleMs');
  } finally {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
