// The segment script's options for the follow tests (scripts, segment-script-bash): a file
// `a.log` in `dir` followed from offset 5, with the follower's usual intervals.
import type { SegmentScriptOptions } from '../../src/follow/segment-script.ts';

/** Options for `dir`/a.log; `over` replaces any. */
export function segmentOptions(dir: string, over: Partial<SegmentScriptOptions> = {}): SegmentScriptOptions {
  return {
    path: `${dir}/a.log`,
    inode: '12',
    offset: 5,
    follow: true,
    headLength: 3,
    logDirectory: dir,
    dataDirectory: '/d',
    format: 'stderr',
    pollIntervalMs: 200,
    rotationCheckMs: 1000,
    heartbeatMs: 2000,
    ...over,
  };
}
