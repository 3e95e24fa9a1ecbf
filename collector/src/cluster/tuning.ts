/**
 * The Node.js tuning a shard's collector child runs with (CollectorShard spec.tuning): how the
 * launcher passes it to the child on its command line (`--launched`), and when a change means
 * starting the child again.
 */
import type { ShardTuning } from '@pglog/common/api/collector-shard.ts';
import { PglogError } from '@pglog/common/errors.ts';

/** Exit status of a collector child that stopped cleanly because its shard's tuning changed. */
export const EXIT_TUNING_CHANGED = 75;

/** `--launched` value: how the launcher passes the tuning to its child. */
export function formatTuning(t: ShardTuning): string {
  const growing = t.heapGrowingPercent === undefined ? '' : `,heapGrowingPercent=${t.heapGrowingPercent}`;
  return `uvThreadpoolSize=${t.uvThreadpoolSize},maxOldSpaceSizeMiB=${t.maxOldSpaceSizeMiB},maxSemiSpaceSizeMiB=${t.maxSemiSpaceSizeMiB}${growing}`;
}

const REQUIRED_FIELDS = ['uvThreadpoolSize', 'maxOldSpaceSizeMiB', 'maxSemiSpaceSizeMiB'] as const;

export function parseTuning(text: string): ShardTuning {
  const fields = new Map<string, number>();
  for (const part of text.split(',')) {
    const m = /^(uvThreadpoolSize|maxOldSpaceSizeMiB|maxSemiSpaceSizeMiB|heapGrowingPercent)=(\d{1,7})$/.exec(part);
    if (m === null || fields.has(m[1]!))
      throw new PglogError(
        'USAGE',
        `collect: --launched must be ${formatTuning({ uvThreadpoolSize: 4, maxOldSpaceSizeMiB: 512, maxSemiSpaceSizeMiB: 16, heapGrowingPercent: 100 })} (heapGrowingPercent optional), got '${text}'`,
      );
    fields.set(m[1]!, Number(m[2]));
  }
  if (REQUIRED_FIELDS.some((f) => !fields.has(f)))
    throw new PglogError('USAGE', `collect: --launched needs uvThreadpoolSize, maxOldSpaceSizeMiB and maxSemiSpaceSizeMiB, got '${text}'`);
  const growing = fields.get('heapGrowingPercent');
  return {
    uvThreadpoolSize: fields.get('uvThreadpoolSize')!,
    maxOldSpaceSizeMiB: fields.get('maxOldSpaceSizeMiB')!,
    maxSemiSpaceSizeMiB: fields.get('maxSemiSpaceSizeMiB')!,
    ...(growing === undefined ? {} : { heapGrowingPercent: growing }),
  };
}

/** Whether two tunings start the same process. */
export function sameTuning(a: ShardTuning, b: ShardTuning): boolean {
  return (
    a.uvThreadpoolSize === b.uvThreadpoolSize &&
    a.maxOldSpaceSizeMiB === b.maxOldSpaceSizeMiB &&
    a.maxSemiSpaceSizeMiB === b.maxSemiSpaceSizeMiB &&
    a.heapGrowingPercent === b.heapGrowingPercent
  );
}
