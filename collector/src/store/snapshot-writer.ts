/**
 * SQL snapshots into the store (issue 7): the part of StoreWriter.writeSnapshot that is not
 * the writer's connection and queue.
 *
 * A snapshot is written in two steps:
 * - `SnapshotEncoders.encode` maps it to rows (snapshot-tables.ts) and encodes them, before the
 *   writer's queue is joined: the store connection, shared with the event batches, is then held
 *   only for sending, never for mapping or encoding. A value that cannot be encoded refuses the
 *   whole snapshot here (STORE_REJECTED), before anything is sent.
 * - `writeEncodedSnapshot` sends it in one transaction: BEGIN, one COPY BINARY per non-empty
 *   table, COMMIT. Nothing is retried and nothing waits on anything but the store, so an event
 *   batch queued behind a snapshot waits for at most that one transaction. Any failure rolls
 *   back, so a snapshot is stored whole or not at all. A refusal for the data (SQLSTATE class
 *   22, 23, 54) throws STORE_REJECTED: a snapshot is a sample, the next one replaces it, so
 *   there is no quarantine and no bisection as for event batches. Any other failure is
 *   rethrown for the writer, which reports STORE_UNAVAILABLE and drops the connection.
 */
import { isPglogError, PglogError } from '@pglog/common/errors.ts';
import type pg from 'pg';

import type { Snapshot, SnapshotFailure } from '../snapshot/types.ts';
import { CopyBinaryEncoder } from './copy-binary.ts';
import { CHUNK_BYTES, copyIn, estimatedRowBytes } from './copy-stream.ts';
import type { SnapshotTable } from './snapshot-tables.ts';
import { isSnapshotFailure, SNAPSHOT_TABLE_DEFS, SNAPSHOT_TABLES, snapshotRows } from './snapshot-tables.ts';
import { describeServerError, isDataRejection } from './sqlstate.ts';

/** Snapshots are small next to event batches: the encoders start small and grow when needed. */
const ENCODER_INITIAL_BYTES = 16 * 1024;

/** One snapshot, encoded and ready to send. */
export interface EncodedSnapshot {
  /** `the <kind> snapshot of <target>/<instance>` (or `failed ... snapshot`), for messages. */
  readonly what: string;
  /** The non-empty tables, in SNAPSHOT_TABLES order (samples first, the run record last). */
  readonly tables: ReadonlyArray<{ readonly table: SnapshotTable; readonly copySql: string; readonly rows: number; readonly data: readonly Buffer[] }>;
}

/** One COPY BINARY encoder per snapshot table, made once and reused by every snapshot (docs/decisions/0004). */
export class SnapshotEncoders {
  private readonly encoders: Readonly<Record<SnapshotTable, CopyBinaryEncoder>>;

  constructor() {
    const encoders = {} as Record<SnapshotTable, CopyBinaryEncoder>;
    for (const t of SNAPSHOT_TABLES) encoders[t] = new CopyBinaryEncoder(SNAPSHOT_TABLE_DEFS[t].types, { initialSize: ENCODER_INITIAL_BYTES });
    this.encoders = encoders;
  }

  /**
   * The COPY data of a snapshot, each table's as header, chunks, trailer. Synchronous, so two
   * snapshots never share an encoder's scratch buffer. Throws PglogError STORE_REJECTED naming
   * the snapshot, the table and the value when the snapshot cannot be stored.
   */
  encode(s: Snapshot | SnapshotFailure, maxTextBytes: number): EncodedSnapshot {
    const what = `the ${isSnapshotFailure(s) ? 'failed ' : ''}${s.kind} snapshot of ${s.target}/${s.instance}`;
    let table: SnapshotTable | null = null;
    try {
      const rows = snapshotRows(s, maxTextBytes);
      const tables: Array<EncodedSnapshot['tables'][number]> = [];
      for (const t of SNAPSHOT_TABLES) {
        table = t;
        const list = rows[t];
        if (list.length === 0) continue;
        const encoder = this.encoders[t];
        tables.push({
          table: t,
          copySql: SNAPSHOT_TABLE_DEFS[t].copySql,
          rows: list.length,
          data: [encoder.header(), ...chunks(encoder, list), encoder.trailer()],
        });
      }
      return { what, tables };
    } catch (e) {
      if (!isPglogError(e) || e.code !== 'STORE_ENCODING') throw e;
      const where = table === null ? '' : ` (${table})`;
      throw new PglogError('STORE_REJECTED', `${what} cannot be stored${where}, not written: ${e.message}`, { cause: e });
    }
  }
}

/**
 * Sends an encoded snapshot in one transaction (see the top of this file). The client must not
 * be in a transaction; on return or throw it is not in one either.
 */
