// The pod status the test node agent writes, from the state of its container processes
// (pure but for the clock), and its readiness probe (httpGet).
import { request } from 'node:http';
import { constants } from 'node:os';
import type { ChildProcess } from 'node:child_process';
import type { PodContainer } from './pod-spec.ts';

/** One container of a pod as the agent runs it. */
export interface ContainerRun {
  spec: PodContainer;
  kind: 'init' | 'sidecar' | 'main';
  child: ChildProcess | undefined;
  exited: Promise<void>;
  startedAt: string | undefined;
  startedAtMs: number | undefined;
  restartCount: number;
  probeOk: boolean;
  probeFailures: number;
  probing: boolean;
  last: { exitCode: number; signal: string | null; startedAt: string; finishedAt: string } | undefined;
  done: boolean;
  waiting: string | undefined;
  tree: Set<number>;
  argv: string[];
  env: Map<string, string>;
  partial: string;
}

export const now = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** Ready: running and its readiness probe passing (none: running is enough); a finished init container is ready. */
export function containerReady(r: ContainerRun): boolean {
  if (r.child === undefined) return r.kind === 'init' && r.done;
  return r.spec.readinessProbe === undefined ? true : r.probeOk;
}

export function podPhase(runs: readonly ContainerRun[], initialized: boolean): string {
  const mains = runs.filter((r) => r.kind === 'main');
  if (mains.every((r) => r.done)) return mains.every((r) => r.last?.exitCode === 0) ? 'Succeeded' : 'Failed';
  return initialized && mains.some((r) => r.startedAt !== undefined) ? 'Running' : 'Pending';
}

/** A pod condition; its lastTransitionTime moves only when its status changes (`times` remembers). */
export function condition(times: Map<string, { status: string; time: string }>, type: string, ok: boolean): Record<string, string> {
  const status = ok ? 'True' : 'False';
  let seen = times.get(type);
  if (seen?.status !== status) times.set(type, seen = { status, time: now() });
  return { type, status, lastTransitionTime: seen.time };
}

export function containerStatus(r: ContainerRun): Record<string, unknown> {
  const terminated = (t: NonNullable<ContainerRun['last']>): Record<string, unknown> => ({
    terminated: {
      exitCode: t.exitCode, ...(t.signal === null ? {} : { signal: constants.signals[t.signal as NodeJS.Signals] }),
      reason: t.exitCode === 0 ? 'Completed' : 'Error', startedAt: t.startedAt, finishedAt: t.finishedAt,
    },
  });
  const state = r.child !== undefined
    ? { running: { startedAt: r.startedAt } }
    : r.done && r.last !== undefined ? terminated(r.last) : { waiting: { reason: r.waiting ?? 'ContainerCreating' } };
  return {
    name: r.spec.name, image: r.spec.image ?? 'node-agent', imageID: '', ready: containerReady(r), started: r.child !== undefined, restartCount: r.restartCount,
    ...(r.child?.pid === undefined ? {} : { containerID: `node-agent://${r.child.pid}` }),
    state, lastState: r.last === undefined || r.done ? {} : terminated(r.last),
  };
}

/** An httpGet probe: true for a 2xx or 3xx answer within the timeout. */
export function httpProbe(host: string, port: number, path: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, timeout: timeoutMs }, (res) => {
      res.resume();
      resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
    req.end();
  });
}
