/**
 * Bytes of one database's log text → UTF-8 JavaScript strings.
 *
 * One server's log interleaves databases in different encodings, so decoding happens per
 * entry, with the encoding configured for the entry's database (or the default one).
 *
 * Decoding never throws. Two things are counted, because they are data loss worth a metric:
 * - `replacements`: invalid or unmappable byte sequences, each replaced with U+FFFD. A U+FFFD
 *   that was genuinely in the input (valid UTF-8 `EF BF BD`, GB18030 `84 31 A4 37`) is not
 *   counted.
 * - `nulRemoved`: NUL bytes. PostgreSQL text cannot hold them, so they only appear in a log
 *   through damage (a zero-filled block after a crash); they are removed.
 *
 * SQL_ASCII (the server checks nothing): bytes are decoded as UTF-8 when they are valid
 * UTF-8, otherwise byte per character as Latin-1. Latin-1 maps every byte to one code point,
 * so nothing is replaced and nothing is counted: the text is kept losslessly (if mojibake),
 * and configuring the real encoding of such a database fixes it.
 */
import { isAscii, isUtf8 } from 'node:buffer';

import { PglogError } from '@pglog/common/errors.ts';
import iconv from 'iconv-lite';

export interface EncodingConfig {
  /** PostgreSQL encoding name (or alias) for databases not listed in `databases`. */
  defaultEncoding: string;
  /** Database name (as text) → PostgreSQL encoding name (or alias). */
  databases: Record<string, string>;
}

/** PostgreSQL encoding name → iconv-lite codec name ('' = handled natively). */
const CODECS: Readonly<Record<string, string>> = {
  UTF8: '',
  SQL_ASCII: '',
  LATIN1: 'iso-8859-1',
  LATIN2: 'iso-8859-2',
  LATIN3: 'iso-8859-3',
  LATIN4: 'iso-8859-4',
  LATIN5: 'iso-8859-9',
  LATIN6: 'iso-8859-10',
  LATIN7: 'iso-8859-13',
  LATIN8: 'iso-8859-14',
  LATIN9: 'iso-8859-15',
  LATIN10: 'iso-8859-16',
  ISO_8859_5: 'iso-8859-5',
  ISO_8859_6: 'iso-8859-6',
  ISO_8859_7: 'iso-8859-7',
  ISO_8859_8: 'iso-8859-8',
  WIN866: 'cp866',
  WIN874: 'windows-874',
  WIN1250: 'windows-1250',
  WIN1251: 'windows-1251',
  WIN1252: 'windows-1252',
  WIN1253: 'windows-1253',
  WIN1254: 'windows-1254',
  WIN1255: 'windows-1255',
  WIN1256: 'windows-1256',
  WIN1257: 'windows-1257',
  WIN1258: 'windows-1258',
  KOI8R: 'koi8-r',
  KOI8U: 'koi8-u',
  EUC_JP: 'euc-jp',
  // EUC-CN is GB2312 in EUC form; iconv-lite decodes it with its GBK superset.
  EUC_CN: 'gb2312',
  EUC_KR: 'euc-kr',
  // Client-only encodings in PostgreSQL, but a log may still carry them.
  SJIS: 'cp932',
  BIG5: 'cp950',
  GBK: 'gbk',
  GB18030: 'gb18030',
  UHC: 'cp949',
};

/**
 * Known to PostgreSQL, not decodable here: iconv-lite has no EUC-TW, JOHAB or MULE internal
 * codec, and the JIS X 0213 encodings would decode wrongly (not merely replaced) as EUC-JP or
 * Shift_JIS, so they are refused rather than approximated.
 */
const UNSUPPORTED = ['EUC_TW', 'EUC_JIS_2004', 'SHIFT_JIS_2004', 'JOHAB', 'MULE_INTERNAL'];

/**
 * Aliases, keyed like PostgreSQL's `clean_encoding_name()` does (lower case, only letters and
 * digits kept), so `win1251`, `windows-1251`, `WIN-1251`, `koi8-r`, `utf-8` all resolve.
 */
