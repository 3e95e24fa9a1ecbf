/**
 * A server that ignores the SSH window is cut off at one window plus one packet, through ssh2's
 * own message handlers: a real ssh2 Client on a socket that swallows what it writes, whose
 * CHANNEL_OPEN_CONFIRMATION, CHANNEL_SUCCESS, CHANNEL_DATA and CHANNEL_EXTENDED_DATA handlers
 * (the ones ssh2 calls for each decrypted packet) are called as a server's packets would call
 * them. So ssh2's real window accounting and Channel streams run, not a model of them. The same
 * against a hostile ssh2 server over TCP: collector/test/integration/ssh-hostile-window.test.ts.
 */
import { strict as assert } from 'node:assert';
import { Duplex } from 'node:stream';
import { afterEach, describe, test } from 'node:test';

import { isPglogError, type PglogError } from '@pglog/common/errors.ts';
import { Client, type ClientChannel } from 'ssh2';

import { windowExceededError } from '../../../src/transport/ssh-errors.ts';
import { holdWindow, openSessionsWithWindow } from '../../../src/transport/ssh-window.ts';
import { WINDOW_OVERRUN_TOLERANCE_BYTES, type WindowOverrun } from '../../../src/transport/ssh-window-guard.ts';

const WINDOW = 512 * 1024;
/** What a hostile server sends beyond the window. */
const FLOOD = 64 * 1024 * 1024;
/** 32 KiB less one byte: ssh2's count steps past 0 instead of meeting it, so its own check never fires. */
const PACKET = 32 * 1024 - 1;
const SSH2_WINDOW = 2 * 1024 * 1024;
const endpoint = { target: 'db1', host: '10.0.0.5', port: 22, username: 'postgres' };

type Handler = (p: unknown, ...args: unknown[]) => void;
interface Fake {
  client: Client;
  /** A server packet, handed to ssh2's handler for it. */
  receive(message: string, ...args: unknown[]): void;
  /** Every overrun reported, mapped to the connection's error. */
  errors: PglogError[];
  /** CHANNEL_WINDOW_ADJUST amounts the client sent. */
  grants: number[];
}

const clients: Client[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.destroy();
});

/** A real ssh2 Client "connected" to a socket that swallows writes, set up as SshConnection sets it up. */
function fakeClient(): Fake {
  const sock = new Duplex({
    read() {},
    write(_chunk, _encoding, done) {
      done();
    },
  });
  (sock as Duplex & { connecting: boolean }).connecting = false;
  const client = new Client();
  clients.push(client);
  client.on('error', () => undefined); // "Connection lost before handshake" when destroyed
  // Not OpenSSH (no server banner at all): strictVendor would refuse the stream-local forward.
  client.connect({ sock, username: 'postgres', readyTimeout: 60_000, keepaliveInterval: 0, strictVendor: false });
  const protocol = (client as unknown as { _protocol: { _handlers: Record<string, Handler>; channelWindowAdjust(id: number, n: number): void } })._protocol;
  const fake: Fake = {
    client,
    receive: (message, ...args) => protocol._handlers[message]!(protocol, ...args),
    errors: [],
    grants: [],
  };
  const adjust = protocol.channelWindowAdjust.bind(protocol);
  protocol.channelWindowAdjust = (id: number, n: number): void => {
    fake.grants.push(n);
    adjust(id, n);
  };
  openSessionsWithWindow(client, WINDOW, (overrun: WindowOverrun) => fake.errors.push(windowExceededError(endpoint, overrun)));
  return fake;
}

/** The local id of a fresh client's first channel; the server's id for it is 100. */
const ID = 0;

/**
 * client.exec as SshConnection runs it (holdWindow in the callback), the server confirming the
 * channel and, with `reply`, the exec.
 */
function exec(fake: Fake, reply = true): Promise<ClientChannel> {
  const channel = new Promise<ClientChannel>((resolve, reject) => {
    fake.client.exec('tail -f log', (err, ch) => (err === undefined || err === null ? resolve(holdWindow(fake.client, ch, WINDOW)) : reject(err)));
  });
  channel.catch(() => undefined); // without a reply, ssh2 fails it when the client is destroyed
  fake.receive('CHANNEL_OPEN_CONFIRMATION', { recipient: ID, sender: 100, window: SSH2_WINDOW, packetSize: 32 * 1024 });
  if (reply) fake.receive('CHANNEL_SUCCESS', ID);
  return channel;
}

/** The ssh2 Channel the client holds for local id `id` (before exec hands it over, too). */
function channelOf(fake: Fake, id: number): ClientChannel {
  return (fake.client as unknown as { _chanMgr: { get(id: number): ClientChannel } })._chanMgr.get(id);
}

