/**
 * The simulated fleet's SSH servers: one real OpenSSH sshd per server, each on an address of
 * its own (`BASE.x.y`, port `port`), with a host key of its own (cached: generating thousands
 * takes a while), the sshd defaults a real server has (MaxStartups 10:30:100, MaxSessions 10)
 * and one client key authorized everywhere, as a fleet's monitoring account has. One
 * known_hosts file holds every server's key, as a fleet's does.
 *
 * The addresses must be local: 127.x.y.z always are (the whole 127/8 is loopback on Linux); a
 * range the pods of the real node reach is made local with `ip route add local RANGE dev lo`
 * (localRange), as root.
 *
 * Each sshd logs at INFO into its own file, so a run can count the handshakes sshd refused
 * (`drop connection #N ... past MaxStartups`) and the connections it accepted.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, chownSync, closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { onProcessExit } from '../exit-cleanup.ts';
import { killTrees } from '../process-tree.ts';
import { allowKeyLogin, currentUser, isRoot, serverUser, type SystemUser } from '../server-user.ts';
import { keyLoginOnly, readBanner } from '../sshd.ts';
import { sleep } from '../wait.ts';

const run = promisify(execFile);
const SSHD = '/usr/sbin/sshd';

export interface FleetServer {
  readonly index: number;
  readonly host: string;
  readonly port: number;
  /** This server's directory (config, host key, sshd's log). */
  readonly dir: string;
}

export interface FleetServersOptions {
  count: number;
  /** Where the servers' files go (created). */
  dir: string;
  /** Host keys are kept here between runs (created). */
  keyCache: string;
  /** The first two octets of the addresses: server i listens on BASE.(i / 250).(i % 250 + 1). Default '127.77'. */
  addressBase?: string;
  /** Default 2222. */
  port?: number;
  /** Servers whose sshd lets clients forward to Unix sockets (the SQL snapshots): their indices. */
  forwarding?: ReadonlySet<number>;
  /** Servers started at once. Default 32. */
  startGroup?: number;
}

export interface FleetServers {
  readonly servers: readonly FleetServer[];
  /** The login user on every server. */
  readonly user: string;
  /** The client key authorized on every server (ed25519, OpenSSH format, mode 0600). */
  readonly privateKeyFile: string;
  /** Every server's host key, `[host]:port key` a line. */
  readonly knownHostsFile: string;
  /** Kills these servers' sshd with every connection and session they have; `start` brings them back. */
  kill(indices: readonly number[]): Promise<void>;
  /** Starts these servers' sshd again (after kill). */
  start(indices: readonly number[]): Promise<void>;
  /** The running sshd listeners' pids (their connections and sessions are their descendants). */
  pids(): number[];
  /** sshd's own lines of every server that match `pattern`, counted (e.g. refused handshakes). */
  countLogLines(pattern: RegExp): number;
  /** Stops every server; safe to call twice; also runs on process 'exit'. */
  dispose(): Promise<void>;
}

/** Server i's address under `base` (two octets): 250 a /24, from .1. */
export function fleetAddress(base: string, index: number): string {
  return `${base}.${Math.floor(index / 250)}.${(index % 250) + 1}`;
}

/** sshd's line for a handshake it refused because too many were unauthenticated at once. */
export const MAX_STARTUPS_REFUSAL = /drop connection #\d+ from .* past MaxStartups/;

/** Makes every address of `cidr` local (bindable, answered by this machine): as root, idempotent. */
export async function localRange(cidr: string): Promise<void> {
  const { stdout } = await run('ip', ['route', 'show', 'table', 'local', cidr]);
  if (stdout.trim() === '') await run('ip', ['route', 'add', 'local', cidr, 'dev', 'lo']);
}

async function ensureKey(file: string, comment: string): Promise<void> {
  if (existsSync(file) && existsSync(`${file}.pub`)) return;
  await run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file]);
}

/** The host keys of servers 0 .. count-1 in the cache, generated where missing, `parallel` at a time. */
async function hostKeys(cache: string, count: number, parallel = 8): Promise<string[]> {
  mkdirSync(cache, { recursive: true, mode: 0o700 });
  const files = Array.from({ length: count }, (_, i) => join(cache, `host-${String(i).padStart(5, '0')}`));
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < files.length) {
      const i = next++;
      await ensureKey(files[i]!, `pglog-fleet-host-${i}`);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return files;
}

function sshdConfig(o: { host: string; port: number; hostKey: string; authorizedKeys: string; user: string; dir: string; forwarding: boolean }): string {
  return [
    `ListenAddress ${o.host}:${o.port}`,
    `HostKey ${o.hostKey}`,
    ...keyLoginOnly(o.authorizedKeys, o.user),
    `PidFile ${join(o.dir, 'sshd.pid')}`,
    // A real server's defaults: the limits a collector must live with.
    'MaxSessions 10',
    'MaxStartups 10:30:100',
    'LogLevel INFO',
    'UseDNS no',
    'PrintMotd no',
    'PrintLastLog no',
    'X11Forwarding no',
    `AllowTcpForwarding ${o.forwarding ? 'local' : 'no'}`,
    // As in sshd.ts: the test user may have no home; a chroot to / keeps sshd quiet about it.
    ...(isRoot() ? ['ChrootDirectory /'] : []),
    '',
  ].join('\n');
}

