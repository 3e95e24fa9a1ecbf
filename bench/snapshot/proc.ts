/**
 * What the snapshot benchmark (bench/snapshot-bench.ts) reads of the machine from /proc: the CPU
 * of a process tree, the kernel's delayed-ACK count, and the pid of a test sshd's listener.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { cmdline } from '@pglog/test-support/process-tree.ts';
import type { TestSshServer } from '@pglog/test-support/sshd.ts';

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU ms of `pids` (utime + stime + reaped children's), from /proc; a process that is gone counts 0. */
export function treeCpuMs(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // After "pid (comm) ": state is f[0], so utime (field 14) is f[11] … cstime (17) f[14].
      ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    } catch {
      /* exited */
    }
  }
  return (ticks * 1000) / CLK_TCK;
}

/** TcpExt DelayedACKs: delayed ACKs the kernel has sent (all sockets of the network namespace). */
export function delayedAcks(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('TcpExt:'));
  const names = lines[0]?.split(' ') ?? [];
  const counts = lines[1]?.split(' ') ?? [];
  const at = names.indexOf('DelayedACKs');
  return at === -1 ? NaN : Number(counts[at]);
}

export function sshdListenerPid(ssh: TestSshServer): number {
  const config = join(ssh.dir, 'sshd_config');
  // sshd sets its process title: "sshd: /usr/sbin/sshd -D -e -f CONFIG [listener] ...".
  const pid = readdirSync('/proc')
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .find((p) => {
      const args = cmdline(p).join(' ');
      return args.includes('sshd') && args.includes(config);
    });
  if (pid === undefined) throw new Error(`no sshd with ${config} found in /proc`);
  return pid;
}
