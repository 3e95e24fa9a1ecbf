// Exact counts of the processes a running process tree starts, and of its CPU, for tests and
// benchmarks of what the follower's remote loops cost a server. `strace -f -c` attached to the
// tree's root counts every successful clone/fork/vfork of the root and of every descendant it
// starts meanwhile (a subshell's fork counts, as it costs the server a process too); it is
// exact whatever else runs on the machine, which the system-wide fork counter (/proc/stat
// `processes`) is not. Attaching needs ptrace rights over the process (root, or the same user
// without Yama restrictions).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const FORK_SYSCALLS = new Set(['clone', 'clone3', 'fork', 'vfork']);

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
  /** Stops counting; resolves with the process starts seen since attaching. */
  stop(): Promise<number>;
}

/** Parses `strace -c` summary rows: successful clone/fork/vfork calls. */
export function parseForkCount(summary: string): number {
  let starts = 0;
  for (const line of summary.split('\n')) {
    const cols = line.trim().split(/\s+/);
    const name = cols.at(-1) ?? '';
    if (!FORK_SYSCALLS.has(name) || cols.length < 5) continue;
    // % time, seconds, usecs/call, calls, [errors,] syscall
    const calls = Number(cols[3]);
    const errors = cols.length >= 6 ? Number(cols[4]) : 0;
    if (Number.isFinite(calls) && Number.isFinite(errors)) starts += calls - errors;
  }
  return starts;
}

/** Attaches `strace -f -c` to `pid` and resolves once it traces it (TracerPid set). */
export async function countProcessStarts(pid: number): Promise<ProcessStartCounter> {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-strace-'));
  const out = join(dir, 'summary');
  const child: ChildProcess = spawn('strace', ['-f', '-c', '-qq', '-e', 'trace=clone,clone3,fork,vfork', '-o', out, '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (b: Buffer) => { stderr += b.toString('utf8'); });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 20_000;
  for (;;) {
    let tracer = 0;
    try {
      tracer = Number(/^TracerPid:\s*(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    } catch { /* gone */ }
    if (tracer !== 0) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`strace could not attach to ${pid}: ${stderr.trim() || 'timed out'}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return {
    async stop(): Promise<number> {
      child.kill('SIGINT'); // strace detaches and writes its summary
      await exited;
      try {
        return parseForkCount(readFileSync(out, 'utf8'));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
