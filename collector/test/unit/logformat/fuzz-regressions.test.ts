// Replays what the fuzz targets (collector/fuzz, `make fuzz`) check over every committed input:
// the findings of past runs (collector/fuzz/regressions/<target>/: inputs that broke a property
// or ran too long) and the seed corpus (collector/fuzz/corpus/<target>/, cut from real
// PostgreSQL logs). A finding that comes back fails here without running the fuzzer. An input
// that once ran too long (timeout-*, slow-unit-*) must also stay within a ratio of the time a
// real log of the same length takes, measured in the same run.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { corpusDir, regressionsDir } from '../../../fuzz/run.ts';
import { TARGET_NAMES, type TargetName, TARGETS } from '../../../fuzz/targets.ts';

/** An input that once ran too long may take this many times as long as a real log of its size. */
const SLOW_RATIO = 20;

function inputs(dir: string): Array<[name: string, data: Buffer]> {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => !f.startsWith('.'))
    .sort()
    .map((f) => [f, readFileSync(join(dir, f))]);
}

/** Milliseconds per call of fn, the best of five batches of at least 20 ms each. */
function msPerCall(fn: () => void): number {
  let best = Infinity;
  for (let batch = 0; batch < 5; batch++) {
    let calls = 0;
    const start = performance.now();
    let elapsed = 0;
    do {
      fn();
      calls++;
      elapsed = performance.now() - start;
    } while (elapsed < 20);
    best = Math.min(best, elapsed / calls);
  }
  return best;
}

/** A real log of `length` bytes for `target`: its seeds, one after another, under `header`. */
function realInputOfLength(target: TargetName, length: number, header: Buffer): Buffer {
  const logTarget = target !== 'prefix';
  const bodies = inputs(corpusDir(target)).map(([, d]) => (logTarget ? d.subarray(2) : d));
  const parts: Buffer[] = [header];
  for (let n = header.length, k = 0; n < length; k++) {
    const b = bodies[k % bodies.length]!;
    parts.push(b);
    n += b.length;
  }
  return Buffer.concat(parts).subarray(0, Math.max(length, header.length));
}

for (const target of TARGET_NAMES) {
  describe(`fuzz target ${target}`, () => {
    const check = TARGETS[target];

    test('the seed corpus holds the properties', () => {
      const seeds = inputs(corpusDir(target));
      assert.ok(seeds.length >= 10, `${seeds.length} seeds in ${corpusDir(target)} (node collector/fuzz/seed-corpus.ts writes them)`);
      for (const [name, data] of seeds) assert.doesNotThrow(() => check(data), `seed ${name}`);
    });

    for (const [name, data] of inputs(regressionsDir(target))) {
      test(`finding ${name} holds the properties`, () => {
        check(data);
      });
      if (/^(?:timeout|slow-unit)-/.test(name)) {
        test(`finding ${name} takes at most ${SLOW_RATIO}x the time of a real log of its length`, () => {
          const header = target === 'prefix' ? Buffer.alloc(0) : data.subarray(0, 2);
          const real = realInputOfLength(target, data.length, header);
          const slow = msPerCall(() => check(data));
          const normal = msPerCall(() => check(real));
          assert.ok(slow <= SLOW_RATIO * normal, `${slow.toFixed(2)} ms for the finding, ${normal.toFixed(2)} ms for ${real.length} bytes of real log`);
        });
      }
    }
  });
}