const ALIASES: ReadonlyMap<string, string> = buildAliases();

function clean(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]/g, '');
}

function buildAliases(): Map<string, string> {
  const m = new Map<string, string>();
  for (const name of [...Object.keys(CODECS), ...UNSUPPORTED]) m.set(clean(name), name);
  const extra: Record<string, string> = {
    unicode: 'UTF8',
    sqlascii: 'SQL_ASCII',
    iso88591: 'LATIN1',
    iso88592: 'LATIN2',
    iso88593: 'LATIN3',
    iso88594: 'LATIN4',
    iso88599: 'LATIN5',
    iso885910: 'LATIN6',
    iso885913: 'LATIN7',
    iso885914: 'LATIN8',
    iso885915: 'LATIN9',
    iso885916: 'LATIN10',
    l1: 'LATIN1',
    win: 'WIN1251',
    alt: 'WIN866',
    koi8: 'KOI8R',
    cp866: 'WIN866',
    windows866: 'WIN866',
    windows874: 'WIN874',
    cp874: 'WIN874',
    tcvn: 'WIN1258',
    tcvn5712: 'WIN1258',
    vscii: 'WIN1258',
    abc: 'WIN1258',
    mskanji: 'SJIS',
    shiftjis: 'SJIS',
    win932: 'SJIS',
    windows932: 'SJIS',
    cp932: 'SJIS',
    win936: 'GBK',
    windows936: 'GBK',
    cp936: 'GBK',
    win949: 'UHC',
    windows949: 'UHC',
    cp949: 'UHC',
    win950: 'BIG5',
    windows950: 'BIG5',
    cp950: 'BIG5',
    shiftjis2004: 'SHIFT_JIS_2004',
  };
  for (let n = 1250; n <= 1258; n++) {
    extra[`windows${n}`] = `WIN${n}`;
    extra[`cp${n}`] = `WIN${n}`;
  }
  for (const [alias, name] of Object.entries(extra)) m.set(alias, name);
  return m;
}

/** The encodings `canonicalEncoding` accepts (canonical PostgreSQL names). */
export const SUPPORTED_ENCODINGS: readonly string[] = Object.keys(CODECS);

/**
 * Validates an encoding name or alias and returns its canonical PostgreSQL name (`UTF8`,
 * `WIN1251`, ...). Throws ENCODING_UNSUPPORTED naming the encoding and the supported list.
 */
export function canonicalEncoding(name: string): string {
  const canonical = ALIASES.get(clean(name));
  if (canonical !== undefined && canonical in CODECS) return canonical;
  const why = canonical !== undefined ? `PostgreSQL encoding ${canonical} has no decoder in pglog` : `unknown encoding "${name}"`;
  throw new PglogError(
    'ENCODING_UNSUPPORTED',
    `${why}; supported: ${SUPPORTED_ENCODINGS.join(', ')} (and their usual aliases, e.g. windows-1251, koi8-r, utf-8)`,
  );
}

type Kind = 'utf8' | 'sql_ascii' | 'iconv';

/** A resolved encoding: how to turn bytes into a string. */
interface Codec {
  name: string;
  kind: Kind;
  iconvName: string;
}

function codecOf(name: string): Codec {
  const canonical = canonicalEncoding(name);
  const iconvName = CODECS[canonical] ?? '';
  const kind: Kind = canonical === 'UTF8' ? 'utf8' : canonical === 'SQL_ASCII' ? 'sql_ascii' : 'iconv';
  return { name: canonical, kind, iconvName };
}

const REPLACEMENT = '\uFFFD';
const NUL = '\u0000';

/** Buffer's utf8Slice (what toString('utf8', s, e) ends in, without its argument checks). */
interface Utf8Slicer {
  utf8Slice(start: number, end: number): string;
}
function utf8(b: Buffer, s: number, e: number): string {
  return (b as unknown as Utf8Slicer).utf8Slice(s, e);
}

