// The batcher on its own, with a scripted committer standing in for the store: batches cut by
// rows, bytes and time; positions travel with their events; a failing store keeps the batch and
// retries it whole; budgets pause producers until a commit frees room; stop() flushes.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { PglogError } from '@pglog/common/errors.ts';

import { type BatchCommitter, Batcher, eventCost } from '../../../src/collect/batcher.ts';
import type { PglogEvent } from '../../../src/logformat/events.ts';
import { type EncodedRows, RowEncoder } from '../../../src/store/encoded-rows.ts';
import type { CommitResult, SourceRef, StoreBatch, StorePosition } from '../../../src/store/store-writer.ts';
import { otherEvent, statementEvent } from '../../helpers/events.ts';

function event(offset: number, size = 100): PglogEvent {
  return otherEvent({ offset, end: offset + size });
}

const source = (target = 't1', instance = 'main'): { target: string; instance: string; file: string } => ({ target, instance, file: '/log/a.log' });
const position = (offset: number, target = 't1', instance = 'main'): StorePosition => ({ target, instance, file: '/log/a.log', identity: '1:10:99', offset });

class ScriptedStore implements BatchCommitter {
  readonly batches: StoreBatch[] = [];
  failures = 0;
  fence: Array<{ target: string; instance: string; epoch: number }> = [];
  gate: Promise<void> | null = null;
  async commit(batch: StoreBatch): Promise<CommitResult> {
    if (this.gate !== null) await this.gate;
    if (this.failures > 0) {
      this.failures--;
      throw new PglogError('STORE_UNAVAILABLE', 'store down (scripted)');
    }
    this.batches.push(batch);
    const fenced = this.fence;
    this.fence = [];
    return { rows: { other_events: batch.items.length }, quarantined: 0, fenced, copyMs: 0, bytes: 0 };
  }
}

