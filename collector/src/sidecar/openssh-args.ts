/**
 * The OpenSSH command lines of the sidecar: one ControlMaster per (server, slot) and one mux
 * client per stream. Pure: paths and argv only.
 *
 * Every option is given on the command line with `-F /dev/null`, so neither ~/.ssh/config
 * nor /etc/ssh/ssh_config can change what runs (docs/sshproxy.md explains each option).
 */
import { createHash } from 'node:crypto';

import { CONTROL_DIR, type DesiredServer, forwardDir, KEYS_DIR, pgSocketName } from '@pglog/common/sidecar/contract.ts';

/** sun_path holds 108 bytes including the terminating NUL. */
const SUN_PATH_MAX = 107;
/**
 * ssh -M binds `<ControlPath>.<16 random characters>` first and then links it to the final
 * name, so the temporary name is what must fit.
 */
const SSH_BIND_SUFFIX = 17;
const HASH_CHARS = 10;
/** Room kept for the slot number in the socket name (slots beyond 9999 are refused). */
const SLOT_DIGITS = 4;
export const MAX_SLOT = 10 ** SLOT_DIGITS - 1;
/** The longest DIR (absolute) whose control sockets fit a Unix socket address. */
export const MAX_DIR_LENGTH = SUN_PATH_MAX - SSH_BIND_SUFFIX - `/${CONTROL_DIR}/`.length - HASH_CHARS - '-'.length - SLOT_DIGITS;

/** Why `dir` cannot hold the sidecar's control sockets, or null when it can. */
export function dirTooLong(dir: string): string | null {
  const length = Buffer.byteLength(dir);
  if (length <= MAX_DIR_LENGTH) return null;
  return (
    `the directory ${dir} is ${length} bytes long; it must be at most ${MAX_DIR_LENGTH} ` +
    `because its control sockets (${CONTROL_DIR}/<name>) must fit the ${SUN_PATH_MAX}-byte Unix socket path limit, ` +
    `with the ${SSH_BIND_SUFFIX} characters ssh adds while binding`
  );
}

/**
 * What a master's connection depends on: a change restarts the server's masters. maxSessions
 * is not part of it (it only decides how streams are spread over masters).
 */
export function serverFingerprint(s: DesiredServer): string {
  return JSON.stringify([s.host, s.port, s.user, s.identityFile, s.knownHostsFile, s.serverAliveIntervalS, s.connectTimeoutS]);
}

/**
 * DIR/ctl/<hash>-<slot>: short (see MAX_DIR_LENGTH), and different for a server whose
 * connection changed, so a new master never binds the name a stopping one still holds.
 */
export function controlSocketPath(dir: string, server: DesiredServer, slot: number): string {
  if (!Number.isInteger(slot) || slot < 0 || slot > MAX_SLOT) throw new RangeError(`slot ${slot} is outside 0..${MAX_SLOT}`);
  const hash = createHash('sha256')
    .update(`${server.name}\0${server.user}@${server.host}:${server.port}\0${serverFingerprint(server)}`)
    .digest('hex')
    .slice(0, HASH_CHARS);
  return `${dir}/${CONTROL_DIR}/${hash}-${slot}`;
}

export function keyPath(dir: string, file: string): string {
  return `${dir}/${KEYS_DIR}/${file}`;
}

/** Symmetric ciphers in order of preference: AES-GCM first (AES-NI), ChaCha20 for CPUs without it. */
export const CIPHERS = 'aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr';

/** Options that keep ssh from reading anything but what we name, and from asking anyone anything. */
function isolationOptions(): string[] {
  return [
    '-F',
    '/dev/null',
    '-o',
    'BatchMode=yes',
    '-o',
    'IdentityAgent=none',
    '-o',
    'ForwardAgent=no',
    '-o',
    'ForwardX11=no',
    '-o',
    'ClearAllForwardings=yes',
    '-o',
    'PermitLocalCommand=no',
    '-o',
    'RequestTTY=no',
  ];
}

