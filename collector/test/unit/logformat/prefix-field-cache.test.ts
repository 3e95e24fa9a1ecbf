/**
 * FieldCache (logformat/prefix-field-cache.ts): values made from a field's bytes are handed out
 * again while the bytes repeat, from as many slots as the cache was given, and are always
 * equal to a fresh decoding.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { FieldCache } from '../../../src/logformat/prefix-field-cache.ts';

const line = (...fields: string[]): { b: Buffer; at: Array<[number, number]> } => {
  const at: Array<[number, number]> = [];
  let s = 0;
  for (const f of fields) {
    at.push([s, s + Buffer.byteLength(f, 'latin1')]);
    s += Buffer.byteLength(f, 'latin1') + 1;
  }
  return { b: Buffer.from(fields.join(' '), 'latin1'), at };
};

void describe('FieldCache', () => {
  void it('hands out the same Buffer while names alternate among as many as it has slots', () => {
    const cache = new FieldCache(3);
    const { b, at } = line('app', 'reporting', 'batch', 'app', 'batch', 'reporting', 'app');
    const got = at.map(([s, e]) => cache.buffer(b, s, e));
    assert.deepEqual(
      got.map((x) => x.toString('latin1')),
      ['app', 'reporting', 'batch', 'app', 'batch', 'reporting', 'app'],
    );
    assert.equal(got[3], got[0]);
    assert.equal(got[4], got[2]);
    assert.equal(got[5], got[1]);
    assert.equal(got[6], got[0]);
  });

  void it('one slot by default: only the last value is handed out again', () => {
    const cache = new FieldCache();
    const { b, at } = line('app', 'app', 'batch', 'app');
    const got = at.map(([s, e]) => cache.string(b, s, e));
    assert.deepEqual(got, ['app', 'app', 'batch', 'app']);
    const bufs = at.map(([s, e]) => new FieldCache().buffer(b, s, e));
    assert.notEqual(bufs[0], bufs[1]);
  });

  void it("keeps no value longer than a slot, and copies (a value never shares the line's memory)", () => {
    const cache = new FieldCache(2);
    const long = 'x'.repeat(65);
    const { b, at } = line(long, long, 'db', 'db');
    const got = at.map(([s, e]) => cache.buffer(b, s, e));
    assert.notEqual(got[0], got[1]);
    assert.equal(got[2], got[3]);
    b.fill(0x41);
    assert.equal(got[0]!.toString('latin1'), long);
    assert.equal(got[3]!.toString('latin1'), 'db');
  });

  void it('any sequence of fields: every value equals the bytes it was made from', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.constantFrom('a', 'b', 'ab', 'ba', '', 'c'.repeat(64), 'd'.repeat(70), 'é'), { maxLength: 40 }),
        (slots, fields) => {
          const cache = new FieldCache(slots);
          const { b, at } = line(...fields);
          at.forEach(([s, e], i) => {
            const expected = b.toString('latin1', s, e);
            assert.equal(cache.string(b, s, e), expected, `string ${i}`);
            assert.equal(cache.buffer(b, s, e).toString('latin1'), expected, `buffer ${i}`);
          });
        },
      ),
      { numRuns: 300 },
    );
  });
});
