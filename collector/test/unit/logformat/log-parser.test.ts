// The whole parsing path (split, assemble, parse, decode, normalize) as the collector runs it:
// chunking must never change the events, and resuming at an entry boundary must give exactly
// the rest of them (the collector commits offsets at entry boundaries).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import type { PglogEvent } from '../../../src/logformat/events.ts';
import { LogParser } from '../../../src/logformat/log-parser.ts';
import { parseChunks, type ParseSetup, UTF8_ONLY } from '../../helpers/parse.ts';

const fixture = (name: string): Buffer => readFileSync(new URL(`../../fixtures/${name}`, import.meta.url));

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
          assert.deepEqual(
            parseChunks(
              c.setup,
              bytes,
              cuts.sort((a, b) => a - b),
            ).events,
            whole.events,
          );
        }),
        { numRuns: 200 },
      );
    });

    test('a batch sink gets the same events, one new array per push that has any', () => {
      fc.assert(
        fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 20 }), (cuts) => {
          const batches: PglogEvent[][] = [];
          const parser = new LogParser({ ...c.setup, encodings }, { events: (batch) => batches.push(batch) });
          let from = 0;
          for (const cut of [...cuts.sort((a, b) => a - b), bytes.length]) {
            const before = batches.length;
            parser.push(bytes.subarray(from, cut));
            assert.ok(batches.length - before <= 1, 'at most one batch per push');
            from = cut;
          }
          parser.end();
          assert.ok(batches.every((b) => b.length > 0));
          assert.equal(new Set(batches).size, batches.length, 'every batch is an array of its own');
          assert.deepEqual(batches.flat(), whole.events);
        }),
        { numRuns: 100 },
      );
    });

    // Each chunk here is a small part of memory of its own, as a socket read's slice is: what
    // the parser keeps of it past its push (an entry or a line still open) must be a copy, so
    // that the chunk's memory can go (issue 15). Scribbled over once pushed, it changes nothing.
    test('nothing of a chunk is used after its push: overwritten then, it changes no event', () => {
      fc.assert(
        fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 40 }), (cuts) => {
          const events: PglogEvent[] = [];
          const parser = new LogParser({ ...c.setup, encodings }, (e) => events.push(e));
          let from = 0;
          for (const cut of [...cuts.sort((a, b) => a - b), bytes.length]) {
            const memory = Buffer.allocUnsafeSlow(Math.max(64 * 1024, 4 * (cut - from)));
            bytes.copy(memory, 0, from, cut);
            parser.push(memory.subarray(0, cut - from));
            memory.fill(0x3f);
            from = cut;
          }
          parser.end();
          assert.deepEqual(events, whole.events);
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

// A followed log goes quiet between entries: the collector flushes on idle so the newest
// entry is committed without waiting for the next one, and never emits half a line.
describe('flushIdle', () => {
  const bytes = fixture('pipeline-stderr.log');
  const setup = CASES[0]!.setup;
  const whole = parseChunks(setup, bytes);

  // PostgreSQL's logging collector writes a whole ereport (message, DETAIL, HINT, STATEMENT
  // lines) with one write, so a log goes quiet only at entry ends: those are the idle points.
  test('idle at every entry end of a stderr log: everything up to it is out, and the events are those of one pass', () => {
    for (const idleAt of whole.events.map((e) => e.end)) {
      const events: PglogEvent[] = [];
      const parser = new LogParser({ format: 'stderr', prefix: setup.prefix, encodings: setup.encodings ?? UTF8_ONLY }, (e) => events.push(e));
      parser.push(bytes.subarray(0, idleAt));
      parser.flushIdle();
      assert.equal(events.length, whole.events.filter((e) => e.end <= idleAt).length, `idle at ${idleAt}`);
      parser.push(bytes.subarray(idleAt));
      parser.end();
      assert.deepEqual(events, whole.events, `idle at ${idleAt}`);
    }
  });

  test('a line without its terminator is never flushed', () => {
    const events: PglogEvent[] = [];
    const parser = new LogParser({ format: 'stderr', prefix: setup.prefix, encodings: setup.encodings ?? UTF8_ONLY }, (e) => events.push(e));
    const cut = bytes.indexOf(10) + 5; // 5 bytes into the second line
    parser.push(bytes.subarray(0, cut));
    parser.flushIdle();
    const first = events.length;
    parser.push(bytes.subarray(cut));
    parser.end();
    assert.deepEqual(events, whole.events);
    assert.ok(first <= 1);
  });

  test('csvlog and jsonlog hold nothing back, so idle changes nothing', () => {
    for (const c of CASES.slice(1)) {
      const b = fixture(c.file);
      const events: PglogEvent[] = [];
      const parser = new LogParser({ format: c.setup.format, encodings: c.setup.encodings ?? UTF8_ONLY }, (e) => events.push(e));
      const mid = b.indexOf(10, b.length >> 1) + 1;
      parser.push(b.subarray(0, mid));
      parser.flushIdle();
      parser.push(b.subarray(mid));
      parser.end();
      assert.deepEqual(events, parseChunks(c.setup, b).events, c.name);
    }
  });
});
