/**
 * Reading log input: a file or standard input, gzip and bzip2 decompressed transparently.
 * Compression is recognised by its magic bytes, not by the file name, so a renamed or
 * piped archive still reads. bzip2 goes through the system's `bzip2 -dc` (a C decoder; the
 * pure-JavaScript ones decode byte by byte into arrays and are an order of magnitude slower).
 */
import { spawn } from 'node:child_process';
import { open } from 'node:fs/promises';
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
  const raw = path === '-' ? stdin : await openFile(path);
  const chunks = raw[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
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

async function openFile(path: string): Promise<Readable> {
  // Open eagerly so a missing or unreadable file fails here with its own error.
  try {
    const handle = await open(path, 'r');
    // The stream owns the handle and closes it when done or destroyed.
    return handle.createReadStream({ highWaterMark: READ_CHUNK });
  } catch (e) {
    throw unreadable(path, e);
  }
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
