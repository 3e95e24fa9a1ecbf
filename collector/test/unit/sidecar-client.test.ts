// The collector's side of the sidecar directory: a server that leaves the collector is taken
// out of desired.json with its streams, and the copies of its key and known_hosts are deleted.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { SidecarClient, type SidecarServer } from '../../src/transport/sidecar-client.ts';

const server = (name: string): SidecarServer => ({
  name, host: '127.0.0.2', port: 22, user: 'postgres', maxSessions: 10, serverAliveIntervalS: 5, connectTimeoutS: 5,
  privateKey: Buffer.from(`key of ${name}`), knownHosts: `127.0.0.2 ssh-ed25519 AAAA${name}\n`,
});

test('removeServer withdraws its streams, leaves the others, and deletes its key copies', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sc-'));
  const client = await SidecarClient.open({ dir });
  try {
    await client.setServer(server('a'));
    await client.setServer(server('b'));
    client.addStream('a', 'tail a');
    const kept = client.addStream('b', 'tail b');
    await client.flushed();
    assert.ok(existsSync(join(dir, 'keys', 'a.key')));
    await client.removeServer('a');
    const desired = JSON.parse(readFileSync(join(dir, 'desired.json'), 'utf8')) as { servers: Array<{ name: string }>; streams: Array<{ id: string; server: string }> };
    assert.deepEqual(desired.servers.map((s) => s.name), ['b']);
    assert.deepEqual(desired.streams.map((s) => s.id), [kept]);
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
