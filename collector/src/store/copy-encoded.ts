/**
 * One event table's COPY of a commit, from rows already encoded (encoded-rows.ts).
 *
 * Without savepoints (the first attempt of a commit) the handovers' Buffers are sent as they
 * are, runs of small ones joined (SEND_AS_IS_BYTES): nothing is mapped or encoded at
 * commit time. A COPY the server refuses for its data then throws RowsRefused, and the writer
 * runs the transaction again with savepoints: each COPY inside one, and a refused COPY split
 * (bisect.ts) until the bad rows are known, each sent again as a slice of its Buffer. A refused
 * row is decoded (copy-binary-decode.ts) into its quarantine record. With a rollup, the
 * statement rows the server accepted are added to it (StatementRollup.addTable), since only
 * those count.
 */
import type pg from 'pg';

import type { Rejection } from './bisect.ts';
import { writeWithBisection } from './bisect.ts';
import { COPY_BINARY_HEADER, COPY_BINARY_TRAILER } from './copy-binary.ts';
import { CHUNK_BYTES, copyIn } from './copy-stream.ts';
import { decodedRow, type EncodedTable, rowRange } from './encoded-rows.ts';
import type { TableDef } from './event-tables.ts';
import { quarantineRecord } from './quarantine.ts';
import type { StatementRollup } from './rollup.ts';
import { copyLineOf, describeServerError, isDataRejection } from './sqlstate.ts';
import type { QuarantineRecord } from './store-sql.ts';
import type { SourceRef } from './store-types.ts';

// Shared: never modified.
const HEADER = COPY_BINARY_HEADER;
const TRAILER = COPY_BINARY_TRAILER;

/** A table's rows from one handover. */
export interface TablePart {
  source: SourceRef;
  rows: EncodedTable;
}

/** What the COPYs of a commit add up to. */
export interface CopyCounters {
  copyMs: number;
  bytes: number;
}

/** The server refused a COPY for its data, in an attempt without savepoints: try again with them. */
export class RowsRefused extends Error {
  constructor(table: string, cause: unknown) {
    super(`${table}: ${describeServerError(cause)}`, { cause });
    this.name = 'RowsRefused';
  }
}

/** One row of a part: what a bisection splits. */
interface RowRef {
  part: TablePart;
  index: number;
}

/**
 * COPYs the rows of `parts` into `def`'s table; returns the rows committed. Without savepoints
 * a data rejection throws RowsRefused; with them the refused rows go to `quarantine` and the
 * accepted statement rows into `rollup` (when given).
 */
export async function copyEncoded(
  client: pg.Client,
  def: TableDef,
  parts: readonly TablePart[],
  savepoints: boolean,
  counters: CopyCounters,
  quarantine: QuarantineRecord[],
  rollup: StatementRollup | null,
): Promise<number> {
  if (!savepoints) {
    const started = performance.now();
    try {
      await copyIn(client, def.copySql, wholeParts(parts, counters));
    } catch (e) {
      if (isDataRejection(e)) throw new RowsRefused(def.name, e);
      throw e;
    } finally {
      counters.copyMs += performance.now() - started;
    }
    let rows = 0;
    for (const p of parts) {
      rows += p.rows.ends.length;
      // All or nothing: every row of the COPY is in.
      rollup?.addTable(p.rows, 0, p.rows.ends.length);
    }
    return rows;
  }
  let committed = 0;
  const refs: RowRef[] = [];
  for (const part of parts) for (let index = 0; index < part.rows.ends.length; index++) refs.push({ part, index });
  const attempt = async (some: readonly RowRef[]): Promise<Rejection | null> => {
    await client.query('SAVEPOINT pglog_copy');
    const started = performance.now();
    const sent = { bytes: 0 };
    try {
      await copyIn(client, def.copySql, rowSlices(some, sent));
    } catch (e) {
      counters.copyMs += performance.now() - started;
      if (!isDataRejection(e)) throw e;
      await client.query('ROLLBACK TO SAVEPOINT pglog_copy');
      return { reason: describeServerError(e), rowIndex: copyLineOf(e) };
    }
    counters.copyMs += performance.now() - started;
    await client.query('RELEASE SAVEPOINT pglog_copy');
    counters.bytes += sent.bytes;
    committed += some.length;
    if (rollup !== null) for (const r of some) rollup.addTable(r.part.rows, r.index, r.index + 1);
    return null;
  };
  const outcome = await writeWithBisection(refs, attempt);
  for (const { row, rejection } of outcome.rejected) {
    quarantine.push(quarantineRecord(decodedRow(def.name, row.part.rows, row.index, row.part.source), rejection.reason));
  }
  return committed;
}

/**
 * A handover's rows at least this large are sent as they are; smaller ones (a quiet stream's
 * few rows) are joined into pieces of about CHUNK_BYTES first, so that a commit of many small
 * handovers is still a few writes. Joining every part had copied all COPY data once more into
 * a new Buffer, each fresh from mmap, which at 10 MB/s cost more than the writes it saved
 * (issue 15, docs/benchmarks.md): there a handover is one 64 KiB slice's rows.
 */
const SEND_AS_IS_BYTES = 32 * 1024;

/** Header, the parts' Buffers (runs of small ones joined), trailer. */
function* wholeParts(parts: readonly TablePart[], counters: CopyCounters): Generator<Buffer> {
  let bytes = HEADER.length + TRAILER.length;
  yield HEADER;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  for (const { rows } of parts) {
    bytes += rows.data.length;
    if (rows.data.length >= SEND_AS_IS_BYTES) {
      if (pending.length > 0) yield joined(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
      yield rows.data;
      continue;
    }
    pending.push(rows.data);
    pendingBytes += rows.data.length;
    if (pendingBytes >= CHUNK_BYTES) {
      yield joined(pending, pendingBytes);
      pending = [];
      pendingBytes = 0;
    }
  }
  if (pending.length > 0) yield joined(pending, pendingBytes);
  yield TRAILER;
  // Counted once the whole COPY data was taken: a COPY that fails midway sent no committed bytes.
  counters.bytes += bytes;
}

function joined(list: Buffer[], total: number): Buffer {
  return list.length === 1 ? (list[0] as Buffer) : Buffer.concat(list, total);
}

/** Header, the rows (runs of neighbours in one part as one slice), trailer; their bytes counted in `sent`. */
function* rowSlices(refs: readonly RowRef[], sent: { bytes: number }): Generator<Buffer> {
  sent.bytes += HEADER.length + TRAILER.length;
  yield HEADER;
  let i = 0;
  while (i < refs.length) {
    const first = refs[i] as RowRef;
    let last = first;
    i++;
    while (i < refs.length && (refs[i] as RowRef).part === first.part && (refs[i] as RowRef).index === last.index + 1) last = refs[i++] as RowRef;
    const slice = first.part.rows.data.subarray(rowRange(first.part.rows, first.index)[0], rowRange(last.part.rows, last.index)[1]);
    sent.bytes += slice.length;
    yield slice;
  }
  yield TRAILER;
}
