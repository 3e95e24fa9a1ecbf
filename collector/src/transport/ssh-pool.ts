/**
 * The collector's SSH connections by target name: one connection per target, all paced by one
 * ConnectLimiter, all closed together at shutdown.
 *
 * A fleet's targets usually share one known_hosts (a file, or a Secret) that lists every server:
 * it is parsed once per distinct text and source, not once per target, and each connection
 * keeps only its own server's entries (issue 46: a thousand copies of a thousand-line parse
 * were most of a collector's memory).
 */
import { ConnectLimiter, type ConnectLimiterOptions } from './connect-limiter.ts';
import { type KnownHosts, parseKnownHosts } from './known-hosts.ts';
import { SshConnection, type SshConnectionOptions } from './ssh-connection.ts';

/** Per-target options: everything but the shared limiter, which the pool supplies. */
export type PooledConnectionOptions = Omit<SshConnectionOptions, 'limiter' | 'parsedKnownHosts'>;

export class SshConnectionPool {
  readonly limiter: ConnectLimiter;
  private readonly connections = new Map<string, SshConnection>();
  /** Each distinct known_hosts parsed, with the targets that use it; forgotten with the last. */
  private readonly parsed = new Map<string, Map<string, { knownHosts: KnownHosts; users: Set<string> }>>();
  /** The known_hosts text and source each target's connection was made with. */
  private readonly parsedKeyOf = new Map<string, { text: string; source: string }>();

  constructor(options: { limiter?: ConnectLimiter | ConnectLimiterOptions } = {}) {
    this.limiter = options.limiter instanceof ConnectLimiter ? options.limiter : new ConnectLimiter(options.limiter);
  }

  /** The target's connection, created on first use (it connects lazily, on its first spawn). */
  get(options: PooledConnectionOptions): SshConnection {
    let connection = this.connections.get(options.target);
    if (connection === undefined) {
      connection = new SshConnection({ ...options, limiter: this.limiter, parsedKnownHosts: this.parse(options.target, options.knownHosts) });
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
    this.release(target);
    await connection.close();
  }

  /** Closes every connection. */
  async closeAll(): Promise<void> {
    const all = [...this.connections.values()];
    this.connections.clear();
    this.parsed.clear();
    this.parsedKeyOf.clear();
    await Promise.allSettled(all.map((c) => c.close()));
  }

  private parse(target: string, knownHosts: { text: string; source: string }): KnownHosts {
    // Keyed by the text itself (no joined key: that would copy a fleet's known_hosts per target).
    let bySource = this.parsed.get(knownHosts.text);
    if (bySource === undefined) this.parsed.set(knownHosts.text, (bySource = new Map<string, { knownHosts: KnownHosts; users: Set<string> }>()));
    let entry = bySource.get(knownHosts.source);
    if (entry === undefined) {
      entry = { knownHosts: parseKnownHosts(knownHosts.text, knownHosts.source), users: new Set() };
      bySource.set(knownHosts.source, entry);
    }
    this.release(target);
    entry.users.add(target);
    this.parsedKeyOf.set(target, knownHosts);
    return entry.knownHosts;
  }

  private release(target: string): void {
    const key = this.parsedKeyOf.get(target);
    if (key === undefined) return;
    this.parsedKeyOf.delete(target);
    const bySource = this.parsed.get(key.text);
    const entry = bySource?.get(key.source);
    entry?.users.delete(target);
    if (entry?.users.size !== 0) return;
    bySource!.delete(key.source);
    if (bySource!.size === 0) this.parsed.delete(key.text);
  }
}
