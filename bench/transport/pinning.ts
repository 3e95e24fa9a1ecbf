/**
 * CPU placement for the transport and ingest benchmarks' `--pin-collector` (issue 15 points 2 and 6): the
 * collector's own process (every thread: main, libuv's pool, V8's helpers) alone on one core,
 * and everything else, its sidecar and the ssh clients the sidecar starts included, on the
 * others. The benchmark itself runs under `taskset -c <others>`, so the store, the servers and
 * the log writer start there; the collector is moved right after its spawn, and its
 * descendants (which a fork would put on the collector's core) are moved back every half
 * second, before they do measurable work.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

import { descendants } from '@pglog/test-support/process-tree.ts';

const run = promisify(execFile);

/** `taskset -a -p -c CPUS PID`: every thread of the process. */
async function place(pid: number, cpus: string): Promise<void> {
  await run('taskset', ['-a', '-p', '-c', cpus, String(pid)]);
}

/** The CPUs this process may run on (its own affinity, as `taskset -c` gave it). */
export async function ownCpus(): Promise<string> {
  const { stdout } = await run('taskset', ['-c', '-p', String(process.pid)]);
  // "pid 123's current affinity list: 1" (the text after the last colon).
  const list = stdout.trim().split(':').at(-1)?.trim();
  if (list === undefined || list === '') throw new Error(`taskset -p: unexpected output ${JSON.stringify(stdout)}`);
  return list;
}

/**
 * `--pin-collector CORE`: the collector alone on CORE, everything else (store, servers, writer,
 * a sidecar and its ssh clients) on the CPUs this process was started with, which must not
 * include CORE: run as `taskset -c 1 node bench/....ts --pin-collector 0`. Undefined without it.
 */
export async function pinningOption(option: string | undefined): Promise<{ core: number; others: string } | undefined> {
  if (option === undefined) return undefined;
  const core = Number(option);
  const others = await ownCpus();
  if (
    !Number.isInteger(core) ||
    core < 0 ||
    others.split(',').some((part) => {
      const [a, b] = part.split('-').map(Number);
      return core >= a! && core <= (b ?? a)!;
    })
  ) {
    throw new Error(`--pin-collector ${option}: a core this process does not run on (it runs on ${others}; start it with taskset -c)`);
  }
  return { core, others };
}

/**
 * Puts `collectorPid` on `core` and keeps its descendants on `others` until the returned stop
 * function is called.
 */
export async function pinCollector(collectorPid: number, core: number, others: string): Promise<() => void> {
  await place(collectorPid, String(core));
  const moved = new Set<number>();
  let busy = false;
  const tick = async (): Promise<void> => {
    for (const pid of descendants(collectorPid)) {
      if (pid === collectorPid || moved.has(pid)) continue;
      try {
        await place(pid, others);
        moved.add(pid);
      } catch {
        /* gone already */
      }
    }
  };
  await tick();
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    tick()
      .catch(() => undefined)
      .finally(() => {
        busy = false;
      });
  }, 500);
  timer.unref();
  return () => clearInterval(timer);
}
