/**
 * One PostgreSQL session to one monitored instance, through the server's SSH connection (an
 * ssh2 stream-local channel, or the sidecar's OpenSSH forward): no TCP port, pg_hba.conf entry
 * for the network, or TLS set-up on the server (docs/snapshots.md, ADR 0010).
 *
 * The session is opened on first use and kept between snapshots; it is read-only twice over
 * (`default_transaction_read_only` at start-up, and every snapshot runs in BEGIN READ ONLY),
 * bounded by `statement_timeout`, `lock_timeout` and pg's own connect and query timeouts (a
 * stopped server answers nothing, so only the client side can bound that), resolves names on
 * a pinned search_path (pg_catalog, pg_temp: no schema a monitored database's roles can
 * create in is searched), and announces itself as `application_name = 'pglog'`. After any
 * failure that is not a plain SQL error the session is dropped and opened again by the next
 * snapshot.
 */
import type { Duplex } from 'node:stream';

import { type PglogError, sqlStateOf } from '@pglog/common/errors.ts';
import { settleWithin } from '@pglog/common/time/retry.ts';
import pg from 'pg';

import { DeferredSocket } from './deferred-socket.ts';
import { toSqlError } from './sql-errors.ts';

export interface SqlSessionOptions {
  /** Where it goes, for messages: `db1/main (/var/run/postgresql/.s.PGSQL.5432 via 10.0.0.5:22)`. */
  place: string;
  user: string;
  database: string;
  /** Bound on opening the session and on each statement, ms. */
  timeoutMs: number;
  /** Opens a byte stream to the instance's Unix socket; rejects with a PglogError. */
  open: (signal: AbortSignal) => Promise<Duplex>;
  /** Runs once on every new session before the first transaction (e.g. reads the server version). */
  prepare?: (client: pg.ClientBase) => Promise<void>;
}

/**
 * Start-up settings of every monitoring session (a client setting: it wins over ALTER ROLE /
 * ALTER DATABASE ... SET, which the owner of a monitored database may run).
 *
 * - Read-only from the start: even a statement outside our transactions cannot write.
 * - search_path pinned to pg_catalog, then pg_temp named last: a role that can CREATE in a
 *   schema of the default path ("$user", public) cannot plant an operator or function that
 *   wins the resolution of ours (security review F2: `public.=(oid,integer)` ran as the
 *   collector's role, and a superuser's reaches the OS through COPY ... TO PROGRAM). pg_temp
 *   is searched first for relations and types unless it is named; named last it shadows
 *   nothing. The snapshot SQL qualifies its functions and relations too (docs/snapshots.md).
 */
export const SESSION_OPTIONS = '-c default_transaction_read_only=on -c search_path=pg_catalog,pg_temp';

/** How long ending a session may wait for the server's goodbye. */
const END_GRACE_MS = 1000;

/** Extra time pg waits for an answer beyond statement_timeout, for the server's own cancel to arrive first. */
const CLIENT_GRACE_MS = 2000;

export class SqlSession {
  private readonly o: SqlSessionOptions;
  private client: pg.Client | null = null;
  /** Aborted by close(): ends an open that is under way. */
  private readonly closing = new AbortController();
  /** Set when the idle session broke (the 'error' event); the next use opens a new one. */
  private broken = false;

  constructor(options: SqlSessionOptions) {
    this.o = options;
  }

  get place(): string {
    return this.o.place;
  }

  /** True while a session is open (it may still turn out broken on its next use). */
  get isOpen(): boolean {
    return this.client !== null && !this.broken;
  }

  /**
   * Runs `fn` in a READ ONLY transaction, opening the session first when needed. Rejects with
   * a PglogError (SQL_*, or the transport's SSH_* / SIDECAR_UNAVAILABLE) naming the place and
   * `during`.
   */
  async readOnly<T>(during: string, fn: (client: pg.ClientBase) => Promise<T>): Promise<T> {
    const client = await this.connected();
    try {
      await client.query('BEGIN TRANSACTION READ ONLY');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (e) {
      const error = toSqlError(e, this.o.place, during);
      // A plain SQL error leaves a usable session: roll back and keep it. Anything else
      // (timeout, lost stream) may leave it mid-protocol: drop it.
      if (sqlStateOf(e) !== null && error.code !== 'SQL_TIMEOUT') {
        await client.query('ROLLBACK').catch(() => this.drop());
      } else {
        await this.drop();
      }
      throw error;
    }
  }

  /** Ends the session; a later readOnly() opens a new one unless the session was closed for good. */
  async drop(): Promise<void> {
    const client = this.client;
    this.client = null;
    this.broken = false;
    if (client === null) return;
    // end() waits for the server's goodbye; a dead stream never gives one.
    await settleWithin(client.end(), END_GRACE_MS);
  }

  /** Ends the session for good. */
  async close(): Promise<void> {
    this.closing.abort();
    await this.drop();
  }

  private async connected(): Promise<pg.Client> {
    if (this.client !== null && !this.broken) return this.client;
    if (this.client !== null) await this.drop();
    if (this.closing.signal.aborted) throw toSqlError(new Error('the session was closed'), this.o.place, 'connecting');
    const { user, database, timeoutMs } = this.o;
    const signal = this.closing.signal;
    const client = new pg.Client({
      user,
      database,
      application_name: 'pglog',
      options: SESSION_OPTIONS,
      statement_timeout: timeoutMs,
      lock_timeout: timeoutMs,
      idle_in_transaction_session_timeout: timeoutMs + CLIENT_GRACE_MS,
      connectionTimeoutMillis: timeoutMs,
      query_timeout: timeoutMs + CLIENT_GRACE_MS,
      stream: () => new DeferredSocket(() => this.o.open(signal)),
    });
    // An idle session that breaks (server restart, SSH loss) emits 'error': without this
    // listener that would crash the process. The next use opens a new session.
    client.on('error', () => {
      if (this.client === client) this.broken = true;
    });
    try {
      await client.connect();
      await this.o.prepare?.(client);
    } catch (e) {
      await settleWithin(client.end(), END_GRACE_MS);
      throw connectError(e, this.o.place);
    }
    this.client = client;
    this.broken = false;
    return client;
  }
}

function connectError(e: unknown, place: string): PglogError {
  // pg asks for a password when pg_hba.conf wants one; pglog only uses peer or trust over the socket.
  if (e instanceof Error && /password/i.test(e.message) && sqlStateOf(e) === null) {
    return toSqlError(
      Object.assign(new Error(`${e.message} (the server asks for a password: allow the role local peer or trust authentication in pg_hba.conf)`), {
        code: '28P01',
      }),
      place,
      'connecting',
    );
  }
  return toSqlError(e, place, 'connecting');
}
