/**
 * The ingest benchmark's fleet: N real OpenSSH servers on 127.0.0.2, 127.0.0.3, ... (the test
 * helper test-support/src/sshd.ts, one sshd each, as the login user it chooses), and for
 * every server a PostgreSQL-like data directory the collector follows:
 *
 *   DIR/srvNN/data/current_logfiles     "stderr log/postgresql.log"
 *   DIR/srvNN/data/log/postgresql.log   appended to by the log writer
 *
 * No PostgreSQL runs there (fifty of them would not fit on two cores next to the collector);
 * the log writer produces what they would log.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ParseArgsOptionsConfig } from 'node:util';

import type { TargetSpec } from '@pglog/test-support/collector-process.ts';
import type { TestPostgres } from '@pglog/test-support/postgres.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';
import { LOG_LINE_PREFIX } from '@pglog/test-support/statement-log.ts';

import { type Cleanup, createCleanup } from '../lib/cleanup.ts';
import { descendantsNamed } from './proc-stats.ts';
import { startBenchStore } from './store.ts';

export interface Fleet {
  servers: TestSshServer[];
  /** Stops every server and removes its files; safe to call twice. */
  dispose(): Promise<void>;
}

/**
 * Starts `count` sshd servers on 127.0.0.2 upwards, `group` at a time, and gives them (and so
 * every session and remote command they fork later) the scheduling priority `nice`.
 *
 * Why nice: on a real fleet the server side of SSH (sshd, the follower's shell loops on each
 * server) runs on the database servers, not next to the collector. Here all of it shares the
 * collector's cores, and the follower's remote loops fork a few processes per round, so fifty
 * of them can ask for more CPU than the machine has. At a low priority they get what the
 * collector leaves instead of taking it from the collector being measured.
 */
export async function startFleet(count: number, nice: number, group = 5): Promise<Fleet> {
  if (count < 1 || count > 250) throw new Error(`--servers must be 1..250 (127.0.0.2 .. 127.0.0.251), got ${count}`);
  const servers: TestSshServer[] = [];
  let disposed = false;
  const dispose = async (): Promise<void> => {
    if (disposed) return;
    disposed = true;
    const all = servers.splice(0);
    for (let i = 0; i < all.length; i += 10) {
      await Promise.allSettled(all.slice(i, i + 10).map((s) => s.dispose()));
    }
  };
  try {
    for (let i = 0; i < count; i += group) {
      const started = await Promise.allSettled(
        Array.from({ length: Math.min(group, count - i) }, (_, j) => startSshServer({ address: `127.0.0.${2 + i + j}` })),
      );
      for (const r of started) if (r.status === 'fulfilled') servers.push(r.value);
      const failed = started.find((r) => r.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
    }
    if (nice !== 0) {
      for (const pid of descendantsNamed(process.pid, ['sshd', 'sshd-session'])) {
        try {
          setPriority(pid, nice);
        } catch {
          /* a pre-authentication child that just ended */
        }
      }
    }
  } catch (e) {
    await dispose();
    throw e;
  }
  return { servers, dispose };
}

/** The options every fleet benchmark (ingest-bench, transport-bench) takes, for its parseArgs. */
export const FLEET_BENCH_OPTIONS = {
  'fleet-nice': { type: 'string', default: '10' },
  'collector-arg': { type: 'string', multiple: true, default: [] },
  'pin-collector': { type: 'string' },
  out: { type: 'string' },
  keep: { type: 'boolean', default: false },
  verbose: { type: 'boolean', default: false },
} satisfies ParseArgsOptionsConfig;

export interface FleetBench {
  say: (line: string) => void;
  cleanups: Cleanup;
  /** The working directory: logs, targets files, collector output. */
  root: string;
}

/**
 * What a fleet benchmark sets up first: progress lines on stderr prefixed with `name`, its
 * clean-up, room for the process 'exit' hook each sshd and PostgreSQL helper registers, and a
 * working directory the sshd login user can read, removed at the end unless `keep` (then
 * `keptNote` says what is in it).
 */
export function fleetBench(name: string, servers: number, keep: boolean, keptNote: string): FleetBench {
  process.setMaxListeners(servers + 20);
  const say = (line: string): void => {
    process.stderr.write(`${name}: ${line}\n`);
  };
  const cleanups = createCleanup(say);
  const root = mkdtempSync(join(tmpdir(), `pglog-${name}-`));
  chmodSync(root, 0o755); // the sshd login user reads the logs below
  cleanups.push(() => {
    if (keep) say(`kept ${root} (${keptNote})`);
    else rmSync(root, { recursive: true, force: true });
  });
  return { say, cleanups, root };
}

/**
 * The store and a fleet of `count` servers (startFleet), started side by side; each is handed to
 * `cleanups` as soon as it is up, so a failure of the other still stops it.
 */
export async function startStoreAndFleet(
  count: number,
  nice: number,
  cleanups: Cleanup,
  say: (line: string) => void,
): Promise<{ store: TestPostgres; fleet: Fleet }> {
  const started = Date.now();
  say(`starting the store and ${count} sshd servers`);
  const [store, fleet] = await Promise.all([
    startBenchStore().then((s) => {
      cleanups.push(() => s.stop());
      return s;
    }),
    startFleet(count, nice).then((f) => {
      cleanups.push(() => f.dispose());
      return f;
    }),
  ]);
  say(`set up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { store, fleet };
}

export interface ServerLogs {
  targets: TargetSpec[];
  /** The log file of each target, in target order. */
  files: string[];
}

/**
 * Creates one data directory per server under `dir` (readable by the server's login user) and
 * the target specs that point the collector at them, with instance name `instance`.
 */
export function createServerLogs(dir: string, servers: readonly TestSshServer[], instance: string): ServerLogs {
  const targets: TargetSpec[] = [];
  const files: string[] = [];
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
  const owners = new Map<string, { uid: number; gid: number }>();
  servers.forEach((server, i) => {
    const name = `db${String(i + 1).padStart(2, '0')}`;
    const data = join(dir, name, 'data');
    const logDir = join(data, 'log');
    mkdirSync(logDir, { recursive: true });
    writeFileSync(join(data, 'current_logfiles'), 'stderr log/postgresql.log\n');
    const file = join(logDir, 'postgresql.log');
    writeFileSync(file, '');
    let owner = owners.get(server.user);
    if (owner === undefined) {
      owner = userIds(server.user);
      owners.set(server.user, owner);
    }
    for (const p of [join(dir, name), data, logDir, join(data, 'current_logfiles'), file]) chownSync(p, owner.uid, owner.gid);
    chmodSync(join(dir, name), 0o755);
    files.push(file);
    targets.push({
      name,
      host: server.host,
      port: server.port,
      user: server.user,
      privateKeyFile: server.privateKeyFile,
      knownHostsFile: server.knownHostsFile,
      instances: [{ name: instance, dataDirectory: data, logDirectory: 'log', logFormat: 'stderr', logLinePrefix: LOG_LINE_PREFIX }],
    });
  });
  return { targets, files };
}

/** uid and gid of a login user. */
function userIds(user: string): { uid: number; gid: number } {
  const id = (flag: string): number => Number(execFileSync('id', [flag, user], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}
