/**
 * A long silence in the builtin loop (ADR 0014's amendment of issue 46): once the waits have
 * grown and the heartbeats no longer take the size with `stat`, a file truncated in place to
 * empty or to a shorter size is still reported, and read again from 0, through a real shell on
 * real files. Exactness of what is read: the file's bytes from the announced offset.
 */
import assert from 'node:assert/strict';
import { appendFileSync, closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { sleep } from '@pglog/test-support/wait.ts';

import { LogFollower } from '../../src/follow/follower.ts';
import { fastFollowerOptions } from '../helpers/fast-follower.ts';
import { LocalShell } from '../helpers/local-shell.ts';

/** Truncates `path` in place (same inode) to `size` bytes. */
function truncateTo(path: string, size: number): void {
  const fd = openSync(path, 'r+');
  ftruncateSync(fd, size);
  closeSync(fd);
}

const line = (i: number): string => `2024-01-01 00:00:00.${String(i).padStart(6, '0')} UTC [1] LOG:  line ${i}\n`;

test('after a long silence (waits grown, heartbeats without stat), truncation to empty or to a shorter size is still reported', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-silence-'));
  const dirs = { data: dir, log: join(dir, 'log') };
  mkdirSync(dirs.log);
  const live = join(dirs.log, 'postgresql.log');
  writeFileSync(live, Array.from({ length: 30 }, (_, i) => line(i)).join(''));
  const files: Array<{ offset: number; chunks: Buffer[] }> = [];
  let gaps = 0;
  const controller = new AbortController();
  const follower = new LogFollower(new LocalShell(), fastFollowerOptions(dirs));
  const done = (async () => {
    for await (const item of follower.follow(null, controller.signal)) {
      if (item.kind === 'file') files.push({ offset: item.offset, chunks: [] });
      else if (item.kind === 'data') files.at(-1)!.chunks.push(Buffer.from(item.chunk));
      else if (item.kind === 'gap') gaps++;
    }
  })();
  const bytes = (k: number): number => files[k]?.chunks.reduce((n, c) => n + c.length, 0) ?? -1;
  const until = async (what: string, ok: () => boolean): Promise<void> => {
    for (const deadline = Date.now() + 30_000; !ok(); await sleep(20)) if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
  };
  try {
    await until('the whole file', () => bytes(0) === readFileSync(live).length);
    // Long enough for the waits to grow and the heartbeats to stop taking the size (fast options: heartbeat 400 ms, size every 1.6 s).
    await sleep(1200);
    truncateTo(live, 0);
    await sleep(1000);
    appendFileSync(live, line(100) + line(101));
    await until('the file read again from 0 after being emptied', () => files.length === 2 && bytes(1) === readFileSync(live).length);
    await sleep(1200);
    // Shorter, not empty: only a size check (stat) tells; nothing more is written meanwhile.
    truncateTo(live, 40);
    await until('the file read again after being shortened', () => files.length === 3 && bytes(2) === 40);
    assert.equal(Buffer.concat(files[2]!.chunks).toString(), readFileSync(live, 'utf8'));
  } finally {
    controller.abort();
    await done;
    rmSync(dir, { recursive: true, force: true });
  }
  assert.deepEqual(
    files.map((f) => f.offset),
    [0, 0, 0],
  );
  assert.equal(Buffer.concat(files[1]!.chunks).toString(), line(100) + line(101));
  assert.equal(gaps, 2);
});

test('an idle silence longer than the heartbeat is still noticed: the heartbeats in it do not start it again', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-silence-'));
  const dirs = { data: dir, log: join(dir, 'log') };
  mkdirSync(dirs.log);
  writeFileSync(join(dirs.log, 'postgresql.log'), line(1));
  // Heartbeats every 400 ms, the idle silence 1.2 s: three heartbeats fall within it.
  const follower = new LogFollower(new LocalShell(), fastFollowerOptions(dirs, { idleMs: 1200 }));
  const controller = new AbortController();
  const kinds: string[] = [];
  let idleAt = 0;
  let dataAt = 0;
  try {
    for await (const item of follower.follow(null, controller.signal)) {
      kinds.push(item.kind);
      if (item.kind === 'data') dataAt = performance.now();
      if (item.kind === 'idle') {
        idleAt = performance.now();
        break;
      }
      if (dataAt > 0 && performance.now() - dataAt > 30_000) assert.fail(`no idle item within 30 s of the data: ${kinds.join(',')}`);
    }
  } finally {
    controller.abort();
    rmSync(dir, { recursive: true, force: true });
  }
  assert.ok(kinds.includes('size'), `heartbeats came meanwhile: ${kinds.join(',')}`);
  assert.ok(idleAt - dataAt >= 1000, `idle ${Math.round(idleAt - dataAt)} ms after the data`);
});
