/**
 * The collector's SSH connections by target name: one connection per target, all paced by one
 * ConnectLimiter, all closed together at shutdown.
 */
import { ConnectLimiter, type ConnectLimiterOptions } from './connect-limiter.ts';
import { SshConnection, type SshConnectionOptions } from './ssh-connection.ts';

/** Per-target options: everything but the shared limiter, which the pool supplies. */
export type PooledConnectionOptions = Omit<SshConnectionOptions, 'limiter'>;

export class SshConnectionPool {
  readonly limiter: ConnectLimiter;
  private readonly connections = new Map<string, SshConnection>();

  constructor(options: { limiter?: ConnectLimiter | ConnectLimiterOptions } = {}) {
    this.limiter = options.limiter instanceof ConnectLimiter ? options.limiter : new ConnectLimiter(options.limiter);
  }

  /** The target's connection, created on first use (it connects lazily, on its first spawn). */
  get(options: PooledConnectionOptions): SshConnection {
    let connection = this.connections.get(options.target);
    if (connection === undefined) {
      connection = new SshConnection({ ...options, limiter: this.limiter });
      this.connections.set(options.target, connection);
    }
    return connection;
  }

  /** The target's connection if it exists. */
  find(target: string): SshConnection | undefined {
    return this.connections.get(target);
  }

  /** Names of the targets with a connection. */
  targets(): string[] {
    return [...this.connections.keys()];
  }

  /** Closes and forgets one target's connection (the target was removed or moved to the sidecar). */
  async remove(target: string): Promise<void> {
    const connection = this.connections.get(target);
    if (connection === undefined) return;
    this.connections.delete(target);
    await connection.close();
  }

  /** Closes every connection. */
  async closeAll(): Promise<void> {
    const all = [...this.connections.values()];
    this.connections.clear();
    await Promise.allSettled(all.map((c) => c.close()));
  }
}
