// The collector's side of SQL forwards: forward() writes the forward into desired.json and
// resolves only on a fresh status that applied it and reports it ready; it rejects with the
// sidecar's code, or SIDECAR_UNAVAILABLE on timeout; removeForward and removeServer withdraw it.
// The sidecar is played by writing status.json by hand.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, test } from 'node:test';

import { PglogError } from '@pglog/common/errors.ts';
import type { DesiredState, ForwardStatus, SidecarStatus } from '@pglog/common/sidecar/contract.ts';

import { SidecarClient } from '../../../src/transport/sidecar-client.ts';
import { forwardId } from '../../../src/transport/sidecar-forward.ts';
import { sidecarServer } from '../../helpers/sidecar-server.ts';

const REMOTE = '/var/run/postgresql/.s.PGSQL.5432';

const open: Array<{ dir: string; client: SidecarClient }> = [];

async function setup(forwardTimeoutMs = 2000): Promise<{ dir: string; client: SidecarClient }> {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-scf-'));
  const client = await SidecarClient.open({ dir, pollMs: 20, forwardTimeoutMs });
  await client.setServer(sidecarServer('db'));
  await client.setServer(sidecarServer('other'));
  open.push({ dir, client });
  return { dir, client };
}

function desired(dir: string): DesiredState {
  return JSON.parse(readFileSync(join(dir, 'desired.json'), 'utf8')) as DesiredState;
}

/** Writes status.json as the sidecar would. */
function writeStatus(dir: string, appliedGeneration: number, forwards: Record<string, ForwardStatus>, extra: Partial<SidecarStatus> = {}): void {
  const status: SidecarStatus = {
    version: 1,
    instance: 'i1',
    pid: 1,
    startedAt: new Date().toISOString(),
    updatedAt: new Date().toISOString(),
    appliedGeneration,
    masters: [],
    streams: {},
    forwards,
    ...extra,
  };
  writeFileSync(join(dir, 'status.json.tmp'), JSON.stringify(status));
  renameSync(join(dir, 'status.json.tmp'), join(dir, 'status.json'));
}

const forwardStatus = (dir: string, id: string, state: ForwardStatus['state'], error?: ForwardStatus['error']): ForwardStatus => ({
  state,
  server: 'db',
  remoteSocket: REMOTE,
  port: 5432,
  localDir: join(dir, 'sql', id),
  ...(error === undefined ? {} : { error }),
});

/** Settles within `ms` or says it is still pending. */
async function settled<T>(p: Promise<T>, ms: number): Promise<{ value: T } | { error: unknown } | 'pending'> {
  return Promise.race([
    p.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ),
    new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms)),
  ]);
}

