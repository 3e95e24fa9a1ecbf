// LineSplitter against a plain reference splitter: LF with an optional CR, offsets, NUL and
// high bytes, the cap and its truncation; a fast-check property that any chunking gives the same
// lines. Also joins a 50 MB line in 16 KB chunks (time printed, not asserted) and feeds a 200 MB
// line without newline to check memory stays bounded.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import fc from 'fast-check';

import { DEFAULT_MAX_ENTRY_BYTES, LineSplitter } from '../../../src/logformat/line-splitter.ts';

interface Line {
  text: string;
  offset: number;
  next: number;
  truncated: boolean;
}

function split(chunks: Buffer[], max?: number, start = 0): { lines: Line[]; s: LineSplitter } {
  const lines: Line[] = [];
  const s = new LineSplitter(
    (b, f, t, o, n, tr) => lines.push({ text: b.toString('latin1', f, t), offset: o, next: n, truncated: tr }),
    max === undefined ? undefined : { maxEntryBytes: max },
    start,
  );
  for (const c of chunks) s.push(c);
  s.end();
  return { lines, s };
}

/** Reference: split a whole buffer with String.split semantics. */
function reference(data: Buffer, max = Infinity, start = 0): Line[] {
  const out: Line[] = [];
  let pos = 0;
  while (pos < data.length) {
    const nl = data.indexOf(10, pos);
    const stop = nl < 0 ? data.length : nl;
    let end = stop;
    if (nl >= 0 && end > pos && data[end - 1] === 13) end--;
    const truncated = end - pos > max;
    out.push({
      text: data.toString('latin1', pos, truncated ? pos + max : end),
      offset: start + pos,
      next: start + (nl < 0 ? data.length : nl + 1),
      truncated,
    });
    pos = stop + 1;
  }
  return out;
}

function cutAt(data: Buffer, cuts: number[]): Buffer[] {
  const pts = [...new Set(cuts.filter((c) => c > 0 && c < data.length))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const c of pts) {
    out.push(data.subarray(prev, c));
    prev = c;
  }
  out.push(data.subarray(prev));
  return out;
}

void describe('LineSplitter', () => {
  void it('splits on LF, strips CR before LF, reports offsets', () => {
    const { lines, s } = split([Buffer.from('a\r\nbb\n\nccc\rd\n')]);
    assert.deepEqual(lines, [
      { text: 'a', offset: 0, next: 3, truncated: false },
      { text: 'bb', offset: 3, next: 6, truncated: false },
      { text: '', offset: 6, next: 7, truncated: false },
      { text: 'ccc\rd', offset: 7, next: 13, truncated: false },
    ]);
    assert.equal(s.lines, 4);
    assert.equal(s.bytes, 13);
  });

  void it('delivers a last line without terminator on end(), keeping a lone CR', () => {
    const { lines } = split([Buffer.from('x\nlast\r')], undefined, 100);
    assert.deepEqual(lines, [
      { text: 'x', offset: 100, next: 102, truncated: false },
      { text: 'last\r', offset: 102, next: 107, truncated: false },
    ]);
  });

  void it('handles CR and LF in different chunks', () => {
    const { lines } = split([Buffer.from('abc\r'), Buffer.from('\ndef\r'), Buffer.from('\n')]);
    assert.deepEqual(
      lines.map((l) => [l.text, l.offset, l.next]),
      [
        ['abc', 0, 5],
        ['def', 5, 10],
      ],
    );
  });

  void it('passes NUL and high bytes through untouched', () => {
    const data = Buffer.from([0, 1, 0xff, 0xcf, 10, 0, 10]);
    const got: Buffer[] = [];
    const s = new LineSplitter((b, f, t) => got.push(Buffer.from(b.subarray(f, t))));
    s.push(data.subarray(0, 2));
    s.push(data.subarray(2));
    s.end();
    assert.deepEqual(got, [Buffer.from([0, 1, 0xff, 0xcf]), Buffer.from([0])]);
  });

  void it('gives the same lines for any chunking (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('a', 'b', '\r', '\n', '\r\n', 'xyz', '\u00ff', '\0'), { maxLength: 60 }),
        fc.array(fc.nat(200), { maxLength: 12 }),
        fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
        fc.nat(1000),
        (parts, cuts, max, start) => {
          const data = Buffer.from(parts.join(''), 'latin1');
          const { lines, s } = split(cutAt(data, cuts), max, start);
          const ref = reference(data, max ?? Infinity, start);
          assert.deepEqual(lines, ref);
          assert.equal(s.truncatedLines, ref.filter((l) => l.truncated).length);
        },
      ),
      { numRuns: 2000 },
    );
  });

  void it('truncates at the cap, counts, and goes on', () => {
    const { lines, s } = split([Buffer.from('0123456789\nab\n0123'), Buffer.from('456789\r\n')], 4);
    assert.deepEqual(lines, [
      { text: '0123', offset: 0, next: 11, truncated: true },
      { text: 'ab', offset: 11, next: 14, truncated: false },
      { text: '0123', offset: 14, next: 26, truncated: true },
    ]);
    assert.equal(s.truncatedLines, 2);
  });

  void it('does not count a final CR against the cap', () => {
    const { lines } = split([Buffer.from('abc'), Buffer.from('d\r'), Buffer.from('\n')], 4);
    assert.deepEqual(lines, [{ text: 'abcd', offset: 0, next: 6, truncated: false }]);
  });

  void it('joins a 50 MB line arriving in 16 KB chunks in linear time', () => {
    const size = 50 * 1024 * 1024;
    const chunk = Buffer.alloc(16 * 1024, 0x61);
    let got = -1;
    let first = -1;
    const s = new LineSplitter(
      (b, f, t) => {
        got = t - f;
        first = b[f]!;
      },
      { maxEntryBytes: 64 * 1024 * 1024 },
    );
    const t0 = performance.now();
    for (let n = 0; n < size; n += chunk.length) s.push(chunk);
    s.push(Buffer.from('\n'));
    const ms = performance.now() - t0;
    assert.equal(got, size);
    assert.equal(first, 0x61);
    console.log(`# 50 MB line in 16 KB chunks: ${ms.toFixed(0)} ms`);
  });

  void it('keeps memory bounded for a 200 MB line without newline under the default cap', () => {
    const chunk = Buffer.alloc(16 * 1024, 0x62);
    let got = -1;
    let truncated = false;
    let next = -1;
    const s = new LineSplitter((_b, f, t, _o, n, tr) => {
      got = t - f;
      truncated = tr;
      next = n;
    });
    const before = process.memoryUsage().arrayBuffers;
    let peak = 0;
    const total = 200 * 1024 * 1024;
    for (let n = 0; n < total; n += chunk.length) {
      s.push(chunk);
      if ((n & 0xfffff) === 0) peak = Math.max(peak, process.memoryUsage().arrayBuffers - before);
    }
    s.end();
    assert.equal(got, DEFAULT_MAX_ENTRY_BYTES);
    assert.equal(truncated, true);
    assert.equal(next, total);
    assert.equal(s.truncatedLines, 1);
    assert.equal(s.bytes, total);
    // The same chunk is pushed again and again: kept pieces are views, never copies beyond the join.
    assert.ok(peak < 64 * 1024 * 1024, `arrayBuffers grew by ${peak} bytes`);
  });

  void it('rejects a bad cap', () => {
    assert.throws(() => new LineSplitter(() => undefined, { maxEntryBytes: 0 }), RangeError);
  });
});
