/**
 * CPU and memory of processes and of the machine, from Linux /proc (no sampling tools, no
 * permissions beyond reading /proc).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

import { descendants } from '@pglog/test-support/process-tree.ts';

export const CLK_TCK = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * A /proc/PID/stat or /proc/PID/task/TID/stat line: the command (or thread) name, which may
 * hold spaces and parentheses, the parent pid, and CPU seconds: the process's (or thread's)
 * own user and kernel time, and what its reaped children used (cutime + cstime).
 */
export interface ProcStat {
  name: string;
  ppid: number;
  user: number;
  system: number;
  reaped: number;
}

export function parseStat(text: string): ProcStat {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) throw new Error(`not a /proc stat line: '${text.slice(0, 80)}'`);
  // After the name: state ppid ... utime (the 12th) stime cutime cstime (fields 14 to 17 of stat).
  const f = text.slice(close + 2).split(' ');
  return {
    name: text.slice(open + 1, close),
    ppid: Number(f[1]),
    user: Number(f[11]) / CLK_TCK,
    system: Number(f[12]) / CLK_TCK,
    reaped: (Number(f[13]) + Number(f[14])) / CLK_TCK,
  };
}

/** The stat file at `path` parsed; null when its process or thread is gone. */
export function readStat(path: string): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return null;
  }
  return parseStat(text);
}

/** User + system CPU seconds of one process (its own threads, not its children); null when gone. */
export function processCpuSeconds(pid: number): number | null {
  const s = readStat(`/proc/${pid}/stat`);
  return s === null ? null : s.user + s.system;
}

/**
 * Which of the collector's threads a thread name is: Node names its main thread `MainThread`,
 * V8's platform workers (concurrent marking, sweeping, parallel scavenging, background
 * compilation) `V8Worker`, libuv's threadpool `libuv-worker`; anything else is `other`.
 */
export type ThreadGroup = 'main' | 'v8 workers' | 'libuv workers' | 'other';
export const THREAD_GROUPS: readonly ThreadGroup[] = ['main', 'v8 workers', 'libuv workers', 'other'];

export function threadGroup(name: string): ThreadGroup {
  if (name === 'MainThread') return 'main';
  if (name === 'V8Worker') return 'v8 workers';
  if (name === 'libuv-worker') return 'libuv workers';
  return 'other';
}

/** CPU seconds of one process's threads by group, user and kernel apart (threads that exited are in none). */
export type ThreadCpu = Record<ThreadGroup, { user: number; system: number }>;

export function threadCpu(pid: number): ThreadCpu {
  const out = Object.fromEntries(THREAD_GROUPS.map((g) => [g, { user: 0, system: 0 }])) as ThreadCpu;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    const t = readStat(`/proc/${pid}/task/${tid}/stat`);
    if (t === null) continue; // exited while we looked
    const g = out[threadGroup(t.name)];
    g.user += t.user;
    g.system += t.system;
  }
  return out;
}

/** `after` minus `before`, per group (a group's threads that exited in between take their CPU with them). */
export function threadCpuDelta(before: ThreadCpu, after: ThreadCpu): ThreadCpu {
  return Object.fromEntries(
    THREAD_GROUPS.map((g) => [g, { user: Math.max(0, after[g].user - before[g].user), system: Math.max(0, after[g].system - before[g].system) }]),
  ) as ThreadCpu;
}

/**
 * Peak (VmHWM) and current (VmRSS) resident memory of one process, bytes, and of the current:
 * anonymous pages (heap, Buffers, stacks) and file-backed ones (for a collector mostly the Node
 * binary's own code and data, clean pages shared with every other process running it); null
 * when gone.
 */
export function processMemory(pid: number): { peakRss: number; rss: number; rssAnon: number; rssFile: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { peakRss: kb('VmHWM'), rss: kb('VmRSS'), rssAnon: kb('RssAnon'), rssFile: kb('RssFile') };
}

/** CPU seconds of every live process whose command name is `comm`, keyed by pid. */
export function cpuByCommand(comm: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (commandName(pid) !== comm) continue;
    const s = processCpuSeconds(pid);
    if (s !== null) out.set(pid, s);
  }
  return out;
}

/** CPU seconds used between two `cpuByCommand` snapshots by the processes alive at the end. */
export function cpuDelta(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): number {
  let sum = 0;
  for (const [pid, s] of after) sum += s - (before.get(pid) ?? 0);
  return sum;
}

/** Machine-wide CPU time from /proc/stat, seconds summed over all cores. */
export function machineCpu(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user)
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = v;
  const busy = user + nice + system + irq + softirq + steal;
  return { busy: busy / CLK_TCK, total: (busy + idle + iowait) / CLK_TCK };
}

/** Processes created since boot (/proc/stat `processes`): its rate is the machine's fork rate. */
export function forksSinceBoot(): number {
  const m = /^processes (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'));
  return m === null ? NaN : Number(m[1]);
}

/** Pids of every live descendant of `root` whose command name is one of `comms`. */
export function descendantsNamed(root: number, comms: readonly string[]): number[] {
  return descendants(root).filter((pid) => pid !== root && comms.includes(commandName(pid)));
}

/** The command name (/proc/PID/comm) of `pid`; '' when it is gone. */
export function commandName(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return ''; // exited while we looked
  }
}
