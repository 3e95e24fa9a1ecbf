// Text on its way into the store: NULs removed, lone surrogates replaced, long text cut at a
// character boundary within the byte limit, each repair counted.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { cleanText, cutMarker, cutUtf8, MIN_MAX_TEXT_BYTES, noRepairs } from '../../../src/store/text-clean.ts';

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');

test('clean text is returned as it is, nothing counted', () => {
  const r = noRepairs();
  const s = 'SELECT 1 -- ünïcödé 😀';
  assert.equal(cleanText(s, 4096, r), s);
  assert.deepEqual(r, { nulRemoved: 0, invalidReplaced: 0, cut: 0 });
});

test('NUL characters are removed and counted', () => {
  const r = noRepairs();
  assert.equal(cleanText('a\0b\0\0c', 4096, r), 'abc');
  assert.equal(r.nulRemoved, 3);
});

test('unpaired surrogates become U+FFFD, pairs stay', () => {
  const r = noRepairs();
  assert.equal(cleanText('x\ud800y\udc00z😀', 4096, r), 'x\ufffdy\ufffdz😀');
  assert.equal(r.invalidReplaced, 1);
});

test('text over the limit is cut at a character boundary and marked with its full length', () => {
  const r = noRepairs();
  const s = 'é'.repeat(10_000); // 20,000 bytes
  const out = cleanText(s, 4096, r);
  assert.ok(bytes(out) <= 4096, `${bytes(out)} bytes`);
  assert.ok(out.endsWith(cutMarker(20_000)));
  const kept = out.slice(0, -cutMarker(20_000).length);
  assert.ok(s.startsWith(kept));
  assert.ok(kept.length >= 1000, 'at least the first 1000 characters');
  assert.equal(r.cut, 1);
});

test('a 50 MB text costs one small cut, not a copy of the whole text', () => {
  const r = noRepairs();
  const s = 'x'.repeat(50 * 1024 * 1024);
  const out = cleanText(s, 1024 * 1024, r);
  assert.ok(bytes(out) <= 1024 * 1024);
  assert.ok(bytes(out) > 1024 * 1024 - 100);
  assert.ok(out.endsWith(cutMarker(50 * 1024 * 1024)));
});

test('cutUtf8 never splits a character or a surrogate pair', () => {
  assert.equal(cutUtf8('aé', 2), 'a');
  assert.equal(cutUtf8('a😀', 4), 'a');
  assert.equal(cutUtf8('a😀', 5), 'a😀');
  assert.equal(cutUtf8('€€', 5), '€');
  assert.equal(cutUtf8('abc', 0), '');
});

test('property: cleaned text has no NUL, is well formed, fits the limit and keeps the start of the text', () => {
  const unit = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 20 }), fc.constantFrom('\0', '\ud800', '\udfff', '😀', 'é', '€', 'x'));
  fc.assert(
    fc.property(fc.array(unit, { maxLength: 3000 }), fc.integer({ min: MIN_MAX_TEXT_BYTES, max: 12_000 }), (parts, max) => {
      const s = parts.join('');
      const r = noRepairs();
      const out = cleanText(s, max, r);
      assert.ok(!out.includes('\0'));
      assert.ok(out.isWellFormed());
      assert.ok(bytes(out) <= max);
      const clean = s.replaceAll('\0', '').toWellFormed();
      if (r.cut === 0) {
        assert.equal(out, clean);
      } else {
        const marker = cutMarker(bytes(clean));
        assert.ok(out.endsWith(marker));
        const kept = out.slice(0, -marker.length);
        assert.ok(clean.startsWith(kept));
        assert.ok(kept.length >= Math.min(1000, clean.length), 'never below the first 1000 characters');
      }
      assert.equal(r.nulRemoved, s.length - s.replaceAll('\0', '').length);
    }),
    { numRuns: 300 },
  );
});
