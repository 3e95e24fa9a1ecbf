// The connection pool shares what a fleet's targets share: one known_hosts text is parsed once
// for all the targets that name it, and forgotten with the last of them.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';

import { SshConnectionPool } from '../../../src/transport/ssh-pool.ts';

const blob = (): string => {
  const type = Buffer.from('ssh-ed25519');
  const len = (b: Buffer): Buffer => Buffer.from([0, 0, 0, b.length]);
  const key = randomBytes(32);
  return Buffer.concat([len(type), type, len(key), key]).toString('base64');
};

test('targets that share a known_hosts text share its parse; a different text or source gets its own', () => {
  const pool = new SshConnectionPool();
  const text = Array.from({ length: 20 }, (_, i) => `[10.0.0.${i + 1}]:22 ssh-ed25519 ${blob()}`).join('\n');
  const parsed = (pool as unknown as { parsed: Map<string, Map<string, unknown>> }).parsed;
  const open = (target: string, known: { text: string; source: string }): void => {
    pool.get({ target, host: '10.0.0.1', port: 22, username: 'u', privateKey: Buffer.from('k'), knownHosts: known });
  };
  for (let i = 0; i < 20; i++) open(`db${i}`, { text: `${text}`, source: 'fleet' });
  assert.equal(parsed.size, 1);
  assert.equal(parsed.get(text)!.size, 1);
  open('other', { text, source: 'another file' });
  open('own', { text: `${text}\n`, source: 'fleet' });
  assert.equal(parsed.size, 2);
  assert.equal(parsed.get(text)!.size, 2);
  return (async () => {
    for (let i = 0; i < 20; i++) await pool.remove(`db${i}`);
    assert.equal(parsed.get(text)!.size, 1, 'the other source still uses the text');
    await pool.remove('other');
    await pool.remove('own');
    assert.equal(parsed.size, 0);
    await pool.closeAll();
  })();
});