afterEach(async () => {
  for (const { dir, client } of open.splice(0)) {
    await client.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe('SidecarClient.forward', () => {
  test('writes the forward into desired.json and resolves with its directory only once a status that applied it says ready', async () => {
    const { dir, client } = await setup();
    const id = forwardId('db', REMOTE, 5432);
    assert.match(id, /^f[0-9a-f]{15}$/);
    const result = client.forward('db', REMOTE, 5432);
    await client.flushed();
    const d = desired(dir);
    assert.deepEqual(d.forwards, [{ id, server: 'db', remoteSocket: REMOTE, port: 5432 }]);
    const generation = client.forwardGeneration(id)!;
    assert.equal(generation, d.generation);

    // A status from before this generation, even saying ready, is not this forward's.
    writeStatus(dir, generation - 1, { [id]: forwardStatus(dir, id, 'ready') });
    assert.equal(await settled(result, 150), 'pending');
    writeStatus(dir, generation, { [id]: forwardStatus(dir, id, 'pending') });
    assert.equal(await settled(result, 150), 'pending');
    writeStatus(dir, generation, { [id]: forwardStatus(dir, id, 'ready') });
    assert.equal(await result, join(dir, 'sql', id));
    // The same forward again: no new write, at once.
    assert.equal(await client.forward('db', REMOTE, 5432), join(dir, 'sql', id));
    assert.equal(desired(dir).generation, generation);
  });

  test('a stale status (sidecar gone) never makes it ready', async () => {
    const { dir, client } = await setup(600);
    const id = forwardId('db', REMOTE, 5432);
    const result = client.forward('db', REMOTE, 5432);
    await client.flushed();
    writeStatus(dir, client.forwardGeneration(id)!, { [id]: forwardStatus(dir, id, 'ready') }, { updatedAt: new Date(Date.now() - 60_000).toISOString() });
    await assert.rejects(result, (e: unknown) => {
      assert.ok(e instanceof PglogError);
      assert.equal(e.code, 'SIDECAR_UNAVAILABLE');
      assert.match(
        e.message,
        /^db: SQL forward of \/var\/run\/postgresql\/\.s\.PGSQL\.5432 via sshproxy: not ready within 600 ms; waited for the sshproxy sidecar's status .* is older than/,
      );
      return true;
    });
  });

  test('failed: rejects with the reported code and message, naming server and socket', async () => {
    const { dir, client } = await setup();
    const id = forwardId('db', REMOTE, 5432);
    const result = client.forward('db', REMOTE, 5432);
    await client.flushed();
    writeStatus(dir, client.forwardGeneration(id)!, {
      [id]: forwardStatus(dir, id, 'failed', { code: 'SIDECAR_UNAVAILABLE', message: 'forward x: the master did not bind' }),
    });
    await assert.rejects(
      result,
      (e: unknown) =>
        e instanceof PglogError &&
        e.code === 'SIDECAR_UNAVAILABLE' &&
        e.message === `db: SQL forward of ${REMOTE} via sshproxy: forward x: the master did not bind`,
    );
  });

  test('pending on a master refused for good rejects at once; on a master that may come back it waits, then times out with its error', async () => {
    const { dir, client } = await setup(500);
    const id = forwardId('db', REMOTE, 5432);
    const refused = client.forward('db', REMOTE, 5432);
    await client.flushed();
    const generation = client.forwardGeneration(id)!;
    writeStatus(dir, generation, {
      [id]: forwardStatus(dir, id, 'pending', { code: 'SSH_AUTH_FAILED', message: 'postgres@127.0.0.2:22: the server refused the private key' }),
    });
    await assert.rejects(refused, (e: unknown) => e instanceof PglogError && e.code === 'SSH_AUTH_FAILED' && e.message.includes('refused the private key'));

    writeStatus(dir, generation, {
      [id]: forwardStatus(dir, id, 'pending', { code: 'SSH_CONNECT_FAILED', message: 'postgres@127.0.0.2:22: the connection failed: Connection refused' }),
    });
    while (client.status?.forwards[id]?.error?.code !== 'SSH_CONNECT_FAILED') await new Promise((resolve) => setTimeout(resolve, 10));
    const started = Date.now();
    await assert.rejects(
      client.forward('db', REMOTE, 5432),
      (e: unknown) =>
        e instanceof PglogError &&
        e.code === 'SSH_CONNECT_FAILED' &&
        /not ready within 500 ms: postgres@127\.0\.0\.2:22: the connection failed/.test(e.message),
    );
    assert.ok(Date.now() - started >= 450);
  });

  test('no sidecar at all: SIDECAR_UNAVAILABLE after the timeout, saying what it waited for', async () => {
    const { client } = await setup(300);
    await assert.rejects(
      client.forward('db', REMOTE, 5432),
      /SQL forward of .* not ready within 300 ms; waited for the sshproxy sidecar has not written status\.json/,
    );
  });

  test("an abort rejects with the signal's reason; bad arguments are refused before anything is written", async () => {
    const { client } = await setup();
    const controller = new AbortController();
    const result = client.forward('db', REMOTE, 5432, controller.signal);
    controller.abort(new Error('snapshot timed out'));
    await assert.rejects(result, /snapshot timed out/);
    await assert.rejects(client.forward('db', 'relative/.s.PGSQL.5432', 5432), (e: unknown) => e instanceof PglogError && e.code === 'CONFIG_INVALID');
    await assert.rejects(client.forward('db', '/a:b/.s.PGSQL.5432', 5432), /OpenSSH would read as syntax/);
    await assert.rejects(client.forward('db', REMOTE, 0), /port 0/);
    await assert.rejects(client.forward('nobody', REMOTE, 5432), /no server nobody/);
  });

  test('removeForward and removeServer take forwards out of desired.json', async () => {
    const { dir, client } = await setup();
    void client.forward('db', REMOTE, 5432).catch(() => undefined);
    void client.forward('db', '/tmp/.s.PGSQL.5433', 5433).catch(() => undefined);
    void client.forward('other', REMOTE, 5432).catch(() => undefined);
    await client.flushed();
    assert.equal(desired(dir).forwards.length, 3);
    client.removeForward('db', '/tmp/.s.PGSQL.5433', 5433);
    await client.flushed();
    assert.deepEqual(
      desired(dir).forwards.map((f) => [f.server, f.port]),
      [
        ['db', 5432],
        ['other', 5432],
      ],
    );
    await client.removeServer('db');
    assert.deepEqual(
      desired(dir).forwards.map((f) => f.server),
      ['other'],
    );
    assert.equal(client.forwardGeneration(forwardId('db', REMOTE, 5432)), undefined);
  });
});
