// SQL normalization and fingerprints: a table of statements and their normalized text (each a
// fixed point), pinned fingerprint vectors (stored in the database, so a change must fail here),
// fast-check properties over literals, whitespace, comments and list lengths, linear cost on
// huge statements, and TemplateCache agreeing with a fresh normalization.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import { fingerprintOf, normalizeQuery, TemplateCache } from '../../../../src/logformat/normalize/normalize.ts';
import { fastest, remeasured } from '../../../helpers/linear-time.ts';

const fp = (sql: string): string => fingerprintOf(normalizeQuery(sql));

void describe('normalizeQuery', () => {
  const cases: [string, string][] = [
    ['SELECT * FROM t WHERE id = 42', 'select * from t where id = ?'],
    ['select *\n  from T where ID=-42.5e3 -- trailing\n;', 'select * from t where id = ?'],
    [
      "SELECT name FROM users WHERE name = 'O''Brien' AND note = E'it\\'s' AND b = B'101' AND x = X'ff' AND u = U&'d\\0061t'",
      'select name from users where name = ? and note = ? and b = ? and x = ? and u = ?',
    ],
    ['SELECT $$a $ b$$, $fn$ body; $$ $fn$ FROM t', 'select ?, ? from t'],
    ['SELECT * FROM t WHERE id = $1 AND b = $22', 'select * from t where id = ? and b = ?'],
    ['SELECT 0x1F, 0o17, 0b101, 1_000_000, .5, 1., 1e10, 2.5E-3', 'select ?, ?, ?, ?, ?, ?, ?, ?'],
    ['select a - 1, a -1, a - -1, (-1), f(+2), x * -3, array[-1]', 'select a - ?, a - ?, a - ?, (?), f(?), x * ?, array[...]'],
    [
      'SELECT * FROM t WHERE a IN (1, 2, 3) AND b NOT IN ($1,$2) AND c IN (SELECT 1)',
      'select * from t where a in (...) and b not in (...) and c in (select ?)',
    ],
    ["INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'), (3, 'z')", 'insert into t(a, b) values (...)'],
    ['INSERT INTO t (a, b) VALUES ($1, $2) RETURNING id', 'insert into t(a, b) values (...) returning id'],
    ['INSERT INTO t VALUES (1, now()), (2, now())', 'insert into t values (?, now()), (?, now())'],
    ['SELECT ARRAY[1,2,3], ARRAY[[1,2],[3,4]], x = ANY(ARRAY[$1, $2])', 'select array[...], array[...], x = any (array[...])'],
    ['SELECT /* a /* nested */ comment */ 1 -- end', 'select ?'],
    ['SELECT "Foo"."Bar", "we""ird" FROM "Schema".t', 'select "Foo"."Bar", "we""ird" from "Schema".t'],
    ['SELECT Имя, "Фамилия" FROM Таблица WHERE Поле = \'привет\'', 'select имя, "Фамилия" from таблица where поле = ?'],
    ['SELECT İ, ΑΣ.Β, ÀB_Ç1 FROM "Ünï"', 'select i̇, ας.β, àb_ç1 from "Ünï"'],
    ["SELECT 'é', Ü", 'select ?, ü'],
    ['SELECT true, FALSE, NULL', 'select true, false, null'],
    ["SELECT '2024-01-01'::date, interval '1 day', x::text", 'select ?::date, interval ?, x::text'],
    ["SELECT a[1:2], j->>'k', j #> '{a}', x<>-1, y||'s'", 'select a[?:?], j ->> ?, j #> ?, x <> ?, y || ?'],
    ['SELECT count(*) FROM t GROUP BY 1 ORDER BY 2 DESC LIMIT 10 OFFSET 20;;', 'select count(*) from t group by ? order by ? desc limit ? offset ?'],
    ['begin; select 1; commit;', 'begin; select ?; commit'],
    ["SELECT 'one'\n  'continued' AS s", 'select ? as s'],
    ["SELECT 'unterminated", 'select ?'],
    ['SELECT /* unterminated', 'select'],
    ['SELECT "unterminated', 'select "unterminated'],
    ['SELECT $tag$ unterminated', 'select ?'],
    ['', ''],
    ['   ;  ', ''],
  ];
  for (const [sql, expected] of cases) {
    void test(JSON.stringify(sql), () => {
      assert.equal(normalizeQuery(sql), expected);
      assert.equal(normalizeQuery(expected), expected, 'normalized text is a fixed point');
    });
  }
});

