/**
 * Where each simulated server's PostgreSQL-like data directory is, and the targets that point a
 * collector at them:
 *
 *   DIR/dbNNNNN/data/current_logfiles             "stderr log/postgresql-000000.log"
 *   DIR/dbNNNNN/data/log/postgresql-000000.log    appended to by the log writer, rotated onward
 *
 * owned by the servers' login user, as a monitoring account reads a server's logs.
 */
import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import type { TargetSpec } from '../collector-process.ts';
import { currentLogfilesLine, FLEET_LOG_LINE_PREFIX, rotatedLogName } from './log-files.ts';

/** The target name of server `index`: db00000, db00001, ... (sorts as the servers do). */
export function fleetTargetName(index: number): string {
  return `db${String(index).padStart(5, '0')}`;
}

export interface SimulatedLog {
  /** The target's name. */
  name: string;
  dataDirectory: string;
  logDirectory: string;
  /** The first log file (the writer rotates onward from it). */
  file: string;
}

/** Creates the data and log directories of servers 0 .. count-1 under `dir`, owned by `owner`. */
export function createSimulatedLogs(dir: string, count: number, owner: { uid: number; gid: number } | null): SimulatedLog[] {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
  return Array.from({ length: count }, (_, i) => {
    const name = fleetTargetName(i);
    const dataDirectory = join(dir, name, 'data');
    const logDirectory = join(dataDirectory, 'log');
    mkdirSync(logDirectory, { recursive: true });
    const first = rotatedLogName(0);
    const file = join(logDirectory, first);
    writeFileSync(join(dataDirectory, 'current_logfiles'), currentLogfilesLine(`log/${first}`));
    writeFileSync(file, '');
    chmodSync(join(dir, name), 0o755);
    if (owner !== null) {
      for (const p of [join(dir, name), dataDirectory, logDirectory, join(dataDirectory, 'current_logfiles'), file]) chownSync(p, owner.uid, owner.gid);
    }
    return { name, dataDirectory, logDirectory, file };
  });
}

/** A standalone collector's target for a simulated log, logging in with the fleet's key and known_hosts. */
export function simulatedTarget(
  log: SimulatedLog,
  server: { host: string; port: number },
  login: { user: string; privateKeyFile: string; knownHostsFile: string },
  transport: TargetSpec['transport'] = 'auto',
): TargetSpec {
  return {
    name: log.name,
    host: server.host,
    port: server.port,
    user: login.user,
    privateKeyFile: login.privateKeyFile,
    knownHostsFile: login.knownHostsFile,
    transport,
    instances: [{ name: 'main', dataDirectory: log.dataDirectory, logDirectory: 'log', logFormat: 'stderr', logLinePrefix: FLEET_LOG_LINE_PREFIX }],
  };
}
