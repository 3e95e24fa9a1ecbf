/**
 * The ssh2 internals the bounded SSH window relies on (collector/src/transport/ssh-window.ts,
 * ADR 0016), checked against the installed ssh2 so that an upgrade that changes them fails
 * here, by name, rather than as stalled or unbounded streams. The behaviour itself is tested
 * against OpenSSH in collector/test/integration/ssh-transport.test.ts, the cut-off of a server
 * that ignores it in ssh-window-guard.test.ts and ssh-hostile-window.test.ts.
 */
import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { Client } from 'ssh2';

import { holdWindow, openSessionsWithWindow } from '../../../src/transport/ssh-window.ts';

const require = createRequire(import.meta.url);
const ssh2Main = require.resolve('ssh2');
const ssh2Root = ssh2Main.slice(0, ssh2Main.lastIndexOf('/lib/'));

test('ssh2 is the pinned version the window adapter was written against', () => {
  const installed = (JSON.parse(readFileSync(`${ssh2Root}/package.json`, 'utf8')) as { version: string }).version;
  const pinned = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> }).dependencies
    .ssh2;
  assert.equal(pinned, '1.17.0', 'ssh2 is pinned exactly: review ssh-window.ts against a new version before changing this');
  assert.equal(installed, pinned);
});

test("ssh2's window constants and protocol methods are where ssh-window.ts expects them", () => {
  const channel = require(`${ssh2Root}/lib/Channel.js`) as { MAX_WINDOW: number; WINDOW_THRESHOLD: number; windowAdjust: unknown };
  // ssh2 re-grants only at or below WINDOW_THRESHOLD: the adapter's 1 GiB offset must stay above it.
  assert.equal(channel.MAX_WINDOW, 2 * 1024 * 1024);
  assert.equal(channel.WINDOW_THRESHOLD, 1024 * 1024);
  const Protocol = require(`${ssh2Root}/lib/protocol/Protocol.js`) as { prototype: Record<string, unknown> };
  assert.equal(typeof Protocol.prototype.session, 'function');
  assert.equal((Protocol.prototype.session as (...a: unknown[]) => void).length, 3);
  assert.equal(typeof Protocol.prototype.channelWindowAdjust, 'function');
  assert.equal((Protocol.prototype.channelWindowAdjust as (...a: unknown[]) => void).length, 2);
  // The client handler that counts incoming data against channel.incoming.window.
  const client = readFileSync(`${ssh2Root}/lib/client.js`, 'utf8');
  assert.match(client, /if \(channel\.incoming\.window === 0\)\s+return;\s+channel\.incoming\.window -= data\.length;/);
  assert.match(client, /const initWindow = MAX_WINDOW;/);
  // The handlers decrement the window before they push (ssh-window-guard.ts checks at push).
  assert.match(client, /channel\.incoming\.window -= data\.length;\s+if \(channel\.push\(data\) === false\)/);
  assert.match(client, /channel\.incoming\.window -= data\.length;\s+if \(!channel\.stderr\.push\(data\)\)/);
  // A channel the client opened is filed with _chanMgr.update before anything else sees it.
  assert.match(client, /this\._chanMgr\.update\(info\.recipient, instance\);\s+channel\(undefined, instance\);/);
  const utils = require(`${ssh2Root}/lib/utils.js`) as { ChannelManager: { prototype: Record<string, unknown> } };
  assert.equal(typeof utils.ChannelManager.prototype.update, 'function');
});

test('the adapter refuses, with a stable code, a client or channel whose internals it does not recognise', () => {
  const client = new Client(); // never connected: no _protocol yet
  assert.throws(
    () => openSessionsWithWindow(client, 512 * 1024, () => undefined),
    (e: unknown) => isPglogError(e) && e.code === 'SSH_CHANNEL_FAILED',
  );
  assert.throws(
    () => holdWindow(client, {} as never, 512 * 1024),
    (e: unknown) => isPglogError(e) && e.code === 'SSH_CHANNEL_FAILED',
  );
});
