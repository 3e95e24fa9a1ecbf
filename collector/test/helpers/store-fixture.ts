// One test PostgreSQL for a file of store tests: a fresh database per test with a StoreWriter
// on it (its URL carries a password that trust authentication ignores, so messages can be
// checked for it), plain clients, and everything closed at the end.
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import pg from 'pg';

import { StoreWriter } from '../../src/store/store-writer.ts';

export interface FreshStore {
  writer: StoreWriter;
  /** A client on the fresh database. */
  db: pg.Client;
  url: string;
  name: string;
}

export class StoreFixture {
  private readonly prefix: string;
  private readonly password: string;
  private readonly applicationName: string;
  private pgServer: TestPostgres | null = null;
  private admin: pg.Client | null = null;
  private counter = 0;
  private readonly clients: pg.Client[] = [];
  private readonly writers: StoreWriter[] = [];

  /** Databases are named `<prefix>_<n>`; `password` goes into every writer URL. */
  constructor(options: { prefix: string; password: string; applicationName: string }) {
    this.prefix = options.prefix;
    this.password = options.password;
    this.applicationName = options.applicationName;
  }

  get server(): TestPostgres {
    if (this.pgServer === null) throw new Error('StoreFixture: start() first');
    return this.pgServer;
  }

  async start(): Promise<void> {
    this.pgServer = await startPostgres();
    this.admin = await this.connect('postgres');
  }

  /** Closes every writer and client and stops the server. */
  async stop(): Promise<void> {
    for (const w of this.writers)
      await w.close().catch(() => {
        /* the server may be gone */
      });
    for (const c of this.clients)
      await c.end().catch(() => {
        /* already closed */
      });
    await this.pgServer?.stop();
  }

  /** After the server was stopped and started again: a new admin session. */
  async reconnectAdmin(): Promise<void> {
    this.admin = await this.connect('postgres');
  }

  async connect(database: string): Promise<pg.Client> {
    const c = new pg.Client({ host: this.server.socketDir, port: this.server.port, user: 'postgres', database });
    c.on('error', () => {
      /* a test that stops the server sees the error through its queries */
    });
    await c.connect();
    this.clients.push(c);
    return c;
  }

  /** A new empty database; returns its name. */
  async freshDatabase(): Promise<string> {
    const name = `${this.prefix}_${++this.counter}`;
    await this.admin!.query(`CREATE DATABASE ${name}`);
    return name;
  }

  urlOf(name: string): string {
    return `postgresql://postgres:${this.password}@/${name}?host=${encodeURIComponent(this.server.socketDir)}&port=${this.server.port}`;
  }

  async openWriter(name: string, options: { maxTextBytes?: number; retentionDays?: number; connections?: number } = {}): Promise<StoreWriter> {
    const writer = await StoreWriter.open({ url: this.urlOf(name), applicationName: this.applicationName, connectTimeoutMs: 5_000, ...options });
    this.writers.push(writer);
    return writer;
  }

  /** A fresh database, a writer on it, and a client. */
  async freshStore(options: { maxTextBytes?: number; retentionDays?: number; connections?: number } = {}): Promise<FreshStore> {
    const name = await this.freshDatabase();
    const writer = await this.openWriter(name, options);
    return { writer, db: await this.connect(name), url: this.urlOf(name), name };
  }

  /** The name of the newest fresh database. */
  get lastDatabase(): string {
    return `${this.prefix}_${this.counter}`;
  }
}