export async function writeEncodedSnapshot(client: pg.ClientBase, snapshot: EncodedSnapshot): Promise<void> {
  let table: SnapshotTable | null = null;
  await client.query('BEGIN');
  try {
    for (const t of snapshot.tables) {
      table = t.table;
      await copyIn(client, t.copySql, t.data);
    }
    table = null;
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {
      /* the connection may be gone: the transaction is then over anyway */
    });
    if (isDataRejection(e)) {
      throw new PglogError(
        'STORE_REJECTED',
        `the store refused ${snapshot.what}${table === null ? '' : ` (pglog.${table})`}, not written: ${describeServerError(e)}`,
        { cause: e },
      );
    }
    throw e;
  }
}

/**
 * Several encoded snapshots as one: per table, one COPY with the rows of all of them (one
 * header, every snapshot's chunks, one trailer). A collector with thousands of instances then
 * writes a transaction per group instead of one per snapshot.
 */
export function mergeEncoded(list: readonly EncodedSnapshot[]): EncodedSnapshot {
  if (list.length === 1) return list[0]!;
  const byTable = new Map<SnapshotTable, { copySql: string; rows: number; header: Buffer; chunks: Buffer[]; trailer: Buffer }>();
  for (const s of list) {
    for (const t of s.tables) {
      let entry = byTable.get(t.table);
      if (entry === undefined) byTable.set(t.table, (entry = { copySql: t.copySql, rows: 0, header: t.data[0]!, chunks: [], trailer: t.data.at(-1)! }));
      entry.rows += t.rows;
      entry.chunks.push(...t.data.slice(1, -1));
    }
  }
  const tables = SNAPSHOT_TABLES.flatMap((table) => {
    const e = byTable.get(table);
    return e === undefined ? [] : [{ table, copySql: e.copySql, rows: e.rows, data: [e.header, ...e.chunks, e.trailer] }];
  });
  return { what: `${list.length} snapshots (${list[0]!.what}, ...)`, tables };
}

/** StoreWriter's one-operation-at-a-time section on its connection. */
export type Exclusive = (what: string, fn: (client: pg.ClientBase) => Promise<void>) => Promise<void>;

/**
 * StoreWriter.writeSnapshots: encodes each snapshot (`encoders[i]()`), sends the group in one
 * transaction, and resolves with each one's outcome in order (null: stored). A snapshot that
 * cannot be encoded is refused alone; when the store refuses the group's data, each is sent
 * alone so that only the bad one is lost; any other failure fails them all.
 */
export async function writeSnapshotGroup(encoders: ReadonlyArray<() => EncodedSnapshot>, exclusive: Exclusive): Promise<Array<PglogError | null>> {
  const asError = (e: unknown, code: 'STORE_REJECTED' | 'STORE_UNAVAILABLE'): PglogError =>
    isPglogError(e) ? e : new PglogError(code, String(e), { cause: e });
  const results: Array<PglogError | null> = encoders.map(() => null);
  const encoded: Array<{ index: number; snapshot: EncodedSnapshot }> = [];
  encoders.forEach((encode, index) => {
    try {
      encoded.push({ index, snapshot: encode() });
    } catch (e) {
      results[index] = asError(e, 'STORE_REJECTED');
    }
  });
  if (encoded.length === 0) return results;
  const group = mergeEncoded(encoded.map((x) => x.snapshot));
  try {
    await exclusive(`writing ${group.what}`, (client) => writeEncodedSnapshot(client, group));
  } catch (e) {
    const error = asError(e, 'STORE_UNAVAILABLE');
    if (error.code !== 'STORE_REJECTED' || encoded.length === 1) {
      for (const { index } of encoded) results[index] = error;
      return results;
    }
    for (const { index, snapshot } of encoded) {
      try {
        await exclusive(`writing ${snapshot.what}`, (client) => writeEncodedSnapshot(client, snapshot));
      } catch (alone) {
        results[index] = asError(alone, 'STORE_UNAVAILABLE');
      }
    }
  }
  return results;
}

/**
 * Encoded rows in pieces of about CHUNK_BYTES (by estimatedRowBytes), so a large statistics
 * snapshot is not one huge Buffer and the socket gets work early.
 */
function chunks(encoder: CopyBinaryEncoder, rows: readonly (readonly unknown[])[]): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  let size = 0;
  for (let i = 0; i < rows.length; i++) {
    size += estimatedRowBytes(rows[i] as readonly unknown[]);
    if (size >= CHUNK_BYTES || i === rows.length - 1) {
      try {
        out.push(encoder.encodeRows(rows.slice(start, i + 1)));
      } catch (e) {
        // The encoder counts rows from the start of the chunk: say where the chunk starts.
        if (start === 0 || !isPglogError(e) || e.code !== 'STORE_ENCODING') throw e;
        throw new PglogError('STORE_ENCODING', `${e.message} (rows counted from row ${start})`, { cause: e });
      }
      start = i + 1;
      size = 0;
    }
  }
  return out;
}
