// Signals to a process and all of its descendants, found through /proc (Linux). A process
// group is not enough for servers like sshd: each connection's process calls setsid(), and so
// does each session, so they leave the listener's group but stay its descendants.
import { readdirSync, readFileSync } from 'node:fs';

/** Every live pid, from the entries of /proc. */
function livePids(): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number);
}

/** Parent pid of every live process, from /proc/<pid>/stat. */
function parentsByPid(): Map<number, number> {
  const parents = new Map<number, number>();
  for (const pid of livePids()) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    parents.set(pid, Number(fields[1]));
  }
  return parents;
}

/** `root` and every live descendant of it (root first). */
export function descendants(root: number): number[] {
  return descendantsOfAll([root]);
}

/** Each root and every live descendant of them, from one look at /proc (a fleet's thousands of servers). */
export function descendantsOfAll(roots: readonly number[]): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of parentsByPid()) {
    const list = children.get(ppid);
    if (list === undefined) children.set(ppid, [pid]);
    else list.push(pid);
  }
  const found = [...roots];
  for (let i = 0; i < found.length; i++) {
    for (const child of children.get(found[i] as number) ?? []) found.push(child);
  }
  return found;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}

/**
 * Stops `root` and its descendants with SIGSTOP, repeating until no new process appears (one
 * may fork between listing and stopping); returns the stopped pids.
 */
export function stopTree(root: number): number[] {
  return stopTrees([root]);
}

/** stopTree over several roots at once, with one look at /proc a round. */
export function stopTrees(roots: readonly number[]): number[] {
  const stopped = new Set<number>();
  for (let round = 0; round < 100; round++) {
    const pids = descendantsOfAll(roots).filter((pid) => !stopped.has(pid));
    if (pids.length === 0) break;
    for (const pid of pids) {
      signal(pid, 'SIGSTOP');
      stopped.add(pid);
    }
  }
  return [...stopped];
}

/** SIGCONT to `root` and its descendants. */
export function continueTree(root: number): void {
  for (const pid of descendants(root)) signal(pid, 'SIGCONT');
}

/** Kills `root` and every descendant: stops them all first so none can fork a survivor. */
export function killTree(root: number): void {
  killTrees([root]);
}

/** Kills every root and its descendants, as killTree does one, with one look at /proc a round. */
export function killTrees(roots: readonly number[]): void {
  for (const pid of stopTrees(roots)) signal(pid, 'SIGKILL');
}

/** The arguments of a live process (empty once it has exited). */
export function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      .split('\0')
      .filter((a) => a !== '');
  } catch {
    return [];
  }
}

/** SIGKILL to every live process whose arguments (cmdline) `match`. */
export function killMatching(match: (args: readonly string[]) => boolean): void {
  for (const pid of livePids()) if (match(cmdline(pid))) signal(pid, 'SIGKILL');
}

/** Live pids with a cgroup whose path holds `part` (/proc/<pid>/cgroup). */
function pidsInCgroup(part: string): number[] {
  return livePids().filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(part);
    } catch {
      return false; // exited while we looked
    }
  });
}

/** Live processes with a cgroup whose path holds `part`, as `pid: command line`. */
export function processesInCgroup(part: string): string[] {
  return pidsInCgroup(part).map((pid) => `${pid}: ${cmdline(pid).join(' ')}`);
}

/**
 * SIGKILL to every live process with a cgroup whose path holds `part`; none when this process is
 * one of them (the tests run inside such a cgroup, e.g. in a pod, so `part` names them too).
 */
export function killInCgroup(part: string): void {
  const pids = pidsInCgroup(part);
  if (pids.includes(process.pid)) return;
  for (const pid of pids) signal(pid, 'SIGKILL');
}
