// DeferredSocket, the Duplex node-postgres is given while the real stream opens, against a
// real Unix-socket echo server standing in for the SSH channel or forward: bytes both ways with
// backpressure, the far end's close, a failed open, and a destroy before the open completes.
import { strict as assert } from 'node:assert';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { after, before, describe, test } from 'node:test';

import { DeferredSocket } from '../../../src/sampler/deferred-socket.ts';

// A Unix socket server plays the far end (what an SSH channel or forward would reach).
describe('DeferredSocket', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-ds-'));
  const path = join(dir, 'echo.sock');
  let server: Server;
  const accepted: Socket[] = [];

  before(async () => {
    server = createServer((s) => {
      accepted.push(s);
      s.on('error', () => undefined);
      s.pipe(s);
    });
    server.listen(path);
    await once(server, 'listening');
  });
  after(() => {
    for (const s of accepted) s.destroy();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const openUnix = (): Promise<Duplex> =>
    new Promise((resolve, reject) => {
      const s = connect(path);
      s.once('connect', () => resolve(s));
      s.once('error', reject);
    });

  test('connect() opens the stream, emits connect, and bytes go both ways', async () => {
    const socket = new DeferredSocket(openUnix);
    socket.setNoDelay().setKeepAlive();
    const connected = once(socket, 'connect');
    socket.connect();
    await connected;
    const received: Buffer[] = [];
    socket.on('data', (b: Buffer) => received.push(b));
    const payload = Buffer.alloc(3 * 1024 * 1024, 7); // more than any socket buffer: backpressure both ways
    socket.write(payload);
    while (Buffer.concat(received).length < payload.length) await once(socket, 'data');
    assert.ok(Buffer.concat(received).equals(payload));
    socket.end();
    await once(socket, 'close');
  });

  test('the far end closing ends the stream and closes it (pg sees the connection end)', async () => {
    const socket = new DeferredSocket(openUnix);
    socket.connect();
    await once(socket, 'connect');
    socket.resume();
    const closed = once(socket, 'close');
    accepted.at(-1)!.destroy();
    await closed;
  });

  test('a failure to open destroys the stream with that error', async () => {
    const cause = new Error('the server could not connect to the Unix socket');
    const socket = new DeferredSocket(() => Promise.reject(cause));
    const failed = once(socket, 'error');
    socket.connect();
    const [error] = (await failed) as [Error];
    assert.equal(error, cause);
  });

  test('destroyed before the open finishes: the opened stream is closed again', async () => {
    let opened: Duplex | null = null;
    const socket = new DeferredSocket(async () => {
      opened = await openUnix();
      return opened;
    });
    socket.connect();
    socket.destroy();
    while (opened === null) await new Promise((r) => setTimeout(r, 5));
    const inner = opened as Duplex;
    if (!inner.destroyed) await once(inner, 'close');
    assert.ok(inner.destroyed);
  });
});
