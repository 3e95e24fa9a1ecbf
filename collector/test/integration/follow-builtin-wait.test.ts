/**
 * The builtin-wait segment loop (segment-script-bash.ts, ADR 0014) on real files through a
 * real shell (LocalShell: /bin/sh, which execs bash): up to BUILTIN_READ_BYTES of every burst go
 * through bash's `read` and `printf`, so every byte value must come out as it went in, whatever
 * starts a burst (NUL, newline, space, backslash, bytes above 0x7f) or lies within it, in a
 * burst that `read` copies alone or with `cat`, and the bytes must be the same the polling
 * loop sends.
 */
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { sleep } from '@pglog/test-support/wait.ts';

import { LogFollower } from '../../src/follow/follower.ts';
import type { IdleWait } from '../../src/follow/segment-script.ts';
import { BUILTIN_READ_BYTES } from '../../src/follow/segment-script-bash.ts';
import { fastFollowerOptions } from '../helpers/fast-follower.ts';
import { LocalShell } from '../helpers/local-shell.ts';
import { processesWithCommandLine } from '../helpers/process-starts.ts';

const WAIT_MS = 30_000;
// The remote shell's locale: a UTF-8 one, where `read -n 1` would take a character, not a byte.
process.env.LC_ALL = 'C.UTF-8';
const root = mkdtempSync(join(tmpdir(), 'pglog-builtin-wait-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** Bursts that each start with a byte `read` treats specially, then every byte value. */
function bursts(): Buffer[] {
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  const starts = [0x00, 0x0a, 0x20, 0x5c, 0x09, 0x80, 0xc3, 0xff, 0x00];
  return (
    starts
      .map((first, i) => Buffer.concat([Buffer.from([first]), i % 2 === 0 ? all : all.reverse(), Buffer.from([first])]))
      // single bytes, each alone in its round; 0xc3 starts a UTF-8 character that never ends
      .concat([0x00, 0xff, 0x0a, 0x20, 0xc3, 0xa9].map((b) => Buffer.from([b])))
      // Rounds copied by `read` alone, by `read` and `cat`, and at the edge between them:
      // every byte value at random (NULs end a `read` early), and UTF-8 text split anywhere.
      .concat(
        [BUILTIN_READ_BYTES - 1, BUILTIN_READ_BYTES, BUILTIN_READ_BYTES + 1, 3 * BUILTIN_READ_BYTES].map((n, i) =>
          i % 2 === 0 ? randomBytes(n, i + 1) : utf8Text(n),
        ),
      )
  );
}

/** `n` bytes of every value, from a seeded generator (the same bytes each run). */
function randomBytes(n: number, seed: number): Buffer<ArrayBuffer> {
  const out = Buffer.alloc(n);
  let x = seed * 2654435761;
  for (let i = 0; i < n; i++) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** `n` bytes of log-like text with two- and three-byte UTF-8 characters, cut wherever `n` falls. */
function utf8Text(n: number): Buffer<ArrayBuffer> {
  const line = Buffer.from("2026-11-27 12:00:00.000 UTC [42] ünïcödé LOG:  statement: SELECT '€'\n");
  return Buffer.alloc(n, line);
}

async function follow(idleWait: IdleWait): Promise<{ received: Buffer; content: Buffer; comm: string }> {
  const data = join(root, idleWait);
  const log = join(data, 'log');
  mkdirSync(log, { recursive: true });
  writeFileSync(join(data, 'current_logfiles'), 'stderr log/postgresql.log\n');
  const file = join(log, 'postgresql.log');
  writeFileSync(file, 'first line\n');
  const follower = new LogFollower(new LocalShell(), fastFollowerOptions({ data, log }, { idleWait }));
  const controller = new AbortController();
  const chunks: Buffer[] = [];
  let failure: unknown = null;
  const done = (async () => {
    try {
      for await (const item of follower.follow(null, controller.signal)) if (item.kind === 'data') chunks.push(item.chunk);
    } catch (e) {
      failure = e;
    }
  })();
  const caughtUp = async (): Promise<void> => {
    const size = readFileSync(file).length;
    const deadline = Date.now() + WAIT_MS;
    while (Buffer.concat(chunks).length < size) {
      if (failure !== null) throw failure as Error;
      if (Date.now() > deadline) throw new Error(`${idleWait}: ${Buffer.concat(chunks).length} of ${size} bytes`);
      await sleep(10);
    }
  };
  try {
    await caughtUp();
    const [pid] = processesWithCommandLine(data);
    const comm = pid === undefined ? '' : readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    for (const burst of bursts()) {
      appendFileSync(file, burst);
      await caughtUp(); // each burst after a silence: its first byte is the one `read` finds
      await sleep(120);
    }
    return { received: Buffer.concat(chunks), content: readFileSync(file), comm };
  } finally {
    controller.abort();
    await done;
  }
}

describe('the builtin-wait segment loop', () => {
  it('sends every byte value exactly, whatever starts a burst, and the same bytes as the polling loop', async () => {
    const builtins = await follow('builtins');
    assert.equal(builtins.comm, 'bash', 'the segment runs under bash');
    assert.ok(builtins.received.equals(builtins.content), 'builtins: received bytes differ from the file');
    const polling = await follow('polling');
    assert.notEqual(polling.comm, 'bash');
    assert.ok(polling.received.equals(polling.content), 'polling: received bytes differ from the file');
    assert.ok(builtins.received.equals(polling.received));
  });
});
