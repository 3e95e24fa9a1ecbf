// Busy loops that keep the machine's cores occupied, as other work on a shared host does: the
// collector then gets its CPU in slices and its start-up stages stretch out. One process per
// core, each spinning forever until stop() kills it.
import { type ChildProcess, spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';

export interface CpuHog {
  readonly pids: readonly number[];
  /** Kills every busy loop and waits until each has exited. */
  stop(): Promise<void>;
}

export function startCpuHog(processes = availableParallelism()): CpuHog {
  const children: ChildProcess[] = [];
  for (let i = 0; i < processes; i++) {
    children.push(spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
  }
  const exited = children.map(
    (c) =>
      new Promise<void>((resolve) => {
        if (c.exitCode !== null || c.signalCode !== null) resolve();
        else c.once('exit', () => resolve());
      }),
  );
  return {
    pids: children.map((c) => c.pid ?? 0),
    async stop(): Promise<void> {
      for (const c of children) c.kill('SIGKILL');
      await Promise.all(exited);
    },
  };
}
