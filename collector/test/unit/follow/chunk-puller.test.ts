// ChunkPuller on plain Readables: each chunk handed over as it was pushed (the same Buffer, never
// a join of several), one per next(), nothing read while the consumer does not ask, the end
// after the last chunk (never before it), and a failure or a close before the end as an error.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';

import { ChunkPuller, type Pulled } from '../../../src/follow/chunk-puller.ts';

/** A puller over `stream` whose results land in `got`. */
function pull(stream: Readable): { puller: ChunkPuller; got: Pulled[]; errors: unknown[]; settled: () => Promise<void> } {
  const got: Pulled[] = [];
  const errors: unknown[] = [];
  const puller = new ChunkPuller(
    stream,
    (p) => got.push(p),
    (e) => errors.push(e),
  );
  const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  return { puller, got, errors, settled };
}

describe('ChunkPuller', () => {
  it('hands over each buffered chunk as pushed, one per next(), then the end', async () => {
    const chunks = [Buffer.from('first\n'), Buffer.from('second\n'), Buffer.from('third\n')];
    const stream = new Readable({ read() {} });
    for (const c of chunks) stream.push(c);
    stream.push(null);
    const { puller, got, errors, settled } = pull(stream);
    await settled();
    assert.equal(got.length, 0, 'nothing is read before the consumer asks');
    for (let i = 0; i < chunks.length; i++) {
      puller.next();
      await settled();
      // One chunk per ask (after the last one, the end may follow at once).
      assert.equal(got.filter((p) => !p.done).length, i + 1);
      const p = got[i]!;
      assert.equal(p.done, false);
      // The very Buffer pushed: async iteration's read() would have joined all three.
      assert.equal(p.value, chunks[i]);
    }
    if (got.length === chunks.length) puller.next();
    await settled();
    assert.equal(got.length, chunks.length + 1);
    assert.deepEqual(got.at(-1), { done: true, value: undefined });
    assert.deepEqual(errors, []);
    puller.close();
  });

  it('passes on a chunk pushed while it waits, and holds the rest back until the next ask', async () => {
    const stream = new Readable({ read() {} });
    const { puller, got, settled } = pull(stream);
    puller.next();
    await settled();
    assert.equal(got.length, 0);
    stream.push(Buffer.from('a'));
    stream.push(Buffer.from('b'));
    await settled();
    assert.equal(got.length, 1);
    assert.equal(stream.readableLength, 1, 'the second chunk waits in the stream (backpressure)');
    puller.next();
    await settled();
    assert.deepEqual(
      got.map((p) => p.value?.toString()),
      ['a', 'b'],
    );
    puller.close();
  });

  it('reports a stream error, and a close before the end, as errors', async () => {
    const failing = new Readable({ read() {} });
    const a = pull(failing);
    a.puller.next();
    failing.destroy(new Error('channel reset'));
    await a.settled();
    assert.equal((a.errors[0] as Error).message, 'channel reset');

    const closed = new Readable({ read() {} });
    const b = pull(closed);
    b.puller.next();
    closed.destroy();
    await b.settled();
    assert.equal((b.errors[0] as NodeJS.ErrnoException).code, 'ERR_STREAM_PREMATURE_CLOSE');
    assert.ok(!b.got.some((p) => p.done), 'a close before the end is not the end');
  });
});
