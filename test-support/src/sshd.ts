// A real OpenSSH sshd for tests, on a loopback address of its own (the whole 127/8 is local on
// Linux), with its own host key, config and client key in a private directory. As root it logs
// in as the unprivileged user that runs the test PostgreSQL servers (server-user.ts), so a
// remote command can read their logs as a monitoring account would.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { onProcessExit } from './exit-cleanup.ts';
import { continueTree, killTree, stopTree } from './process-tree.ts';
import { allowKeyLogin, currentUser, isRoot, serverUser, type SystemUser } from './server-user.ts';
import { freePort } from './wait.ts';

export interface TestSshServer {
  readonly host: string;
  readonly port: number;
  /** The login user. */
  readonly user: string;
  /** Client private key (ed25519, OpenSSH format, mode 0600) authorized on this server. */
  readonly privateKeyFile: string;
  /** known_hosts holding the server's host key as first started: `[host]:port key`. */
  readonly knownHostsFile: string;
  /** The server's private directory (config, keys, log); the login user can write in it. */
  readonly dir: string;
  /**
   * With `hostCertificate`: a known_hosts line `@cert-authority [host]:port <CA key>` naming
   * the CA that signed the server's host certificate (sshd presents it, HostCertificate).
   */
  readonly certAuthorityLine: string | null;
  /** sshd's own log (LogLevel VERBOSE), for assertions and for printing on failure. */
  readLog(): string;
  /** Kills sshd and every connection and session process it started; start() runs it again. */
  stop(): Promise<void>;
  /** (Re)starts on the same address, port and host key; resolves once it sends its banner. */
  start(): Promise<void>;
  /** SIGSTOPs the listener and all its connection processes: TCP stays open, nothing answers. */
  freeze(): void;
  /** SIGCONTs them. */
  thaw(): void;
  /** Replaces the host key and restarts; knownHostsFile keeps the OLD key. */
  changeHostKey(): Promise<void>;
  /** Stops and removes the directory; safe to call twice; also runs on process 'exit'. */
  dispose(): Promise<void>;
}

export interface SshServerOptions {
  /** Default: a random address in 127.0.0.2 .. 127.0.0.254, so parallel test files do not collide. */
  address?: string;
  /** Default: a port the kernel reports free on that address. */
  port?: number;
  /** Default: the test PostgreSQL user when root, else the current user (sshd can only log in as itself). */
  user?: string;
  /** sshd MaxSessions (default 10). */
  maxSessions?: number;
  authorizedKeyComment?: string;
  /**
   * Lets clients open forwarded channels to local Unix sockets on the server (`ssh -L` /
   * direct-streamlocal, the SQL sessions over SSH). Default off, like a locked-down server.
   * sshd ties it to AllowTcpForwarding: with `no` even stream-local channels are refused.
   */
  allowLocalForwarding?: boolean;
  /** Signs the host key with a fresh CA (ssh-keygen -s) and presents the certificate (HostCertificate). Default off. */
  hostCertificate?: boolean;
}

const SSHD = '/usr/sbin/sshd';
const READY_TIMEOUT_MS = 20_000;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function randomLoopbackAddress(): string {
  return `127.0.0.${2 + Math.floor(Math.random() * 253)}`;
}

function loginUser(name: string | undefined): SystemUser {
  if (!isRoot()) {
    const me = currentUser();
    if (name !== undefined && name !== me.name) throw new Error(`startSshServer: a non-root sshd can only log in as ${me.name}, not ${name}`);
    return me;
  }
  if (name === undefined) return serverUser();
  const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
  return { name, uid, gid };
}

