/**
 * What following the fleet's logs costs the servers, from /proc: the processes under each
 * server's sshd (connection, session and the follower's remote loops), counted per followed
 * log, and the CPU they use. On a real fleet each server pays its own share; here all of them
 * share this machine, which is why the benchmark reports them apart from the collector.
 */
import { descendantsOfAll } from '@pglog/test-support/process-tree.ts';

import { commandName, processCpuSeconds, readStat } from '../ingest/proc-stats.ts';

export interface ServerSide {
  /** Live processes under the fleet's sshd listeners (not the listeners), by command name. */
  processes: Map<string, number>;
  /** CPU seconds of those processes (their own and their reaped children's). */
  cpuSeconds: number;
}

/** The processes below the given sshd listener pids, and their CPU so far. */
export function serverSide(listeners: readonly number[]): ServerSide {
  const listenerSet = new Set(listeners);
  const processes = new Map<string, number>();
  let cpuSeconds = 0;
  for (const pid of descendantsOfAll(listeners)) {
    if (listenerSet.has(pid)) continue;
    const name = commandName(pid);
    if (name === '') continue;
    processes.set(name, (processes.get(name) ?? 0) + 1);
    const stat = readStat(`/proc/${pid}/stat`);
    cpuSeconds += (processCpuSeconds(pid) ?? 0) + (stat?.reaped ?? 0);
  }
  return { processes, cpuSeconds };
}

/** `name: count` pairs, most first. */
export function formatProcesses(p: ReadonlyMap<string, number>, per: number): string {
  return [...p]
    .sort((a, b) => b[1] - a[1])
    .map(([name, n]) => `${name} ${(n / per).toFixed(2)}`)
    .join(', ');
}
