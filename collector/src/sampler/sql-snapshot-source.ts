/**
 * The SQL side of one instance: its SqlSession through whichever transport the target reads
 * through now, and the snapshot queries run on it (a SnapshotSource for InstanceSnapshots).
 *
 *   inproc  ssh2 `direct-streamlocal@openssh.com` channel on the target's SSH connection
 *   proxy   the sidecar's OpenSSH stream-local forward (`ssh -O forward`), a Unix socket in
 *           the shared directory
 * When the target moves between transports, the session is dropped and the next snapshot
 * opens it through the new one, so an SQL session never keeps a demoted path alive.
 */
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';

import type { ActiveTransport, PostgresInstance, PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';

import { type ActivityResult, readActivity } from '../snapshot/activity-query.ts';
import { readServerInfo, rolePrivilegeOf, type ServerInfo, type SqlRolePrivilege } from '../snapshot/server-info.ts';
import { readStatistics, type StatisticsSample } from '../snapshot/statistics-query.ts';
import type { SshConnection } from '../transport/ssh-connection.ts';
import type { SnapshotSource } from './instance-snapshots.ts';
import { SqlSession } from './sql-session.ts';

/** Opens the sidecar's forward of a remote Unix socket; resolves with the local socket's directory. */
export interface SocketForwarder {
  forward(server: string, remoteSocketPath: string, port: number, signal?: AbortSignal): Promise<string>;
}

export interface SqlSnapshotSourceOptions {
  target: PostgresTarget;
  instance: PostgresInstance;
  connection: SshConnection;
  /** Null without a sidecar (--sshproxy off). */
  sidecar: SocketForwarder | null;
  /** The transport the target reads through now. */
  transport: () => ActiveTransport;
  log: Logger;
}

export class SqlSnapshotSource implements SnapshotSource {
  private readonly o: SqlSnapshotSourceOptions;
  private readonly session: SqlSession;
  private readonly remoteSocket: string;
  private info: ServerInfo | null = null;
  /** The transport the open session goes through. */
  private openedVia: ActiveTransport | null = null;
  /** The privilege the newest session found (SnapshotSource.rolePrivilege); undefined before one opened. */
  private privilege: SqlRolePrivilege | null | undefined;
  /** The privilege last warned about, so each session of a privileged role does not warn again. */
  private warnedPrivilege: SqlRolePrivilege | null = null;

  constructor(options: SqlSnapshotSourceOptions) {
    this.o = options;
    const { target, instance } = options;
    const sql = instance.sql;
    this.remoteSocket = `${sql.socketDirectory.replace(/(?<!\/)\/+$/, '')}/.s.PGSQL.${sql.port}`;
    this.session = new SqlSession({
      place: `${target.metadata.name}/${instance.name} (${this.remoteSocket} as ${sql.user}@${sql.database} via ${target.spec.host}:${target.spec.port})`,
      user: sql.user,
      database: sql.database,
      timeoutMs: sql.timeoutSeconds * 1000,
      open: (signal) => this.open(signal),
      prepare: async (client) => {
        this.info = await readServerInfo(client);
        this.privilege = rolePrivilegeOf(this.info);
        this.refuseSuperuser(this.info);
        this.warnAboutPrivileges(this.info, this.privilege);
      },
    });
  }

  get rolePrivilege(): SqlRolePrivilege | null | undefined {
    return this.privilege;
  }

  async activity(): Promise<ActivityResult> {
    await this.followTransport();
    const { activity, locks } = this.o.target.spec.collect;
    // Without collect.activity only the sessions of blocking chains are read (the tree's nodes).
    return this.session.readOnly('activity snapshot', (client) => readActivity(client, this.info!, { sessions: activity, locks }));
  }

  async statistics(): Promise<StatisticsSample> {
    await this.followTransport();
    const { statements, databases } = this.o.target.spec.collect;
    return this.session.readOnly('statistics snapshot', (client) => readStatistics(client, this.info!, { statements, databases }));
  }

  close(): Promise<void> {
    return this.session.close();
  }

  private async followTransport(): Promise<void> {
    if (this.openedVia !== null && this.openedVia !== this.o.transport() && this.session.isOpen) await this.session.drop();
  }

  private async open(signal: AbortSignal): Promise<Duplex> {
    const via = this.o.sidecar !== null && this.o.transport() === 'proxy' ? 'proxy' : 'inproc';
    this.openedVia = via;
    if (via === 'inproc') return this.o.connection.openStreamLocal(this.remoteSocket, { signal });
    const { target, instance } = this.o;
    // A little longer than pg waits for the whole connect (its "timeout expired" is the error
    // reported); an abandoned wait would linger otherwise.
    const bounded = AbortSignal.any([signal, AbortSignal.timeout(instance.sql.timeoutSeconds * 1000 + 1000)]);
    const dir = await this.o.sidecar!.forward(target.metadata.name, this.remoteSocket, instance.sql.port, bounded);
    return connectUnix(
      `${dir}/.s.PGSQL.${instance.sql.port}`,
      `${target.metadata.name}/${instance.name}: the sidecar's forward of ${this.remoteSocket}`,
      signal,
    );
  }

  /**
   * Ends a session whose role is a superuser before any snapshot query runs, unless the
   * instance sets `sql.allowSuperuser` (ADR 0032): a superuser reaches the server's OS account
   * (COPY ... TO PROGRAM runs even in a read-only transaction), so a slip that let a role of
   * the monitored server run SQL in the session would hand it the OS account. The server-info
   * query, which found out, is the only statement the session ran. Each snapshot tries again,
   * so a role made NOSUPERUSER is taken at the next one.
   */
  private refuseSuperuser(info: ServerInfo): void {
    const { target, instance } = this.o;
    if (!info.superuser || instance.sql.allowSuperuser) return;
    throw new PglogError(
      'SQL_ROLE_SUPERUSER',
      `${target.metadata.name}/${instance.name}: the SQL role ${info.username} is a superuser: refused, no snapshot runs as it ` +
        `(any SQL a role of the monitored server got it to run would run with every right, up to the server's OS account). ` +
        'Use a role with only pg_monitor (docs/snapshots.md), or set spec.instances[].sql.allowSuperuser: true to take snapshots as it anyway',
    );
  }

  /** Warns when the role is more powerful than monitoring needs: once per privilege found, again when it changes. */
  private warnAboutPrivileges(info: ServerInfo, privilege: SqlRolePrivilege | null): void {
    if (privilege === this.warnedPrivilege) return;
    this.warnedPrivilege = privilege;
    if (privilege === null) return;
    const { target, instance } = this.o;
    const where = `${target.metadata.name}/${instance.name}`;
    const risk =
      privilege === 'SQL_ROLE_SUPERUSER'
        ? `is a superuser (${privilege}), taken because sql.allowSuperuser is set: any SQL a role of the monitored server gets it to run would run with every right, up to the server's OS account`
        : `can write data (${privilege}, a member of pg_write_all_data): any SQL a role of the monitored server gets it to run could write`;
    this.o.log.warn(
      { target: target.metadata.name, instance: instance.name, role: info.username, superuser: info.superuser, code: privilege },
      `${where}: the SQL role ${info.username} ${risk}. pglog only reads, in read-only transactions on a pinned search_path, but use a role with only pg_monitor (docs/snapshots.md)`,
    );
  }
}

/** Connects to a local Unix socket; rejects with SQL_CONNECT_FAILED naming `what`. */
function connectUnix(path: string, what: string, signal: AbortSignal): Promise<Duplex> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<Duplex>((resolve, reject) => {
    const socket = connect(path);
    const onAbort = (): void => {
      socket.destroy();
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => {
      signal.removeEventListener('abort', onAbort);
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (e) => {
      signal.removeEventListener('abort', onAbort);
      reject(new PglogError('SQL_CONNECT_FAILED', `${what} (${path}) cannot be connected to: ${e.message}`, { cause: e }));
    });
  });
}
