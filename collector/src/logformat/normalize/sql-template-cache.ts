/**
 * Fingerprints of query templates, and TemplateCache: normalization (normalize.ts) with a
 * memory of the templates seen, so a log's repeated statements are hashed once.
 *
 * The cache is bounded in bytes, not only in entries: the statements it sees are whatever the
 * log says, and any database role can log megabytes of distinct failing SQL. Templates longer
 * than a few KiB are never kept (they rarely repeat, and each would cost its size again),
 * and the rest live in a byte budget from which the least recently used leave first.
 */
import { hash } from 'node:crypto';

import { stringHeapBytes } from '../heap-bytes.ts';
import { copyInput, copyPlainInput, decodeOutput, encodeInput, inputWords, literalsReplaced, outputWords, releaseBuffers, scanInput } from './sql-scanner.ts';
import { shapeOf, shapeWords } from './sql-shape.ts';

/**
 * The fingerprint of a normalized template: the first 8 bytes of SHA-256 over the UTF-8
 * bytes of the normalized text, as 16 lowercase hex digits.
 *
 * This is part of pglog's stored interface (the store keys aggregates by it): the algorithm
 * never changes. Changing the normalization changes fingerprints too, so that is a
 * versioned, announced change as well; the pinned vectors in normalize.test.ts guard both.
 */
export function fingerprintOf(normalized: string): string {
  // Hex of the first 8 bytes only: a slice of the whole digest's hex would keep all 64
  // characters alive for as long as the fingerprint lives (V8 slices share their parent).
  return hash('sha256', normalized, 'buffer').toString('hex', 0, 8);
}

/** A 30-bit hash of the first `len` bytes of `w` (zero-padded to whole words). */
function hashWords(w: Int32Array, len: number): number {
  const count = (len + 3) >> 2;
  let h = len ^ 0x2545f491;
  for (let k = 0; k < count; k++) {
    h = Math.imul(h ^ w[k]!, 0x5bd1e995);
    h ^= h >>> 15;
  }
  return h & 0x3fffffff;
}

/** Bytes a template cache may hold by default: its own accounting, see TemplateCache. */
export const DEFAULT_TEMPLATE_CACHE_BYTES = 32 * 1024 * 1024;
/** Longest normalized template (UTF-8 bytes) a cache keeps by default; longer ones are made afresh each time. */
export const MAX_CACHED_TEMPLATE_BYTES = 4096;
/** Longest SQL text kept verbatim or by its shape (UTF-16 units; see TemplateCache.verbatim). */
const MAX_VERBATIM_CHARS = 2048;
/**
 * Heap of one known template besides its text and the bytes of its UTF-8 copy: the Known and
 * QueryTemplate objects, the fingerprint string, the Int32Array and its slot in the Map
 * (measured, heapUsed + arrayBuffers after GC over 20,000 entries: about 340 bytes).
 */
const KNOWN_ENTRY_BYTES = 352;
/**
 * Heap of one verbatim entry besides the bytes and the template text it holds: the entry and
 * its Map slot (about 158 bytes measured as above when it held the SQL string instead) and
 * the Int32Array around its bytes (about 110, as in KNOWN_ENTRY_BYTES).
 */
const VERBATIM_ENTRY_BYTES = 272;

export interface TemplateCacheOptions {
  /** Bytes the cache may hold, by its own accounting (texts, copies, per-entry overhead). */
  maxBytes?: number | undefined;
  /** Normalized templates longer than this (UTF-8 bytes) are not cached. */
  maxTemplateBytes?: number | undefined;
  /** Bound on distinct templates besides the bytes (tests). */
  maxEntries?: number | undefined;
}

export interface QueryTemplate {
  normalized: string;
  fingerprint: string;
}

/** What a cache entry costs, and whether it was used since the eviction hand last passed it. */
interface Entry {
  bytes: number;
  used: boolean;
}

/** A known template and its normalized text as UTF-8, zero-padded to whole words. */
interface Known extends Entry {
  template: QueryTemplate;
  len: number;
  words: Int32Array;
}

/** A text without constants (or a text's shape) as bytes, zero-padded to whole words, and its template. */
interface Verbatim extends Entry {
  template: QueryTemplate;
  len: number;
  words: Int32Array;
}

/** Whether the first `len` bytes of `w` (zero-padded) are the bytes of `entry`. */
function wordsAre(entry: Known | Verbatim, w: Int32Array, len: number): boolean {
  if (entry.len !== len) return false;
  const k = entry.words;
  for (let j = 0; j < k.length; j++) if (k[j] !== w[j]) return false;
  return true;
}

