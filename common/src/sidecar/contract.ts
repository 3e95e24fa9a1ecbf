/**
 * The contract between the collector and the `pglog sshproxy` sidecar: two JSON files and a
 * few FIFOs in one shared directory (an emptyDir with medium Memory in a pod, a private
 * temporary directory in standalone mode). Pure: types, names, validation; no I/O.
 *
 *   DIR/desired.json          written by the collector (write to a temp name, then rename)
 *   DIR/status.json           written by the sidecar the same way: on every change, and as a
 *                             heartbeat at least every HEARTBEAT_MS
 *   DIR/keys/<file>           private keys and known_hosts named by desired.json, mode 0600,
 *                             written by the collector (the sidecar refuses wider modes)
 *   DIR/streams/<id>.out      FIFO: the stream command's standard output (raw log bytes)
 *   DIR/streams/<id>.err      FIFO: its standard error (status lines and diagnostics)
 *   DIR/ctl/<master>          ControlMaster sockets (one per user, host, port and slot group)
 *   DIR/sql/<id>/.s.PGSQL.<port>  a forward's local Unix socket, bound by the server's master
 *                             (`ssh -O forward -L local:remote`): pg's `host` is DIR/sql/<id>
 *
 * A stream is one run of one command (like a Job's pod with restartPolicy Never): the sidecar
 * starts it once its server's master is up, and reports how it ended. It never re-runs a
 * stream command by itself, because only the collector knows how many bytes it has read, so
 * only the collector can say where the next run must start (docs/decisions/0006). What the
 * sidecar restarts with backoff are the masters.
 *
 * Stream life in status.json: `waiting` (for its master) -> `running` (both FIFOs exist and the
 * ssh client is started; it opens the FIFOs for writing, so it runs the command only once the
 * collector has opened both read ends) -> `exited` (with code and signal) or `failed` (it could
 * not be started: see `error`). A stream removed from desired.json is killed and its FIFOs
 * removed.
 *
 * A forward is the opposite: lasting state, not a run. It maps a local Unix socket to a Unix
 * socket on the server (a PostgreSQL instance's), through the server's slot-0 master. It is
 * `pending` until that master is up and has bound the local socket, then `ready`; a master
 * that ends takes its forwards with it, and they go back to `pending` until the next master
 * has them again. `failed` means the master refused to set it up (retried with backoff). A
 * forward removed from desired.json is cancelled and its socket removed. Whether the remote
 * socket exists is only known when a connection is made through it.
 */

export const PROTOCOL_VERSION = 1;
export const DESIRED_FILE = 'desired.json';
export const STATUS_FILE = 'status.json';
export const KEYS_DIR = 'keys';
export const STREAMS_DIR = 'streams';
export const CONTROL_DIR = 'ctl';
export const FORWARDS_DIR = 'sql';
/**
 * The sidecar rewrites status.json at least this often; a status older than 15 heartbeats means
 * it is gone. Not 5: on a node at load 50 (`make fleet N=1000`) a CPU-starved sidecar missed
 * five heartbeats while its OpenSSH streams went on delivering, and being called gone failed
 * them all. A killed sidecar is seen at once anyway (a new `instance`, or its exit standalone).
 */
export const HEARTBEAT_MS = 1000;
export const STALE_STATUS_MS = 15 * HEARTBEAT_MS;

/** One SSH server as the sidecar reaches it. */
export interface DesiredServer {
  /** Key of the server in `streams[].server` (the target name). */
  name: string;
  host: string;
  port: number;
  user: string;
  /** Private key file, relative to DIR/keys (mode 0600). */
  identityFile: string;
  /** known_hosts file, relative to DIR/keys (mode 0600). The host key is always checked. */
  knownHostsFile: string;
  /** The server's MaxSessions: streams per master connection. */
  maxSessions: number;
  /** OpenSSH ServerAliveInterval, seconds (ServerAliveCountMax is 3). */
  serverAliveIntervalS: number;
  /** OpenSSH ConnectTimeout, seconds. */
  connectTimeoutS: number;
}

/** One run of one remote command whose output goes through FIFOs. */
export interface DesiredStream {
  /** Unique for the life of the directory, never reused: [A-Za-z0-9_.-], at most 80 characters. */
  id: string;
  /** `DesiredServer.name`. */
  server: string;
  /** The remote command (run by the login shell of the SSH user). */
  command: string;
}

