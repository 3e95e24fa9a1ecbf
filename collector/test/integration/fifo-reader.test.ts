/**
 * openFifoReader (collector/src/transport/fifo-reader.ts) on real FIFOs made by `mkfifo`, with
 * real writer processes: threadpool starvation (the problem with fs.createReadStream, and the
 * fix, in a child process with UV_THREADPOOL_SIZE=2), byte-exact data and EOF only after the
 * writer, backpressure down to the writer, and the errors for paths that are not FIFOs.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, afterEach, describe, it } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import { sleep, within } from '@pglog/test-support/wait.ts';

import { closeFifoReader, openFifoReader } from '../../src/transport/fifo-reader.ts';

/** Generous bound on every wait: a hang fails the test instead of blocking CI. */
const WAIT_MS = 30_000;
const CHILD = new URL('../helpers/fifo-starvation-child.ts', import.meta.url).pathname;
const FIFOS = 30;

const dirs: string[] = [];
const processes = new Set<ChildProcess>();
function killAll(): void {
  for (const child of processes) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  processes.clear();
}
const unregister = onProcessExit(killAll);
afterEach(killAll);
after(() => {
  unregister();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-fifo-'));
  dirs.push(dir);
  return dir;
}

/** FIFOs made by the `mkfifo` binary, as the sidecar's would be. */
function mkfifo(...paths: string[]): void {
  execFileSync('mkfifo', ['-m', '0600', ...paths]);
}

interface Started {
  child: ChildProcess;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function start(command: string, args: string[], env?: NodeJS.ProcessEnv): Started {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: env ?? process.env });
  processes.add(child);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal }));
  });
  return { child, exit };
}

/** A `/bin/sh -c script` writer; its arguments are $1 ... */
function shell(script: string, ...args: string[]): Started {
  return start('/bin/sh', ['-c', script, 'sh', ...args]);
}

const alive = (child: ChildProcess): boolean => child.exitCode === null && child.signalCode === null;

async function collect(reader: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of reader) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

type Durations = Record<'readFile' | 'stat' | 'lookup', number | null>;
interface Waiting {
  phase: 'waiting';
  mode: string;
  fifos: number;
  threadpool: string | null;
  ms: Durations;
}
interface Released {
  phase: 'released';
  mode: string;
  ms: Durations;
  allDoneMs: number;
  delivered: Record<string, string>;
}

/**
 * Runs fifo-starvation-child.ts with UV_THREADPOOL_SIZE=2 on 30 writerless FIFOs, reads its
 * first report, then gives every FIFO a writer (one line each, like a short ssh run) and reads
 * its second report.
 */
async function starvation(mode: 'fifo-reader' | 'read-stream'): Promise<{ waiting: Waiting; released: Released; writerExit: number | null }> {
  const dir = tempDir();
  const fifoDir = join(dir, 'streams');
  execFileSync('mkdir', [fifoDir]);
  const names = Array.from({ length: FIFOS }, (_, i) => `s${String(i).padStart(2, '0')}.out`);
  const paths = names.map((name) => join(fifoDir, name));
  mkfifo(...paths);
  const file = join(dir, 'status.json');
  writeFileSync(file, '{"version":1}\n');

  const child = start(process.execPath, [CHILD, '--mode', mode, '--dir', fifoDir, '--file', file, '--bound-ms', '1000'], {
    ...process.env,
    UV_THREADPOOL_SIZE: '2',
  });
  let stderr = '';
  child.child.stderr?.setEncoding('utf8').on('data', (s: string) => {
    stderr += s;
  });
  const lines = createInterface({ input: child.child.stdout! })[Symbol.asyncIterator]();
  const next = async (what: string): Promise<unknown> => {
    const line = await within(WAIT_MS, `${mode} child: ${what}`, lines.next());
    if (line.done === true) throw new Error(`${mode} child ended before ${what}: ${stderr}`);
    return JSON.parse(line.value) as unknown;
  };
  const waiting = (await next('first report')) as Waiting;
  // One writer for all FIFOs, in order: each `>` blocks until that FIFO has a reader, which for
  // read-stream is the threadpool reaching that FIFO's queued open().
  const writer = shell('for f in "$@"; do echo "${f##*/}" > "$f"; done', ...paths);
  const released = (await next('second report')) as Released;
  const [childExit, writerExit] = await within(WAIT_MS, `${mode} child and writer exit`, Promise.all([child.exit, writer.exit]));
  assert.equal(childExit.code, 0, stderr);
  return { waiting, released, writerExit: writerExit.code };
}

