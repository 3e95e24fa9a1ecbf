/**
 * Fingerprints of query templates, and TemplateCache: normalization (normalize.ts) with a
 * memory of the templates seen, so a log's repeated statements are hashed once.
 */
import { hash } from 'node:crypto';
import { decodeOutput, literalsReplaced, outputWords, releaseBuffers, scan } from './sql-scanner.ts';

/**
 * The fingerprint of a normalized template: the first 8 bytes of SHA-256 over the UTF-8
 * bytes of the normalized text, as 16 lowercase hex digits.
 *
 * This is part of pglog's stored interface (the store keys aggregates by it): the algorithm
 * never changes. Changing the normalization changes fingerprints too, so that is a
 * versioned, announced change as well; the pinned vectors in normalize.test.ts guard both.
 */
export function fingerprintOf(normalized: string): string {
  return hash('sha256', normalized, 'hex').slice(0, 16);
}

/** A 30-bit hash of the last scan's output, `len` bytes (zero-padded to whole words). */
function hashOutput(len: number): number {
  const w = outputWords();
  const count = (len + 3) >> 2;
  let h = len ^ 0x2545f491;
  for (let k = 0; k < count; k++) {
    h = Math.imul(h ^ w[k]!, 0x5bd1e995);
    h ^= h >>> 15;
  }
  return h & 0x3fffffff;
}

/** A known template and its normalized text as UTF-8, zero-padded to whole words. */
interface Known {
  template: QueryTemplate;
  len: number;
  words: Int32Array;
}

/** Whether the last scan's output, `len` bytes, is the text of `known`. */
function outputIs(known: Known, len: number): boolean {
  if (known.len !== len) return false;
  const w = outputWords();
  const k = known.words;
  for (let j = 0; j < k.length; j++) if (k[j] !== w[j]) return false;
  return true;
}

/** Longest SQL text kept verbatim by TemplateCache (bounds its memory). */
const MAX_VERBATIM_CHARS = 2048;

export interface QueryTemplate {
  normalized: string;
  fingerprint: string;
}

/**
 * Normalizes statements and fingerprints their templates, hashing each distinct template
 * once. Bounded: at `maxEntries` distinct templates, the oldest entry is evicted. Returned
 * templates are shared between calls: read them, do not change them.
 */
export class TemplateCache {
  private readonly maxEntries: number;
  /**
   * Hash of the normalized text (see hashOutput) → template. A known template is found from
   * the scanner's output bytes, without making its string; texts whose hashes collide
   * replace each other (told apart by comparing the bytes), which costs speed, never
   * correctness.
   */
  private readonly known = new Map<number, Known>();
  /**
   * SQL text → template, for texts without constants (only `$n` parameters, or none): the
   * extended protocol repeats those verbatim, so they skip normalization. Texts with
   * literals rarely repeat exactly and are not kept.
   */
  private readonly verbatim = new Map<string, QueryTemplate>();

  constructor(maxEntries = 10_000) {
    this.maxEntries = Math.max(1, Math.floor(maxEntries));
  }

  template(sql: string): QueryTemplate {
    const again = this.verbatim.get(sql);
    if (again !== undefined) return again;
    const len = scan(sql);
    const key = hashOutput(len);
    let k = this.known.get(key);
    if (k === undefined || !outputIs(k, len)) {
      const normalized = decodeOutput(len);
      k = { template: { normalized, fingerprint: fingerprintOf(normalized) }, len, words: outputWords().slice(0, (len + 3) >> 2) };
      if (!this.known.delete(key)) evictOldest(this.known, this.maxEntries);
      this.known.set(key, k);
    }
    if (literalsReplaced() === 0 && sql.length <= MAX_VERBATIM_CHARS) {
      evictOldest(this.verbatim, this.maxEntries);
      this.verbatim.set(sql, k.template);
    }
    releaseBuffers();
    return k.template;
  }

  /** Distinct templates held. */
  get size(): number {
    return this.known.size;
  }
}

/** Makes room for one more entry in a map bounded to `max` entries (oldest first out). */
function evictOldest<K, V>(map: Map<K, V>, max: number): void {
  if (map.size < max) return;
  const oldest = map.keys().next();
  if (oldest.done !== true) map.delete(oldest.value);
}