/** A local Unix socket forwarded to a Unix socket on a server (a PostgreSQL instance's). */
export interface DesiredForward {
  /** Names its directory DIR/sql/<id>: 1-16 characters of [A-Za-z0-9_-] (the socket path must stay short). */
  id: string;
  /** `DesiredServer.name`: the forward goes through that server's master (slot 0). */
  server: string;
  /** Absolute path of the socket on the server, e.g. /var/run/postgresql/.s.PGSQL.5432. */
  remoteSocket: string;
  /** Names the local socket `.s.PGSQL.<port>`, the name pg connects to in the directory it is given as host. */
  port: number;
}

export interface DesiredState {
  version: typeof PROTOCOL_VERSION;
  /** Increases with every write; status.json echoes the last one applied. */
  generation: number;
  servers: DesiredServer[];
  streams: DesiredStream[];
  /** Optional in the file (a file without it has none). */
  forwards: DesiredForward[];
}

/** A failure with a stable code (the collector's ErrorCode values: SSH_HOST_KEY_CHANGED, ...). */
export interface StatusError {
  code: string;
  message: string;
}

export type MasterState = 'connecting' | 'up' | 'backoff';

export interface MasterStatus {
  /** Server name. */
  server: string;
  /** Which of the server's masters (0, 1, ... when streams exceed MaxSessions). */
  slot: number;
  state: MasterState;
  /** How many times this master was started again after it ended or failed. */
  restarts: number;
  /** Streams assigned to it. */
  streams: number;
  /** The last failure (kept after a successful restart, for status). */
  error?: StatusError;
}

export type StreamState = 'waiting' | 'running' | 'exited' | 'failed';

export interface StreamStatus {
  state: StreamState;
  server: string;
  /** Set once `exited`: the command's exit status, or null when it ended by a signal. */
  exitCode: number | null;
  /** Signal name without SIG, when it ended by one. */
  signal: string | null;
  /** Why it is `waiting` (the master's failure) or `failed`. */
  error?: StatusError;
}

export type ForwardState = 'pending' | 'ready' | 'failed';

export interface ForwardStatus {
  state: ForwardState;
  server: string;
  remoteSocket: string;
  port: number;
  /** Absolute DIR/sql/<id>: pg's `host`; the socket in it is `.s.PGSQL.<port>`. Exists only while `ready`. */
  localDir: string;
  /** Why it is `failed`, or why it is `pending` (its master's failure). */
  error?: StatusError;
}

export interface SidecarStatus {
  version: typeof PROTOCOL_VERSION;
  /** Random per sidecar start: a different value means the sidecar restarted and every old stream is gone. */
  instance: string;
  pid: number;
  startedAt: string;
  /** Heartbeat: when this status was written (ISO time). */
  updatedAt: string;
  /** The generation of desired.json last applied (-1 before the first). */
  appliedGeneration: number;
  /** Why desired.json could not be applied at all, if it could not (the previous state stays). */
  desiredError?: string;
  /** The generation of that refused file, when it could be read: the collector fails the streams it holds. */
  desiredErrorGeneration?: number;
  /**
   * Servers of the applied desired.json that were refused (CONFIG_INVALID, with why). Their
   * streams and forwards are reported `failed` under their own ids; everything else was applied.
   */
  refusedServers?: Record<string, StatusError>;
  /** Entries that were refused and cannot be reported under an id (no valid one, or listed twice). */
  refusedEntries?: string[];
  masters: MasterStatus[];
  streams: Record<string, StreamStatus>;
  /** Every forward in the applied desired.json (absent in a status written before forwards existed). */
  forwards: Record<string, ForwardStatus>;
}

const STREAM_ID = /^[A-Za-z0-9_.-]{1,80}$/;
const FILE_NAME = /^[A-Za-z0-9_.-]{1,100}$/;

export function isValidStreamId(id: string): boolean {
  return STREAM_ID.test(id) && id !== '.' && id !== '..';
}

const FORWARD_ID = /^[A-Za-z0-9_-]{1,16}$/;
/** sun_path holds 108 bytes including the terminating NUL, on the server as here. */
export const MAX_SOCKET_PATH = 107;

export function isValidForwardId(id: string): boolean {
  return FORWARD_ID.test(id);
}

/** A forward's directory, relative to DIR: what pg gets as `host` (made absolute). */
export function forwardDir(id: string): string {
  return `${FORWARDS_DIR}/${id}`;
}

