/**
 * Where the CPU went, from /proc: the collector process alone, its sshproxy sidecar (the
 * `pglog sshproxy` child, told apart by its command line), the sidecar's OpenSSH clients, and
 * the simulated servers' side (every sshd listener of the fleet with its sessions and the
 * follower's remote loops).
 *
 * A tree's CPU is the sum over its live processes of their own time plus the time of the
 * children they have already reaped (cutime/cstime): a process that ended inside a window is
 * counted through its parent, so the difference of two snapshots is the tree's CPU in between
 * as long as the tree's root lived through it.
 */
import { readFileSync } from 'node:fs';

import { cmdline, descendants } from '@pglog/test-support/process-tree.ts';

import { commandName, processCpuSeconds, readStat } from '../ingest/proc-stats.ts';

interface Stat {
  ppid: number;
  own: number;
  reaped: number;
}

function stat(pid: number): Stat | null {
  const s = readStat(`/proc/${pid}/stat`);
  return s === null ? null : { ppid: s.ppid, own: s.user + s.system, reaped: s.reaped };
}

/** CPU seconds of `root` and everything under it (own + reaped children's), 0 when gone. */
export function treeCpuSeconds(root: number): number {
  let sum = 0;
  for (const pid of descendants(root)) {
    const s = stat(pid);
    if (s !== null) sum += s.own + s.reaped;
  }
  return sum;
}

/** The collector's `pglog sshproxy` child, or null (none yet, or the transport is off). */
export function findSidecar(collectorPid: number): number | null {
  for (const pid of descendants(collectorPid)) {
    if (pid === collectorPid) continue;
    // Node names its main thread (comm) MainThread: tell the sidecar by its arguments.
    if (stat(pid)?.ppid === collectorPid && cmdline(pid).includes('sshproxy')) return pid;
  }
  return null;
}

/** Parent pid of `pid`, or null when gone. */
export function parentPid(pid: number): number | null {
  return stat(pid)?.ppid ?? null;
}

/** The sshd listeners this process started (the fleet), each the root of one server's tree. */
export function fleetRoots(): number[] {
  return descendants(process.pid).filter((pid) => pid !== process.pid && stat(pid)?.ppid === process.pid && commandName(pid) === 'sshd');
}

export interface CpuSplit {
  /** The collector process itself (all its threads), not its children. */
  collector: number;
  /** The sidecar's node process itself. */
  sidecar: number;
  /** Everything the sidecar started: ControlMaster and stream `ssh` clients (and their shells). */
  sshClients: number;
  /** Live `ssh` processes under the sidecar (masters + streams). */
  sshProcesses: number;
  sidecarPid: number | null;
}

export function cpuSplit(collectorPid: number): CpuSplit {
  const collector = processCpuSeconds(collectorPid) ?? NaN;
  const sidecarPid = findSidecar(collectorPid);
  if (sidecarPid === null) return { collector, sidecar: 0, sshClients: 0, sshProcesses: 0, sidecarPid };
  const s = stat(sidecarPid);
  const under = descendants(sidecarPid).filter((pid) => pid !== sidecarPid);
  let ssh = s?.reaped ?? 0;
  for (const pid of under) {
    const c = stat(pid);
    if (c !== null) ssh += c.own + c.reaped;
  }
  return { collector, sidecar: s?.own ?? 0, sshClients: ssh, sshProcesses: under.filter((pid) => commandName(pid) === 'ssh').length, sidecarPid };
}

/**
 * Time the main thread of `pid` has spent runnable but waiting for a CPU (the run queue),
 * seconds, from /proc/PID/task/PID/schedstat; NaN when unavailable. On a full machine the
 * event loop is late because its thread is not running, whatever the loop itself does.
 */
export function runQueueWaitSeconds(pid: number): number {
  try {
    const [, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').trim().split(' ');
    return Number(wait) / 1e9;
  } catch {
    return NaN;
  }
}
