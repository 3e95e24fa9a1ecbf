// One instance's stream with a scripted follower and a recording committer: every entry is
// handed over once, with the position of its end; a failure mid-entry resumes at the last
// entry boundary (the partly read entry is read again, nothing twice); file switches flush the
// last entry; idle flushes a quiet log's newest entry.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { PglogError } from '@pglog/common/errors.ts';

import { Batcher } from '../../../src/collect/batcher.ts';
import { type Follower, InstanceStream, type InstanceStreamOptions } from '../../../src/collect/instance-stream.ts';
import type { FollowedFile, FollowItem, FollowPosition } from '../../../src/follow/follower.ts';
import { TemplateCache } from '../../../src/logformat/normalize/normalize.ts';
import type { CommitResult, StoreBatch } from '../../../src/store/store-writer.ts';

const line = (n: number): string =>
  `2026-11-23 07:20:${String(n % 60).padStart(2, '0')}.123 UTC [4242] app@bench LOG:  duration: 0.5 ms  statement: SELECT ${n}\n`;
const logText = (from: number, to: number): string => Array.from({ length: to - from }, (_, i) => line(from + i)).join('');

/** Serves files as chunks of a fixed size from a position; fails once after `failAfterBytes`. */
class ScriptedFollower implements Follower {
  readonly starts: Array<FollowPosition | null> = [];
  private current: FollowedFile | null = null;
  failAfterBytes = Infinity;
  private readonly files: Array<{ file: FollowedFile; text: Buffer }>;
  private readonly chunk: number;
  constructor(files: Array<{ file: FollowedFile; text: Buffer }>, chunk: number) {
    this.files = files;
    this.chunk = chunk;
  }
  currentFile(): FollowedFile | null {
    return this.current;
  }
  readonly events: string[] = [];
  chooseStart(): Promise<FollowPosition | null> {
    this.events.push('chooseStart');
    return Promise.resolve({ file: this.files[0]!.file, offset: 0 });
  }
  async *follow(start: FollowPosition | null, signal: AbortSignal): AsyncIterable<FollowItem> {
    this.starts.push(start);
    this.events.push('follow');
    let index = start === null ? 0 : this.files.findIndex((f) => f.file.path === start.file.path);
    let offset = start?.offset ?? 0;
    let sent = 0;
    for (; index < this.files.length; index++, offset = 0) {
      const { file, text } = this.files[index]!;
      this.current = file;
      yield { kind: 'file', file, offset };
      for (let at = offset; at < text.length; at += this.chunk) {
        if (sent >= this.failAfterBytes) {
          this.failAfterBytes = Infinity;
          throw new PglogError('SSH_TIMEOUT', 'scripted connection loss');
        }
        const piece = text.subarray(at, Math.min(text.length, at + this.chunk));
        sent += piece.length;
        yield { kind: 'data', chunk: piece };
      }
      if (index < this.files.length - 1) yield { kind: 'end-of-file' };
    }
    yield { kind: 'idle' };
    // A switch can abort the signal while the consumer is between items; a listener added
    // after that would never fire and the follow would hang.
    if (signal.aborted) return;
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  }
}

class Recorder {
  readonly batches: StoreBatch[] = [];
  commit(batch: StoreBatch): Promise<CommitResult> {
    this.batches.push(batch);
    return Promise.resolve({ rows: {}, quarantined: 0, fenced: [], copyMs: 0, bytes: 0 });
  }
}

/** The options of a stream of db1/main logging stderr with the default prefix; `over` replaces any. */
function streamOptions(follower: Follower, batcher: Batcher, over: Partial<InstanceStreamOptions> = {}): InstanceStreamOptions {
  return {
    target: 'db1',
    instance: 'main',
    format: 'stderr',
    prefix: '%m [%p] %q%u@%d ',
    encodings: { defaultEncoding: 'UTF8', databases: {} },
    maxEntryBytes: 1 << 20,
    templates: new TemplateCache(),
    follower,
    batcher,
    retryBaseMs: 1,
    retryCapMs: 2,
    claim: () => Promise.resolve({ epoch: 1, position: null }),
    storeStart: (start) => Promise.resolve(start),
    ...over,
  };
}

/** The queries the recorder was handed, in order (`?` for an entry that is not a statement). */
const queriesOf = (recorder: Recorder): string[] => recorder.batches.flatMap((x) => x.items.map((i) => (i.event.kind === 'statement' ? i.event.query : '?')));
/** The queries of `line(from)` up to `line(to)`, the end not included. */
const selects = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `SELECT ${from + i}`);