/** The socket file name pg connects to in its `host` directory for `port`. */
export function pgSocketName(port: number): string {
  return `.s.PGSQL.${port}`;
}

/**
 * Why `path` cannot be a forward's remote socket, or null. OpenSSH splits `-L` arguments at
 * ':' (and '[' ']' bracket a field) and expands '%' tokens and a leading '~' in socket paths,
 * so such characters would change what is forwarded: they are refused, not escaped.
 */
export function remoteSocketProblem(path: string): string | null {
  if (!path.startsWith('/')) return 'is not an absolute path';
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) return `is longer than the ${MAX_SOCKET_PATH} bytes of a Unix socket path`;
  if (/[\s:%[\]]/.test(path) || [...path].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f))
    return "holds a blank, control character, ':', '%', '[' or ']', which OpenSSH would read as syntax";
  return null;
}

/** FIFO paths of a stream, relative to DIR. */
export function streamFifos(id: string): { out: string; err: string } {
  return { out: `${STREAMS_DIR}/${id}.out`, err: `${STREAMS_DIR}/${id}.err` };
}

/**
 * The one rule for an SSH user name, shared by the targets loader, the CRD (`spec.user`'s
 * pattern, same text) and the sidecar: no leading '-' (it would read as an option wherever
 * the name is not behind `-l`), no blank and no control character. Anything else is passed to
 * OpenSSH as `-l USER`, which takes it as is: `alice@corp.example.com` (AD/SSSD) included.
 */
export const SSH_USER_PATTERN = '^[^\\x00-\\x20\\x7f-][^\\x00-\\x20\\x7f]*$';
const SSH_USER = new RegExp(SSH_USER_PATTERN);

/** Why `user` cannot be an SSH user name, or null (see SSH_USER_PATTERN). */
export function sshUserProblem(user: string): string | null {
  if (user === '') return 'must not be empty';
  if (SSH_USER.test(user)) return null;
  return user.startsWith('-') ? 'must not start with "-"' : 'must not contain whitespace or control characters';
}

/** A field of desired.json that is wrong: in an entry, that entry alone is refused with this message. */
class FieldError extends Error {}

/** desired.json as a whole cannot be applied; `generation` is its generation when it has one. */
export class DesiredStateError extends Error {
  readonly generation: number | null;

  constructor(message: string, generation: number | null) {
    super(message);
    this.generation = generation;
  }
}

/**
 * Entries the sidecar refused, each with why; the rest of desired.json was applied. Streams and
 * forwards of a refused server are refused with it.
 */
export interface DesiredRefusals {
  servers: Record<string, StatusError>;
  streams: Record<string, { server: string; error: StatusError }>;
  forwards: Record<string, { server: string; remoteSocket: string; port: number; error: StatusError }>;
  /** Entries without a usable name or id (or listed twice), described by their place in the file. */
  unnamed: string[];
}

/** desired.json as the sidecar applies it: the valid entries, and what it refused. */
export interface ParsedDesiredState extends DesiredState {
  refused: DesiredRefusals;
}

const refusal = (message: string): StatusError => ({ code: 'CONFIG_INVALID', message });

/**
 * Parses and validates desired.json, entry by entry: a wrong server, stream or forward is
 * refused alone (in `refused`, with what is wrong and where) and every other entry applies, so
 * one target's bad field never stops the sidecar for the other targets of the pod. Only a file
 * that is not a desired state at all (not JSON, another version, no generation, a list that is
 * not a list) throws; the sidecar then keeps its previous state (a half-written file never gets
 * here: the collector renames it into place).
 */