/** A server ignoring the window: `bytes` in PACKET-sized packets, as data or as stderr. */
function flood(fake: Fake, id: number, bytes: number, stream: 'data' | 'stderr' = 'data'): void {
  const packet = Buffer.alloc(PACKET, 0x61);
  for (let sent = 0; sent < bytes; sent += PACKET) {
    if (stream === 'data') fake.receive('CHANNEL_DATA', id, packet);
    else fake.receive('CHANNEL_EXTENDED_DATA', id, packet, 1);
  }
}

/** `held` is at most `bound` (default one window) plus one packet. */
function assertCutOff(fake: Fake, held: number, windowBytes: number, channelType: string, bound = windowBytes): void {
  assert.ok(held <= bound + WINDOW_OVERRUN_TOLERANCE_BYTES, `the channel holds ${held} bytes, more than ${bound} plus one packet`);
  assert.equal(fake.errors.length, 1, 'one overrun reported');
  const error = fake.errors[0]!;
  assert.ok(isPglogError(error));
  assert.equal(error.code, 'SSH_WINDOW_EXCEEDED');
  assert.match(error.message, /^target db1 \(postgres@10\.0\.0\.5:22\): the server sent \d+ bytes beyond the SSH window/);
  assert.match(error.message, new RegExp(`on a ${channelType} channel.*\\(window ${windowBytes} bytes\\)`));
  const excess = Number(/sent (\d+) bytes/.exec(error.message)![1]);
  assert.ok(excess > WINDOW_OVERRUN_TOLERANCE_BYTES && excess <= WINDOW_OVERRUN_TOLERANCE_BYTES + PACKET, `excess reported: ${excess}`);
}

describe('a server that ignores the SSH window', () => {
  test('64 MiB beyond a 512 KiB window, nothing read: cut off with SSH_WINDOW_EXCEEDED, at most one window plus one packet held', async () => {
    const fake = fakeClient();
    const channel = await exec(fake);
    flood(fake, ID, WINDOW + FLOOD);
    assertCutOff(fake, channel.readableLength, WINDOW, 'session');
    assert.deepEqual(fake.grants, [], 'nothing was read, so nothing was granted');
  });

  test('the same on stderr', async () => {
    const fake = fakeClient();
    const channel = await exec(fake);
    flood(fake, ID, WINDOW + FLOOD, 'stderr');
    assertCutOff(fake, channel.readableLength + channel.stderr.readableLength, WINDOW, 'session');
    assert.match(fake.errors[0]!.message, /\(its stderr\)/);
  });

  test('the same before the server has answered the exec (the channel is guarded from its creation)', () => {
    const fake = fakeClient();
    void exec(fake, false);
    flood(fake, ID, WINDOW + FLOOD);
    assertCutOff(fake, channelOf(fake, ID).readableLength, WINDOW, 'session');
  });

  test("an SQL socket forward (ssh2's own 2 MiB window) is cut off the same way", async () => {
    const fake = fakeClient();
    const opened = new Promise<ClientChannel>((resolve, reject) =>
      fake.client.openssh_forwardOutStreamLocal('/run/postgresql/.s.PGSQL.5432', (err, ch) => (err ? reject(err) : resolve(ch))),
    );
    fake.receive('CHANNEL_OPEN_CONFIRMATION', { recipient: ID, sender: 100, window: SSH2_WINDOW, packetSize: 32 * 1024 });
    const channel = await opened;
    channel.pause();
    flood(fake, ID, SSH2_WINDOW + FLOOD);
    // ssh2 grants this window itself, up to 2 MiB more while its buffer is under its 2 MiB
    // high-water mark: what a correct server can make it hold, and no more.
    assertCutOff(fake, channel.readableLength, SSH2_WINDOW, 'direct-streamlocal@openssh.com', 2 * SSH2_WINDOW);
  });

  test('a server that keeps to the window is never cut off, however much it sends to a reading consumer', async () => {
    const fake = fakeClient();
    const channel = await exec(fake);
    let window = WINDOW;
    let received = 0;
    const total = 16 * 1024 * 1024;
    const packet = Buffer.alloc(32 * 1024, 0x62);
    for (let sent = 0; sent < total;) {
      // Send all the window allows, then let the consumer read, which grants more.
      while (window > 0 && sent < total) {
        const n = Math.min(window, packet.length, total - sent);
        fake.receive('CHANNEL_DATA', ID, packet.subarray(0, n));
        window -= n;
        sent += n;
      }
      for (let chunk = channel.read() as Buffer | null; chunk !== null; chunk = channel.read() as Buffer | null) received += chunk.length;
      window += fake.grants.splice(0).reduce((a, b) => a + b, 0);
      assert.ok(window > 0 || sent === total, 'the consumer read everything, so the window was granted again');
    }
    assert.equal(received, total);
    assert.deepEqual(fake.errors, []);
  });
});