function generateKey(file: string, comment: string): void {
  rmSync(file, { force: true });
  rmSync(`${file}.pub`, { force: true });
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Resolves once something on host:port sends an SSH identification line. */
/** sshd_config lines that let `user` in with the keys of `authorizedKeysFile` and nothing else. */
export function keyLoginOnly(authorizedKeysFile: string, user: string): string[] {
  return [
    `AuthorizedKeysFile ${authorizedKeysFile}`,
    `AllowUsers ${user}`,
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'StrictModes no',
    'PermitRootLogin no',
  ];
}

export function readBanner(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port });
    let received = '';
    socket.setTimeout(5_000, () => socket.destroy(new Error('no banner within 5 s')));
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
      if (received.includes('\n')) {
        socket.destroy();
        if (received.startsWith('SSH-2.0-')) resolve();
        else reject(new Error(`unexpected banner ${JSON.stringify(received.slice(0, 80))}`));
      }
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error('closed before a banner')));
  });
}

export async function startSshServer(options: SshServerOptions = {}): Promise<TestSshServer> {
  const user = loginUser(options.user);
  if (isRoot()) {
    await allowKeyLogin(user.name);
    mkdirSync('/run/sshd', { recursive: true, mode: 0o755 }); // privilege separation directory
  }
  const host = options.address ?? randomLoopbackAddress();
  let port = options.port ?? (await freePort(host));
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sshd-'));
  // The login user reads authorized_keys through it and tests let remote commands write here.
  chmodSync(dir, 0o755);
  if (isRoot()) chownSync(dir, user.uid, user.gid);
  const hostKeyFile = join(dir, 'ssh_host_ed25519_key');
  const privateKeyFile = join(dir, 'client_ed25519');
  const authorizedKeysFile = join(dir, 'authorized_keys');
  const knownHostsFile = join(dir, 'known_hosts');
  const configFile = join(dir, 'sshd_config');
  const logFile = join(dir, 'sshd.log');

  generateKey(hostKeyFile, 'pglog-test-host');
  generateKey(privateKeyFile, options.authorizedKeyComment ?? 'pglog-test-client');
  chmodSync(privateKeyFile, 0o600);
  writeFileSync(authorizedKeysFile, readFileSync(`${privateKeyFile}.pub`), { mode: 0o644 });
  let caPublicKey: string | null = null;
  if (options.hostCertificate === true) {
    const caFile = join(dir, 'host_ca');
    generateKey(caFile, 'pglog-test-host-ca');
    // Principal: the address clients connect to (OpenSSH checks it against the host name).
    execFileSync('ssh-keygen', ['-q', '-s', caFile, '-I', 'pglog-test-host', '-h', '-n', host, '-V', '-5m:+1d', `${hostKeyFile}.pub`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const [caType, caKey] = readFileSync(`${caFile}.pub`, 'utf8').trim().split(/\s+/);
    caPublicKey = `${caType} ${caKey}`;
  }

  const writeConfig = (): void => {
    writeFileSync(
      configFile,
      [
        `ListenAddress ${host}:${port}`,
        `HostKey ${hostKeyFile}`,
        ...(caPublicKey === null ? [] : [`HostCertificate ${hostKeyFile}-cert.pub`]),
        ...keyLoginOnly(authorizedKeysFile, user.name),
        'PermitUserEnvironment no',
        `PidFile ${join(dir, 'sshd.pid')}`,
        `MaxSessions ${options.maxSessions ?? 10}`,
        'MaxStartups 100:30:200',
        'LogLevel VERBOSE',
        'ClientAliveInterval 0',
        'UseDNS no',
        'PrintMotd no',
        'PrintLastLog no',
        'X11Forwarding no',
        `AllowTcpForwarding ${options.allowLocalForwarding === true ? 'local' : 'no'}`,
        // The test user's home may not exist (system users get /nonexistent), and it cannot be
        // changed while that user runs test PostgreSQL servers. sshd prints "Could not chdir to
        // home directory" into every command's stderr unless the session is chrooted; a chroot
        // to / changes nothing else.
        ...(isRoot() ? ['ChrootDirectory /'] : []),
        '',
      ].join('\n'),
    );
  };
  const writeKnownHosts = (): void => {
    const [type, key] = readFileSync(`${hostKeyFile}.pub`, 'utf8').trim().split(/\s+/);
    const name = port === 22 ? host : `[${host}]:${port}`;
    writeFileSync(knownHostsFile, `${name} ${type} ${key}\n`);
  };

  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  let disposed = false;

  const readLog = (): string => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };

  const killNow = (): void => {
    const running = child;
    if (running?.pid === undefined || running.exitCode !== null || running.signalCode !== null) return;
    killTree(running.pid);
  };

  const stop = async (): Promise<void> => {
    killNow();
    await exited;
    child = null;
  };

  const start = async (): Promise<void> => {
    if (disposed) throw new Error(`sshd in ${dir} was disposed`);
    if (child !== null) await stop();
    const logFd = openSync(logFile, 'a');
    let proc: ChildProcess;
    try {
      // detached: its own process group, away from the test runner's terminal signals.
      proc = spawn(SSHD, ['-D', '-e', '-f', configFile], { stdio: ['ignore', logFd, logFd], detached: true });
    } finally {
      closeSync(logFd);
    }
    child = proc;
    // Set by the exit handlers (an object, so the loop below rereads it after each await).
    const ended: { how: string | null } = { how: null };
    exited = new Promise<void>((resolve) => {
      proc.once('exit', (code, signal) => {
        ended.how = `exited with code ${code} signal ${signal}`;
        resolve();
      });
      proc.once('error', (e) => {
        ended.how = `could not be started: ${e.message}`;
        resolve();
      });
    });
    const deadline = Date.now() + READY_TIMEOUT_MS;
    let lastError = '';
    for (;;) {
      if (ended.how !== null) {
        child = null;
        throw new Error(`sshd on ${host}:${port} ${ended.how}\n--- ${logFile} ---\n${readLog()}`);
      }
      try {
        await readBanner(host, port);
        return;
      } catch (e) {
        lastError = (e as Error).message;
      }
      if (Date.now() > deadline) {
        killNow();
        await exited;
        child = null;
        throw new Error(`sshd on ${host}:${port} did not answer within ${READY_TIMEOUT_MS} ms (${lastError})\n--- ${logFile} ---\n${readLog()}`);
      }
      await sleep(50);
    }
  };

  const onExit = (): void => {
    killNow();
    rmSync(dir, { recursive: true, force: true });
  };
  const unregisterExit = onProcessExit(onExit);

  const dispose = async (): Promise<void> => {
    if (disposed) return;
    disposed = true;
    unregisterExit();
    try {
      await stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  // The chosen port may be taken between probing and sshd's bind: then try another one.
  for (let attempt = 1; ; attempt++) {
    writeConfig();
    writeKnownHosts();
    try {
      await start();
      break;
    } catch (e) {
      const portTaken = /Address already in use/.test((e as Error).message);
      if (!portTaken || options.port !== undefined || attempt >= 5) {
        await dispose();
        throw new Error(`startSshServer: ${(e as Error).message}`, { cause: e });
      }
      port = await freePort(host);
    }
  }

  return {
    host,
    port,
    user: user.name,
    privateKeyFile,
    knownHostsFile,
    certAuthorityLine: caPublicKey === null ? null : `@cert-authority [${host}]:${port} ${caPublicKey}`,
    dir,
    readLog,
    stop,
    start,
    freeze(): void {
      if (child?.pid !== undefined) stopTree(child.pid);
    },
    thaw(): void {
      if (child?.pid !== undefined) continueTree(child.pid);
    },
    async changeHostKey(): Promise<void> {
      await stop();
      generateKey(hostKeyFile, 'pglog-test-host-changed');
      await start();
    },
    dispose,
  };
}

/** True when this machine can run the test sshd (OpenSSH server installed). */
export function sshdAvailable(): boolean {
  return existsSync(SSHD);
}