/**
 * True when a string decoded from UTF-8 needs nothing more: no NUL (only a 0 byte decodes to
 * U+0000) and no U+FFFD (what every invalid sequence decodes to). String searches, much
 * cheaper than scanning the bytes again (and a one-byte string has no U+FFFD to find).
 */
function cleanUtf8(s: string): boolean {
  return s.indexOf(NUL) === -1 && s.indexOf(REPLACEMENT) === -1;
}

/** ASCII without NUL: text that decodes to itself and counts nothing in every supported encoding. */
export function plainAscii(bytes: Buffer): boolean {
  return isAscii(bytes) && bytes.indexOf(0) === -1;
}

/** plainAscii of `b[s, e)` without a view of it, for a few bytes (a statement's name). */
export function plainAsciiSpan(b: Buffer, s: number, e: number): boolean {
  // Bit 7 of (c - 1) | c is set for 0 (-1 has every bit) and for 0x80..0xff.
  for (let i = s; i < e; i++) if (((b[i]! - 1) | b[i]!) & 0x80) return false;
  return true;
}

/** Names remembered by `decodeName` (database, user and application names repeat). */
const NAME_SLOTS = 8;
/** Longest name remembered (PostgreSQL names are at most 63 bytes; application names too). */
const NAME_MAX = 64;

/**
 * The strings of the last clean (valid UTF-8, NUL-free) names by their bytes. Such a name
 * decodes the same with every encoding and counts nothing, so its string can be reused: no
 * decoding, and one string per name (whose hash a Map computes once).
 */
class NameCache {
  private readonly bytes: Buffer[] = [];
  private readonly lens = new Int32Array(NAME_SLOTS).fill(-1);
  private readonly strs: string[] = [];
  private next = 0;

  constructor() {
    for (let i = 0; i < NAME_SLOTS; i++) {
      this.bytes.push(Buffer.alloc(NAME_MAX));
      this.strs.push('');
    }
  }

  get(b: Buffer): string | null {
    const n = b.length;
    const lens = this.lens;
    for (let k = 0; k < NAME_SLOTS; k++) {
      if (lens[k] !== n) continue;
      const c = this.bytes[k]!;
      let i = n - 1;
      while (i >= 0 && c[i] === b[i]) i--;
      if (i < 0) return this.strs[k]!;
    }
    return null;
  }

  set(b: Buffer, s: string): void {
    const n = b.length;
    if (n > NAME_MAX) return;
    const k = this.next;
    this.next = k + 1 === NAME_SLOTS ? 0 : k + 1;
    b.copy(this.bytes[k]!, 0, 0, n);
    this.lens[k] = n;
    this.strs[k] = s;
  }
}
const UTF8_REPLACEMENT = Buffer.from([0xef, 0xbf, 0xbd]);
const GB18030_REPLACEMENT = Buffer.from([0x84, 0x31, 0xa4, 0x37]);
/** Bound on the per-name lookup cache (distinct database names seen). */
const MAX_CACHED_NAMES = 4096;

function countChar(s: string, ch: string): number {
  let n = 0;
  for (let i = s.indexOf(ch); i !== -1; i = s.indexOf(ch, i + 1)) n++;
  return n;
}

function countBytes(b: Buffer, needle: Buffer): number {
  let n = 0;
  for (let i = b.indexOf(needle); i !== -1; i = b.indexOf(needle, i + needle.length)) n++;
  return n;
}

export class Decoder {
  private readonly defaultCodec: Codec;
  /** latin1 view of a database name's bytes → codec (configured names pre-seeded). */
  private readonly byName = new Map<string, Codec>();
  private readonly configured = new Map<string, Codec>();
  private replaced = 0;
  private nuls = 0;
  private lastDatabase: Buffer | null = null;
  private lastCodec: Codec;
  private readonly names = new NameCache();
  /** The last clean names of decodeNames(), and the database's string (undefined: none yet). */
  private memoDatabase: Buffer | null | undefined = undefined;
  private memoUser: Buffer | null | undefined = undefined;
  private memoApplication: Buffer | null | undefined = undefined;
  private memoName: string | null = null;
  /**
   * Every text given to account() and isPlain() is ASCII without NUL: set by a LogParser that
   * has checked all the bytes it was pushed (and cleared for good once one is not).
   */
  plainInput = false;

