/**
 * CPU time of the processes of the operator benchmark (kube-apiserver, etcd, the operator, the
 * bench itself) read from /proc/PID/stat, so a step's seconds can be split by who spent them.
 * Linux only; a process that is gone or unreadable counts as null. The API server and etcd of
 * a test control plane are found by their command lines (the API server's port, then the etcd
 * URL it was given), so other control planes on the same machine are left out.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** Clock ticks per second of utime/stime in /proc/PID/stat (USER_HZ, 100 on Linux). */
const USER_HZ = 100;

/** utime + stime of `pid` in seconds, or null when it cannot be read. */
export function processCpuSeconds(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces; the fields after its ')' are fixed.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / USER_HZ;
  } catch {
    return null;
  }
}

function pgrep(pattern: string): number | undefined {
  try {
    const out = execFileSync('pgrep', ['-f', pattern], { encoding: 'utf8' }).trim();
    const first = out.split('\n')[0];
    return first === undefined || first === '' ? undefined : Number(first);
  } catch {
    return undefined;
  }
}

/** The kube-apiserver serving `server` (https://HOST:PORT) and the etcd it talks to. */
export function controlPlanePids(server: string): { apiserver: number | undefined; etcd: number | undefined } {
  const port = new URL(server).port;
  const apiserver = pgrep(`kube-apiserver.*--secure-port=${port}`);
  if (apiserver === undefined) return { apiserver, etcd: undefined };
  let etcd: number | undefined;
  try {
    const args = readFileSync(`/proc/${apiserver}/cmdline`, 'utf8').split('\0');
    const url = args.find((a) => a.startsWith('--etcd-servers='))?.slice('--etcd-servers='.length);
    if (url !== undefined) etcd = pgrep(`etcd .*--listen-client-urls ${url}`);
  } catch {
    etcd = undefined;
  }
  return { apiserver, etcd };
}

/** CPU seconds the whole machine was busy (every core, /proc/stat: all but idle and iowait), or null. */
export function machineBusySeconds(): number | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is within user).
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
    return (user + nice + system + irq + softirq + steal) / USER_HZ;
  } catch {
    return null;
  }
}

export type CpuOwner = 'apiserver' | 'etcd' | 'operator' | 'bench' | 'others';

/** CPU seconds per process at one moment; subtract two with cpuBetween(). */
export type CpuReading = Record<CpuOwner, number | null>;

export function readCpu(pids: { apiserver: number | undefined; etcd: number | undefined; operator: number | undefined }): CpuReading {
  const self = process.cpuUsage();
  const reading = {
    apiserver: processCpuSeconds(pids.apiserver),
    etcd: processCpuSeconds(pids.etcd),
    operator: processCpuSeconds(pids.operator),
    bench: (self.user + self.system) / 1e6,
  };
  const busy = machineBusySeconds();
  // Kept as the machine's total here; cpuBetween() turns it into what the others spent.
  return { ...reading, others: busy };
}

/** CPU seconds each spent between two readings; `others` is the machine's busy time less the four (other jobs, the kernel). */
export function cpuBetween(before: CpuReading, after: CpuReading): CpuReading {
  const d = (k: CpuOwner): number | null => (before[k] === null || after[k] === null ? null : after[k] - before[k]);
  const ours = [d('apiserver'), d('etcd'), d('operator'), d('bench')];
  const machine = d('others');
  const others = machine === null || ours.some((x) => x === null) ? null : Math.max(0, machine - ours.reduce((a: number, x) => a + x!, 0));
  return { apiserver: ours[0]!, etcd: ours[1]!, operator: ours[2]!, bench: ours[3]!, others };
}
