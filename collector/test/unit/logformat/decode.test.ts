// Per-database decoding of log text (iconv-lite encodes the inputs): encoding names and
// aliases, Cyrillic and East Asian encodings, database names matched in either encoding,
// replacements and removed NULs counted exactly, SQL_ASCII's fallback, name reuse, decodeClean;
// fast-check properties that decoding never throws and never yields a NUL.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import fc from 'fast-check';
import iconv from 'iconv-lite';

import { canonicalEncoding, Decoder, SUPPORTED_ENCODINGS } from '../../../src/logformat/decode.ts';

const HELLO = 'Привет, мир';

void describe('canonicalEncoding', () => {
  void test('canonical names and aliases, case-insensitive', () => {
    const cases: [string, string][] = [
      ['UTF8', 'UTF8'],
      ['utf-8', 'UTF8'],
      ['unicode', 'UTF8'],
      ['win1251', 'WIN1251'],
      ['windows-1251', 'WIN1251'],
      ['CP1251', 'WIN1251'],
      ['koi8-r', 'KOI8R'],
      ['KOI8', 'KOI8R'],
      ['latin1', 'LATIN1'],
      ['ISO-8859-1', 'LATIN1'],
      ['iso_8859_5', 'ISO_8859_5'],
      ['sql_ascii', 'SQL_ASCII'],
      ['euc_jp', 'EUC_JP'],
      ['EUC-KR', 'EUC_KR'],
      ['Shift_JIS', 'SJIS'],
      ['gb18030', 'GB18030'],
      ['WIN866', 'WIN866'],
      ['latin10', 'LATIN10'],
      ['iso885915', 'LATIN9'],
      ['big5', 'BIG5'],
      ['uhc', 'UHC'],
    ];
    for (const [alias, name] of cases) assert.equal(canonicalEncoding(alias), name, alias);
  });

  void test('every supported encoding resolves to itself', () => {
    for (const name of SUPPORTED_ENCODINGS) assert.equal(canonicalEncoding(name), name);
  });

  void test('unknown and undecodable encodings: ENCODING_UNSUPPORTED naming it and the list', () => {
    for (const name of ['klingon', 'EUC_TW', 'MULE_INTERNAL', 'JOHAB', 'EUC_JIS_2004', '']) {
      assert.throws(
        () => canonicalEncoding(name),
        (e: unknown) => {
          assert.ok(isPglogError(e));
          assert.equal(e.code, 'ENCODING_UNSUPPORTED');
          assert.match(e.message, /supported: UTF8, SQL_ASCII, LATIN1/);
          return true;
        },
        name,
      );
    }
    assert.throws(() => new Decoder({ defaultEncoding: 'UTF8', databases: { app: 'nope' } }), /unknown encoding "nope"/);
  });
});

