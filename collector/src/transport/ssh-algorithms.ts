/**
 * Which algorithms the in-process client offers, and whether ssh2's native crypto binding
 * (built by `npm ci`, see package.json allowScripts) is loaded.
 *
 * Ciphers: AES-GCM first. With the binding, ssh2 runs AES-GCM through OpenSSL's AES-NI code in
 * C++ (one call per packet), the fastest choice on x86; chacha20-poly1305 next (also in the
 * binding, and the fastest without AES-NI); AES-CTR (with a separate HMAC) last.
 */
import { createRequire } from 'node:module';

import type { Algorithms, CipherAlgorithm, ServerHostKeyAlgorithm } from 'ssh2';

export const PREFERRED_CIPHERS: readonly CipherAlgorithm[] = [
  'aes128-gcm@openssh.com',
  'aes256-gcm@openssh.com',
  'chacha20-poly1305@openssh.com',
  'aes128-ctr',
  'aes192-ctr',
  'aes256-ctr',
];

/** Host key signature algorithms per known_hosts key type (an RSA key signs with SHA-2 first). */
const HOST_KEY_ALGORITHMS: Record<string, readonly ServerHostKeyAlgorithm[]> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
};

const ALL_HOST_KEY_ALGORITHMS: readonly ServerHostKeyAlgorithm[] = [
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'rsa-sha2-512',
  'rsa-sha2-256',
  'ssh-rsa',
];

/**
 * Host key algorithms, those of the key types known_hosts holds for the server first (as
 * OpenSSH orders them), so a server with several host keys presents the one we can check.
 * The rest stay offered so that a server with none of the known types still completes key
 * exchange far enough to be refused with a message naming the key it offered.
 */
export function hostKeyAlgorithms(knownTypes: readonly string[]): ServerHostKeyAlgorithm[] {
  const first = knownTypes.flatMap((t) => HOST_KEY_ALGORITHMS[t] ?? []);
  return [...first, ...ALL_HOST_KEY_ALGORITHMS.filter((a) => !first.includes(a))];
}

/**
 * No compression is offered: a server that insists on zlib is refused at key exchange. Logs are
 * read on the server's network and compression would cost the collector CPU per byte; and a
 * hostile server's single zlib packet can inflate to tens of MB before the window guard
 * (ssh-window-guard.ts) sees it. OpenSSH servers already chose `none` when it was offered first.
 */
const COMPRESSION: Algorithms['compress'] = ['none'];

export function clientAlgorithms(knownTypes: readonly string[], ciphers: readonly CipherAlgorithm[] = PREFERRED_CIPHERS): Algorithms {
  return { cipher: [...ciphers], serverHostKey: hostKeyAlgorithms(knownTypes), compress: COMPRESSION };
}

let bindingAvailable: boolean | undefined;

/** Whether ssh2 loaded its native crypto binding (AES-GCM, chacha20-poly1305 and the generic ciphers in C++). */
export function cryptoBindingAvailable(): boolean {
  if (bindingAvailable === undefined) {
    const require = createRequire(import.meta.url);
    const crypto = require('ssh2/lib/protocol/crypto.js') as { bindingAvailable?: unknown };
    bindingAvailable = crypto.bindingAvailable === true;
  }
  return bindingAvailable;
}
