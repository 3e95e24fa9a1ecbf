// One real node per machine at a time: its bridge, the bridge's address and kube-proxy's
// iptables chains belong to the machine, not to a test. Test files that start one (node --test
// may run several side by side) take this lock first and wait for each other. A lock whose
// holder is gone (killed, crashed) is taken over: its directory names the holder's pid.
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { onProcessExit } from './exit-cleanup.ts';
import { sleep } from './wait.ts';

function holderAlive(dir: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
  } catch {
    // Made but not yet named: alive unless that was long ago (a holder killed in between).
    try {
      return Date.now() - statSync(dir).mtimeMs < 10_000;
    } catch {
      return false;
    }
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Waits (up to `waitMs`) for the machine-wide lock `name`; resolves with its release. */
export async function acquireMachineLock(name: string, waitMs: number): Promise<() => void> {
  const dir = join(tmpdir(), `pglog-${name}.lock`);
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      let held = true;
      const release = (): void => {
        if (!held) return;
        held = false;
        forget();
        rmSync(dir, { recursive: true, force: true });
      };
      const forget = onProcessExit(release);
      return release;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    if (!holderAlive(dir)) {
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) {
      let holder = '?';
      try {
        holder = readFileSync(join(dir, 'pid'), 'utf8');
      } catch {
        /* just released */
      }
      throw new Error(`${name}: still held by pid ${holder} after ${waitMs / 1000} s (${dir})`);
    }
    await sleep(500);
  }
}