void describe('fingerprints', () => {
  void test('pinned vectors: any change to normalization or hashing fails here (stored interface)', () => {
    assert.equal(fingerprintOf(''), 'e3b0c44298fc1c14');
    assert.equal(fingerprintOf('select * from t where id = ?'), '88e41652b573c403');
    assert.equal(fp('SELECT * FROM t WHERE id = 42'), '88e41652b573c403');
    assert.equal(fp('UPDATE pgbench_accounts SET abalance = abalance + -4711 WHERE aid = 87;'), '97690197335858e3');
    assert.equal(fp('select имя from таблица where x in (1,2,3)'), '60e6df8c590c404e');
  });

  void test('a lone surrogate (no decoder makes one) is U+FFFD in the text, as in the fingerprint', () => {
    assert.equal(normalizeQuery('SELECT "a\ud800" FROM b\udc00'), 'select "a\ufffd" from b\ufffd');
    assert.equal(fp('SELECT "a\ud800"'), fingerprintOf('select "a\ud800"'));
  });

  void test('16 lowercase hex digits', () => {
    fc.assert(fc.property(fc.string(), (s) => assert.match(fingerprintOf(s), /^[0-9a-f]{16}$/)));
  });

  const TEMPLATES = [
    'SELECT * FROM t WHERE id = % AND name = %',
    'UPDATE accounts SET balance = balance + % WHERE id = % AND branch = %',
    'INSERT INTO t (a, b, c) VALUES (%, %, %)',
    'SELECT a FROM t WHERE x IN (%, %, %) AND y > % LIMIT %',
    'select f(%, %), %::int, g(x) from t where z between % and % order by 1',
    'SELECT * FROM "Orders" o WHERE o.total >= % OR o.note = % OFFSET %',
    'DELETE FROM sessions WHERE expires < % AND user_id = ANY(ARRAY[%, %])',
  ];
  const literal = fc.oneof(
    fc.integer().map(String),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => String(d)),
    fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
    fc.string().map((s) => `'${s.replaceAll("'", "''")}'`),
    fc.string().map((s) => `E'${s.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`),
    fc
      .string()
      .filter((s) => !s.includes('$q$') && !s.endsWith('$q'))
      .map((s) => `$q$${s}$q$`),
    fc.integer({ min: 1, max: 99 }).map((n) => `$${n}`),
  );
  const fill = (template: string, values: string[]): string => {
    let k = 0;
    return template.replace(/%/g, () => values[k++ % values.length]!);
  };

  void test('statements differing only in literals share a fingerprint', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...TEMPLATES),
        fc.array(literal, { minLength: 1, maxLength: 8 }),
        fc.array(literal, { minLength: 1, maxLength: 8 }),
        (t, a, b) => {
          assert.equal(fp(fill(t, a)), fp(fill(t, b)), `${fill(t, a)}\n${fill(t, b)}`);
        },
      ),
      { numRuns: 3000 },
    );
  });

  void test('whitespace and comments between tokens do not matter', () => {
    const gap = fc.constantFrom(' ', '  ', '\n\t', ' /* c */ ', ' -- x\n', '\r\n', ' /* /* n */ */\n');
    fc.assert(
      fc.property(fc.constantFrom(...TEMPLATES), fc.array(gap, { minLength: 30, maxLength: 30 }), (t, gaps) => {
        const sql = fill(t, ['1']);
        let k = 0;
        const spaced = sql.replace(/ /g, () => gaps[k++ % gaps.length]!);
        assert.equal(normalizeQuery(spaced), normalizeQuery(sql));
      }),
      { numRuns: 1000 },
    );
  });

  void test('IN lists, VALUES rows and arrays of any length collapse', () => {
    fc.assert(
      fc.property(fc.array(fc.integer(), { minLength: 1, maxLength: 50 }), fc.array(fc.integer(), { minLength: 1, maxLength: 50 }), (a, b) => {
        assert.equal(fp(`SELECT * FROM t WHERE id IN (${a.join(', ')})`), fp(`SELECT * FROM t WHERE id IN (${b.join(',')})`));
        assert.equal(fp(`INSERT INTO t VALUES ${a.map((x) => `(${x}, 'v')`).join(', ')}`), fp(`INSERT INTO t VALUES ${b.map((x) => `(${x}, 'w')`).join(',')}`));
        assert.equal(fp(`SELECT ARRAY[${a.join(',')}]`), fp(`SELECT ARRAY[${b.join(',')}]`));
      }),
    );
  });

  void test('different structure, different fingerprint', () => {
    const distinct = [
      'SELECT * FROM t WHERE id = 1',
      'SELECT * FROM u WHERE id = 1',
      'SELECT * FROM t WHERE id > 1',
      'SELECT a FROM t WHERE id = 1',
      'SELECT * FROM t WHERE id = 1 AND b = 2',
      'SELECT * FROM "T" WHERE id = 1',
      'SELECT * FROM t WHERE id IN (SELECT 1)',
      'SELECT * FROM t WHERE id IN (1)',
      'SELECT * FROM t WHERE active = true',
      'SELECT * FROM t WHERE active = false',
      'SELECT * FROM t WHERE id = 1 LIMIT 1',
      'SELECT x - 1 FROM t',
      'SELECT x + 1 FROM t',
    ];
    assert.equal(new Set(distinct.map(fp)).size, distinct.length);
  });

  void test('never throws on arbitrary text; output is a fixed point on SQL-ish text', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        assert.equal(typeof normalizeQuery(s), 'string');
      }),
      { numRuns: 3000 },
    );
    const sqlish = fc.string({
      unit: fc.constantFrom(
        'a',
        'B',
        '1',
        ' ',
        "'",
        '"',
        '$',
        '(',
        ')',
        '[',
        ']',
        ',',
        ';',
        '-',
        '+',
        '/',
        '*',
        '\n',
        '.',
        ':',
        'E',
        'x',
        '\\',
        '=',
        '<',
        'é',
        'И',
        '?',
        '&',
        'U',
        'i',
        'n',
      ),
      maxLength: 60,
    });
    fc.assert(
      fc.property(sqlish, (s) => {
        const n = normalizeQuery(s);
        assert.equal(normalizeQuery(n), n, JSON.stringify(s));
      }),
      { numRuns: 5000 },
    );
  });
});