  /** Validates every configured encoding: throws ENCODING_UNSUPPORTED on an unknown one. */
  constructor(config: EncodingConfig) {
    this.defaultCodec = codecOf(config.defaultEncoding);
    this.lastCodec = this.defaultCodec;
    for (const [db, enc] of Object.entries(config.databases)) {
      const codec = codecOf(enc);
      // The name as UTF-8 bytes, and as bytes of its own encoding (a WIN1251 database's
      // name may be logged in WIN1251).
      this.configured.set(Buffer.from(db, 'utf8').toString('latin1'), codec);
      if (codec.kind === 'iconv') {
        const own = iconv.encode(db, codec.iconvName).toString('latin1');
        if (!this.configured.has(own)) this.configured.set(own, codec);
      }
    }
    for (const [k, v] of this.configured) this.byName.set(k, v);
  }

  /** Invalid or unmappable sequences replaced with U+FFFD so far. */
  get replacements(): number {
    return this.replaced;
  }

  /** NUL bytes removed so far. */
  get nulRemoved(): number {
    return this.nuls;
  }

  /** The canonical encoding used for a database name (bytes as logged; null → default). */
  encodingOf(database: Buffer | null): string {
    return this.codecFor(database).name;
  }

  /** Decodes text of an entry of `database` (null: the default encoding). Never throws. */
  decode(bytes: Buffer | null, database: Buffer | null): string | null {
    if (bytes === null) return null;
    const codec = this.codecFor(database);
    if (codec.kind === 'utf8') {
      const s = utf8(bytes, 0, bytes.length);
      if (cleanUtf8(s)) return s;
    }
    return this.decodeWith(bytes, codec);
  }

  /**
   * Counts what decode(bytes, database) would count (replacements, removed NULs) without
   * making its string when it would count nothing: for a caller that only needs the counters
   * right (the summary, which does not keep the text). ASCII without NUL is itself in every
   * supported encoding; anything else is decoded and the string dropped.
   */
  account(bytes: Buffer | null, database: Buffer | null): void {
    if (bytes === null || this.isPlain(bytes)) return;
    this.decode(bytes, database);
  }

  /** plainAscii(bytes), known without looking while plainInput holds. */
  isPlain(bytes: Buffer): boolean {
    return this.plainInput || plainAscii(bytes);
  }

  /**
   * `bytes[s, e)` decoded, when that needs no replacement and removes no NUL (so it counts
   * nothing); otherwise null and the caller decodes the whole text with decode(). For parsers
   * that take a field apart on its bytes and decode only the pieces they keep. The pieces must
   * start and end at ASCII bytes, which are whole characters in every supported encoding.
   */
  decodeClean(bytes: Buffer, s: number, e: number, database: Buffer | null): string | null {
    const codec = this.codecFor(database);
    if (codec.kind === 'utf8') {
      const v = utf8(bytes, s, e);
      return cleanUtf8(v) ? v : null;
    }
    const sub = bytes.subarray(s, e);
    return sub.indexOf(0) === -1 && isAscii(sub) ? sub.toString('latin1') : null;
  }

  /**
   * Decodes a database, user or application name: UTF-8 when the bytes are valid UTF-8
   * (the usual case, and ASCII), otherwise the encoding of `database` (the entry's database:
   * a session's names usually come in its encoding), or the default encoding without one.
   */
  decodeName(bytes: Buffer | null, database: Buffer | null = null): string | null {
    if (bytes === null) return null;
    const known = this.names.get(bytes);
    if (known !== null) return known;
    const s = utf8(bytes, 0, bytes.length);
    if (cleanUtf8(s)) {
      this.names.set(bytes, s);
      return s;
    }
    if (bytes.indexOf(0) === -1 && isUtf8(bytes)) return s; // a genuine U+FFFD
    return this.decodeWith(bytes, this.codecFor(database));
  }

