/**
 * One `COPY ... FROM STDIN` through pg-copy-streams, fed from an iterator of Buffers.
 *
 * One chunk is written at a time, and the next one is produced (encoded) while it is being
 * sent: a slow store holds at most two chunks in memory, and backpressure reaches the producer. The COPY fails as soon as the server refuses it or the
 * connection drops: the stream's 'error' ends any wait, including a write waiting for a
 * socket that will never drain.
 *
 * Why not `pipeline(Readable.from(chunks), copyStream)`: after the server has refused the
 * COPY, pg-copy-streams drops its connection reference, and a further write or destroy from
 * the pipeline would touch it; here nothing is written once an error has been seen.
 */
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

export async function copyIn(client: pg.ClientBase, sql: string, chunks: Iterable<Buffer>): Promise<{ rows: number }> {
  const stream = client.query(copyFrom(sql));
  // In an object: set from the 'error' listener, which TypeScript's narrowing does not see.
  const state: { failure: Error | null } = { failure: null };
  let fail: (e: unknown) => void = () => {
    /* replaced below */
  };
  const failed = new Promise<never>((_, reject) => {
    fail = reject;
  });
  // The race below observes `failed`; this keeps an error that arrives after the last await
  // from being reported as an unhandled rejection.
  failed.catch(() => {
    /* handled through the races */
  });
  stream.on('error', (e: Error) => {
    state.failure ??= e;
    fail(e);
  });
  const write = (chunk: Buffer): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      stream.write(chunk, (err) => {
        if (err) reject(err);
        else resolve();
      });
    });
  try {
    // The next chunk is produced (by the iterator) while the last one is being sent.
    let sending: Promise<void> | null = null;
    for (const chunk of chunks) {
      if (sending !== null) await Promise.race([sending, failed]);
      if (state.failure !== null) break;
      sending = write(chunk);
    }
    if (sending !== null) await Promise.race([sending, failed]);
  } catch (e) {
    // The chunks could not be produced: abort the COPY (CopyFail) so the session is usable.
    if (state.failure === null) stream.destroy(e instanceof Error ? e : new Error(String(e)));
    throw e;
  }
  if (state.failure !== null) throw state.failure;
  await Promise.race([
    new Promise<void>((resolve) => {
      stream.end(resolve);
    }),
    failed,
  ]);
  return { rows: stream.rowCount };
}

/**
 * COPY data is produced and sent in pieces of about this many bytes. Small enough that making
 * the next piece (mapping and encoding, a few ms) takes less time than the server needs for
 * what the socket buffer holds (~200 KB of a Unix socket), so the server does not wait on us;
 * big enough that the cost per piece does not count.
 */
export const CHUNK_BYTES = 256 * 1024;

/** Fixed part of a row's size estimate: length words, numbers, short texts. */
const ROW_OVERHEAD = 160;

/**
 * Rough size of a row once encoded, to cut COPY data into pieces of about CHUNK_BYTES without
 * encoding twice: the length of its texts (and 8 bytes per array element) plus a fixed part.
 */
export function estimatedRowBytes(values: readonly unknown[]): number {
  let n = ROW_OVERHEAD;
  for (const v of values) {
    if (typeof v === 'string') n += v.length;
    else if (Array.isArray(v)) n += 8 * v.length;
  }
  return n;
}
