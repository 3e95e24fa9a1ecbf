// A server entry for the sidecar client's tests (sidecar-client, sidecar-forward): a made-up
// address and key material named after the server, so each server's files can be told apart.
import type { SidecarServer } from '../../src/transport/sidecar-client.ts';

export const sidecarServer = (name: string): SidecarServer => ({
  name,
  host: '127.0.0.2',
  port: 22,
  user: 'postgres',
  maxSessions: 10,
  serverAliveIntervalS: 5,
  connectTimeoutS: 5,
  privateKey: Buffer.from(`key of ${name}`),
  knownHosts: `127.0.0.2 ssh-ed25519 AAAA${name}\n`,
});