/** `ssh -M -N`: the connection that the streams of one (server, slot) share. */
export function masterArgs(dir: string, server: DesiredServer, slot: number): string[] {
  return [
    ...isolationOptions(),
    '-M',
    '-N',
    '-T',
    '-S',
    controlSocketPath(dir, server, slot),
    '-o',
    'ControlPersist=no',
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    `UserKnownHostsFile=${keyPath(dir, server.knownHostsFile)}`,
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-o',
    'CheckHostIP=no',
    '-o',
    'UpdateHostKeys=no',
    '-o',
    'VerifyHostKeyDNS=no',
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    `IdentityFile=${keyPath(dir, server.identityFile)}`,
    '-o',
    'PreferredAuthentications=publickey',
    '-o',
    `ServerAliveInterval=${server.serverAliveIntervalS}`,
    '-o',
    'ServerAliveCountMax=3',
    '-o',
    `ConnectTimeout=${server.connectTimeoutS}`,
    '-o',
    `Ciphers=${CIPHERS}`,
    '-o',
    'Compression=no',
    // The master binds the local sockets of SQL forwards (`-O forward`) with its own options:
    // a socket file left by an earlier master is replaced instead of failing the bind, and
    // only the sidecar's user (the collector's, in the pod) may connect: the socket is a
    // session to a PostgreSQL instance as the SSH user.
    '-o',
    'StreamLocalBindUnlink=yes',
    '-o',
    'StreamLocalBindMask=0177',
    // INFO, not ERROR: OpenSSH logs a keepalive timeout ("Timeout, server ... not responding.")
    // and a lost connection at INFO; a healthy master prints nothing at this level.
    '-o',
    'LogLevel=INFO',
    '-p',
    String(server.port),
    '-l',
    server.user,
    server.host,
  ];
}

/**
 * The message a stream client prints when its master is gone: without a ControlMaster to
 * talk to, ssh would otherwise open a connection of its own, which is never wanted here (the
 * master alone holds the key options, and one connection per stream is what the sidecar
 * exists to avoid). ProxyCommand makes that fallback fail at once, with this text.
 */
export const NO_MASTER_MESSAGE = 'pglog sshproxy: the control master of this stream is not running';

/** `ssh -S <socket>`: one stream over its master; stdin is /dev/null, stdout and stderr the FIFOs. */
export function streamClientArgs(dir: string, server: DesiredServer, slot: number, command: string): string[] {
  return [
    ...isolationOptions(),
    '-T',
    '-S',
    controlSocketPath(dir, server, slot),
    '-o',
    'ControlMaster=no',
    '-o',
    `ProxyCommand=sh -c 'echo "${NO_MASTER_MESSAGE}" >&2; exit 1'`,
    '-o',
    'LogLevel=ERROR',
    '-p',
    String(server.port),
    '-l',
    server.user,
    server.host,
    remoteCommandArg(command),
  ];
}

/**
 * ssh parses options after the host name too, so a command starting with '-' would become an
 * option; a leading space is harmless to the remote shell. (`--` is not a separator there: it
 * is passed on to the remote command.)
 */
export function remoteCommandArg(command: string): string {
  return command.startsWith('-') ? ` ${command}` : command;
}

/**
 * DIR/sql/<id>/.s.PGSQL.<port>: a forward's local socket. With DIR at most MAX_DIR_LENGTH
 * bytes and an id of at most 16 characters it fits sun_path (the master binds it directly,
 * without a temporary name).
 */
export function forwardSocketPath(dir: string, id: string, port: number): string {
  return `${dir}/${forwardDir(id)}/${pgSocketName(port)}`;
}

/**
 * `ssh -S <socket> -O forward|cancel -L local:remote`: asks the running master to bind (or
 * drop) a local Unix socket forwarded to `remote` on the server. Not isolationOptions():
 * ClearAllForwardings=yes on this client would drop its own -L, and -O forward would then
 * succeed having asked for nothing. Without a master, `-O` fails at once (it never connects
 * by itself).
 */
export function forwardClientArgs(dir: string, server: DesiredServer, slot: number, op: 'forward' | 'cancel', local: string, remote: string): string[] {
  return [
    '-F',
    '/dev/null',
    '-o',
    'BatchMode=yes',
    '-S',
    controlSocketPath(dir, server, slot),
    '-o',
    'ControlMaster=no',
    '-o',
    'LogLevel=ERROR',
    '-O',
    op,
    '-L',
    `${local}:${remote}`,
    '-p',
    String(server.port),
    '-l',
    server.user,
    server.host,
  ];
}