const until = async (cond: () => boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

/** A store that encodes what is handed over, as the StoreWriter does. */
class EncodingStore extends ScriptedStore {
  private readonly rows = new RowEncoder(1024 * 1024);
  encode(src: SourceRef, events: readonly PglogEvent[], readAt: number): EncodedRows {
    return this.rows.encode(src, events, readAt);
  }
}

describe('Batcher', () => {
  test('with an encoding committer it holds encoded rows, counted by their size, and cuts batches by events handed over', async () => {
    const store = new EncodingStore();
    const committed: Array<{ rows: number; bytes: number; newest: ReadonlyArray<{ ms: number }> }> = [];
    const b = new Batcher(store, { maxRows: 400, maxDelayMs: 60_000 }, { committed: (_, info) => committed.push(info) });
    try {
      // A handover as streams make them: a few hundred entries of a chunk of log.
      const handover = (from: number): PglogEvent[] =>
        Array.from({ length: 200 }, (_, i) =>
          statementEvent({
            offset: from + i * 150,
            end: from + i * 150 + 150,
            ts: '2026-11-21T10:00:04.000Z',
            query: `SELECT abalance FROM pgbench_accounts WHERE aid = ${i}`,
          }),
        );
      const first = handover(0);
      b.add(source(), first, position(30_000), 1, 0);
      const held = b.heldBytes;
      const asEvents = first.reduce((n, e) => n + eventCost(e), 0);
      assert.ok(held > 0 && held < asEvents / 2, `encoded rows held ${held} bytes, the events would be counted ${asEvents}`);
      b.add(source(), handover(30_000), position(60_000), 1, 0);
      await until(() => store.batches.length === 1, 'the batch');
      const batch = store.batches[0]!;
      assert.equal(batch.items.length, 0, 'no events are held besides the encoded rows');
      assert.equal(batch.encoded?.length, 2);
      assert.equal(
        batch.encoded?.reduce((n, e) => n + (e.tables.statement_events?.ends.length ?? 0), 0),
        400,
      );
      assert.deepEqual(batch.positions, [position(60_000)]);
      await until(() => committed.length === 1, 'the committed hook');
      assert.equal(committed[0]?.rows, 400);
      assert.equal(committed[0]?.newest[0]?.ms, Date.parse('2026-11-21T10:00:04.000Z'));
      await until(() => b.heldBytes === 0, 'the budget freed');
    } finally {
      await b.stop(Date.now() + 1000);
    }
  });

  test('cuts a batch at maxRows, with the newest position of each stream', async () => {
    const store = new ScriptedStore();
    const b = new Batcher(store, { maxRows: 10, maxDelayMs: 60_000 });
    for (let i = 0; i < 10; i++) b.add(source(), [event(i * 100)], position((i + 1) * 100), 1, 0);
    await until(() => store.batches.length === 1, 'the batch');
    assert.equal(store.batches[0]!.items.length, 10);
    assert.deepEqual(store.batches[0]!.positions, [position(1000)]);
    await b.stop(Date.now() + 1000);
  });

  test('cuts a batch at maxBytes and at maxDelayMs', async () => {
    const store = new ScriptedStore();
    const b = new Batcher(store, { maxRows: 1_000_000, maxBytes: eventCost(event(0, 5000)), maxDelayMs: 60_000 });
    b.add(source(), [event(0, 5000)], position(5000), 1, 0);
    await until(() => store.batches.length === 1, 'the bytes batch');
    await b.stop(Date.now() + 1000);

    const timed = new ScriptedStore();
    const t = new Batcher(timed, { maxRows: 1_000_000, maxDelayMs: 30 });
    t.add(source(), [event(0)], position(100), 1, 0);
    await until(() => timed.batches.length === 1, 'the timed batch');
    await t.stop(Date.now() + 1000);
  });

  test('a failing store: the same batch is retried whole until it commits, nothing lost or doubled', async () => {
    const store = new ScriptedStore();
    store.failures = 3;
    const retries: number[] = [];
    const b = new Batcher(store, { maxRows: 5, maxDelayMs: 10, retryBaseMs: 1, retryCapMs: 5 }, { retrying: (_e, attempt) => retries.push(attempt) });
    for (let i = 0; i < 12; i++) b.add(source(), [event(i * 100)], position((i + 1) * 100), 1, 0);
    await b.flush();
    assert.deepEqual(retries, [1, 2, 3]);
    const offsets = store.batches.flatMap((x) => x.items.map((it) => it.event.offset));
    assert.deepEqual(
      offsets,
      Array.from({ length: 12 }, (_, i) => i * 100),
    );
    assert.deepEqual(store.batches.at(-1)!.positions, [position(1200)]);
    await b.stop(Date.now() + 1000);
  });

  test('over budget a producer waits, and a commit lets it go on', async () => {
    const store = new ScriptedStore();
    let open!: () => void;
    store.gate = new Promise((r) => {
      open = r;
    });
    const cost = eventCost(event(0));
    const b = new Batcher(store, { maxRows: 1_000_000, maxDelayMs: 60_000, budgetBytes: cost * 100, targetBudgetBytes: cost * 3 });
    for (let i = 0; i < 3; i++) b.add(source(), [event(i * 100)], position((i + 1) * 100), 1, 0);
    assert.equal(b.hasRoom('t1'), false);
    assert.equal(b.hasRoom('t2'), true, 'another target is not held back by t1');
    let released = false;
    const waiting = b.waitForRoom('t1').then(() => {
      released = true;
    });
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(released, false, 'no room while the store holds the batch');
    open();
    await waiting;
    assert.equal(b.heldBytes, 0);
    await b.stop(Date.now() + 1000);
  });

  test('a fenced stream is reported once and refused afterwards; other streams go on', async () => {
    const store = new ScriptedStore();
    store.fence = [{ target: 't1', instance: 'main', epoch: 7 }];
    const fenced: string[] = [];
    const b = new Batcher(store, { maxRows: 1, maxDelayMs: 10 }, { fenced: (t, i, e) => fenced.push(`${t}/${i}@${e}`) });
    b.add(source(), [event(0)], position(100), 3, 0);
    await until(() => fenced.length === 1, 'the fence');
    assert.deepEqual(fenced, ['t1/main@7']);
    assert.throws(
      () => b.add(source(), [event(100)], position(200), 3, 0),
      (e: unknown) => e instanceof PglogError && e.code === 'STORE_FENCED',
    );
    b.add(source('t2'), [event(0)], position(100, 't2'), 1, 0);
    await b.flush();
    assert.equal(store.batches.at(-1)!.positions[0]!.target, 't2');
    await b.stop(Date.now() + 1000);
  });

  test('stop() commits what is pending; with the store down it gives up at the deadline', async () => {
    const store = new ScriptedStore();
    const b = new Batcher(store, { maxRows: 1_000_000, maxDelayMs: 60_000 });
    b.add(source(), [event(0)], position(100), 1, 0);
    await b.stop(Date.now() + 5_000);
    assert.equal(store.batches.length, 1);

    const down = new ScriptedStore();
    down.failures = Number.MAX_SAFE_INTEGER;
    const d = new Batcher(down, { maxRows: 1_000_000, maxDelayMs: 60_000, retryBaseMs: 20, retryCapMs: 50 });
    d.add(source(), [event(0)], position(100), 1, 0);
    const started = Date.now();
    await d.stop(Date.now() + 300);
    assert.equal(down.batches.length, 0);
    assert.ok(Date.now() - started < 5_000, 'stop returned although the store never came back');
  });

  test('a position without events (a new file) is committed too', async () => {
    const store = new ScriptedStore();
    const b = new Batcher(store, { maxDelayMs: 10 });
    b.add(source(), [], position(0), 1, 0);
    await b.flush();
    assert.deepEqual(store.batches[0]!.positions, [position(0)]);
    assert.equal(store.batches[0]!.items.length, 0);
    await b.stop(Date.now() + 1000);
  });
});

describe('Batcher under a slow store', () => {
  test('what queues up during a slow commit is cut into batches of at most maxRows, each with the positions of exactly its events', async () => {
    const store = new ScriptedStore();
    let open!: () => void;
    store.gate = new Promise((r) => {
      open = r;
    });
    const b = new Batcher(store, { maxRows: 10, maxDelayMs: 1, budgetBytes: 1 << 30, targetBudgetBytes: 1 << 30 });
    b.add(source(), [event(0)], position(100), 1, 0);
    await new Promise((r) => setTimeout(r, 20)); // the first commit is now waiting at the gate
    for (let i = 1; i <= 45; i++) b.add(source(i % 2 === 0 ? 't1' : 't2'), [event(i * 100)], position((i + 1) * 100, i % 2 === 0 ? 't1' : 't2'), 1, 0);
    open();
    await b.flush();
    const sizes = store.batches.map((x) => x.items.length);
    assert.deepEqual(sizes, [1, 10, 10, 10, 10, 5]);
    for (const batch of store.batches) {
      for (const p of batch.positions) {
        const last = batch.items.filter((it) => it.source.target === p.target).at(-1)!;
        assert.equal(p.offset, last.event.end, `the ${p.target} position is the end of its last event in the batch`);
      }
    }
    await b.stop(Date.now() + 1000);
  });
});

/** A store whose commits each wait until the test lets them go, recording what is in flight. */
class HeldStore implements BatchCommitter {
  readonly committed: StoreBatch[] = [];
  readonly inFlight = new Set<StoreBatch>();
  /** Streams (target/instance) of two batches in flight at once: must stay empty. */
  readonly overlaps: string[] = [];
  mostInFlight = 0;
  private readonly waiting: Array<() => void> = [];
  async commit(batch: StoreBatch): Promise<CommitResult> {
    const keys = new Set(batch.positions.map((p) => `${p.target}/${p.instance}`));
    for (const other of this.inFlight)
      for (const p of other.positions) if (keys.has(`${p.target}/${p.instance}`)) this.overlaps.push(`${p.target}/${p.instance}`);
    this.inFlight.add(batch);
    this.mostInFlight = Math.max(this.mostInFlight, this.inFlight.size);
    await new Promise<void>((r) => this.waiting.push(r));
    this.inFlight.delete(batch);
    this.committed.push(batch);
    return { rows: { other_events: batch.items.length }, quarantined: 0, fenced: [], copyMs: 0, bytes: 0 };
  }
  get held(): number {
    return this.waiting.length;
  }
  /** Lets the oldest waiting commit finish. */
  releaseOne(): void {
    this.waiting.shift()?.();
  }
}

describe('Batcher with lanes (parallel commits)', () => {
  test('batches of different streams commit side by side; a stream never has two in flight, and its batches commit in order', async () => {
    const store = new HeldStore();
    const streams = ['a', 'b', 'c', 'd', 'e', 'f'];
    const b = new Batcher(store, { maxRows: 4, maxDelayMs: 1, lanes: 3, budgetBytes: 1 << 30, targetBudgetBytes: 1 << 30 });
    const rounds = 20;
    for (let i = 0; i < rounds; i++) {
      for (const s of streams) b.add(source(s), [event(i * 100)], position((i + 1) * 100, s), 1, 0);
    }
    const flushed = b.flush();
    await until(() => store.held === 3, 'three commits in flight');
    assert.equal(store.mostInFlight, 3);
    // Let them finish one at a time, oldest first, until everything is committed.
    let done = false;
    void flushed.then(() => {
      done = true;
    });
    while (!done) {
      store.releaseOne();
      await new Promise((r) => setTimeout(r, 1));
    }
    assert.deepEqual(store.overlaps, [], 'no stream in two batches in flight at once');
    assert.ok(store.mostInFlight <= 3, 'never more than the lanes');
    for (const s of streams) {
      const offsets = store.committed.flatMap((x) => x.items.filter((it) => it.source.target === s).map((it) => it.event.offset));
      assert.deepEqual(
        offsets,
        Array.from({ length: rounds }, (_, i) => i * 100),
        `${s}: every event once, in order`,
      );
      const positions = store.committed.flatMap((x) => x.positions.filter((p) => p.target === s).map((p) => p.offset));
      assert.deepEqual(
        positions,
        [...positions].sort((x, y) => x - y),
        `${s}: positions move forward only`,
      );
      assert.equal(positions.at(-1), rounds * 100);
    }
    await b.stop(Date.now() + 1000);
  });

  test('one lane: one batch in flight at a time (the behaviour of a single store connection)', async () => {
    const store = new HeldStore();
    const b = new Batcher(store, { maxRows: 1, maxDelayMs: 1 });
    for (const s of ['a', 'b', 'c']) b.add(source(s), [event(0)], position(100, s), 1, 0);
    const flushed = b.flush();
    let done = false;
    void flushed.then(() => {
      done = true;
    });
    while (!done) {
      await new Promise((r) => setTimeout(r, 5));
      store.releaseOne();
    }
    assert.equal(store.mostInFlight, 1);
    await b.stop(Date.now() + 1000);
  });

  test('flush() waits for what was added before it, not for streams that keep handing over', async () => {
    // Each commit takes a few ms and the busy stream hands over every ms: its lane always has
    // something pending or committing.
    const store = new ScriptedStore();
    const slow = {
      commit: async (batch: StoreBatch): Promise<CommitResult> => {
        await new Promise((r) => setTimeout(r, 5));
        return store.commit(batch);
      },
    };
    const b = new Batcher(slow, { maxRows: 1_000, maxDelayMs: 1, lanes: 2 });
    let producing = true;
    let i = 0;
    const busy = (async (): Promise<void> => {
      for (; producing; i++) {
        b.add(source('a'), [event(i * 100)], position((i + 1) * 100, 'a'), 1, 0);
        await new Promise((r) => setTimeout(r, 1));
      }
    })();
    await until(() => store.batches.length > 2, 'a few commits of the busy stream');
    b.add(source('b'), [event(0)], position(100, 'b'), 1, 0);
    await b.flush();
    assert.ok(
      store.batches.some((x) => x.positions.some((p) => p.target === 'b' && p.offset === 100)),
      'b was committed',
    );
    assert.ok(producing, 'the busy stream never paused');
    producing = false;
    await busy;
    await b.stop(Date.now() + 1000);
  });

  test('lanes must be a whole number of at least one', () => {
    assert.throws(
      () => new Batcher(new ScriptedStore(), { lanes: 0 }),
      (e: unknown) => e instanceof PglogError && e.code === 'CONFIG_INVALID',
    );
  });
});
