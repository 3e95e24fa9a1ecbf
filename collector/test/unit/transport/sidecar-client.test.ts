// The collector's side of the sidecar directory: a server that leaves the collector is taken
// out of desired.json with its streams, and the copies of its key and known_hosts are deleted;
// a desired.json the sidecar refused whole fails what it holds at once.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { ProxyShell } from '../../../src/transport/proxy-shell.ts';
import { SidecarClient } from '../../../src/transport/sidecar-client.ts';
import { sidecarServer } from '../../helpers/sidecar-server.ts';

test('removeServer withdraws its streams, leaves the others, and deletes its key copies', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sc-'));
  const client = await SidecarClient.open({ dir });
  try {
    await client.setServer(sidecarServer('a'));
    await client.setServer(sidecarServer('b'));
    client.addStream('a', 'tail a');
    const kept = client.addStream('b', 'tail b');
    await client.flushed();
    assert.ok(existsSync(join(dir, 'keys', 'a.key')));
    await client.removeServer('a');
    const desired = JSON.parse(readFileSync(join(dir, 'desired.json'), 'utf8')) as {
      servers: Array<{ name: string }>;
      streams: Array<{ id: string; server: string }>;
    };
    assert.deepEqual(
      desired.servers.map((s) => s.name),
      ['b'],
    );
    assert.deepEqual(
      desired.streams.map((s) => s.id),
      [kept],
    );
    assert.equal(existsSync(join(dir, 'keys', 'a.key')), false);
    assert.equal(existsSync(join(dir, 'keys', 'a.known_hosts')), false);
    assert.ok(existsSync(join(dir, 'keys', 'b.key')));
    assert.throws(() => client.addStream('a', 'tail a'), /no server a/);
    await client.removeServer('a');
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
