// Follower options for the local-shell follow tests (follow-local, follow-builtin-wait): db1/main
// logging stderr, with polls, idle, rotation checks, heartbeats and a long silence's waits and
// size checks short enough for a test.
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
    idlePollMaxMs: 200,
    sizeCheckMs: 1600,
    waitMs: 100,
    ...extra,
  };
}
