/**
 * The segment loops' wait after a round with data (LogFollowerOptions.dataIntervalMs), on real
 * files through a real shell (LocalShell), for both loops: a log written steadily is read once
 * per data interval, not once per poll, and the first bytes after a silence still come within
 * a poll. The intervals are far apart (50 ms against 600 ms), so the counts differ by several
 * times, not by a margin a slow machine could cross. The builtins loop also lets a log written
 * in small pieces wait longer between rounds (dataIntervalMaxMs), and is checked to.
 */
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { sleep } from '@pglog/test-support/wait.ts';

import { LogFollower } from '../../src/follow/follower.ts';
import type { IdleWait } from '../../src/follow/segment-script.ts';
import { fastFollowerOptions } from '../helpers/fast-follower.ts';
import { LocalShell } from '../helpers/local-shell.ts';

const POLL_MS = 50;
const DATA_INTERVAL_MS = 600;
const WRITING_MS = 2_400;
const root = mkdtempSync(join(tmpdir(), 'pglog-data-interval-'));
after(() => rmSync(root, { recursive: true, force: true }));

interface Reads {
  /** Data items while a line was appended every 20 ms. */
  whileWriting: number;
  /** From appending one line after a silence to its data item. */
  afterSilenceMs: number;
}

async function reads(idleWait: IdleWait, dataIntervalMs: number, dataIntervalMaxMs = dataIntervalMs): Promise<Reads> {
  const data = join(root, `${idleWait}-${dataIntervalMs}-${dataIntervalMaxMs}`);
  const log = join(data, 'log');
  mkdirSync(log, { recursive: true });
  writeFileSync(join(data, 'current_logfiles'), 'stderr log/postgresql.log\n');
  const file = join(log, 'postgresql.log');
  writeFileSync(file, 'first line\n');
  const options = fastFollowerOptions({ data, log }, { idleWait, pollIntervalMs: POLL_MS, dataIntervalMs, dataIntervalMaxMs, idleMs: 2_000 });
  const follower = new LogFollower(new LocalShell(), options);
  const controller = new AbortController();
  const arrivals: number[] = [];
  let failure: unknown = null;
  const done = (async () => {
    try {
      for await (const item of follower.follow(null, controller.signal)) if (item.kind === 'data') arrivals.push(Date.now());
    } catch (e) {
      failure = e;
    }
  })();
  const waitForArrival = async (count: number): Promise<void> => {
    for (const deadline = Date.now() + 30_000; arrivals.length < count; await sleep(5)) {
      if (failure !== null) throw failure as Error;
      if (Date.now() > deadline) throw new Error(`${idleWait}: no data read within 30 s`);
    }
  };
  try {
    await waitForArrival(1);
    // Quiet for longer than any wait, so the loop is in its idle rounds.
    await sleep(1_500);
    const before = arrivals.length;
    for (const end = Date.now() + WRITING_MS; Date.now() < end; await sleep(20)) appendFileSync(file, 'a line written steadily\n');
    // A silence longer than the longest wait after data: the loop is in its idle rounds again.
    await sleep(Math.max(1_500, dataIntervalMaxMs + 500));
    const whileWriting = arrivals.length - before;
    const appended = Date.now();
    appendFileSync(file, 'one line after a silence\n');
    await waitForArrival(before + whileWriting + 1);
    return { whileWriting, afterSilenceMs: arrivals.at(-1)! - appended };
  } finally {
    controller.abort();
    await done;
  }
}

for (const idleWait of ['builtins', 'polling'] as const) {
  describe(`the ${idleWait} segment loop's wait after data`, () => {
    it('reads a steadily written log once per data interval, and the first bytes after a silence within a poll', async () => {
      const slow = await reads(idleWait, DATA_INTERVAL_MS);
      const fast = await reads(idleWait, POLL_MS);
      // 2.4 s of writing: about 4 reads with the long wait, dozens with the short one.
      assert.ok(slow.whileWriting <= WRITING_MS / DATA_INTERVAL_MS + 3, `${slow.whileWriting} reads in ${WRITING_MS} ms with a ${DATA_INTERVAL_MS} ms wait`);
      assert.ok(
        fast.whileWriting >= 3 * slow.whileWriting,
        `${fast.whileWriting} reads with a ${POLL_MS} ms wait, ${slow.whileWriting} with ${DATA_INTERVAL_MS} ms`,
      );
      assert.ok(slow.afterSilenceMs < DATA_INTERVAL_MS, `the first line after a silence took ${slow.afterSilenceMs} ms`);
    });
  });
}

describe("the builtins loop's longer wait after small rounds (dataIntervalMaxMs)", () => {
  it('reads a log written in small pieces in fewer rounds, and the first bytes after a silence without a data wait', async () => {
    // Every round of this log is small (a line every 20 ms): the wait doubles from 50 ms up to 1600 ms.
    const growing = await reads('builtins', POLL_MS, 1_600);
    const fixed = await reads('builtins', POLL_MS);
    assert.ok(fixed.whileWriting >= 3 * growing.whileWriting, `${growing.whileWriting} reads growing to 1600 ms, ${fixed.whileWriting} at 50 ms`);
    // After the silence the loop polls again: the line is not held for a longest wait after data.
    assert.ok(growing.afterSilenceMs < 1_600, `the first line after a silence took ${growing.afterSilenceMs} ms`);
  });
});
