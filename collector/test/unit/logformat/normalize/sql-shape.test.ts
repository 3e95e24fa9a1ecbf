// Statement shapes (sql-shape.ts) and the template cache's lookups by them: the invariant that
// fingerprints rest on (texts of one shape normalize to one template) checked by properties over
// texts built to share shapes and over random texts grouped by shape, the bytes around a text
// never read, what is marked and what is kept, and the texts that are not shaped.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import { fingerprintOf, normalizeQuery, TemplateCache } from '../../../../src/logformat/normalize/normalize.ts';
import { shapeOf, shapeWords } from '../../../../src/logformat/normalize/sql-shape.ts';

/** The shape of `sql` (ASCII) as a latin1 string, or null when it is not shaped. */
function shape(sql: string, around = ''): string | null {
  const bytes = Buffer.from(around + sql + around, 'latin1');
  const n = shapeOf(bytes, around.length, around.length + sql.length);
  return n < 0 ? null : Buffer.from(shapeWords().buffer, 0, n).toString('latin1');
}

/** Groups texts by shape and checks that every text of a group normalizes as the group's first. */
function assertOneTemplatePerShape(texts: readonly string[]): number {
  const byShape = new Map<string, { sql: string; normalized: string }>();
  for (const sql of texts) {
    const s = shape(sql);
    if (s === null) continue;
    const normalized = normalizeQuery(sql);
    const first = byShape.get(s);
    if (first === undefined) byShape.set(s, { sql, normalized });
    else assert.equal(normalized, first.normalized, `${JSON.stringify(sql)} and ${JSON.stringify(first.sql)} share the shape ${JSON.stringify(s)}`);
  }
  return byShape.size;
}

/** Tokens of SQL-ish text, the awkward ones included: numbers next to names, dots, quotes, signs, lists. */
const TOKENS = [
  'a',
  'B',
  'in',
  'IN',
  'x',
  'e',
  'E',
  'U&',
  '_',
  '0',
  '1',
  '12',
  '0x',
  '.',
  '..',
  ' ',
  '\n',
  '\t',
  "'",
  "''",
  '"',
  '$',
  '$1',
  '(',
  ')',
  '[',
  ']',
  ',',
  ';',
  '-',
  '+',
  '*',
  '/',
  '::',
  '=',
  '?',
  'values',
  'array',
  '\\',
];

/** Constants that may stand where a number or a string's content stands in a template. */
const NUMBER_VARIANTS = ['0', '7', '42', '000', '9876543210', '1.5', '12.', '0.25', '3.14159'];
const STRING_VARIANTS = ['', 'a', 'x y', 'it', '12', '"', '(1, 2)', ' in (', ';', '$$', 'é'];

