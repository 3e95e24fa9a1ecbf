// An in-process SSH connection's options for a test SSH server (sshd.ts): its login, key and
// known_hosts read from the server's files, no start-up spread and a short backoff. For the
// collector's tests and the benchmarks that open an SshConnection.
import { readFileSync } from 'node:fs';

import { ConnectLimiter } from '@pglog/collector/transport/connect-limiter.ts';
import type { SshConnectionOptions } from '@pglog/collector/transport/ssh-connection.ts';

import type { TestSshServer } from './sshd.ts';

/** Options for `server`; `over` replaces any (a shared limiter, other keys, another target name). */
export function sshConnectionOptions(server: TestSshServer, over: Partial<SshConnectionOptions> = {}): SshConnectionOptions {
  return {
    target: 'test',
    host: server.host,
    port: server.port,
    username: server.user,
    privateKey: readFileSync(server.privateKeyFile),
    privateKeySource: server.privateKeyFile,
    knownHosts: { text: readFileSync(server.knownHostsFile, 'utf8'), source: server.knownHostsFile },
    limiter: new ConnectLimiter({ spreadMs: 0 }),
    backoff: { baseMs: 50, capMs: 1000 },
    ...over,
  };
}
