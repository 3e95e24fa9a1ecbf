/**
 * Reading a FIFO (the sshproxy sidecar's DIR/streams/<id>.out and .err) without occupying a
 * libuv threadpool thread.
 *
 * Why not fs.createReadStream: libuv does file I/O as blocking system calls on its threadpool
 * (4 threads unless UV_THREADPOOL_SIZE says otherwise), and on a FIFO they block for as long
 * as there is nothing to read: open(O_RDONLY) until a writer opens the other end, each read()
 * until the writer writes. A few idle FIFOs therefore hold every pool thread, and everything
 * else that runs on the pool waits behind them: fs.promises (the store of desired.json and
 * status.json), dns.lookup (getaddrinfo: every connect by host name), crypto.pbkdf2/scrypt,
 * zlib. With 30 FIFOs waiting for writers that wait is for ever
 * (collector/test/integration/fifo-reader.test.ts proves both the problem and this fix), and
 * with 32 busy FIFOs it shows as event-loop and lookup latency (bench/fifo-bench.ts).
 *
 * What this does instead: open(O_RDONLY | O_NONBLOCK), which on a FIFO returns at once even
 * with no writer (POSIX), check with fstat that it is a FIFO, and hand the descriptor to a
 * libuv pipe handle (`new net.Socket({ fd })`, the same path as process.stdin on a pipe). The
 * pipe handle waits in epoll on the event loop's thread and reads only what is there: no
 * threadpool, no thread per FIFO. A regular file is refused: epoll does not support regular
 * files, so Node would read it through the threadpool again (or fail), and a regular file at a
 * FIFO's path means the directory contract was broken anyway.
 *
 * The Linux detail this relies on (fs/pipe.c, fifo_open and pipe_poll): a reader opened with
 * O_NONBLOCK before any writer exists would get 0 (EOF) from a read() right away, but poll and
 * epoll do not report EPOLLHUP for it until a writer has opened the FIFO ("suppress EPOLLHUP
 * until we have seen a writer"), and libuv reads only when epoll reports the descriptor. So
 * the stream waits, without a thread, for the sidecar's ssh to open the write end, then gets
 * its bytes, then EOF ('end') once the last writer has closed. A writer that opens and closes
 * without writing also ends the stream (with no data): the FIFO has no way to say "a writer
 * will come again", and the sidecar's contract is one writer run per FIFO.
 *
 * Backpressure is the stream's own: when the readable buffer is full (a paused consumer), Node
 * stops the pipe handle's reads (readStop, onStreamRead in Node's stream_base_commons), the
 * kernel's pipe buffer (64 KiB by default) fills, and the writer (ssh, then the remote command
 * through the SSH channel window) blocks in write().
 *
 * open and fstat are synchronous on purpose: both are non-blocking system calls here (the
 * directory is a local tmpfs and the open does not wait for a writer), and their asynchronous
 * forms would run on the very threadpool this module keeps free, queued behind whatever
 * occupies it.
 */
import { closeSync, constants, fstatSync, openSync } from 'node:fs';
import { Socket } from 'node:net';

import { PglogError } from '@pglog/common/errors.ts';

/** The file types a path that should be a FIFO may turn out to be, named for the error message. */
const FILE_TYPES = new Map<number, string>([
  [constants.S_IFREG, 'a regular file'],
  [constants.S_IFDIR, 'a directory'],
  [constants.S_IFCHR, 'a character device'],
  [constants.S_IFBLK, 'a block device'],
  [constants.S_IFSOCK, 'a socket'],
  [constants.S_IFLNK, 'a symbolic link'],
]);

/** What kind of file `mode` (st_mode) is, for the error message. */
function describeFileType(mode: number): string {
  const type = mode & constants.S_IFMT;
  return FILE_TYPES.get(type) ?? `a file of type 0o${type.toString(8)}`;
}

/** Node's message for a failed system call already names the call, the errno and the path. */
function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Opens the FIFO at `path` for reading without blocking and without the threadpool. The
 * returned socket is readable only: 'data' gives Buffers, 'end' comes when the last writer has
 * closed (never before a first writer has opened it). Throws a PglogError (INPUT_UNREADABLE)
 * naming `path` when the open fails (ENOENT, EACCES, ...) or `path` is not a FIFO. The caller
 * owns the socket: end it with closeFifoReader (or destroy()); that closes the descriptor, and
 * a writer still writing then gets EPIPE/SIGPIPE.
 */
export function openFifoReader(path: string): Socket {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw new PglogError('INPUT_UNREADABLE', `cannot open FIFO ${path} for reading: ${reason(error)}`, { cause: error });
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFIFO()) {
      throw new PglogError(
        'INPUT_UNREADABLE',
        `${path} is ${describeFileType(stat.mode)}, not a FIFO: refusing to read it (a FIFO is read through epoll; anything else would occupy the libuv threadpool)`,
      );
    }
    // The pipe handle takes the descriptor over: from here on, destroying the socket closes it.
    return new Socket({ fd, readable: true, writable: false });
  } catch (error) {
    try {
      closeSync(fd);
    } catch {
      /* already closed or never ours: nothing more to do */
    }
    if (error instanceof PglogError) throw error;
    throw new PglogError('INPUT_UNREADABLE', `cannot read FIFO ${path}: ${reason(error)}`, { cause: error });
  }
}

/**
 * Stops reading and closes the descriptor. Never throws, may be called more than once and on a
 * reader that already ended or failed. A writer blocked on the full pipe gets EPIPE.
 */
export function closeFifoReader(reader: Socket): void {
  try {
    reader.destroy();
  } catch {
    /* destroy() of a net.Socket does not throw today; closing must never fail the caller */
  }
}