/** Waits (ten seconds at most) until the recorder holds `total` events, then flushes and stops the stream and the batcher. */
async function stopOnceRecorded(
  recorder: Recorder,
  total: number,
  { batcher, abort, running }: { batcher: Batcher; abort: AbortController; running: Promise<void> },
): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (recorder.batches.reduce((n, b) => n + b.items.length, 0) < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  await batcher.flush();
  abort.abort();
  await running;
  await batcher.stop(Date.now() + 1000);
}

async function runUntilIdle(
  files: Array<{ file: FollowedFile; text: Buffer }>,
  chunk: number,
  failAfterBytes = Infinity,
): Promise<{ recorder: Recorder; follower: ScriptedFollower }> {
  const recorder = new Recorder();
  const batcher = new Batcher(recorder, { maxDelayMs: 5, retryBaseMs: 1 });
  const follower = new ScriptedFollower(files, chunk);
  follower.failAfterBytes = failAfterBytes;
  const total = files.reduce((n, f) => n + f.text.toString().split('\n').length - 1, 0);
  const stream = new InstanceStream(streamOptions(follower, batcher));
  const abort = new AbortController();
  const running = stream.run(abort.signal);
  await stopOnceRecorded(recorder, total, { batcher, abort, running });
  return { recorder, follower };
}

