/**
 * The parent's handle on the log writer child (log-writer.ts): spawn, start, snapshots of what
 * was written, rotations on demand, stop, and a kill that always works (for cleanup on failure).
 */
import { type ChildProcess, fork } from 'node:child_process';

import type { WriterCommand, WriterConfig, WriterTotals } from './log-writer.ts';

export interface LogWriter {
  readonly pid: number;
  /** Appends about `bytes` to every file at once (before the collector starts). */
  prefill(bytes: number): Promise<WriterTotals>;
  start(): void;
  snapshot(): Promise<WriterTotals>;
  /** Rotates the files at these indices (all when absent) now. */
  rotate(files?: number[]): Promise<WriterTotals>;
  /** Stops writing; resolves with the final totals once the child has exited. */
  stop(): Promise<WriterTotals>;
  kill(): void;
}

export function spawnLogWriter(config: WriterConfig): LogWriter {
  const child: ChildProcess = fork(new URL('./log-writer.ts', import.meta.url).pathname, [], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: ['--disable-warning=ExperimentalWarning'],
  });
  // Over IPC, not argv: a fleet's file list is more than one argument may hold (E2BIG at 2,000).
  child.send({ type: 'configure', config } satisfies WriterCommand);
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const waiting: Array<{ resolve: (t: WriterTotals) => void; reject: (e: Error) => void }> = [];
  child.on('message', (m: WriterTotals) => {
    waiting.shift()?.resolve(m);
  });
  void exit.then(() => {
    for (const w of waiting.splice(0)) w.reject(new Error('log writer exited'));
  });
  const ask = (command: WriterCommand): Promise<WriterTotals> =>
    new Promise((resolve, reject) => {
      if (exited) {
        reject(new Error('log writer exited'));
        return;
      }
      waiting.push({ resolve, reject });
      child.send(command);
    });
  return {
    pid: child.pid!,
    prefill: (bytes) => ask({ type: 'prefill', bytes }),
    start: () => {
      child.send({ type: 'start' } satisfies WriterCommand);
    },
    snapshot: () => ask({ type: 'snapshot' }),
    rotate: (files) => ask(files === undefined ? { type: 'rotate' } : { type: 'rotate', files }),
    stop: async () => {
      const totals = await ask({ type: 'stop' });
      await exit;
      return totals;
    },
    kill: () => {
      if (!exited) child.kill('SIGKILL');
    },
  };
}