/** Each server's directory, host key and sshd_config, and the fleet's client key, authorized_keys and known_hosts. */
async function prepareServers(o: FleetServersOptions, user: SystemUser): Promise<Omit<FleetServers, 'kill' | 'start' | 'pids' | 'countLogLines' | 'dispose'>> {
  const base = o.addressBase ?? '127.77';
  const port = o.port ?? 2222;
  mkdirSync(o.dir, { recursive: true });
  chmodSync(o.dir, 0o755);
  const keys = await hostKeys(join(o.keyCache, 'hosts'), o.count);
  const clientKey = join(o.keyCache, 'client_ed25519');
  await ensureKey(clientKey, 'pglog-fleet-client');
  const privateKeyFile = join(o.dir, 'client_ed25519');
  copyFileSync(clientKey, privateKeyFile);
  chmodSync(privateKeyFile, 0o600);
  const authorizedKeys = join(o.dir, 'authorized_keys');
  writeFileSync(authorizedKeys, readFileSync(`${clientKey}.pub`), { mode: 0o644 });
  const knownHostsFile = join(o.dir, 'known_hosts');
  const servers: FleetServer[] = [];
  const known: string[] = [];
  for (let i = 0; i < o.count; i++) {
    const host = fleetAddress(base, i);
    const dir = join(o.dir, `sshd-${String(i).padStart(5, '0')}`);
    mkdirSync(dir, { recursive: true });
    const hostKey = join(dir, 'ssh_host_ed25519_key');
    copyFileSync(keys[i]!, hostKey);
    chmodSync(hostKey, 0o600);
    writeFileSync(
      join(dir, 'sshd_config'),
      sshdConfig({ host, port, hostKey, authorizedKeys, user: user.name, dir, forwarding: o.forwarding?.has(i) ?? false }),
    );
    if (isRoot()) chownSync(dir, 0, 0);
    const [type, key] = readFileSync(`${keys[i]!}.pub`, 'utf8').trim().split(/\s+/);
    known.push(`[${host}]:${port} ${type} ${key}`);
    servers.push({ index: i, host, port, dir });
  }
  writeFileSync(knownHostsFile, `${known.join('\n')}\n`);
  return { servers, user: user.name, privateKeyFile, knownHostsFile };
}

/** One sshd per server as a child of this process (`-D`), started and killed by index. */
class SshdProcesses {
  private readonly servers: readonly FleetServer[];
  private readonly startGroup: number;
  private readonly children = new Map<number, ChildProcess>();

  constructor(servers: readonly FleetServer[], startGroup: number) {
    this.servers = servers;
    this.startGroup = startGroup;
  }

  async start(indices: readonly number[]): Promise<void> {
    for (let i = 0; i < indices.length; i += this.startGroup) {
      await Promise.all(indices.slice(i, i + this.startGroup).map((k) => this.startOne(this.servers[k]!)));
    }
  }

  async kill(indices: readonly number[]): Promise<void> {
    const running = indices.flatMap((k) => {
      const child = this.children.get(k);
      return child?.pid === undefined ? [] : [child];
    });
    const exits = running.map((child) => new Promise<void>((resolve) => child.once('exit', () => resolve())));
    killTrees(running.map((child) => child.pid!));
    await Promise.all(exits);
  }

  pids(): number[] {
    return [...this.children.values()].flatMap((c) => (c.pid === undefined ? [] : [c.pid]));
  }

  /** Synchronous, for the process 'exit' hook. */
  killAll(): void {
    killTrees(this.pids());
  }

  private async startOne(s: FleetServer): Promise<void> {
    const logFd = openSync(join(s.dir, 'sshd.log'), 'a');
    try {
      const child = spawn(SSHD, ['-D', '-e', '-f', join(s.dir, 'sshd_config')], { stdio: ['ignore', logFd, logFd], detached: true });
      this.children.set(s.index, child);
      child.once('exit', () => {
        if (this.children.get(s.index) === child) this.children.delete(s.index);
      });
    } finally {
      closeSync(logFd);
    }
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        await readBanner(s.host, s.port);
        return;
      } catch (e) {
        if (!this.children.has(s.index) || Date.now() > deadline)
          throw new Error(`fleet sshd ${s.index} on ${s.host}:${s.port} did not start: ${(e as Error).message}\n${readLog(s)}`);
      }
      await sleep(50);
    }
  }
}

export async function startFleetServers(o: FleetServersOptions): Promise<FleetServers> {
  const user: SystemUser = isRoot() ? serverUser() : currentUser();
  if (isRoot()) {
    await allowKeyLogin(user.name);
    mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  }
  const prepared = await prepareServers(o, user);
  const processes = new SshdProcesses(prepared.servers, o.startGroup ?? 32);
  const unregister = onProcessExit(() => processes.killAll());
  let disposed = false;
  const fleet: FleetServers = {
    ...prepared,
    kill: (indices) => processes.kill(indices),
    start: (indices) => processes.start(indices),
    pids: () => processes.pids(),
    countLogLines: (pattern) =>
      prepared.servers.reduce(
        (sum, s) =>
          sum +
          readLog(s)
            .split('\n')
            .filter((l) => pattern.test(l)).length,
        0,
      ),
    dispose: async () => {
      if (disposed) return;
      disposed = true;
      unregister();
      await processes.kill(prepared.servers.map((s) => s.index));
    },
  };
  try {
    await processes.start(prepared.servers.map((s) => s.index));
  } catch (e) {
    await fleet.dispose();
    throw e;
  }
  return fleet;
}

function readLog(s: FleetServer): string {
  try {
    return readFileSync(join(s.dir, 'sshd.log'), 'utf8');
  } catch {
    return '';
  }
}