describe('InstanceStream', () => {
  const a = { file: { path: '/log/a.log', identity: '1:1024:1' }, text: Buffer.from(logText(0, 40)) };
  const b = { file: { path: '/log/b.log', identity: '2:1024:2' }, text: Buffer.from(logText(40, 70)) };

  test('every entry once, in order, across a file switch; the last position is the end of the last file', async () => {
    const { recorder } = await runUntilIdle([a, b], 97);
    assert.deepEqual(queriesOf(recorder), selects(0, 70));
    const last = recorder.batches.flatMap((x) => x.positions).at(-1)!;
    assert.deepEqual({ file: last.file, offset: last.offset }, { file: '/log/b.log', offset: b.text.length });
    // Positions never go backwards within a file and always sit at an entry end.
    for (const p of recorder.batches.flatMap((x) => x.positions)) {
      const text = p.file === a.file.path ? a.text : b.text;
      assert.ok(p.offset === 0 || text[p.offset - 1] === 10, `position ${p.file}:${p.offset} is an entry boundary`);
    }
  });

  test('a connection lost mid-entry resumes at the last entry boundary: nothing lost, nothing twice', async () => {
    for (const failAfter of [1, 150, 1000, 2600, a.text.length + 333]) {
      const { recorder, follower } = await runUntilIdle([a, b], 61, failAfter);
      assert.deepEqual(queriesOf(recorder), selects(0, 70), `failure after ${failAfter} bytes`);
      assert.equal(follower.starts.length, 2);
      const resume = follower.starts[1]!;
      const text = resume.file.path === a.file.path ? a.text : b.text;
      assert.ok(resume.offset === 0 || text[resume.offset - 1] === 10, `resumed at an entry boundary (${resume.offset})`);
    }
  });

  test('idle flushes the newest entry of a quiet log', async () => {
    // One file only: its last entry is out only because of the idle item.
    const { recorder } = await runUntilIdle([a], 4096);
    assert.equal(recorder.batches.flatMap((x) => x.items).length, 40);
  });

  test('switching followers mid-stream: each new one starts at the committed boundary, nothing lost, nothing twice', async () => {
    const big = { file: { path: '/log/c.log', identity: '3:1024:3' }, text: Buffer.from(logText(0, 600)) };
    const recorder = new Recorder();
    const batcher = new Batcher(recorder, { maxDelayMs: 5, retryBaseMs: 1 });
    // Slow followers (a chunk per millisecond) so that switches land mid-file and mid-entry.
    const slow = (): ScriptedFollower => new ScriptedFollower([big], 53);
    const pace = (f: ScriptedFollower): Follower => ({
      currentFile: () => f.currentFile(),
      chooseStart: () => f.chooseStart(),
      async *follow(start, signal) {
        for await (const item of f.follow(start, signal)) {
          yield item;
          await new Promise((r) => setTimeout(r, 1));
        }
      },
    });
    const first = slow();
    const stream = new InstanceStream(streamOptions(pace(first), batcher, { storeStart: (start) => Promise.resolve(start) }));
    const abort = new AbortController();
    const running = stream.run(abort.signal);
    const followers = [first];
    for (let i = 0; i < 8; i++) {
      await new Promise((r) => setTimeout(r, 15 + ((i * 7) % 20)));
      const next = slow();
      followers.push(next);
      await stream.switchFollower(pace(next));
      // The new follower starts where the store stands: the last committed position.
      const start = next.starts[0]!;
      const committed = recorder.batches.flatMap((x) => x.positions).at(-1)!;
      assert.equal(start.offset, committed.offset, `switch ${i}: starts at the committed offset`);
      assert.ok(start.offset === 0 || big.text[start.offset - 1] === 10, `switch ${i}: at an entry boundary`);
    }
    await stopOnceRecorded(recorder, 600, { batcher, abort, running });
    assert.deepEqual(queriesOf(recorder), selects(0, 600));
    assert.ok(
      followers.slice(1).every((f) => f.starts.length === 1),
      'each follower followed once',
    );
  });

  test('a log never collected: its start is stored (retried while the store refuses) before the follower reads, and reading begins at what the store holds', async () => {
    const recorder = new Recorder();
    const batcher = new Batcher(recorder, { maxDelayMs: 5, retryBaseMs: 1 });
    const follower = new ScriptedFollower([a, b], 500);
    const stored: string[] = [];
    let refusals = 2;
    const stream = new InstanceStream(
      streamOptions(follower, batcher, {
        claim: () => Promise.resolve({ epoch: 7, position: null }),
        storeStart: (start, epoch) => {
          follower.events.push('storeStart');
          if (refusals-- > 0) return Promise.reject(new PglogError('STORE_UNAVAILABLE', 'store down'));
          stored.push(`${start.file}@${start.offset} epoch ${epoch}`);
          // Another start was stored first: that one wins.
          return Promise.resolve({ ...start, file: b.file.path, identity: b.file.identity, offset: 0 });
        },
      }),
    );
    const abort = new AbortController();
    const running = stream.run(abort.signal);
    await stopOnceRecorded(recorder, 30, { batcher, abort, running });
    assert.deepEqual(stored, ['/log/a.log@0 epoch 7']);
    assert.deepEqual(follower.events.slice(0, 7), ['chooseStart', 'storeStart', 'chooseStart', 'storeStart', 'chooseStart', 'storeStart', 'follow']);
    assert.deepEqual(follower.starts[0], { file: b.file, offset: 0 });
    assert.deepEqual(queriesOf(recorder), selects(40, 70));
  });

  test("read bytes plus the backlog's change are what the server wrote: a catch-up adds nothing, new bytes do, a new follow starts from its own backlog", async () => {
    const text = Buffer.from(logText(0, 20));
    const file = { path: '/log/a.log', identity: '1:1024:1' };
    const scripts: FollowItem[][] = [
      // A follow that starts behind: 1,000 bytes unread at its first size (its backlog, not counted).
      // Then the server wrote 300 more: of the next 700 read, 300 are new.
      [
        { kind: 'file', file, offset: 0 },
        { kind: 'size', size: 1000 },
        { kind: 'data', chunk: text.subarray(0, 600) },
        { kind: 'size', size: 1000 },
        { kind: 'data', chunk: text.subarray(600, 1300) },
        { kind: 'size', size: 1300 },
      ],
      // After a loss, the next follow's first size is its own backlog again (no delta), as after a restart.
      [{ kind: 'size', size: 5000 }],
    ];
    let step = 0;
    const follower: Follower = {
      currentFile: () => file,
      chooseStart: () => Promise.resolve({ file, offset: 0 }),
      async *follow(_start, signal) {
        // Each follow plays the next script, then fails (a lost connection): the next follow starts over.
        for (const item of scripts[Math.min(step++, scripts.length - 1)]!) yield item;
        if (step > scripts.length) return await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        throw new PglogError('SSH_TIMEOUT', 'scripted loss');
      },
    };
    const deltas: number[] = [];
    const batcher = new Batcher(new Recorder(), { maxDelayMs: 5, retryBaseMs: 1 });
    const stream = new InstanceStream(streamOptions(follower, batcher, { hooks: { backlog: (d) => deltas.push(d) } }));
    const abort = new AbortController();
    const running = stream.run(abort.signal);
    for (const deadline = Date.now() + 10_000; step <= scripts.length && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 5));
    abort.abort();
    await running;
    await batcher.stop(Date.now() + 1000);
    // 1000 unread, 600 read, 400 unread: -600 with the 600 read is nothing written; then 700 read
    // and 0 unread: -400 with the 700 read is the 300 written meanwhile. The second follow adds nothing.
    assert.deepEqual(deltas, [-600, -400]);
  });

  test('a start the store fences ends the stream with STORE_FENCED, nothing read', async () => {
    const batcher = new Batcher(new Recorder(), { maxDelayMs: 5, retryBaseMs: 1 });
    const follower = new ScriptedFollower([a], 500);
    const stream = new InstanceStream(streamOptions(follower, batcher, { storeStart: () => Promise.reject(new PglogError('STORE_FENCED', 'another owner')) }));
    await assert.rejects(stream.run(new AbortController().signal), { code: 'STORE_FENCED' });
    assert.deepEqual(follower.starts, []);
    await batcher.stop(Date.now() + 1000);
  });
});