export function parseDesiredState(text: string): ParsedDesiredState {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new DesiredStateError(`${DESIRED_FILE}: not JSON: ${(e as Error).message}`, null);
  }
  const g = (raw as { generation?: unknown } | null)?.generation;
  const fileGeneration = typeof g === 'number' && Number.isSafeInteger(g) ? g : null;
  let generation: number, rawServers: unknown[], rawStreams: unknown[], rawForwards: unknown[];
  try {
    const o = record(raw, DESIRED_FILE);
    if (o['version'] !== PROTOCOL_VERSION) throw new FieldError(`${DESIRED_FILE}: version must be ${PROTOCOL_VERSION}, got ${JSON.stringify(o['version'])}`);
    generation = integer(o['generation'], `${DESIRED_FILE}: generation`, 0);
    rawServers = array(o['servers'], `${DESIRED_FILE}: servers`);
    rawStreams = array(o['streams'], `${DESIRED_FILE}: streams`);
    rawForwards = o['forwards'] === undefined ? [] : array(o['forwards'], `${DESIRED_FILE}: forwards`);
  } catch (e) {
    throw e instanceof FieldError ? new DesiredStateError(e.message, fileGeneration) : e;
  }
  const refused: DesiredRefusals = { servers: {}, streams: {}, forwards: {}, unnamed: [] };

  const servers: DesiredServer[] = [];
  const names = new Set<string>();
  for (const [i, value] of rawServers.entries()) {
    const where = `${DESIRED_FILE}: servers[${i}]`;
    const name = serverName(value);
    if (name === null) refused.unnamed.push(messageOf(() => parseServer(value, where), `${where}.name is not 1-100 characters of [A-Za-z0-9_.-]`));
    else if (names.has(name) || Object.hasOwn(refused.servers, name)) refused.unnamed.push(`${where}: server ${name} is listed twice`);
    else {
      const problem = messageOf(() => servers.push(parseServer(value, where)), null);
      if (problem === null) names.add(name);
      else refused.servers[name] = refusal(problem);
    }
  }

  const streams: DesiredStream[] = [];
  for (const { where, id, server, r } of identifiedEntries(rawStreams, 'streams', isValidStreamId, '1-80 characters of [A-Za-z0-9_.-]', refused)) {
    const problem =
      serverProblem(server, where, names, refused) ??
      messageOf(() => {
        if (string(r['command'], `${where}.command`) === '') throw new FieldError(`${where}.command is empty`);
      }, null);
    if (problem !== null) refused.streams[id] = { server, error: refusal(problem) };
    else streams.push({ id, server, command: r['command'] as string });
  }

  const forwards: DesiredForward[] = [];
  for (const { where, id, server, r } of identifiedEntries(rawForwards, 'forwards', isValidForwardId, '1-16 characters of [A-Za-z0-9_-]', refused)) {
    let forward: DesiredForward | undefined;
    const problem =
      serverProblem(server, where, names, refused) ??
      messageOf(() => {
        const remoteSocket = string(r['remoteSocket'], `${where}.remoteSocket`);
        const socketProblem = remoteSocketProblem(remoteSocket);
        if (socketProblem !== null) throw new FieldError(`${where}.remoteSocket: ${JSON.stringify(remoteSocket)} ${socketProblem}`);
        forward = { id, server, remoteSocket, port: integer(r['port'], `${where}.port`, 1, 65535) };
      }, null);
    if (forward !== undefined) forwards.push(forward);
    else {
      const remoteSocket = typeof r['remoteSocket'] === 'string' ? r['remoteSocket'] : '';
      const port = typeof r['port'] === 'number' ? r['port'] : 0;
      refused.forwards[id] = { server, remoteSocket, port, error: refusal(problem ?? `${where} is refused`) };
    }
  }
  return { version: PROTOCOL_VERSION, generation, servers, streams, forwards, refused };
}

/** The message of the FieldError `check` throws, `fallback` when it throws none; other errors pass. */
function messageOf(check: () => unknown, fallback: string): string;
function messageOf(check: () => unknown, fallback: null): string | null;
function messageOf(check: () => unknown, fallback: string | null): string | null {
  try {
    check();
  } catch (e) {
    if (e instanceof FieldError) return e.message;
    throw e;
  }
  return fallback;
}

/** A server entry's name when it is one the status can report it under, else null. */
function serverName(value: unknown): string | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const name = (value as Record<string, unknown>)['name'];
  return typeof name === 'string' && FILE_NAME.test(name) ? name : null;
}

/** Why a stream or forward cannot go to `server` (unknown or itself refused), or null. */
function serverProblem(server: string, where: string, names: ReadonlySet<string>, refused: DesiredRefusals): string | null {
  const serverRefusal = refused.servers[server];
  if (serverRefusal !== undefined) return `${where}.server: server ${server} is refused: ${serverRefusal.message}`;
  return names.has(server) ? null : `${where}.server: no server named ${server}`;
}

/**
 * The entries of the file's `key` list (streams or forwards) with their place, `id` and
 * `server`. An entry without a valid id (`rule` says what one is), with an id listed before or
 * without a server name is refused in `refused.unnamed` and skipped.
 */
