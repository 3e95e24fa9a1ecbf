/**
 * The machine's own yardstick for a fleet's logins: plain OpenSSH clients logging in to every
 * server of the simulated fleet (`ssh ... true`), `parallel` at a time, the way an operator's
 * script would. The collector's recovery after a restart is compared with this time, measured
 * in the same run on the same machine (which runs the servers too).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import type { FleetServers } from '@pglog/test-support/fleet-sim/servers.ts';

const run = promisify(execFile);

export interface PlainLogins {
  seconds: number;
  parallel: number;
  failed: number;
  /** The first failure's message, when any. */
  firstError: string | null;
}

export async function plainOpensshLogins(fleet: FleetServers, parallel: number): Promise<PlainLogins> {
  const servers = fleet.servers;
  let next = 0;
  let failed = 0;
  let firstError: string | null = null;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (next < servers.length) {
      const s = servers[next++]!;
      const args = ['-T', '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes', '-o', `UserKnownHostsFile=${fleet.knownHostsFile}`];
      args.push('-o', 'ConnectTimeout=60', '-i', fleet.privateKeyFile, '-p', String(s.port), `${fleet.user}@${s.host}`, 'true');
      try {
        await run('ssh', args, { timeout: 120_000 });
      } catch (e) {
        failed++;
        firstError ??= `${s.host}: ${(e as Error).message.split('\n')[0]}`;
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return { seconds: (performance.now() - started) / 1000, parallel, failed, firstError };
}
