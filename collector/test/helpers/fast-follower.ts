// Follower options for the local-shell follow tests (follow-local, follow-builtin-wait): db1/main
// logging stderr, with polls, idle, rotation checks and heartbeats short enough for a test.
import type { LogFollowerOptions } from '../../src/follow/follower.ts';

/** Options for the instance in `dirs`; `extra` replaces any. */
export function fastFollowerOptions(dirs: { data: string; log: string }, extra: Partial<LogFollowerOptions> = {}): LogFollowerOptions {
  return {
    target: 'db1',
    instance: 'main',
    dataDirectory: dirs.data,
    logDirectory: dirs.log,
    logFormat: 'stderr',
    pollIntervalMs: 50,
    idleMs: 200,
    rotationCheckMs: 150,
    heartbeatMs: 400,
    waitMs: 100,
    ...extra,
  };
}
