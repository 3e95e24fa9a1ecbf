/**
 * The store writer: batches of events and their read positions into the store, in one
 * transaction each (docs/store.md, docs/architecture.md "Collection path").
 *
 * commit(batch, epochs):
 *   BEGIN
 *   lock the claims of the batch's streams (FOR UPDATE, key order); a stream whose claim
 *     holds another epoch than the one given is fenced: none of its rows, not its position
 *   per event table: COPY ... FROM STDIN WITH (FORMAT binary)
 *   the statement rollup of the rows stored (rollup.ts): COPY into statement_rollup_parts
 *   query templates, quarantine records, read positions (epoch-guarded): one statement
 *   COMMIT
 * When the server refuses a COPY for a reason in the data (SQLSTATE class 22, 23, 54), the
 * transaction is rolled back and run again with each COPY inside a SAVEPOINT: a refused COPY
 * is rolled back to its savepoint and split (bisect.ts) until the bad rows are known; they go
 * to pglog.quarantine with the reason, the rest commits. (Savepoints only then: they cost two
 * round trips per table, and almost every batch has no bad row.) A row the encoder refuses is
 * quarantined without being sent, in either attempt.
 * Any other failure (connection lost, server shutting down, statement_timeout, deadlock, a
 * missing table) rolls everything back and throws PglogError STORE_UNAVAILABLE: the caller
 * keeps the batch and retries it; the connection is dropped and made again on the next call.
 *
 * storeStart(position, epoch): a stream's first position, under its claim, before it reads.
 *
 * writeSnapshot(s): one SQL snapshot (or failed run) in its own transaction, one COPY per
 * non-empty snapshot table; writeSnapshots(list): a group of them in one transaction (the
 * collector's SnapshotSink); see snapshot-writer.ts.
 *
 * A few dedicated connections (`connections`, default 1; connection-pool.ts), each used by one
 * operation at a time: commits, claims and snapshots run side by side on different ones, so
 * batches of different streams commit in parallel (the Batcher never has two batches of one
 * stream in flight); migrations and maintain take every connection, alone. A lost connection
 * is made again by the next operation on its slot.
 *
 * Events reach a commit already mapped and encoded (encode(): encoded-rows.ts, called by the
 * batcher when a stream hands them over; events given in `items` are encoded first), so a
 * commit sends Buffers (copy-encoded.ts). One COPY BINARY encoder per table, made once: its
 * scratch buffer grows to the largest handover and is reused (docs/decisions/0004).
 */