/** An entry for the first `len` bytes of `source` (zero-padded words), standing for `template`. */
function bytesEntry(template: QueryTemplate, source: Int32Array, len: number): Verbatim {
  const words = source.slice(0, (len + 3) >> 2);
  // The template's text is counted here too: it outlives its known entry when that goes first.
  return { template, len, words, bytes: VERBATIM_ENTRY_BYTES + words.byteLength + stringHeapBytes(template.normalized), used: false };
}

/**
 * Normalizes statements and fingerprints their templates, hashing each distinct template
 * once. Bounded in bytes (see the module comment): at `maxBytes`, the least recently used
 * entries are evicted (second chance: an entry used since it was inserted or last passed
 * goes to the back once instead). Returned templates are shared between calls: read them,
 * do not change them.
 */
export class TemplateCache {
  private readonly maxTemplateBytes: number;
  private readonly maxEntries: number;
  /** Budgets of the three maps: three quarters, an eighth and an eighth of maxBytes. */
  private readonly knownBudget: number;
  private readonly verbatimBudget: number;
  private readonly shapeBudget: number;
  /**
   * Hash of the normalized text (see hashWords) → template. A known template is found from
   * the scanner's output bytes, without making its string; texts whose hashes collide
   * replace each other (told apart by comparing the bytes), which costs speed, never
   * correctness.
   */
  private readonly known = new Map<number, Known>();
  /**
   * Hash of the SQL text's UTF-8 bytes → template, for texts without constants (only `$n`
   * parameters, or none): the extended protocol repeats those verbatim, so they skip
   * normalization. Texts with literals rarely repeat exactly and are not kept. Keyed by the
   * bytes the scanner encodes anyway, not by the string: a Map keyed by a fresh string hashes
   * all of it on every lookup, a quarter of what a template costs when it misses. Colliding
   * texts replace each other, as in `known`.
   */
  private readonly verbatim = new Map<number, Verbatim>();
  /**
   * Hash of a plain (ASCII) text's shape (sql-shape.ts: its constants marked) → template:
   * the statements a log repeats with other numbers and strings skip normalization too, and
   * texts without constants (their shape is their text) need no verbatim entry. Colliding
   * shapes replace each other, as in `known`.
   */
  private readonly shapes = new Map<number, Verbatim>();
  private knownBytes = 0;
  private verbatimBytes = 0;
  private shapeBytes = 0;
  private evicted = 0;
  private uncachedTemplates = 0;

  constructor(options: TemplateCacheOptions = {}) {
    const maxBytes = options.maxBytes ?? DEFAULT_TEMPLATE_CACHE_BYTES;
    this.maxTemplateBytes = options.maxTemplateBytes ?? MAX_CACHED_TEMPLATE_BYTES;
    this.maxEntries = Math.max(1, Math.floor(options.maxEntries ?? Infinity));
    this.verbatimBudget = Math.floor(maxBytes / 8);
    this.shapeBudget = Math.floor(maxBytes / 8);
    this.knownBudget = maxBytes - this.verbatimBudget - this.shapeBudget;
  }

  template(sql: string): QueryTemplate {
    return this.templateOfInput(sql.length, encodeInput(sql));
  }

  /**
   * template(sql) for SQL decoded from `bytes[s, e)` without a replacement or a removed NUL
   * (Decoder.decodeClean): those bytes are its UTF-8, so they are copied rather than encoded
   * again; an ASCII text is looked up by its shape first, as in templateOfPlain.
   */
  templateOfUtf8(sql: string, bytes: Buffer, s: number, e: number): QueryTemplate {
    const shaped = e - s <= MAX_VERBATIM_CHARS ? shapeOf(bytes, s, e) : -1;
    return (shaped >= 0 ? this.byShape(shaped) : undefined) ?? this.templateOfInput(sql.length, copyInput(bytes, s, e), shaped);
  }

  /**
   * templateOfUtf8 for SQL whose bytes `bytes[s, e)` are ASCII without NUL (so they decode
   * cleanly to a string of as many characters), without making that string; null, with
   * nothing done, when they are not (checked as they are copied).
   */
  templateOfPlain(bytes: Buffer, s: number, e: number): QueryTemplate | null {
    const shaped = e - s <= MAX_VERBATIM_CHARS ? shapeOf(bytes, s, e) : -1;
    const known = shaped >= 0 ? this.byShape(shaped) : undefined;
    if (known !== undefined) return known;
    const n = copyPlainInput(bytes, s, e);
    return n < 0 ? null : this.templateOfInput(n, n, shaped);
  }