function* identifiedEntries(
  list: readonly unknown[],
  key: 'streams' | 'forwards',
  valid: (id: string) => boolean,
  rule: string,
  refused: DesiredRefusals,
): Generator<{ where: string; id: string; server: string; r: Record<string, unknown> }> {
  const seen = new Set<string>();
  for (const [i, value] of list.entries()) {
    const where = `${DESIRED_FILE}: ${key}[${i}]`;
    let entry: { where: string; id: string; server: string; r: Record<string, unknown> };
    try {
      const r = record(value, where);
      const id = string(r['id'], `${where}.id`);
      if (!valid(id)) throw new FieldError(`${where}.id: ${JSON.stringify(id)} is not ${rule}`);
      if (seen.has(id)) throw new FieldError(`${where}.id: ${id} is listed twice`);
      seen.add(id);
      entry = { where, id, server: string(r['server'], `${where}.server`), r };
    } catch (e) {
      if (!(e instanceof FieldError)) throw e;
      refused.unnamed.push(e.message);
      continue;
    }
    yield entry;
  }
}

function parseServer(value: unknown, where: string): DesiredServer {
  const r = record(value, where);
  const fileName = (v: unknown, field: string): string => {
    const s = string(v, `${where}.${field}`);
    if (!FILE_NAME.test(s) || s === '.' || s === '..') throw new FieldError(`${where}.${field}: ${JSON.stringify(s)} is not a plain file name in ${KEYS_DIR}/`);
    return s;
  };
  const name = string(r['name'], `${where}.name`);
  if (!FILE_NAME.test(name)) throw new FieldError(`${where}.name: ${JSON.stringify(name)} is not 1-100 characters of [A-Za-z0-9_.-]`);
  const host = string(r['host'], `${where}.host`);
  // Never let a host or user become an ssh option.
  if (host === '' || host.startsWith('-') || /\s/.test(host)) throw new FieldError(`${where}.host: ${JSON.stringify(host)} is not a host name or address`);
  const user = string(r['user'], `${where}.user`);
  const userProblem = sshUserProblem(user);
  if (userProblem !== null) throw new FieldError(`${where}.user: ${JSON.stringify(user)} is not an SSH user name: it ${userProblem}`);
  return {
    name,
    host,
    port: integer(r['port'], `${where}.port`, 1, 65535),
    user,
    identityFile: fileName(r['identityFile'], 'identityFile'),
    knownHostsFile: fileName(r['knownHostsFile'], 'knownHostsFile'),
    maxSessions: integer(r['maxSessions'], `${where}.maxSessions`, 1, 1000),
    serverAliveIntervalS: integer(r['serverAliveIntervalS'], `${where}.serverAliveIntervalS`, 1, 3600),
    connectTimeoutS: integer(r['connectTimeoutS'], `${where}.connectTimeoutS`, 1, 3600),
  };
}

/** Parses status.json (written by the sidecar; checked loosely, it is our own output). */
export function parseSidecarStatus(text: string): SidecarStatus {
  const raw = record(JSON.parse(text) as unknown, STATUS_FILE);
  if (raw['version'] !== PROTOCOL_VERSION) throw new Error(`${STATUS_FILE}: version must be ${PROTOCOL_VERSION}, got ${JSON.stringify(raw['version'])}`);
  if (typeof raw['instance'] !== 'string' || typeof raw['updatedAt'] !== 'string') throw new Error(`${STATUS_FILE}: instance and updatedAt are required`);
  record(raw['streams'], `${STATUS_FILE}: streams`);
  array(raw['masters'], `${STATUS_FILE}: masters`);
  if (raw['forwards'] === undefined) raw['forwards'] = {};
  else record(raw['forwards'], `${STATUS_FILE}: forwards`);
  return raw as unknown as SidecarStatus;
}

function record(v: unknown, where: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new FieldError(`${where} must be an object`);
  return v as Record<string, unknown>;
}

function array(v: unknown, where: string): unknown[] {
  if (!Array.isArray(v)) throw new FieldError(`${where} must be a list`);
  return v;
}

function string(v: unknown, where: string): string {
  if (typeof v !== 'string') throw new FieldError(`${where} must be a string`);
  return v;
}

function integer(v: unknown, where: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)
    throw new FieldError(`${where} must be an integer in ${min}..${max}, got ${JSON.stringify(v)}`);
  return v;
}