void describe('large statements', () => {
  // Each family at n and 4n pieces: the time per byte must stay flat (a quadratic normalizer
  // reads about 16x), a ratio measured in one run, never a fixed time (helpers/linear-time.ts).
  const families: Record<string, (n: number) => string> = {
    'many lists': (n) => Array.from({ length: n }, (_, i) => `SELECT * FROM t WHERE a IN (${i}, 2) AND b = 'x';`).join(' '),
    'ORed lists': (n) => `SELECT * FROM t WHERE (${Array.from({ length: n }, (_, i) => `a IN (${i}, 2)`).join(' OR ')})`,
    'long VALUES': (n) => `INSERT INTO t (a, b) VALUES ${Array.from({ length: n * 5 }, (_, i) => `(${i}, 'x${i}')`).join(', ')}`,
    'deep nesting': (n) => `${'('.repeat(n * 5)}1${')'.repeat(n * 5)}`,
    'huge array': (n) => `SELECT ARRAY[${Array.from({ length: n }, (_, i) => `[${i}, ${i}]`).join(', ')}]`,
  };
  for (const [name, build] of Object.entries(families)) {
    void test(`cost stays linear: ${name}`, () => {
      const small = build(5000);
      const large = build(20000);
      const perByteRatio = (): number => fastest(normalizeQuery, large) / large.length / (fastest(normalizeQuery, small) / small.length);
      const ratio = remeasured(perByteRatio, (r) => r >= 4);
      assert.ok(ratio < 4, `${name}: ${ratio.toFixed(1)}x the time per byte at 4x the size`);
    });
  }
  void test('large statements normalize to their templates', () => {
    assert.equal(normalizeQuery(families['long VALUES']!(20000)), 'insert into t(a, b) values (...)');
    assert.equal(normalizeQuery(families['huge array']!(20000)), 'select array[...]');
  });
});

