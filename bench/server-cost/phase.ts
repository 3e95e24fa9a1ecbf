/**
 * One phase of the server-cost benchmark: `streams` logs followed at once through one ssh2
 * connection with one idle wait (the polling loop or the builtin one), either idle or appended
 * to at a fixed rate, and what their remote loops cost the server meanwhile:
 *
 * - CPU: user + system seconds of each loop's shell and everything it started and reaped
 *   (/proc/PID/stat utime+stime+cutime+cstime), and of the sshd processes, over a window;
 * - process starts, in the same window: `perf stat` of the kernel's task creation tracepoint
 *   on each loop, inherited by what it starts (counted in the kernel: the loop runs as fast
 *   as untraced);
 * - latency (idle phases): after the windows' long silence, a line is appended to every log
 *   and timed until the follower delivers it; again after short silences.
 */
import { appendFileSync, chmodSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { LogFollower } from '@pglog/collector/follow/follower.ts';
import type { IdleWait } from '@pglog/collector/follow/segment-script.ts';
import type { RemoteShell } from '@pglog/collector/transport/remote-shell.ts';
import { sleep } from '@pglog/test-support/wait.ts';

import { countProcessStarts, cpuSecondsOf, processesWithCommandLine } from '../../collector/test/helpers/process-starts.ts';
import { descendantsNamed, processCpuSeconds } from '../ingest/proc-stats.ts';

export interface PhaseOptions {
  shell: RemoteShell;
  /** A fresh directory for this phase's logs, readable by the SSH login user. */
  dir: string;
  idleWait: IdleWait;
  /** The follower's wait after a round with data (ADR 0023); undefined: its default. */
  dataIntervalMs?: number;
  streams: number;
  /** Bytes a second appended to each log; 0 = idle. */
  rate: number;
  windowS: number;
  /** Latency samples per stream (idle phases): the first after the windows, the rest after `gapMs` of silence. */
  latencyRounds: number;
  gapMs: number;
}

export interface PhaseResult {
  idleWait: IdleWait;
  /** PhaseOptions.dataIntervalMs (null: the follower's default). */
  dataIntervalMs: number | null;
  rate: number;
  streams: number;
  /** Per stream and second of the window. */
  loopCpuMsPerS: number;
  sshdCpuMsPerS: number;
  startsPerS: number;
  deliveredBytesPerS: number;
  /** Idle phases: ms from an append after silence until delivered, every stream and round. */
  latenciesMs: number[];
}

const LINE = '2024-01-01 00:00:00.000 UTC [4242] bench@bench LOG:  duration: 0.042 ms  statement: SELECT abalance FROM pgbench_accounts WHERE aid = 123456;\n';
const TICK_MS = 10;
const SETTLE_MS = 4_000;
const WAIT_MS = 60_000;

interface Stream {
  data: string;
  file: string;
  received: number;
  wake: (() => void) | null;
}

export async function runPhase(o: PhaseOptions): Promise<PhaseResult> {
  const streams: Stream[] = [];
  for (let i = 0; i < o.streams; i++) {
    const data = join(o.dir, `s${i}`);
    const log = join(data, 'log');
    mkdirSync(log, { recursive: true });
    chmodSync(data, 0o755);
    chmodSync(log, 0o755);
    writeFileSync(join(data, 'current_logfiles'), 'stderr log/postgresql.log\n', { mode: 0o644 });
    const file = join(log, 'postgresql.log');
    writeFileSync(file, LINE, { mode: 0o644 });
    streams.push({ data, file, received: 0, wake: null });
  }
  const controller = new AbortController();
  let failure: unknown = null;
  const consumers = streams.map(async (s) => {
    const follower = new LogFollower(o.shell, {
      target: 'bench',
      instance: s.data,
      dataDirectory: s.data,
      logDirectory: join(s.data, 'log'),
      logFormat: 'stderr',
      idleWait: o.idleWait,
      ...(o.dataIntervalMs === undefined ? {} : { dataIntervalMs: o.dataIntervalMs }),
    });
    try {
      for await (const item of follower.follow(null, controller.signal)) {
        if (item.kind !== 'data') continue;
        s.received += item.chunk.length;
        s.wake?.();
      }
    } catch (e) {
      failure ??= e;
    }
  });
  const caughtUp = async (s: Stream, size: number): Promise<void> => {
    const deadline = Date.now() + WAIT_MS;
    while (s.received < size) {
      if (failure !== null) throw failure as Error;
      if (Date.now() > deadline) throw new Error(`${s.file}: ${s.received} of ${size} bytes after ${WAIT_MS} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        s.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      s.wake = null;
    }
  };
  // The writer: whole lines, paced by elapsed time so the rate holds whatever the timer does.
  let writer: NodeJS.Timeout | undefined;
  let written = 0;
  const startWriter = (): void => {
    if (o.rate === 0) return;
    const chunk = Buffer.from(LINE.repeat(Math.max(1, Math.round((o.rate * TICK_MS) / 1000 / LINE.length))));
    const began = performance.now();
    writer = setInterval(() => {
      while (written < (o.rate * (performance.now() - began)) / 1000) {
        for (const s of streams) appendFileSync(s.file, chunk);
        written += chunk.length;
      }
    }, TICK_MS);
  };
  try {
    await Promise.all(streams.map((s) => caughtUp(s, LINE.length)));
    startWriter();
    await sleep(SETTLE_MS);
    const loops = streams.map((s) => {
      const pids = processesWithCommandLine(s.data);
      if (pids.length !== 1) throw new Error(`${s.data}: expected one remote loop, found ${pids.length}`);
      return pids[0]!;
    });
    const sshd = descendantsNamed(process.pid, ['sshd', 'sshd-session']);
    const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
    const sshdCpu = (): number => sum(sshd.map((pid) => processCpuSeconds(pid) ?? 0));
    const counters = await Promise.all(loops.map(countProcessStarts));
    const loopCpu0 = sum(loops.map(cpuSecondsOf));
    const sshdCpu0 = sshdCpu();
    const bytes0 = sum(streams.map((s) => s.received));
    const t0 = performance.now();
    await sleep(o.windowS * 1000);
    const secs = (performance.now() - t0) / 1000;
    const loopCpu = sum(loops.map(cpuSecondsOf)) - loopCpu0;
    const sshdUsed = sshdCpu() - sshdCpu0;
    const delivered = sum(streams.map((s) => s.received)) - bytes0;
    const counted = await Promise.all(counters.map((c) => c.stop()));
    // Each counter's rate over its own clock, summed: process starts a second of all loops.
    const startsPerS = sum(counted.map((c) => c.starts / c.seconds));
    if (failure !== null) throw failure as Error;
    const latenciesMs: number[] = [];
    if (o.rate === 0) {
      for (let round = 0; round < o.latencyRounds; round++) {
        if (round > 0) await sleep(o.gapMs);
        const began = performance.now();
        await Promise.all(
          streams.map(async (s) => {
            appendFileSync(s.file, LINE);
            await caughtUp(s, statSync(s.file).size);
            latenciesMs.push(performance.now() - began);
          }),
        );
      }
    }
    const per = o.streams;
    return {
      idleWait: o.idleWait,
      dataIntervalMs: o.dataIntervalMs ?? null,
      rate: o.rate,
      streams: per,
      loopCpuMsPerS: (loopCpu * 1000) / secs / per,
      sshdCpuMsPerS: (sshdUsed * 1000) / secs / per,
      startsPerS: startsPerS / per,
      deliveredBytesPerS: delivered / secs / per,
      latenciesMs,
    };
  } finally {
    clearInterval(writer);
    controller.abort();
    await Promise.all(consumers);
    for (const s of streams) rmSync(s.data, { recursive: true, force: true });
  }
}