void describe('Decoder', () => {
  const config = { defaultEncoding: 'UTF8', databases: { win: 'WIN1251', koi: 'koi8-r', база: 'WIN1251', legacy: 'SQL_ASCII', lat: 'LATIN1' } };

  void test('Cyrillic in WIN1251 and KOI8R decodes to the exact string, per database', () => {
    const d = new Decoder(config);
    assert.equal(d.decode(iconv.encode(HELLO, 'windows-1251'), Buffer.from('win')), HELLO);
    assert.equal(d.decode(iconv.encode(HELLO, 'koi8-r'), Buffer.from('koi')), HELLO);
    assert.equal(d.decode(Buffer.from(HELLO), Buffer.from('other')), HELLO);
    assert.equal(d.decode(Buffer.from(HELLO), null), HELLO);
    assert.equal(d.replacements, 0);
  });

  void test('a database name logged in its own encoding or in UTF-8 both match', () => {
    const d = new Decoder(config);
    const text = iconv.encode(HELLO, 'windows-1251');
    assert.equal(d.decode(text, iconv.encode('база', 'windows-1251')), HELLO);
    assert.equal(d.decode(text, Buffer.from('база')), HELLO);
    assert.equal(d.encodingOf(Buffer.from('база')), 'WIN1251');
    assert.equal(d.encodingOf(Buffer.from('unknown')), 'UTF8');
  });

  void test('ASCII fast path in any ASCII-compatible encoding', () => {
    const d = new Decoder(config);
    assert.equal(d.decode(Buffer.from('select 1'), Buffer.from('koi')), 'select 1');
    assert.equal(d.decode(Buffer.alloc(0), Buffer.from('win')), '');
    assert.equal(d.decode(null, Buffer.from('win')), null);
  });

  void test('invalid UTF-8 is replaced and counted exactly; a genuine U+FFFD is not counted', () => {
    const d = new Decoder(config);
    assert.equal(d.decode(Buffer.from([0x61, 0xff, 0x62, 0xc3]), null), 'a\uFFFDb\uFFFD');
    assert.equal(d.replacements, 2);
    assert.equal(d.decode(Buffer.from('x\uFFFDy'), null), 'x\uFFFDy');
    assert.equal(d.replacements, 2);
    assert.equal(d.decode(Buffer.concat([Buffer.from('\uFFFD'), Buffer.from([0xfe])]), null), '\uFFFD\uFFFD');
    assert.equal(d.replacements, 3);
  });

  void test('an unmapped byte of a single-byte encoding is replaced and counted', () => {
    const d = new Decoder(config);
    assert.equal(d.decode(Buffer.from([0x41, 0x98]), Buffer.from('win')), 'A\uFFFD'); // 0x98 is undefined in WIN1251
    assert.equal(d.replacements, 1);
  });

  void test('NUL bytes are removed and counted, in every encoding', () => {
    const d = new Decoder(config);
    assert.equal(d.decode(Buffer.from('a\0b\0\0c'), null), 'abc');
    assert.equal(d.nulRemoved, 3);
    assert.equal(d.decode(Buffer.concat([Buffer.from([0]), iconv.encode(HELLO, 'windows-1251')]), Buffer.from('win')), HELLO);
    assert.equal(d.nulRemoved, 4);
    assert.equal(d.decodeName(Buffer.from('ap\0p')), 'app');
    assert.equal(d.nulRemoved, 5);
    assert.equal(d.replacements, 0);
  });

  void test('SQL_ASCII: UTF-8 when valid, else Latin-1 byte per character, nothing counted', () => {
    const d = new Decoder(config);
    assert.equal(d.decode(Buffer.from(HELLO), Buffer.from('legacy')), HELLO);
    assert.equal(d.decode(Buffer.from([0x63, 0xe9]), Buffer.from('legacy')), 'cé');
    assert.equal(d.replacements, 0);
  });

  void test("names: UTF-8 when valid, else the encoding of the entry's database, else the default", () => {
    const d = new Decoder({ defaultEncoding: 'WIN1251', databases: { koi: 'KOI8R', база: 'KOI8R' } });
    assert.equal(d.decodeName(Buffer.from('приложение')), 'приложение');
    assert.equal(d.decodeName(iconv.encode('база', 'windows-1251')), 'база');
    assert.equal(d.decodeName(iconv.encode('юзер', 'koi8-r'), Buffer.from('koi')), 'юзер');
    assert.equal(d.decodeName(iconv.encode('база', 'koi8-r'), iconv.encode('база', 'koi8-r')), 'база');
    assert.equal(d.decodeName(null), null);
  });

  void test('names are reused by their bytes, never across encodings; bad names are counted every time', () => {
    const d = new Decoder({ defaultEncoding: 'UTF8', databases: { win: 'WIN1251' } });
    const win = Buffer.from('win');
    const names = Array.from({ length: 20 }, (_, k) => `name${k}`);
    for (let round = 0; round < 3; round++) {
      for (const n of names) assert.equal(d.decodeName(Buffer.from(n), win), n);
    }
    const bad = Buffer.from([0x61, 0xff, 0x00]);
    assert.equal(d.decodeName(bad), 'a\uFFFD');
    assert.equal(d.decodeName(Buffer.from(bad)), 'a\uFFFD');
    assert.deepEqual([d.replacements, d.nulRemoved], [2, 2]);
    // Valid UTF-8 is decoded as such whatever the database; other bytes with its encoding.
    const cyr = iconv.encode('база', 'windows-1251');
    assert.equal(d.decodeName(cyr, win), 'база');
    assert.equal(d.decodeName(Buffer.from(cyr), null), '\uFFFD'.repeat(4));
    assert.equal(d.decodeName(Buffer.from('x\uFFFDy'), win), 'x\uFFFDy');
    // Reused strings follow the bytes, not the Buffer object.
    const b = Buffer.from('alpha');
    assert.equal(d.decodeName(b), 'alpha');
    b.write('omega');
    assert.equal(d.decodeName(b), 'omega');
  });

  void test('decodeClean: a span when it decodes without loss, else null and nothing counted', () => {
    const d = new Decoder({ defaultEncoding: 'UTF8', databases: { win: 'WIN1251', legacy: 'SQL_ASCII' } });
    const text = Buffer.from('abc: жук');
    assert.equal(d.decodeClean(text, 5, text.length, null), 'жук');
    assert.equal(d.decodeClean(text, 0, 3, Buffer.from('win')), 'abc');
    assert.equal(d.decodeClean(text, 5, text.length, Buffer.from('win')), null);
    assert.equal(d.decodeClean(text, 5, text.length, Buffer.from('legacy')), null);
    assert.equal(d.decodeClean(Buffer.from('a\0b'), 0, 3, null), null);
    assert.equal(d.decodeClean(Buffer.from('a\0b'), 0, 3, Buffer.from('win')), null);
    assert.equal(d.decodeClean(Buffer.from([0x61, 0xff]), 0, 2, null), null);
    assert.equal(d.decodeClean(Buffer.from('\uFFFD'), 0, 3, null), null);
    assert.equal(d.decodeClean(text, 2, 2, null), '');
    assert.deepEqual([d.replacements, d.nulRemoved], [0, 0]);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 32 }), fc.constantFrom(null, 'win', 'legacy'), (bytes, db) => {
        const b = Buffer.from(bytes);
        const name = db === null ? null : Buffer.from(db);
        const v = d.decodeClean(b, 0, b.length, name);
        const counted = d.replacements + d.nulRemoved;
        const full = new Decoder({ defaultEncoding: 'UTF8', databases: { win: 'WIN1251', legacy: 'SQL_ASCII' } });
        const s = full.decode(b, name);
        assert.equal(d.replacements + d.nulRemoved, counted);
        if (v !== null) {
          assert.equal(v, s);
          assert.equal(full.replacements + full.nulRemoved, 0);
        }
      }),
      { numRuns: 2000 },
    );
  });

  void test('East Asian encodings', () => {
    const d = new Decoder({ defaultEncoding: 'UTF8', databases: { jp: 'EUC_JP', cn: 'GB18030', kr: 'EUC_KR', sj: 'SJIS' } });
    assert.equal(d.decode(iconv.encode('日本語のテキスト', 'euc-jp'), Buffer.from('jp')), '日本語のテキスト');
    assert.equal(d.decode(iconv.encode('中文文本', 'gb18030'), Buffer.from('cn')), '中文文本');
    assert.equal(d.decode(iconv.encode('한국어', 'euc-kr'), Buffer.from('kr')), '한국어');
    assert.equal(d.decode(iconv.encode('ソフト', 'shift_jis'), Buffer.from('sj')), 'ソフト');
    assert.equal(d.decode(iconv.encode('\uFFFD', 'gb18030'), Buffer.from('cn')), '\uFFFD');
    assert.equal(d.replacements, 0);
  });

  void test('never throws; replacements are never negative; output has no NUL', () => {
    const d = new Decoder(config);
    const dbs = [null, 'win', 'koi', 'legacy', 'lat', 'x'];
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.constantFrom(...dbs), (bytes, db) => {
        const before = d.replacements;
        const s = d.decode(Buffer.from(bytes), db === null ? null : Buffer.from(db));
        assert.equal(typeof s, 'string');
        assert.ok(!s!.includes('\0'));
        assert.ok(d.replacements >= before);
      }),
      { numRuns: 2000 },
    );
  });
});
