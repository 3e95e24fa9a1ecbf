/**
 * Reading log input: a file or standard input, gzip and bzip2 decompressed transparently.
 * Compression is recognised by its magic bytes, not by the file name, so a renamed or
 * piped archive still reads. bzip2 goes through the system's `bzip2 -dc` (a C decoder; the
 * pure-JavaScript ones decode byte by byte into arrays and are an order of magnitude slower).
 */
import { spawn } from 'node:child_process';
import { type FileHandle, open } from 'node:fs/promises';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';

import { PglogError } from '@pglog/common/errors.ts';

export type Compression = 'none' | 'gzip' | 'bzip2';

const READ_CHUNK = 256 * 1024;

export function compressionOf(head: Buffer): Compression {
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head.length >= 3 && head[0] === 0x42 && head[1] === 0x5a && head[2] === 0x68) return 'bzip2';
  return 'none';
}

/** A name for messages: the path, or "standard input". */
export function inputName(path: string): string {
  return path === '-' ? 'standard input' : path;
}

/**
 * The decompressed bytes of `path` (`-` for `stdin`) as chunks. Errors (cannot open, corrupt
 * archive, read failure) are PglogError INPUT_UNREADABLE naming the input.
 */
export async function* readInput(path: string, stdin: Readable): AsyncGenerator<Buffer> {
  if (path === '-') {
    yield* readChunks(path, stdin[Symbol.asyncIterator]() as AsyncIterator<Buffer>);
    return;
  }
  const chunks = await fileChunks(path);
  try {
    yield* readChunks(path, chunks);
  } finally {
    // A reader that stopped early closes the file now rather than when the GC finds the handle.
    await chunks.return?.();
  }
}

async function* readChunks(path: string, chunks: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  let first: IteratorResult<Buffer>;
  try {
    first = await chunks.next();
  } catch (e) {
    throw unreadable(path, e);
  }
  if (first.done === true) return;
  const compression = compressionOf(first.value);
  if (compression === 'none') {
    yield first.value;
    try {
      for (let next = await chunks.next(); next.done !== true; next = await chunks.next()) yield next.value;
    } catch (e) {
      throw unreadable(path, e);
    }
    return;
  }
  yield* decompress(path, compression, first.value, chunks);
}

/**
 * A file's chunks, read with FileHandle.read into a fresh Buffer each (the parser keeps views of
 * a chunk while an entry in it is pending, so a Buffer is never refilled while handed out).
 * Not through a ReadStream, whose machinery costs more CPU than the reads themselves (about 2 %
 * of `pglog parse`, docs/benchmarks.md, log parsing). A short read (a pipe or FIFO named as the
 * file) is copied out when it fills less than a quarter of the Buffer: a view would pin
 * 256 KiB for a few bytes.
 */
async function fileChunks(path: string): Promise<AsyncIterator<Buffer>> {
  let handle: FileHandle;
  // Open eagerly so a missing or unreadable file fails here with its own error.
  try {
    handle = await open(path, 'r');
  } catch (e) {
    throw unreadable(path, e);
  }
  // One read ahead, as a ReadStream keeps: the next chunk is read while this one is parsed.
  const next = async (file: FileHandle): Promise<Buffer> => {
    const buf = Buffer.allocUnsafeSlow(READ_CHUNK);
    const { bytesRead } = await file.read(buf, 0, READ_CHUNK, null);
    if (bytesRead === READ_CHUNK) return buf;
    return bytesRead >= READ_CHUNK >>> 2 ? buf.subarray(0, bytesRead) : Buffer.from(buf.subarray(0, bytesRead));
  };
  async function* chunks(file: FileHandle): AsyncGenerator<Buffer> {
    let ahead: Promise<Buffer> | null = null;
    const readAhead = (): Promise<Buffer> => {
      const read = next(file);
      // Handled now, awaited later: a read failing while the reader parses is not unhandled.
      read.catch(() => undefined);
      return read;
    };
    try {
      ahead = readAhead();
      for (;;) {
        const chunk = await ahead;
        ahead = null;
        if (chunk.length === 0) return;
        ahead = readAhead();
        yield chunk;
      }
    } finally {
      // A read still under way when the reader stopped ends before the file closes; its failure no longer matters.
      await ahead?.catch(() => undefined);
      await file.close();
    }
  }
  return chunks(handle);
}

async function* decompress(path: string, compression: Exclude<Compression, 'none'>, first: Buffer, rest: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  async function* compressed(): AsyncGenerator<Buffer> {
    yield first;
    for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
  }
  const output = new PassThrough({ highWaterMark: READ_CHUNK });
  let failure: unknown = null;
  const done = (compression === 'gzip' ? pipeline(compressed(), createGunzip({ chunkSize: 64 * 1024 }), output) : bunzip2(compressed(), output)).catch(
    (e: unknown) => {
      failure = e;
      output.destroy();
    },
  );
  try {
    for await (const chunk of output) yield chunk as Buffer;
  } catch (e) {
    failure ??= e;
  }
  await done;
  if (failure !== null) throw unreadable(path, failure, compression);
}

async function bunzip2(source: AsyncIterable<Buffer>, output: PassThrough): Promise<void> {
  const child = spawn('bzip2', ['-dc'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s: string) => {
    stderr += s;
  });
  const exited = new Promise<void>((resolve, reject) => {
    child.once('error', (e) => reject(new Error(`cannot run bzip2 (install the bzip2 package): ${e.message}`)));
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`bzip2 -dc exited with ${code}: ${stderr.trim()}`))));
  });
  await Promise.all([pipeline(source, child.stdin), pipeline(child.stdout, output), exited]);
}

function unreadable(path: string, cause: unknown, compression?: Compression): PglogError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  const what = compression === undefined || compression === 'none' ? '' : ` (${compression})`;
  return new PglogError('INPUT_UNREADABLE', `${inputName(path)}${what}: ${reason}`, { cause });
}