  /** The template kept for the shape of `shaped` bytes in shapeWords(), if any. */
  private byShape(shaped: number): QueryTemplate | undefined {
    const again = this.shapes.get(hashWords(shapeWords(), shaped));
    if (again === undefined || !wordsAre(again, shapeWords(), shaped)) return undefined;
    again.used = true;
    return again.template;
  }

  /**
   * The template of the text in the scanner's input: `n` bytes of UTF-8, `chars` UTF-16 code
   * units; `shaped` the length of its shape in shapeWords(), or -1 when it has none (a text
   * with one is looked up and kept by its shape instead of verbatim).
   */
  private templateOfInput(chars: number, n: number, shaped = -1): QueryTemplate {
    const short = chars <= MAX_VERBATIM_CHARS;
    const inKey = short && shaped < 0 ? hashWords(inputWords(), n) : 0;
    if (short && shaped < 0) {
      const again = this.verbatim.get(inKey);
      if (again !== undefined && wordsAre(again, inputWords(), n)) {
        again.used = true;
        return again.template;
      }
    }
    const len = scanInput(n, n === chars);
    if (len > this.maxTemplateBytes) {
      // Kept nowhere: a fresh template, gone with the event that carries it.
      const normalized = decodeOutput(len);
      releaseBuffers();
      this.uncachedTemplates++;
      return { normalized, fingerprint: fingerprintOf(normalized) };
    }
    const key = hashWords(outputWords(), len);
    let k = this.known.get(key);
    if (k !== undefined && wordsAre(k, outputWords(), len)) {
      k.used = true;
    } else {
      const normalized = decodeOutput(len);
      const words = outputWords().slice(0, (len + 3) >> 2);
      k = {
        template: { normalized, fingerprint: fingerprintOf(normalized) },
        len,
        words,
        bytes: KNOWN_ENTRY_BYTES + stringHeapBytes(normalized) + words.byteLength,
        used: false,
      };
      if (k.bytes > this.knownBudget) {
        // A budget smaller than one template (tests, tiny configurations): nothing is kept.
        releaseBuffers();
        this.uncachedTemplates++;
        return k.template;
      }
      this.knownBytes = this.store(this.known, this.knownBytes, this.knownBudget, key, k);
    }
    if (shaped >= 0) {
      const v = bytesEntry(k.template, shapeWords(), shaped);
      if (v.bytes <= this.shapeBudget) this.shapeBytes = this.store(this.shapes, this.shapeBytes, this.shapeBudget, hashWords(shapeWords(), shaped), v);
    } else if (literalsReplaced() === 0 && short) {
      const v = bytesEntry(k.template, inputWords(), n);
      if (v.bytes <= this.verbatimBudget) this.verbatimBytes = this.store(this.verbatim, this.verbatimBytes, this.verbatimBudget, inKey, v);
    }
    releaseBuffers();
    return k.template;
  }

  /** Distinct templates held. */
  get size(): number {
    return this.known.size;
  }

  /** Bytes held, by the cache's own accounting (never more than maxBytes). */
  get bytes(): number {
    return this.knownBytes + this.verbatimBytes + this.shapeBytes;
  }

  /** Entries evicted to stay within the budget, since the start. */
  get evictions(): number {
    return this.evicted;
  }

  /** Templates too long to be cached (made afresh each time), since the start. */
  get uncached(): number {
    return this.uncachedTemplates;
  }

  /**
   * Puts `entry` into `map` (holding `held` bytes) under `key`, replacing the entry there,
   * after evicting until it fits in `budget` and one more entry fits in maxEntries; returns
   * the bytes then held. An entry used since it was inserted or last passed is moved to the
   * back once instead of evicted (second chance), so a template that keeps coming stays while
   * one-off statements flow through.
   */
  private store<K, V extends Entry>(map: Map<K, V>, held: number, budget: number, key: K, entry: V): number {
    const old = map.get(key);
    if (old !== undefined) {
      map.delete(key);
      held -= old.bytes;
    }
    const need = entry.bytes;
    while (map.size > 0 && (held + need > budget || map.size >= this.maxEntries)) {
      const [oldest, first] = map.entries().next().value!;
      map.delete(oldest);
      if (first.used) {
        first.used = false;
        map.set(oldest, first);
        continue;
      }
      held -= first.bytes;
      this.evicted++;
    }
    map.set(key, entry);
    return held + need;
  }
}
