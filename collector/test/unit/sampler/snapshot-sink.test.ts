// SnapshotSink, which groups the snapshots of all instances into one store write, with a
// scripted writeGroup: writes within the delay form one group, a full group goes at once, groups
// are written one at a time in order, each write settles with its own outcome, flush() drains.
import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import { PglogError } from '@pglog/common/errors.ts';

import { SnapshotSink } from '../../../src/sampler/snapshot-sink.ts';
import type { SnapshotFailure } from '../../../src/snapshot/types.ts';

const run = (target: string): SnapshotFailure => ({
  target,
  instance: 'main',
  kind: 'activity',
  ts: new Date(0),
  durationMs: 1,
  code: 'SQL_TIMEOUT',
  message: 'x',
});

describe('SnapshotSink', () => {
  test('snapshots written within the delay go to the store as one group; each write settles with its own outcome', async () => {
    const groups: string[][] = [];
    const sink = new SnapshotSink({
      delayMs: 30,
      writeGroup: (list) => {
        groups.push(list.map((s) => s.target));
        return Promise.resolve(list.map((s) => (s.target === 'bad' ? new PglogError('STORE_REJECTED', 'refused') : null)));
      },
    });
    const outcomes = await Promise.allSettled([sink.write(run('a')), sink.write(run('bad')), sink.write(run('c'))]);
    assert.deepEqual(groups, [['a', 'bad', 'c']]);
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.match(String((outcomes[1] as PromiseRejectedResult).reason), /refused/);
  });

  test('a full group is written at once; groups are written one at a time, in order', async () => {
    const groups: string[][] = [];
    let inFlight = 0;
    const sink = new SnapshotSink({
      delayMs: 10_000,
      maxGroup: 2,
      writeGroup: async (list) => {
        assert.equal(inFlight++, 0, 'one group at a time');
        await new Promise((r) => setTimeout(r, 20));
        inFlight--;
        groups.push(list.map((s) => s.target));
        return list.map(() => null);
      },
    });
    const started = Date.now();
    await Promise.all(['a', 'b', 'c', 'd'].map((t) => sink.write(run(t))));
    assert.ok(Date.now() - started < 5_000, 'did not wait for the delay');
    assert.deepEqual(groups, [
      ['a', 'b'],
      ['c', 'd'],
    ]);
  });

  test('flush() writes what is queued now; a failing store rejects every write of the group', async () => {
    const sink = new SnapshotSink({ delayMs: 60_000, writeGroup: () => Promise.reject(new PglogError('STORE_UNAVAILABLE', 'store down')) });
    const pending = Promise.allSettled([sink.write(run('a')), sink.write(run('b'))]);
    await sink.flush();
    const outcomes = await pending;
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['rejected', 'rejected'],
    );
    await sink.flush(); // nothing queued: resolves
  });
});