  /**
   * decodeName() of an entry's database, user and application (in that order, as an event's
   * fields are decoded); returns the database's. The same three Buffers as the last call,
   * when they decoded with nothing counted, are not looked at again: the prefix matcher hands
   * out one Buffer per repeated name (FieldCache), and Buffers of the log are never changed.
   * For the summary, which keeps no event (the memo holds on to three Buffers).
   */
  decodeNames(database: Buffer | null, user: Buffer | null, application: Buffer | null): string | null {
    if (database === this.memoDatabase && user === this.memoUser && application === this.memoApplication) return this.memoName;
    const lost = this.replaced + this.nuls;
    const name = this.decodeName(database, database);
    this.decodeName(user, database);
    this.decodeName(application, database);
    if (this.replaced + this.nuls === lost) {
      this.memoDatabase = database;
      this.memoUser = user;
      this.memoApplication = application;
      this.memoName = name;
    }
    return name;
  }

  private codecFor(database: Buffer | null): Codec {
    if (database === null || this.configured.size === 0) return this.defaultCodec;
    // The fields of one entry are decoded one after another with the same Buffer.
    if (database === this.lastDatabase) return this.lastCodec;
    const codec = this.lookup(database);
    this.lastDatabase = database;
    this.lastCodec = codec;
    return codec;
  }

  private lookup(database: Buffer): Codec {
    const key = database.toString('latin1');
    let codec = this.byName.get(key);
    if (codec === undefined) {
      codec = this.defaultCodec;
      // A name longer than any PostgreSQL name (a damaged or forged field) is not remembered:
      // the cache holds at most MAX_CACHED_NAMES keys of NAME_MAX bytes.
      if (key.length > NAME_MAX) return codec;
      if (this.byName.size >= MAX_CACHED_NAMES) {
        this.byName.clear();
        for (const [k, v] of this.configured) this.byName.set(k, v);
      }
      this.byName.set(key, codec);
    }
    return codec;
  }

  private decodeWith(input: Buffer, codec: Codec): string {
    let bytes = input;
    if (bytes.indexOf(0) !== -1) bytes = this.removeNuls(bytes);
    if (codec.kind === 'utf8') {
      const s = utf8(bytes, 0, bytes.length);
      if (isUtf8(bytes)) return s;
      this.replaced += countChar(s, REPLACEMENT) - countBytes(bytes, UTF8_REPLACEMENT);
      return s;
    }
    if (isAscii(bytes)) return bytes.toString('latin1');
    if (codec.kind === 'sql_ascii') return isUtf8(bytes) ? bytes.toString('utf8') : bytes.toString('latin1');
    let s: string;
    try {
      s = iconv.decode(bytes, codec.iconvName);
    } catch {
      // Not expected from iconv-lite's decoders; keep the bytes readable rather than throw.
      this.replaced++;
      return bytes.toString('latin1');
    }
    if (s.indexOf(REPLACEMENT) !== -1) {
      const genuine = codec.name === 'GB18030' ? countBytes(bytes, GB18030_REPLACEMENT) : 0;
      this.replaced += countChar(s, REPLACEMENT) - genuine;
    }
    return s;
  }

  private removeNuls(bytes: Buffer): Buffer {
    const out = Buffer.allocUnsafe(bytes.length);
    let n = 0;
    let from = 0;
    for (let at = bytes.indexOf(0); at !== -1; at = bytes.indexOf(0, from)) {
      n += bytes.copy(out, n, from, at);
      this.nuls++;
      from = at + 1;
    }
    n += bytes.copy(out, n, from);
    return out.subarray(0, n);
  }
}