void describe('statement shapes', () => {
  void test('texts with the same shape normalize to the same template (constants varied in place)', () => {
    // A template: tokens with holes (`#` a number, `%` a string's content, `@` an IN list's items).
    const template = fc.array(fc.constantFrom(...TOKENS, '#', "'%'", ' in (@)', ' IN(@)', ' in (@', 'in(@', '(#, #)', ' in (#)', '(@)'), {
      minLength: 1,
      maxLength: 24,
    });
    const listItem = fc.oneof(
      fc.constantFrom(...NUMBER_VARIANTS),
      fc.constantFrom(...STRING_VARIANTS).map((s) => `'${s}'`),
    );
    const fill = fc.record({
      numbers: fc.array(fc.constantFrom(...NUMBER_VARIANTS), { minLength: 40, maxLength: 40 }),
      strings: fc.array(fc.constantFrom(...STRING_VARIANTS), { minLength: 40, maxLength: 40 }),
      lists: fc.array(fc.array(listItem, { minLength: 1, maxLength: 5 }), { minLength: 40, maxLength: 40 }),
      spacing: fc.constantFrom(', ', ',', ' , ', ',\n'),
    });
    fc.assert(
      fc.property(template, fc.array(fill, { minLength: 2, maxLength: 6 }), (tokens, fills) => {
        const texts = fills.map((f) => {
          let n = 0;
          let s = 0;
          let l = 0;
          return tokens.join('').replace(/[#%@]/g, (hole) => (hole === '#' ? f.numbers[n++]! : hole === '%' ? f.strings[s++]! : f.lists[l++]!.join(f.spacing)));
        });
        assertOneTemplatePerShape(texts);
      }),
      { numRuns: 3000 },
    );
  });

  void test('random texts grouped by shape: one template per group', () => {
    const text = fc.array(fc.constantFrom(...TOKENS, ...NUMBER_VARIANTS), { maxLength: 12 }).map((t) => t.join(''));
    fc.assert(
      fc.property(fc.array(text, { minLength: 50, maxLength: 400 }), (texts) => {
        assertOneTemplatePerShape(texts);
      }),
      { numRuns: 300 },
    );
  });

  void test('constants are marked, and everything their digits could change is kept', () => {
    const same = [
      ['SELECT * FROM t WHERE id = 1', 'SELECT * FROM t WHERE id = 987654'],
      ['UPDATE t SET total = 12.50 WHERE id = 3;', 'UPDATE t SET total = 7. WHERE id = 31;'],
      ["SELECT * FROM t WHERE s = 'shipped'", "SELECT * FROM t WHERE s = 'on hold'"],
      ['SELECT * FROM t WHERE id IN (1, 2, 3)', "SELECT * FROM t WHERE id IN (4,'x')"],
      ['select 1 in(2)', 'select 5 in(7, 8, 9)'],
    ];
    for (const [a, b] of same) {
      assert.notEqual(shape(a!), null, a);
      assert.equal(shape(a!), shape(b!), `${a} / ${b}`);
      assert.equal(normalizeQuery(a!), normalizeQuery(b!), `${a} / ${b}`);
    }
    const different = [
      ['SELECT t1 FROM t', 'SELECT t2 FROM t'],
      ['SELECT 0x1F', 'SELECT 1x1F'],
      ['SELECT 1e5', 'SELECT 2e5'],
      ['SELECT 1_000', 'SELECT 2_000'],
      ['SELECT .5', 'SELECT .6'],
      ['SELECT a.1', 'SELECT a.2'],
      ['SELECT 1.2.3', 'SELECT 1.2.4'],
      ['SELECT "c 1" FROM t', 'SELECT "c 2" FROM t'],
      ['SELECT $1', 'SELECT $2'],
      ["SELECT ''", "SELECT 'a'"],
      ["SELECT 'a''b'", "SELECT 'ab'"],
      ['SELECT f(1, 2)', 'SELECT f(1)'],
      ['SELECT * FROM t WHERE id IN (-1, 2)', 'SELECT * FROM t WHERE id IN (-1)'],
      ['SELECT * FROM t WHERE id pin (1, 2)', 'SELECT * FROM t WHERE id pin (1)'],
    ];
    for (const [a, b] of different) assert.notEqual(shape(a!), shape(b!), `${a} / ${b}`);
  });

  void test('texts whose lexing quotes alone do not decide are not shaped', () => {
    for (const sql of [
      "SELECT E'a\\'b'",
      'SELECT 1 -- 2',
      'SELECT /* 1 */ 2',
      'SELECT $$a$$',
      'SELECT $q$a$q$',
      'SELECT a$1',
      'SELECT 1$',
      'SELECT \u0000',
      "SELECT 'caf\u00e9'",
    ]) {
      assert.equal(shape(sql), null, JSON.stringify(sql));
    }
    // Comment markers inside a string or a quoted name are content.
    assert.notEqual(shape("SELECT '-- /*'"), null);
    assert.notEqual(shape('SELECT "a--b"'), null);
  });

  void test('only the given range is read: the bytes around it never change a shape', () => {
    for (const sql of ['SELECT 1', "SELECT 'a", 'SELECT x IN (1', 'SELECT 1.', 'SELECT $', 'SELECT -', 'SELECT "a']) {
      const alone = shape(sql);
      for (const around of ['', '2', "'", '-', '*', '.5', ')', '$1', 'e5', '\u0000'])
        assert.equal(shape(sql, around), alone, `${JSON.stringify(sql)} in ${JSON.stringify(around)}`);
    }
  });
});

void describe('TemplateCache by shape', () => {
  void test('ASCII bytes, alone or with their text: the template equals a fresh normalization and its fingerprint, first time and again', () => {
    const cache = new TemplateCache({ maxEntries: 16 });
    const sqlish = fc.array(fc.constantFrom(...TOKENS, ...NUMBER_VARIANTS, "'x'", ' in (1, 2)'), { maxLength: 16 }).map((t) => t.join(''));
    fc.assert(
      fc.property(fc.array(sqlish, { minLength: 1, maxLength: 20 }), fc.constantFrom('', '7', "'", 'in ('), (sqls, around) => {
        for (const sql of [...sqls, ...sqls]) {
          const bytes = Buffer.from(around + sql + around, 'latin1');
          const normalized = normalizeQuery(sql);
          const got = cache.templateOfPlain(bytes, around.length, around.length + sql.length);
          if (sql.includes('\u0000')) {
            assert.equal(got, null);
            continue;
          }
          const expected = { normalized, fingerprint: fingerprintOf(normalized) };
          assert.deepEqual(got, expected, JSON.stringify(sql));
          // The same bytes given with the text they decode to (Decoder.decodeClean's path).
          assert.deepEqual(cache.templateOfUtf8(sql, bytes, around.length, around.length + sql.length), expected, JSON.stringify(sql));
        }
      }),
      { numRuns: 500 },
    );
  });

  void test('an application IN list of every length takes one entry, within the byte budget', () => {
    const cache = new TemplateCache({ maxBytes: 256 * 1024 });
    for (let n = 1; n <= 500; n++) {
      const sql = `SELECT * FROM t WHERE id IN (${Array.from({ length: n }, (_, k) => k * 7919).join(', ')}) AND s = 'v${n}'`;
      const bytes = Buffer.from(sql, 'latin1');
      assert.equal(cache.templateOfPlain(bytes, 0, bytes.length)?.normalized, 'select * from t where id in (...) and s = ?');
    }
    assert.equal(cache.size, 1);
    assert.ok(cache.bytes < 4096, `${cache.bytes} bytes held for one template and its shape`);
  });
});
