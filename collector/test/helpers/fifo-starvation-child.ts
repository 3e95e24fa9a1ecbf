/**
 * Child process of collector/test/integration/fifo-reader.test.ts (run with a small
 * UV_THREADPOOL_SIZE): opens every FIFO in --dir with --mode `fifo-reader` (openFifoReader) or
 * `read-stream` (fs.createReadStream), none of them with a writer yet, then (100 ms later) starts three calls
 * that run on libuv's threadpool: fs.promises.readFile(--file), fs.promises.stat(--file) and
 * dns.lookup('localhost').
 *
 * Prints two JSON lines on stdout:
 *   {"phase":"waiting", ...}   after --bound-ms, or as soon as all three calls are done: each
 *                               call's duration in ms, or null if it had not completed
 *   {"phase":"released", ...}  once every FIFO has delivered its writer's bytes and ended and
 *                               all three calls are done (the test's writer runs after the
 *                               first line): per FIFO what arrived, and when the calls finished
 * then exits 0. The test kills it if the second line never comes.
 */
import { lookup } from 'node:dns/promises';
import { createReadStream, readdirSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { parseArgs } from 'node:util';

import { openFifoReader } from '../../src/transport/fifo-reader.ts';

const { values } = parseArgs({
  options: {
    mode: { type: 'string' },
    dir: { type: 'string' },
    file: { type: 'string' },
    'bound-ms': { type: 'string', default: '1000' },
  },
});
const mode = values.mode;
if (mode !== 'fifo-reader' && mode !== 'read-stream') throw new Error('--mode must be fifo-reader or read-stream');
if (values.dir === undefined || values.file === undefined) throw new Error('--dir and --file are required');
const dir = values.dir;
const file = values.file;
const boundMs = Number(values['bound-ms']);

const started = performance.now();
const names = readdirSync(dir).sort();
/** What each FIFO delivered, as text, once it ended. */
const delivered = new Map<string, string>();
const ended = names.map((name) => {
  const path = join(dir, name);
  const stream: Readable = mode === 'fifo-reader' ? openFifoReader(path) : createReadStream(path);
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  return new Promise<void>((resolve, reject) => {
    stream.once('error', reject);
    stream.once('end', () => {
      delivered.set(name, Buffer.concat(chunks).toString('utf8'));
      resolve();
    });
  });
});

// fs.createReadStream opens its file on a later tick: let every FIFO's open() reach the
// threadpool before the calls are timed, as in a collector that has been running a while.
await new Promise((resolve) => setTimeout(resolve, 100));

const durations: Record<'readFile' | 'stat' | 'lookup', number | null> = { readFile: null, stat: null, lookup: null };
const timed = async (key: keyof typeof durations, call: () => Promise<unknown>): Promise<void> => {
  const t0 = performance.now();
  await call();
  durations[key] = performance.now() - t0;
};
const calls = Promise.all([timed('readFile', () => readFile(file)), timed('stat', () => stat(file)), timed('lookup', () => lookup('localhost'))]);
let boundTimer: NodeJS.Timeout | undefined;
await Promise.race([
  calls,
  new Promise<void>((resolve) => {
    boundTimer = setTimeout(resolve, boundMs);
  }),
]);
clearTimeout(boundTimer);
process.stdout.write(JSON.stringify({ phase: 'waiting', mode, fifos: names.length, threadpool: process.env.UV_THREADPOOL_SIZE ?? null, ms: durations }) + '\n');

await Promise.all([calls, ...ended]);
process.stdout.write(
  JSON.stringify({
    phase: 'released',
    mode,
    ms: durations,
    allDoneMs: performance.now() - started,
    delivered: Object.fromEntries([...delivered].sort(([a], [b]) => a.localeCompare(b))),
  }) + '\n',
);