import { isPglogError, PglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

import type { PglogEvent } from '../logformat/events.ts';
import type { Snapshot, SnapshotFailure } from '../snapshot/types.ts';
import { ClaimQueue } from './claims.ts';
import { ConnectionPool, type PoolSlot } from './connection-pool.ts';
import { CopyBinaryEncoder } from './copy-binary.ts';
import { copyEncoded, RowsRefused, type TablePart } from './copy-encoded.ts';
import { copyIn } from './copy-stream.ts';
import { type EncodedRows, RowEncoder, type StatementRows, type StoreBatch } from './encoded-rows.ts';
import { TemplateSet } from './event-rows.ts';
import { EVENT_TABLES, TABLES } from './event-tables.ts';
import { migrate } from './migrate.ts';
import { ROLLUP_TABLE, RollupIdentities, StatementRollup } from './rollup.ts';
import { SnapshotEncoders, writeEncodedSnapshot, writeSnapshotGroup } from './snapshot-writer.ts';
import { describeServerError } from './sqlstate.ts';
import { connectStore, publicCreateWarning, storeClient } from './store-connection.ts';
import type { QuarantineRecord, StreamEpoch } from './store-sql.ts';
import {
  compactRollupAlone,
  compareKeys,
  dropPartitionsBefore,
  ensurePartitions,
  finishBatch,
  insertMissingClaims,
  lockClaims,
  underMaintenanceLock,
} from './store-sql.ts';
import type { BatchItem, CommitResult, SourceRef, StorePosition } from './store-types.ts';
import { streamKeyOf } from './store-types.ts';
import { describeStore, withoutPassword } from './store-url.ts';
import { addRepairs, DEFAULT_MAX_TEXT_BYTES, MIN_MAX_TEXT_BYTES, noRepairs } from './text-clean.ts';

export type { StoreBatch } from './encoded-rows.ts';
export type { BatchItem, CommitResult, SourceRef, StorePosition } from './store-types.ts';
export { streamKeyOf } from './store-types.ts';

export type StoreLog = (level: 'info' | 'warn' | 'error', msg: string, fields?: object) => void;

export interface StoreWriterOptions {
  /** postgresql:// URL of the store (may hold a password: it never appears in messages). */
  url: string;
  applicationName?: string;
  /** Bound on making a connection (default 10 s). */
  connectTimeoutMs?: number;
  /** Server-side bound on each statement, and on a transaction left idle (default 120 s). */
  statementTimeoutMs?: number;
  /** Longest text value stored, in UTF-8 bytes (default 1 MiB, at least 4096). */
  maxTextBytes?: number;
  /** Days of events kept by maintain(); null or undefined keeps everything. */
  retentionDays?: number | null;
  /** Connections to the store, used side by side (default 1, at most MAX_STORE_CONNECTIONS). */
  connections?: number;
  log?: StoreLog;
}

/** Parts of the statement rollup younger than this are left to grow: batches are still adding to those minutes. */
const ROLLUP_SETTLE_MS = 10 * 60_000;

/** More would only queue inside the server: each commit keeps a backend busy on one core. */
export const MAX_STORE_CONNECTIONS = 64;

export class StoreWriter {
  private readonly url: string;
  private readonly where: string;
  private readonly applicationName: string;
  private readonly connectTimeoutMs: number;
  private readonly statementTimeoutMs: number;
  private readonly maxTextBytes: number;
  private readonly retentionDays: number | null;
  private readonly log: StoreLog;
  private readonly rows: RowEncoder;
  private readonly rollupEncoder = new CopyBinaryEncoder(ROLLUP_TABLE.types);
  /** What the commits' rollups have read of their parts' names, kept between commits (rollup.ts). */
  private readonly rollupIdentities = new RollupIdentities();
  private readonly snapshots = new SnapshotEncoders();
  private readonly pool: ConnectionPool;
  /** Claims and first positions of the streams, gathered into one transaction at a time. */
  private readonly claims = new ClaimQueue((what, fn) => this.exclusive(what, fn));
  private closed = false;

  private constructor(options: StoreWriterOptions) {
    this.url = options.url;
    this.where = describeStore(options.url);
    this.applicationName = options.applicationName ?? 'pglog';
    this.connectTimeoutMs = positive(options.connectTimeoutMs ?? 10_000, 'connectTimeoutMs');
    this.statementTimeoutMs = positive(options.statementTimeoutMs ?? 120_000, 'statementTimeoutMs');
    this.maxTextBytes = options.maxTextBytes ?? DEFAULT_MAX_TEXT_BYTES;
    if (!Number.isSafeInteger(this.maxTextBytes) || this.maxTextBytes < MIN_MAX_TEXT_BYTES) {
      throw new PglogError(
        'CONFIG_INVALID',
        `store maxTextBytes must be an integer of at least ${MIN_MAX_TEXT_BYTES} (stored text keeps at least its first 1000 characters), got ${options.maxTextBytes}`,
      );
    }
    this.retentionDays = options.retentionDays ?? null;
    if (this.retentionDays !== null && (!Number.isSafeInteger(this.retentionDays) || this.retentionDays < 1)) {
      throw new PglogError('CONFIG_INVALID', `store retentionDays must be a whole number of days, at least 1, got ${this.retentionDays}`);
    }
    this.log =
      options.log ??
      (() => {
        /* not logged */
      });
    const connections = options.connections ?? 1;
    if (!Number.isSafeInteger(connections) || connections < 1 || connections > MAX_STORE_CONNECTIONS) {
      throw new PglogError('CONFIG_INVALID', `store connections must be a whole number from 1 to ${MAX_STORE_CONNECTIONS}, got ${connections}`);
    }
    this.pool = new ConnectionPool(connections);
    this.rows = new RowEncoder(this.maxTextBytes);
  }

  /** Connects, applies the schema migrations and makes the partitions around today. */
  static async open(options: StoreWriterOptions): Promise<StoreWriter> {
    const writer = new StoreWriter(options);
    try {
      await writer.exclusive(
        'migrating the store schema',
        async (client) => {
          await migrate(client);
          const warning = await publicCreateWarning(client);
          if (warning !== null) writer.log('warn', warning.message, warning.fields);
        },
        true,
      );
      // Partitions now; the rollup's compaction waits for the maintenance rounds, so that a
      // restarted collector starts collecting at once (at fleet scale a compaction takes a while).
      await writer.maintainPartitions();
    } catch (e) {
      await writer.close();
      throw e;
    }
    return writer;
  }

  /**
   * Claims a stream before reading it; returns the epoch to commit with and the committed
   * position to resume from. Without `epoch` (standalone) the stored epoch + 1 is taken, so a
   * zombie of an earlier process is fenced. With `epoch` (cluster: the shard's assignment
   * epoch) it is stored unless a higher one is: then PglogError STORE_FENCED.
   */
  async claim(target: string, instance: string, epoch?: number): Promise<{ epoch: number; position: StorePosition | null }> {
    if (epoch !== undefined && (!Number.isSafeInteger(epoch) || epoch < 0)) {
      throw new PglogError('CONFIG_INVALID', `${target}/${instance}: an assignment epoch must be a whole number >= 0, got ${epoch}`);
    }
    // Gathered with the other streams' claims into one transaction (claims.ts).
    return (await this.claims.ask({ kind: 'claim', target, instance, epoch: epoch ?? null })) as { epoch: number; position: StorePosition | null };
  }

  /**
   * Stores where a stream never read before starts, before its first byte is read
   * (docs/decisions/0011-durable-first-start.md): under the stream's claim, locked, and only
   * while the claim still holds `epoch` (else PglogError STORE_FENCED, nothing written). A
   * position already stored is kept and returned instead: every later start resumes there.
   */
  async storeStart(start: StorePosition, epoch: number): Promise<StorePosition> {
    return (await this.claims.ask({ kind: 'start', target: start.target, instance: start.instance, epoch, start })) as StorePosition;
  }

  /**
   * The rows of a stream's events, mapped and encoded for a later commit (encoded-rows.ts):
   * the batcher holds these instead of the events while they wait for the store.
   */
  encode(source: SourceRef, events: readonly PglogEvent[], readAt: number, lane = 0): EncodedRows {
    return this.rows.encode(source, events, readAt, lane);
  }

  /**
   * The StatementSink of this writer's streams (statement-sink.ts, encoded-rows.ts): the
   * statements a stream's parser gives it go into the rows of the stream's next encode().
   */
  statementRows(): StatementRows {
    return this.rows;
  }

  /**
   * Commits a batch and its read positions in one transaction (see the top of this file).
   * `epochs` maps `streamKeyOf(target, instance)` to the epoch the stream was claimed with; a
   * stream missing from it is taken as epoch 0 (never claimed: its claim is made at 0).
   */
  async commit(batch: StoreBatch, epochs: ReadonlyMap<string, number>): Promise<CommitResult> {
    const streams = new Map<string, StreamEpoch>();
    const addStream = (target: string, instance: string): void => {
      const key = streamKeyOf(target, instance);
      if (!streams.has(key)) streams.set(key, { target, instance, epoch: epochs.get(key) ?? 0 });
    };
    const fromItems = this.encodeItems(batch.items);
    const encoded = [...(batch.encoded ?? []), ...fromItems];
    for (const e of encoded) addStream(e.source.target, e.source.instance);
    for (const p of batch.positions) addStream(p.target, p.instance);
    const wanted = [...streams.values()].sort(compareKeys);

    const result = await this.exclusive('committing a batch', async (client) => {
      try {
        return await this.commitOnce(client, encoded, batch.positions, wanted, streams, false);
      } catch (e) {
        if (!(e instanceof RowsRefused)) throw e;
        // Rolled back: again, each COPY in a savepoint, so the refused rows can be found.
        return await this.commitOnce(client, encoded, batch.positions, wanted, streams, true);
      }
    });
    // Committed: their memory may be reused (after a failure it is left to the GC instead,
    // since a dropped connection may not have finished writing it).
    this.recycle(fromItems);
    return result;
  }

  /** Handovers encoded by encode() whose batch committed: their memory is reused (encoded-rows.ts). */
  recycle(list: readonly EncodedRows[]): void {
    for (const e of list) this.rows.recycle(e);
  }

  /** Items given as events (not encoded by the batcher): encoded per run of one source and read time. */
  private encodeItems(items: readonly BatchItem[]): EncodedRows[] {
    const out: EncodedRows[] = [];
    let i = 0;
    while (i < items.length) {
      const first = items[i] as BatchItem;
      const events: PglogEvent[] = [];
      while (i < items.length && (items[i] as BatchItem).source === first.source && (items[i] as BatchItem).readAt === first.readAt) {
        events.push((items[i++] as BatchItem).event);
      }
      out.push(this.rows.encode(first.source, events, first.readAt));
    }
    return out;
  }

  /**
   * One attempt at the transaction. Without savepoints (the first attempt: two round trips
   * fewer per table) a COPY the server refuses for its data throws RowsRefused after the
   * rollback; with savepoints the refused rows are bisected out and quarantined.
   */
  private async commitOnce(
    client: pg.Client,
    encoded: readonly EncodedRows[],
    batchPositions: readonly StorePosition[],
    wanted: readonly StreamEpoch[],
    streams: ReadonlyMap<string, StreamEpoch>,
    savepoints: boolean,
  ): Promise<CommitResult> {
    await client.query('BEGIN');
    try {
      const fenced = await this.fence(client, wanted);
      const fencedKeys = new Set(fenced.map((f) => streamKeyOf(f.target, f.instance)));
      const kept = fencedKeys.size === 0 ? encoded : encoded.filter((e) => !fencedKeys.has(streamKeyOf(e.source.target, e.source.instance)));
      const result: CommitResult = { rows: {}, quarantined: 0, fenced, copyMs: 0, bytes: 0 };
      const quarantine: QuarantineRecord[] = [];
      const templates = new TemplateSet();
      const repairs = noRepairs();
      let readTimeUsed = 0;
      for (const e of kept) {
        templates.merge(e.templates);
        templates.addKeys(e.statementKeys);
        addRepairs(repairs, e.repairs);
        readTimeUsed += e.readTimeUsed;
      }
      const rollup = new StatementRollup(this.rollupIdentities);
      // The rollup's rows, encoded as soon as the statement rows are in: its parts then die
      // young instead of waiting through the other tables' COPYs (and being promoted).
      let rollupRows: Buffer | null = null;
      try {
        for (const t of EVENT_TABLES) {
          const refusedBefore = quarantine.length;
          const parts: TablePart[] = [];
          for (const e of kept) {
            for (const r of e.refused) if (r.table === t) quarantine.push(r.record);
            const rows = e.tables[t];
            if (rows !== undefined) parts.push({ source: e.source, rows });
          }
          const statements = t === 'statement_events';
          result.rows[t] = parts.length === 0 ? 0 : await copyEncoded(client, TABLES[t], parts, savepoints, result, quarantine, statements ? rollup : null);
          if (quarantine.length > refusedBefore) (result.quarantinedByTable ??= {})[t] = quarantine.length - refusedBefore;
          if (statements && rollup.size > 0) rollupRows = this.rollupEncoder.encodeRows(rollup.rows());
          if (statements) rollup.release();
        }
      } finally {
        rollup.release();
      }
      // Only rows the server accepted are in it: exactly once, like the rows themselves.
      if (rollupRows !== null) await copyIn(client, ROLLUP_TABLE.copySql, [this.rollupEncoder.header(), rollupRows, this.rollupEncoder.trailer()]);
      const positions = batchPositions
        .filter((p) => !fencedKeys.has(streamKeyOf(p.target, p.instance)))
        .map((p) => ({ ...p, epoch: streams.get(streamKeyOf(p.target, p.instance))?.epoch ?? 0 }));
      await finishBatch(client, templates.sorted(), quarantine, positions);
      await client.query('COMMIT');
      result.quarantined = quarantine.length;
      result.repairs = repairs;
      result.readTimeUsed = readTimeUsed;
      if (quarantine.length > 0) {
        this.log('warn', `${quarantine.length} row(s) refused by the store were put into pglog.quarantine`, {
          reasons: [...new Set(quarantine.map((q) => q.reason))].slice(0, 5),
        });
      }
      for (const f of fenced) {
        this.log('warn', `${f.target}/${f.instance}: fenced by a newer owner (epoch ${f.epoch}); its events were not written`, {
          target: f.target,
          instance: f.instance,
          epoch: f.epoch,
        });
      }
      return result;
    } catch (e) {
      await rollback(client);
      throw e;
    }
  }

  /**
   * Writes one SQL snapshot, or the record of a failed one, in its own transaction
   * (snapshot-writer.ts). It is mapped and encoded before it joins the queue, so event batches
   * wait behind it for its COPYs only. Throws PglogError STORE_REJECTED when the snapshot's
   * data is refused (nothing written; a snapshot is a sample: not retried, not quarantined),
   * STORE_UNAVAILABLE for any other failure.
   */
  async writeSnapshot(s: Snapshot | SnapshotFailure): Promise<void> {
    const encoded = this.snapshots.encode(s, this.maxTextBytes);
    await this.exclusive(`writing ${encoded.what}`, (client) => writeEncodedSnapshot(client, encoded));
  }

  /**
   * Several snapshots in one transaction (one COPY per table for all of them); resolves with
   * each one's outcome, in order: null when stored, else its PglogError. A snapshot that
   * cannot be encoded is refused alone; when the store refuses the group's data, each is
   * written alone so that only the bad one is lost; any other failure fails them all.
   */
  async writeSnapshots(list: ReadonlyArray<Snapshot | SnapshotFailure>): Promise<Array<PglogError | null>> {
    return writeSnapshotGroup(
      list.map((s) => () => this.snapshots.encode(s, this.maxTextBytes)),
      (what, fn) => this.exclusive(what, fn),
    );
  }

  /**
   * Makes the daily partitions from yesterday to three days ahead (UTC), and with a retention
   * drops those older than `retentionDays` before today; then compacts the statement rollup's
   * parts of the last two days up to ROLLUP_SETTLE_MS ago (store-sql.ts compactRollupAlone), on
   * one connection: commits only append newer parts, so they go on beside it. `compaction` is
   * 'skipped' when another collector of the store was compacting (at most one at a time).
   */
  async maintain(now: Date = new Date()): Promise<{ created: string[]; dropped: string[]; compacted: number; compaction: 'done' | 'skipped' }> {
    const partitions = await this.maintainPartitions(now);
    const compacted = await this.exclusive('compacting the statement rollup', (client) =>
      compactRollupAlone(client, new Date(now.getTime() - 2 * 86_400_000), new Date(now.getTime() - ROLLUP_SETTLE_MS)),
    );
    return { ...partitions, compacted: compacted?.removed ?? 0, compaction: compacted === null ? 'skipped' : 'done' };
  }

  /** The partitions of maintain() alone, under the store's maintenance lock, on every connection. */
  async maintainPartitions(now: Date = new Date()): Promise<{ created: string[]; dropped: string[] }> {
    const day = utcDay(now, 0);
    return this.exclusive(
      'maintaining partitions',
      (client) =>
        underMaintenanceLock(client, async () => {
          const created = await ensurePartitions(client, day);
          const dropped = this.retentionDays === null ? [] : await dropPartitionsBefore(client, utcDay(now, -this.retentionDays));
          return { created, dropped };
        }),
      true,
    );
  }

  /** Connections the writer may use side by side. */
  get connections(): number {
    return this.pool.size;
  }

  /** Waits for the operations under way, then closes the connections. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    const slots = await this.pool.lease(true);
    const clients = this.pool.clients();
    for (const slot of slots) slot.client = null;
    this.pool.release(slots);
    await Promise.all(
      clients.map((c) =>
        c.end().catch(() => {
          /* already gone */
        }),
      ),
    );
  }

  /** Locks the claims of the streams; returns those whose stored epoch is not theirs. */
  private async fence(client: pg.Client, wanted: readonly StreamEpoch[]): Promise<Array<{ target: string; instance: string; epoch: number }>> {
    let stored = await lockClaims(client, wanted);
    if (stored.length < wanted.length) {
      const have = new Set(stored.map((s) => streamKeyOf(s.target, s.instance)));
      await insertMissingClaims(
        client,
        wanted.filter((w) => !have.has(streamKeyOf(w.target, w.instance))),
      );
      stored = await lockClaims(client, wanted);
    }
    const storedBy = new Map(stored.map((s) => [streamKeyOf(s.target, s.instance), s.epoch]));
    const fenced: Array<{ target: string; instance: string; epoch: number }> = [];
    for (const w of wanted) {
      const epoch = storedBy.get(streamKeyOf(w.target, w.instance)) ?? w.epoch;
      if (epoch !== w.epoch) fenced.push({ target: w.target, instance: w.instance, epoch });
    }
    return fenced;
  }

  /**
   * Runs `fn` on a connection of its own (a slot of the pool, connected if it is not), or
   * with `all` on one while holding every slot: nothing else runs meanwhile.
   */
  private async exclusive<T>(what: string, fn: (client: pg.Client) => Promise<T>, all = false): Promise<T> {
    const slots = await this.pool.lease(all);
    const slot = slots[0] as PoolSlot;
    try {
      if (this.closed) throw new PglogError('STORE_UNAVAILABLE', `${what}: the writer to ${this.where} is closed`);
      let client: pg.Client;
      try {
        client = await this.connection(slot);
      } catch (e) {
        throw this.unavailable(`${what}: cannot connect to`, e);
      }
      try {
        return await fn(client);
      } catch (e) {
        // Fencing and migration refusals are answers, not failures of the connection.
        if (isPglogError(e) && e.code !== 'STORE_UNAVAILABLE') throw e;
        this.discard(slot, client);
        throw isPglogError(e) ? e : this.unavailable(`${what} failed on`, e);
      }
    } finally {
      this.pool.release(slots);
    }
  }

  private async connection(slot: PoolSlot): Promise<pg.Client> {
    if (slot.client !== null) return slot.client;
    // On the store's pinned search_path (store-connection.ts), migrations and maintenance included.
    const client = storeClient(this.url, {
      application_name: this.applicationName,
      connectionTimeoutMillis: this.connectTimeoutMs,
      statement_timeout: this.statementTimeoutMs,
      // The same bound on the client's side, for a server that no longer answers at all (a
      // network partition says nothing, and TCP keepalive takes many minutes to notice).
      query_timeout: this.statementTimeoutMs + this.connectTimeoutMs,
      // A collector that stops in the middle of a transaction must not hold its locks for long.
      idle_in_transaction_session_timeout: this.statementTimeoutMs,
      keepAlive: true,
    });
    // Without a listener an error between queries (the server went away) would crash the process.
    client.on('error', (e) => {
      this.log('warn', `the connection to ${this.where} failed: ${withoutPassword(e.message, this.url)}`);
      if (slot.client === client) slot.client = null;
    });
    try {
      await connectStore(client);
    } catch (e) {
      await client.end().catch(() => {
        /* never connected */
      });
      throw e;
    }
    slot.client = client;
    return client;
  }

  private discard(slot: PoolSlot, client: pg.Client): void {
    if (slot.client === client) slot.client = null;
    void client.end().catch(() => {
      /* already broken */
    });
  }

  private unavailable(what: string, e: unknown): PglogError {
    return new PglogError('STORE_UNAVAILABLE', withoutPassword(`${what} ${this.where}: ${describeServerError(e)}`, this.url), { cause: e });
  }
}

async function rollback(client: pg.Client): Promise<void> {
  await client.query('ROLLBACK').catch(() => {
    /* the connection may be gone: the transaction is then over anyway */
  });
}

function positive(v: number, name: string): number {
  if (!Number.isFinite(v) || v <= 0) throw new PglogError('CONFIG_INVALID', `store ${name} must be a positive number of milliseconds, got ${v}`);
  return v;
}

/** `YYYY-MM-DD` of the UTC day `offsetDays` from `now`'s. */
function utcDay(now: Date, offsetDays: number): string {
  const d = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + offsetDays));
  return d.toISOString().slice(0, 10);
}
