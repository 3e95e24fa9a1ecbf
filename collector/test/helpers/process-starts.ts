// Exact counts of the processes a running process tree starts, and of its CPU, for tests and
// benchmarks of what the follower's remote loops cost a server. `perf stat` counts the kernel's
// task:task_newtask tracepoint in the tree's root and, inherited, in every descendant it
// starts meanwhile (a subshell's fork counts, as it costs the server a process too): exact
// whatever else runs on the machine, which the system-wide fork counter (/proc/stat
// `processes`) is not, and without slowing the loop down as ptrace (`strace -f`) does, which
// would lower the rate it measures. Needs perf (linux-perf) and root (or CAP_PERFMON).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Pids of live processes whose command line (argv joined by spaces) contains `needle`, topmost only (not their forked copies). */
export function processesWithCommandLine(needle: string): number[] {
  const found = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'latin1').replaceAll('\0', ' ');
      if (!cmdline.includes(needle)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      found.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // ended while we looked
    }
  }
  // A subshell ($(...)) is a fork with the same command line: keep the ones whose parent is not one.
  return [...found].filter(([, ppid]) => !found.has(ppid)).map(([pid]) => pid);
}

/** user + system CPU seconds of a process so far: its own and its ended children's (USER_HZ = 100 on Linux). */
export function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // utime, stime, cutime, cstime are fields 14..17 of stat (index 11..14 after the comm).
  const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  return ticks / 100;
}

export interface ProcessStartCounter {
  /** Stops counting: the process starts seen since attaching, and over how many seconds (perf's own clock). */
  stop(): Promise<{ starts: number; seconds: number }>;
}

/**
 * Parses `perf stat -I MS -x,` output: the sum of the intervals' counts and the end of the last
 * interval. A task-bound event runs only while its task does, so an interval in which the
 * task never ran is `<not counted>`: it started nothing then (its time still counts).
 */
export function parsePerfIntervals(text: string): { starts: number; seconds: number } {
  let starts = 0;
  let seconds = 0;
  let counted = 0;
  for (const line of text.split('\n')) {
    const cols = line.trim().split(',');
    if (cols.length < 4 || cols[3] !== 'task:task_newtask') continue;
    seconds = Math.max(seconds, Number(cols[0]));
    if (cols[1] === '<not counted>') continue;
    const count = Number(cols[1]);
    if (!Number.isFinite(count)) throw new Error(`perf could not count: ${line.trim()}`);
    starts += count;
    counted++;
  }
  if (counted === 0) throw new Error(`perf counted nothing: ${text.trim().slice(0, 500)}`);
  return { starts, seconds };
}

/** Starts `perf stat` on `pid` (inherited by its future children); resolves once its first interval is written. */
export async function countProcessStarts(pid: number): Promise<ProcessStartCounter> {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-perf-'));
  const out = join(dir, 'intervals');
  const child: ChildProcess = spawn('perf', ['stat', '-I', '250', '-x', ',', '-e', 'task:task_newtask', '-o', out, '-p', String(pid)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => {
    stderr += b.toString('utf8');
  });
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const deadline = Date.now() + 20_000;
  const intervals = (): string => {
    try {
      return readFileSync(out, 'utf8');
    } catch {
      return '';
    }
  };
  while (!intervals().includes('task:task_newtask')) {
    if (child.exitCode !== null || child.signalCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`perf stat could not count the process starts of ${pid}: ${stderr.trim() || 'no interval within 20 s'}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return {
    async stop(): Promise<{ starts: number; seconds: number }> {
      child.kill('SIGINT'); // perf writes the last, partial interval and exits
      await exited;
      try {
        return parsePerfIntervals(intervals());
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
