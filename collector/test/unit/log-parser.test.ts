// The whole parsing path (split, assemble, parse, decode, normalize) as the collector runs it:
// chunking must never change the events, and resuming at an entry boundary must give exactly
// the rest of them (the collector commits offsets at entry boundaries).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseChunks, type ParseSetup } from '../helpers/parse.ts';

const fixture = (name: string): Buffer => readFileSync(new URL(`../fixtures/${name}`, import.meta.url));

// Cut from a real generated log (scripts/loggen, run A): one entry of each kind, with a
// WIN1251 error and a KOI8R statement among them.
const encodings = { defaultEncoding: 'UTF8', databases: { cyr_win1251: 'WIN1251', cyr_koi8r: 'KOI8R' } };
const CASES: { name: string; file: string; setup: ParseSetup }[] = [
  { name: 'stderr', file: 'pipeline-stderr.log', setup: { format: 'stderr', prefix: '%m [%p] %q%u@%d ', encodings } },
  { name: 'csvlog', file: 'pipeline-csvlog.csv', setup: { format: 'csvlog', encodings } },
  { name: 'jsonlog', file: 'pipeline-jsonlog.json', setup: { format: 'jsonlog', encodings } },
];

for (const c of CASES) {
  describe(`whole pipeline over ${c.name}`, () => {
    const bytes = fixture(c.file);
    const whole = parseChunks(c.setup, bytes);

    test('the fixture yields events of several kinds and nothing malformed', () => {
      assert.ok(whole.events.length >= 8, `${whole.events.length} events`);
      assert.ok(new Set(whole.events.map((e) => e.kind)).size >= 5);
      assert.equal(whole.counters.malformed, 0);
      assert.equal(whole.counters.replacements, 0);
      assert.equal(whole.counters.bytes, bytes.length);
    });

    test('split at every byte offset: identical events', () => {
      for (let cut = 1; cut < bytes.length; cut++) {
        assert.deepEqual(parseChunks(c.setup, bytes, [cut]).events, whole.events, `cut at ${cut}`);
      }
    });

    test('split at random points: identical events', () => {
      fc.assert(
        fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 40 }), (cuts) => {
          assert.deepEqual(parseChunks(c.setup, bytes, cuts.sort((a, b) => a - b)).events, whole.events);
        }),
        { numRuns: 200 },
      );
    });

    test('resuming at any entry boundary yields exactly the remaining events', () => {
      for (let i = 0; i < whole.events.length; i++) {
        const resumeAt = whole.events[i]!.end;
        const rest = parseChunks(c.setup, bytes.subarray(resumeAt), [], resumeAt).events;
        assert.deepEqual(rest, whole.events.slice(i + 1), `resume after event ${i} at ${resumeAt}`);
      }
    });
  });
}
