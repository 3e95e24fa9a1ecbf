// The sidecar's OpenSSH command lines: the master's fail-closed options (only the named key
// and known_hosts, no config files), stream clients that ride the master's control socket only,
// socket names per slot and connection; the directory length limit is checked by binding a real
// Unix socket at the longest name ssh -M would use.
import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import type { DesiredServer } from '@pglog/common/sidecar/contract.ts';

import {
  controlSocketPath,
  dirTooLong,
  masterArgs,
  MAX_DIR_LENGTH,
  MAX_SLOT,
  remoteCommandArg,
  serverFingerprint,
  streamClientArgs,
} from '../../../src/sidecar/openssh-args.ts';

const server: DesiredServer = {
  name: 'db1',
  host: '10.0.0.5',
  port: 2222,
  user: 'postgres',
  identityFile: 'db1.key',
  knownHostsFile: 'db1.known_hosts',
  maxSessions: 10,
  serverAliveIntervalS: 5,
  connectTimeoutS: 7,
};
const DIR = '/run/pglog';

/** The master's `-o` options for `server` in DIR, but for Ciphers (a list that starts with the fast one). */
const MASTER_OPTIONS: Record<string, string> = {
  ControlPersist: 'no',
  BatchMode: 'yes',
  StrictHostKeyChecking: 'yes',
  UserKnownHostsFile: '/run/pglog/keys/db1.known_hosts',
  GlobalKnownHostsFile: '/dev/null',
  UpdateHostKeys: 'no',
  IdentitiesOnly: 'yes',
  IdentityFile: '/run/pglog/keys/db1.key',
  IdentityAgent: 'none',
  ServerAliveInterval: '5',
  ServerAliveCountMax: '3',
  ConnectTimeout: '7',
  Compression: 'no',
};

/** `-o Name=value` options as a map. */
function options(argv: string[]): Map<string, string> {
  const out = new Map<string, string>();
  argv.forEach((a, i) => {
    if (a !== '-o') return;
    const [name, ...value] = (argv[i + 1] ?? '').split('=');
    out.set(name ?? '', value.join('='));
  });
  return out;
}

describe('OpenSSH command lines', () => {
  test('the master: fail-closed host key check, only the named key, keepalive, no config files', () => {
    const argv = masterArgs(DIR, server, 0);
    assert.deepEqual(argv.slice(0, 2), ['-F', '/dev/null']);
    for (const flag of ['-M', '-N', '-T']) assert.ok(argv.includes(flag), flag);
    assert.equal(argv[argv.indexOf('-S') + 1], controlSocketPath(DIR, server, 0));
    const o = options(argv);
    for (const [name, value] of Object.entries(MASTER_OPTIONS)) assert.equal(o.get(name), value, name);
    assert.match(o.get('Ciphers') ?? '', /^aes128-gcm@openssh\.com,/);
    assert.deepEqual(argv.slice(-5), ['-p', '2222', '-l', 'postgres', '10.0.0.5']);
  });

  test('a stream client: the same socket, never a connection of its own, the command last', () => {
    const argv = streamClientArgs(DIR, server, 3, 'tail -F /var/log/postgresql/pg.log');
    assert.equal(argv[argv.indexOf('-S') + 1], controlSocketPath(DIR, server, 3));
    const o = options(argv);
    assert.equal(o.get('ControlMaster'), 'no');
    assert.equal(o.get('BatchMode'), 'yes');
    assert.match(o.get('ProxyCommand') ?? '', /exit 1/);
    assert.ok(!o.has('IdentityFile'), 'the key stays with the master');
    assert.deepEqual(argv.slice(-6), ['-p', '2222', '-l', 'postgres', '10.0.0.5', 'tail -F /var/log/postgresql/pg.log']);
  });

  test('a command starting with "-" cannot become an ssh option', () => {
    assert.equal(remoteCommandArg('-x'), ' -x');
    assert.equal(remoteCommandArg('echo -x'), 'echo -x');
  });

  test('control sockets: one per slot, a new name when the connection changes, not when maxSessions does', () => {
    const a = controlSocketPath(DIR, server, 0);
    assert.match(a, /^\/run\/pglog\/ctl\/[0-9a-f]{10}-0$/);
    assert.notEqual(controlSocketPath(DIR, server, 1), a);
    assert.equal(controlSocketPath(DIR, { ...server, maxSessions: 3 }, 0), a);
    for (const change of [
      { port: 22 },
      { user: 'x' },
      { host: 'h' },
      { identityFile: 'k2' },
      { knownHostsFile: 'kh2' },
      { connectTimeoutS: 9 },
      { serverAliveIntervalS: 9 },
      { name: 'db2' },
    ]) {
      assert.notEqual(controlSocketPath(DIR, { ...server, ...change }, 0), a, JSON.stringify(change));
    }
    assert.notEqual(serverFingerprint({ ...server, port: 22 }), serverFingerprint(server));
    assert.throws(() => controlSocketPath(DIR, server, MAX_SLOT + 1), RangeError);
  });

  test("the directory length limit: stated, and the longest allowed directory really binds ssh's temporary socket name", async () => {
    assert.equal(dirTooLong('/'.padEnd(MAX_DIR_LENGTH, 'x')), null);
    const message = dirTooLong('/'.padEnd(MAX_DIR_LENGTH + 1, 'x'));
    assert.ok(message !== null);
    assert.match(message, new RegExp(`at most ${MAX_DIR_LENGTH}\\b`));
    assert.match(message, /107-byte Unix socket path limit/);

    const base = mkdtempSync(join(tmpdir(), 'sp-'));
    try {
      const dir = `${base}/`.padEnd(MAX_DIR_LENGTH, 'd');
      mkdirSync(`${dir}/ctl`, { recursive: true });
      // What ssh -M binds: the path plus "." and 16 random characters, for the largest slot.
      const bound = `${controlSocketPath(dir, server, MAX_SLOT)}.${'r'.repeat(16)}`;
      assert.equal(Buffer.byteLength(bound), 107);
      await new Promise<void>((resolve, reject) => {
        const s = createServer();
        s.once('error', reject);
        s.listen(bound, () => s.close(() => resolve()));
      });
    } finally {
      rmSync(base, { recursive: true, force: true });
    }
  });
});