void describe('TemplateCache', () => {
  void test('returns normalized text and fingerprint; bounded', () => {
    const cache = new TemplateCache({ maxEntries: 3 });
    const t = cache.template('SELECT * FROM t WHERE id = 42');
    assert.deepEqual(t, { normalized: 'select * from t where id = ?', fingerprint: '88e41652b573c403' });
    for (let i = 0; i < 10; i++) cache.template(`SELECT c${i} FROM t`);
    assert.equal(cache.size, 3);
    assert.deepEqual(cache.template('SELECT * FROM t WHERE id = 7'), t);
  });

  void test('any text: the template equals a fresh normalization and its fingerprint', () => {
    const cache = new TemplateCache({ maxEntries: 8 });
    const sqlish = fc.string({
      unit: fc.constantFrom('a', 'B', '1', ' ', "'", '"', '$', '(', ')', ',', ';', '-', '+', 'é', 'И', 'in', 'values', '$1', '/*', '*/'),
      maxLength: 40,
    });
    fc.assert(
      fc.property(fc.array(sqlish, { minLength: 1, maxLength: 20 }), (sqls) => {
        for (const sql of [...sqls, ...sqls]) {
          const normalized = normalizeQuery(sql);
          assert.deepEqual(cache.template(sql), { normalized, fingerprint: fingerprintOf(normalized) }, JSON.stringify(sql));
        }
      }),
      { numRuns: 500 },
    );
  });

  void test('a text given with the bytes it was decoded from: the same template as the text alone', () => {
    const cache = new TemplateCache({ maxEntries: 8 });
    const sqlish = fc.string({
      unit: fc.constantFrom('a', 'B', '1', ' ', "'", '$', '(', ')', ',', 'é', 'И', '😀', 'in', '$1', ' ', 'x'.repeat(30)),
      maxLength: 40,
    });
    fc.assert(
      fc.property(fc.array(sqlish, { minLength: 1, maxLength: 10 }), fc.string({ maxLength: 8 }), (sqls, around) => {
        for (const sql of [...sqls, ...sqls]) {
          // The text inside other bytes, as an entry's message carries it.
          const head = Buffer.from(around);
          const bytes = Buffer.concat([head, Buffer.from(sql), head]);
          const normalized = normalizeQuery(sql);
          const expected = { normalized, fingerprint: fingerprintOf(normalized) };
          assert.deepEqual(cache.templateOfUtf8(sql, bytes, head.length, bytes.length - head.length), expected, JSON.stringify(sql));
          assert.deepEqual(cache.template(sql), expected, JSON.stringify(sql));
        }
      }),
      { numRuns: 300 },
    );
  });

  void test('texts without constants are reused verbatim; results equal a fresh normalization', () => {
    const cache = new TemplateCache({ maxEntries: 2 });
    const sqls = ['SELECT * FROM t WHERE id = $1', 'SELECT 1', 'SELECT now()', 'UPDATE t SET a = $1 WHERE b = $2', "SELECT 'x'"];
    for (let round = 0; round < 3; round++) {
      for (const sql of sqls) {
        const normalized = normalizeQuery(sql);
        assert.deepEqual(cache.template(sql), { normalized, fingerprint: fingerprintOf(normalized) });
      }
    }
  });
});