describe('openFifoReader', () => {
  it('leaves the threadpool free: with 30 writerless FIFOs and 2 pool threads, fs and dns calls complete (fs.createReadStream blocks them)', async () => {
    const fixed = await starvation('fifo-reader');
    assert.equal(fixed.waiting.fifos, FIFOS);
    assert.equal(fixed.waiting.threadpool, '2');
    const { readFile, stat, lookup } = fixed.waiting.ms;
    assert.ok(readFile !== null && stat !== null && lookup !== null, `a threadpool call did not complete: ${JSON.stringify(fixed.waiting.ms)}`);
    assert.ok(readFile + stat + lookup < 1000, `threadpool calls took ${JSON.stringify(fixed.waiting.ms)} ms`);
    // The readers work: each got its writer's line, then EOF.
    assert.deepEqual(Object.keys(fixed.released.delivered).length, FIFOS);
    for (const [name, text] of Object.entries(fixed.released.delivered)) assert.equal(text, `${name}\n`);
    assert.equal(fixed.writerExit, 0);

    // The problem, for contrast: the same child with fs.createReadStream. Its 30 open() calls
    // block both pool threads until writers come, and every other pool call queues behind.
    const blocked = await starvation('read-stream');
    assert.equal(blocked.waiting.threadpool, '2');
    assert.deepEqual(
      blocked.waiting.ms,
      { readFile: null, stat: null, lookup: null },
      'fs.createReadStream on writerless FIFOs should have blocked the threadpool for 1 s',
    );
    // ... and it was the FIFOs: once they had writers, everything completed.
    assert.ok(blocked.released.ms.readFile !== null && blocked.released.ms.stat !== null && blocked.released.ms.lookup !== null);
    for (const [name, text] of Object.entries(blocked.released.delivered)) assert.equal(text, `${name}\n`);
    assert.equal(blocked.writerExit, 0);
  });

  it("delivers exactly the writer's bytes, then EOF, and no EOF before the first writer has come", async () => {
    const fifo = join(tempDir(), 'seq.out');
    mkfifo(fifo);
    const reader = openFifoReader(fifo);
    const closed = new Promise((resolve) => reader.once('close', resolve));
    const events: string[] = [];
    reader.on('end', () => events.push('end'));
    reader.on('close', () => events.push('close'));
    reader.on('error', (e) => events.push(`error ${e.message}`));
    const received = collect(reader);
    await sleep(300);
    assert.deepEqual(events, [], 'nothing may happen before a writer opens the FIFO');
    assert.equal(reader.bytesRead, 0);
    // A pause with the writer open and the pipe empty must not end the stream either.
    const writer = shell('{ seq 1 150000; sleep 0.3; seq 150001 300000; } > "$1"', fifo);
    const bytes = await within(WAIT_MS, 'seq through the FIFO', received);
    assert.ok(bytes.equals(execFileSync('seq', ['1', '300000'], { maxBuffer: 16 << 20 })), `received ${bytes.length} bytes, not seq 1 300000`);
    assert.equal((await within(WAIT_MS, 'writer exit', writer.exit)).code, 0);
    await within(WAIT_MS, 'close', closed);
    assert.deepEqual(events, ['end', 'close']);
  });

  it('applies backpressure: a paused reader blocks the writer, which finishes once reading resumes', async () => {
    const fifo = join(tempDir(), 'zero.out');
    mkfifo(fifo);
    const reader = openFifoReader(fifo);
    let received = 0;
    reader.on('data', (chunk: Buffer) => {
      received += chunk.length;
    });
    reader.pause();
    const size = 10 * 1024 * 1024;
    const writer = shell(`head -c ${size} /dev/zero > "$1"`, fifo);
    await sleep(500);
    assert.ok(alive(writer.child), 'the writer finished although the reader was paused');
    assert.equal(received, 0);
    // What is held meanwhile is bounded: the stream's buffer (about one highWaterMark) plus the
    // kernel's pipe buffer, not the 10 MiB.
    assert.ok(reader.readableLength <= 1024 * 1024, `paused reader buffered ${reader.readableLength} bytes`);
    const ended = new Promise((resolve, reject) => {
      reader.once('end', resolve);
      reader.once('error', reject);
    });
    reader.resume();
    await within(WAIT_MS, 'reader end', ended);
    assert.equal(received, size);
    assert.equal((await within(WAIT_MS, 'writer exit', writer.exit)).code, 0);
  });

  it('closeFifoReader never throws, frees the descriptor and releases a writer blocked on the full pipe', async () => {
    const fifo = join(tempDir(), 'closed.out');
    mkfifo(fifo);
    const fdsBefore = readdirSync('/proc/self/fd').length;
    const reader = openFifoReader(fifo);
    const closed = new Promise((resolve) => reader.once('close', resolve));
    reader.pause();
    const writer = shell('head -c 10485760 /dev/zero > "$1"', fifo);
    await sleep(300);
    assert.ok(alive(writer.child));
    closeFifoReader(reader);
    closeFifoReader(reader);
    const exit = await within(WAIT_MS, 'writer exit after the reader closed', writer.exit);
    // head gets SIGPIPE (EPIPE): the shell reports it as 128 + 13.
    assert.notEqual(exit.code, 0);
    await within(WAIT_MS, 'reader close', closed);
    assert.equal(readdirSync('/proc/self/fd').length, fdsBefore);
    closeFifoReader(reader);
  });

  it('refuses a missing path, a regular file and a directory with an error naming the path, and leaks no descriptor', () => {
    const dir = tempDir();
    const regular = join(dir, 'regular.out');
    writeFileSync(regular, 'not a fifo\n');
    const missing = join(dir, 'missing.out');
    const fdsBefore = readdirSync('/proc/self/fd').length;
    const expect = (path: string, pattern: RegExp): void => {
      assert.throws(
        () => openFifoReader(path),
        (e: unknown) => {
          assert.ok(isPglogError(e));
          assert.equal(e.code, 'INPUT_UNREADABLE');
          assert.ok(e.message.includes(path), e.message);
          assert.match(e.message, pattern);
          return true;
        },
      );
    };
    expect(missing, /ENOENT/);
    expect(regular, /is a regular file, not a FIFO/);
    expect(dir, /is a directory, not a FIFO/);
    assert.equal(readdirSync('/proc/self/fd').length, fdsBefore);
  });
});
